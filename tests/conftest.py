"""Shared fixtures: a scripted OpenAI-compatible endpoint on 127.0.0.1, stopped after each test.

    def test_x(scripted_endpoint, fast_retry):
        ep = scripted_endpoint(lambda messages, tools: "hi", latency=0.01)
        client = Client("m", base_url=ep.base_url, **fast_retry)

`scripted_endpoint(policy, **knobs)` takes every `ScriptedEndpoint` keyword (faults, record,
process, ...) and returns the started endpoint; it also works as `with scripted_endpoint(...) as ep:`.
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from harness import Client, ScriptedEndpoint
from tests.cli.conftest import rubric  # noqa: F401  (the `rubric` fixture, for CLI tests outside tests/cli)
from tests.helpers import markers
from tests.helpers.hub import HubServer, serve_pypiserver
from tests.helpers.install import ensure_openenv_side_python, openenv_side_venv

# The OpenEnv cross-version tests run OpenEnv 0.10 from a venv of its own (it cannot sit beside
# our extras); the session makes that venv before the first test, so no test's timeout pays for it.
OPENENV_VERSIONS_TESTS = "tests/envs/interop/test_openenv_versions.py"


@pytest.hookimpl(tryfirst=True)  # before `-m` selects by them
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Refuse tests that use a real part (or `slow`) they do not declare (tests/helpers/markers.py);
    in a pytest-xdist worker, order the files heaviest first (every worker orders alike)."""
    if dump := os.environ.get("RUBRIC_DUMP_UNDECLARED"):  # for a script that adds the markers
        Path(dump).write_text(json.dumps(markers.undeclared(items)))
    else:
        markers.check_declared(items)
    if hasattr(config, "workerinput"):
        markers.order_heaviest_first(items)


def pytest_collection_finish(session: pytest.Session) -> None:
    """Make (once per machine, cached) OpenEnv 0.10's venv when the selected tests need it and
    RUBRIC_OPENENV_PYTHON does not name one; a failure is left for those tests to report."""
    if os.environ.get("RUBRIC_OPENENV_PYTHON"):
        return
    if not any(item.nodeid.startswith(OPENENV_VERSIONS_TESTS) for item in session.items):
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    if reporter is not None and not (openenv_side_venv() / "complete").is_file():
        reporter.write_line(f"making OpenEnv 0.10's venv for the cross-version tests: {openenv_side_venv()}")
    with contextlib.suppress(RuntimeError):
        ensure_openenv_side_python()


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
    for client in Client.open_clients():
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
