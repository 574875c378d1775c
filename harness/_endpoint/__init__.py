"""Talking to an OpenAI-compatible endpoint: one request at a time, bounded, retried, named.

- `client`: `Client`, chat completions with a concurrency limit, retries and usage counts.
- `wire`: the chat-completions format: what a request may carry, what an answer becomes,
  what an error means.
- `retry`: the one tenacity policy (429/5xx/connection errors, `Retry-After`, deadlines).
- `transport`: the bytes: aiohttp (the lean default) or the `openai` SDK.
- `connect`: from a model name to a ready client (key, base URL, reachability, scripted
  policies served on loopback).

May import the data model (`harness._core.types`, `errors`, `aio`, `defaults`) and, for `connect`
only, `harness.scripted`; the engine (`runner`, `evaluation`) builds on it.
"""
