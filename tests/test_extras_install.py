"""Extras installed in any order: `[mcp]` then `[openenv]`, and the reverse, into fresh venvs.

Each order pip-installs the two extras one after the other from the built wheel into a new
venv; the versions must stay working ones, and `rubric mcp` and `rubric serve` from that venv
must answer a client. pip resolves each `pip install` on its own, so a later extra can
silently downgrade what an earlier one installed (unpinned, `[openenv]` took OpenEnv 0.10,
whose fastmcp<4 pulled mcp back to 1.x, and `pip check` saw nothing wrong). The venvs
resolve the wheel's real dependencies from pip's configured index (`--no-compile` spares the
byte-compiling of every installed file); nothing of the checkout is on their path. Among
the slowest tests of the suite: each order builds a venv from nothing (both at once).
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import venv
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client as SDKClient
from mcp.client.stdio import StdioServerParameters, stdio_client
from openenv.core.generic_client import GenericEnvClient
from packaging.version import Version

from tests.envs.interop.test_openenv_serve import play
from tests.helpers.endpoints import free_port
from tests.helpers.install import build_rubric_wheel
from tests.helpers.processes import serving

pytestmark = [
    pytest.mark.timeout(1200),
    pytest.mark.install,
    pytest.mark.interop,
    pytest.mark.serve,
    pytest.mark.slow,
]
ORDERS = [("mcp", "openenv"), ("openenv", "mcp")]


@pytest.fixture(scope="module")
def venvs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    """One fresh venv per order, each with the two extras pip-installed one after the other
    from the built wheel. Made side by side: pip spends most of its time waiting on its index."""
    base = tmp_path_factory.mktemp("extras")
    wheel = build_rubric_wheel(base)

    def make(order: tuple[str, str]) -> Path:
        target = base / "-then-".join(order)
        venv.EnvBuilder(with_pip=True).create(target)
        for extra in order:
            requirement = f"rubric-rl[{extra}] @ {wheel.as_uri()}"
            _in_venv(target, "-m", "pip", "install", "-q", "--no-compile", requirement)
        return target

    with ThreadPoolExecutor(len(ORDERS)) as pool:
        return dict(zip(ORDERS, pool.map(make, ORDERS)))


def _outside() -> dict[str, str]:
    """This environment without PYTHONPATH: the venv sees nothing of the checkout."""
    return {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}


def _in_venv(target: Path, *args: str, timeout: float = 900) -> str:
    done = subprocess.run(
        [str(target / "bin" / "python"), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=_outside(),
        cwd=target.parent,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-4000:]
    return done.stdout


async def _mcp_answers(rubric: Path, cwd: Path) -> None:
    """The official MCP client (this interpreter's) lists and calls the python environment's
    tool through `rubric mcp python` over stdio."""
    params = StdioServerParameters(command=str(rubric), args=["mcp", "python"], cwd=cwd)
    async with SDKClient(stdio_client(params)) as client:
        assert [t.name for t in (await client.list_tools()).tools] == ["run_python"]
        ran = await client.call_tool("run_python", {"code": "print(2 + 3)"})
        assert not ran.is_error and "".join(b.text for b in ran.content if b.type == "text").strip() == "5"


async def _openenv_plays(url: str) -> Any:
    """OpenEnv's client (this interpreter's) plays one wordle episode with the oracle's guesses."""
    from envs import load_environment

    oracle = load_environment("wordle").scripted_policies["oracle"]
    async with GenericEnvClient(base_url=url) as client:
        result, _ = await play(client, oracle, seed=3)
    return result


@pytest.mark.parametrize("order", ORDERS, ids=["mcp-then-openenv", "openenv-then-mcp"])
def test_extras_installed_one_after_the_other_keep_working_versions(
    order: tuple[str, str], venvs: dict[tuple[str, str], Path], tmp_path: Path
) -> None:
    target = venvs[order]
    probe = "import json, importlib.metadata as m; print(json.dumps({d: m.version(d) for d in ('mcp', 'openenv', 'fastmcp')}))"
    versions = json.loads(_in_venv(target, "-c", probe))
    assert Version(versions["mcp"]).major == 2 and versions["openenv"] == "0.4.1", versions
    _in_venv(target, "-m", "pip", "check")  # no installed package left with a broken requirement

    rubric = target / "bin" / "rubric"
    asyncio.run(_mcp_answers(rubric, tmp_path))
    port = free_port()
    command = [str(rubric), "serve", "wordle", "--port", str(port)]
    with serving(command, port, env={"PYTHONPATH": ""}) as server:  # empty: no checkout on the path
        result = asyncio.run(_openenv_plays(f"http://127.0.0.1:{port}"))
    assert result.done and result.observation["stop_reason"] == "won" and result.reward == pytest.approx(1.0)
    assert "Traceback" not in server.stop()[1]
