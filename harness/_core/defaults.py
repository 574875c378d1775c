"""Defaults shared by every layer, defined once (a light module: the CLI imports it at start)."""

from __future__ import annotations

DEFAULT_CONCURRENCY = 64
"""Requests (and, in `evaluate`, rollouts; in `score_batch`, scores) in flight at once."""

TRANSPORTS = ("aiohttp", "openai")
"""The HTTP transports a `harness.Client` can name: lean aiohttp, or the `openai` SDK."""

DEFAULT_TRANSPORT = "aiohttp"
"""The transport a Client uses unless told otherwise (`transport=`, `rubric eval --transport`)."""

DEFAULT_BASE_URL = "https://api.openai.com/v1"
"""The endpoint a Client (and a judge) uses without base_url= or OPENAI_BASE_URL."""

__all__ = ["DEFAULT_BASE_URL", "DEFAULT_CONCURRENCY", "DEFAULT_TRANSPORT", "TRANSPORTS"]
