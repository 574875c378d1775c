"""A scripted OpenAI-compatible endpoint on 127.0.0.1, for tests, benchmarks and offline demos.

- `endpoint`: `ScriptedEndpoint` (start/stop, base URL), `scripted_policy`, `StatefulPolicy`.
- `app`: the chat-completions application: policies, fault injection, statistics.
- `http`: the ASGI adapter and the uvicorn server it runs on.
- `tokens`: fake token ids and logprobs, as vLLM returns them.
- `agents`: `ShellScript`, the model's side for an agent program (its own shell tool format).

May import the harness core only; the engine never imports it (clients reach it over HTTP),
so it could live in its own distribution.
"""

from harness.scripted._agents import ShellScript
from harness.scripted._endpoint import SCRIPTED_PREFIX, ScriptedEndpoint, StatefulPolicy, scripted_policy

__all__ = ["SCRIPTED_PREFIX", "ScriptedEndpoint", "ShellScript", "StatefulPolicy", "scripted_policy"]
