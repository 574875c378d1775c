"""The model-call capture proxy: agents' model calls in their own dialect, recorded per rollout.

- `server`: `CaptureProxy`, the aiohttp server (Unix sockets, loopback), keys, budgets.
- `session`: `ProxySession` (one rollout), `ProxyTurn` (one call), token-id chaining.
- `dialect`: the translated call, refusals and the drop policy every dialect shares.
- `chat`, `responses`, `anthropic`: the three wire formats, each to and from Chat Completions.

Sits beside the endpoint client: may import the data model (`harness.types`, `errors`,
`aio`) and `harness.endpoint`, which carries every upstream call; never the engine
(`runner`, `evaluation`), which may build on it.
"""
