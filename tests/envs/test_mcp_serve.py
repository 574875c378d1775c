"""`rubric mcp ENV`: the official MCP SDK's client against our python environment's tools,
over stdio and over streamable HTTP on 127.0.0.1 (the tool still runs in its sandbox)."""

from __future__ import annotations

import os
import socket
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client as SDKClient
from mcp.client.stdio import StdioServerParameters, stdio_client

from envs import load_environment
from tests.cli.conftest import Invoke
from tests.helpers.endpoints import free_port
from tests.helpers.processes import RUBRIC

pytestmark = [pytest.mark.timeout(120), pytest.mark.interop, pytest.mark.serve, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[2]
# Model code that reports what the sandbox lets it see: the project's files must not be there.
PROBE = f"import os; print(2 + 3, os.path.exists({str(REPO / 'README.md')!r}))"


def _text(result: Any) -> str:
    return "".join(block.text for block in result.content if block.type == "text")


async def _exercise(client: SDKClient) -> list[str]:
    """The checks both transports share; returns the tools the server listed."""
    env = load_environment("python")
    listed = (await client.list_tools()).tools
    assert [t.name for t in listed] == [t.name for t in env.tools] == ["run_python"]
    assert listed[0].input_schema == env.tools[0].parameters
    assert listed[0].description == env.tools[0].description
    ran = await client.call_tool("run_python", {"code": PROBE})
    assert not ran.is_error and _text(ran).split() == ["5", "False"]
    bad = await client.call_tool("run_python", {"program": "print(1)"})
    assert bad.is_error and "not run" in _text(bad) and "code" in _text(bad)
    unknown = await client.call_tool("nope", {})
    assert unknown.is_error and "run_python" in _text(unknown)
    return [t.name for t in listed]


async def test_the_official_client_over_stdio() -> None:
    params = StdioServerParameters(
        command=str(RUBRIC), args=["mcp", "python"], env={"PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    )
    async with SDKClient(stdio_client(params)) as client:
        assert await _exercise(client) == ["run_python"]


@pytest.fixture
def served_over_http(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    with (tmp_path / "err").open("wb") as err:
        proc = subprocess.Popen([str(RUBRIC), "mcp", "python", "--port", str(port)], stderr=err)
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                proc.kill()
                raise RuntimeError((tmp_path / "err").read_text()) from None
            time.sleep(0.1)
    yield f"http://127.0.0.1:{port}/mcp"
    proc.terminate()
    proc.wait(20)
    assert "serving 'python' tools over MCP at http://127.0.0.1" in (tmp_path / "err").read_text()


async def test_the_official_client_over_streamable_http(served_over_http: str) -> None:
    async with SDKClient(served_over_http) as client:
        assert await _exercise(client) == ["run_python"]


def test_an_environment_without_python_tools_is_refused(rubric: Invoke, tmp_path: Path) -> None:
    proc = rubric("mcp", "gsm8k", cwd=tmp_path)
    assert proc.returncode == 1 and "has no Python tools to serve over MCP" in proc.stderr
