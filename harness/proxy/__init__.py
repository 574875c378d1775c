"""The model-call capture proxy: agents' model calls in their own dialect, recorded per rollout.

- `_server`: `CaptureProxy`, the aiohttp server (Unix sockets, loopback), keys, budgets.
- `_session`: `ProxySession` (one rollout), its budgets, each call a `harness.ModelCall`, token ids.
- `_provenance`: which assistant turns of an agent's history are replies the proxy gave.
- `_dialect`: the translated call, refusals and the drop policy every dialect shares.
- `_chat`, `_responses`, `_anthropic`: the three wire formats, each to and from Chat Completions.

Sits beside the endpoint client: may import the data model (`harness._core.types`, `errors`,
`aio`) and `harness._endpoint`, which carries every upstream call; never the engine
(`runner`, `evaluation`), which may build on it.
"""

from harness.proxy._server import CaptureProxy
from harness.proxy._session import ProxyBudgets, ProxySession

__all__ = ["CaptureProxy", "ProxyBudgets", "ProxySession"]
