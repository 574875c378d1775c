"""Environments from other frameworks (Verifiers, OpenEnv) and ours served to them, through their own libraries."""
