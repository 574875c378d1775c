"""Defaults shared by every layer, defined once (a light module: the CLI imports it at start)."""

from __future__ import annotations

DEFAULT_CONCURRENCY = 64
"""Requests (and, in `evaluate`, rollouts; in `score_batch`, scores) in flight at once."""

__all__ = ["DEFAULT_CONCURRENCY"]
