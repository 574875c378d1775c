"""Core: private to harness."""
