"""Shared fixtures: a scripted OpenAI-compatible endpoint on 127.0.0.1, stopped after each test.

    def test_x(scripted_endpoint, fast_retry):
        ep = scripted_endpoint(lambda messages, tools: "hi", latency=0.01)
        client = Client("m", base_url=ep.base_url, **fast_retry)

`scripted_endpoint(policy, **knobs)` takes every `ScriptedEndpoint` keyword (faults, record,
process, ...) and returns the started endpoint; it also works as `with scripted_endpoint(...) as ep:`.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.endpoint.client import open_clients
from harness.scripted.endpoint import ScriptedEndpoint
from tests.helpers import HubServer, serve_pypiserver


@pytest.fixture(autouse=True)
def _close_clients(request: pytest.FixtureRequest) -> Iterator[None]:
    """Close every `Client` pool a test opened, on the loop that owns it, before that loop
    ends: warnings are errors here, and a pool left to the garbage collector warns about its
    sockets in whichever test happens to run next. (Programs close theirs with `async with
    Client(...)` or `await client.aclose()`; many tests build clients in passing.)"""
    if inspect.iscoroutinefunction(request.function):
        # pytest-asyncio's runner for this test's loop: set up first, so torn down after us.
        request.getfixturevalue("_function_scoped_runner")
    yield
    for client in open_clients():
        client.close()


@pytest.fixture
def scripted_endpoint() -> Iterator[Callable[..., ScriptedEndpoint]]:
    started: list[ScriptedEndpoint] = []

    def factory(policy: Callable[..., Any], **knobs: Any) -> ScriptedEndpoint:
        endpoint = ScriptedEndpoint(policy, **knobs).start()
        started.append(endpoint)
        return endpoint

    yield factory
    for endpoint in started:
        endpoint.stop()


@pytest.fixture
def fast_retry() -> dict[str, float]:
    """Client keyword arguments that make retry backoff near-instant, so fault tests stay fast."""
    return {"backoff_base": 0.005, "backoff_max": 0.02}


@pytest.fixture
def hub_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[HubServer]:
    """A running pypiserver; RUBRIC_HUB_URL/USER/PASSWORD point at it, keyring is off."""
    with serve_pypiserver(tmp_path / "hub") as server:
        monkeypatch.setenv("RUBRIC_HUB_URL", server.url)
        monkeypatch.setenv("RUBRIC_HUB_USER", server.user)
        monkeypatch.setenv("RUBRIC_HUB_PASSWORD", server.password)
        monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.null.Keyring")
        monkeypatch.delenv("RUBRIC_HUB_UPLOAD_URL", raising=False)
        yield server
