"""Shared fixtures: a scripted OpenAI-compatible endpoint on 127.0.0.1, stopped after each test.

    def test_x(scripted_endpoint, fast_retry):
        ep = scripted_endpoint(lambda messages, tools: "hi", latency=0.01)
        client = Client("m", base_url=ep.base_url, **fast_retry)

`scripted_endpoint(policy, **knobs)` takes every `ScriptedEndpoint` keyword (faults, record,
process, ...) and returns the started endpoint; it also works as `with scripted_endpoint(...) as ep:`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness.scripted import ScriptedEndpoint
from tests.helpers import HubServer, serve_pypiserver


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
