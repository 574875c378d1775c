"""Fixtures for the capture proxy tests: a scripted upstream and a started proxy in front of it.

`agent_policy` plays the model through the proxy: asked with tools, it calls the first tool
(`add`, or the agent's own `Bash`, ...) once, then answers with the tool's result.
"""

from __future__ import annotations

import importlib
import json
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from harness import CaptureProxy, Client, ScriptedEndpoint

ADD_ARGUMENTS = {"a": 2, "b": 3}


def agent_policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Any:
    """A tool call on the first turn (when there are tools), then the tool's output as the answer."""
    results = [m for m in messages if m["role"] == "tool"]
    if results:
        return f"the answer is {results[-1]['content']}"
    if tools:
        name = tools[0]["function"]["name"]
        return {
            "content": "let me compute",
            "tool_calls": [{"function": {"name": name, "arguments": json.dumps(ADD_ARGUMENTS)}}],
        }
    return "hello from the model"


def unix_socket_http(sdk_client_class: type[Any], socket_path: str) -> Any:
    """An SDK's own async HTTP client (httpx, or httpx2 in newer SDKs) over a Unix socket."""
    package = next(
        b.__module__.split(".")[0] for b in sdk_client_class.__mro__ if b.__name__ == "AsyncClient"
    )
    transport = importlib.import_module(package).AsyncHTTPTransport(uds=socket_path)
    return sdk_client_class(transport=transport)


class ProxyFactory:
    """`await start_proxy(policy, port=0, socket_path=None, endpoint={...}, client={...}, **proxy_kwargs)`:
    a CaptureProxy over a scripted endpoint that returns token ids; `endpoint_of(proxy)` is its upstream."""

    def __init__(self, scripted_endpoint: Callable[..., ScriptedEndpoint]) -> None:
        self._scripted_endpoint = scripted_endpoint
        self.started: list[tuple[CaptureProxy, ScriptedEndpoint]] = []

    async def __call__(
        self,
        policy: Callable[..., Any] = agent_policy,
        *,
        socket_path: str | None = None,
        port: int | None = 0,
        endpoint: dict[str, Any] | None = None,
        client: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> CaptureProxy:
        ep = self._scripted_endpoint(policy, **(endpoint or {}))
        upstream = Client("served-model", base_url=ep.base_url, return_token_ids=True, **(client or {}))
        proxy = CaptureProxy(upstream, **kwargs)
        self.started.append((proxy, ep))
        return await proxy.astart(socket_path=socket_path, port=port)

    def endpoint_of(self, proxy: CaptureProxy) -> ScriptedEndpoint:
        return next(ep for p, ep in self.started if p is proxy)


@pytest.fixture
async def start_proxy(scripted_endpoint: Callable[..., ScriptedEndpoint]) -> AsyncIterator[ProxyFactory]:
    """A `ProxyFactory`; every proxy it started is closed, with its upstream client, after the test."""
    factory = ProxyFactory(scripted_endpoint)
    yield factory
    for proxy, _ in factory.started:
        await proxy.aclose()
        await proxy.client.aclose()
