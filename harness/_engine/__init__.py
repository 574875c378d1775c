"""Engine: private to harness."""
