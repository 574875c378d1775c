"""Bad agents: each ends its rollout with a named stop reason or error, nothing lost, the sandbox gone."""

from __future__ import annotations

import asyncio
import math
import socket
from pathlib import Path
from typing import Any

import pytest

from envs.agents import AgentContext, AgentRun, BashAgent
from harness import Rollout
from tests.envs.agents.conftest import CHAT_AGENT, DOCKER, left_behind, task_env

pytestmark = [pytest.mark.agents, pytest.mark.slow]

# An agent that misbehaves as argv[1] says, with the proxy's answers on its stderr.
BAD_AGENT = r"""
import os, sys, urllib.request, urllib.error
mode = sys.argv[1]
base = os.environ["OPENAI_BASE_URL"]
def post(path, body):
    request = urllib.request.Request(base + path, data=body, headers={
        "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"})
    try:
        return urllib.request.urlopen(request).read()
    except urllib.error.HTTPError as exc:
        sys.exit(f"HTTP {exc.code}: {exc.read()[:200]!r}")
if mode == "malformed":
    post("/chat/completions", b'{"model": "m", "messages": [')
if mode == "dialect":
    post("/completions", b'{"model": "m", "prompt": "hi"}')
if mode == "stolen-key":
    os.environ["OPENAI_API_KEY"] = "rubric-not-this-rollouts-key"
    post("/chat/completions", b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}')
"""


def _run(agent: str, tmp_path: Path, runtime: str = "bwrap", timeout: float | None = None) -> Rollout:
    folder = tmp_path / "agent"
    folder.mkdir(exist_ok=True)
    (folder / "bad.py").write_text(BAD_AGENT)
    (folder / "chat.py").write_text(CHAT_AGENT)
    env = task_env()
    run = AgentRun(agent, runtime=runtime, files=str(folder), timeout=timeout)
    (rollout,) = env.evaluate("scripted:solve", agent=run, progress=False).rollouts
    assert left_behind(runtime) == []  # the sandbox went with the rollout
    return rollout


def test_exit_non_zero_is_an_error_with_its_stderr(tmp_path: Path) -> None:
    r = _run("command:echo broken >&2; exit 3", tmp_path)
    assert r.stop_reason == "error" and math.isnan(r.reward)
    assert "exited with code 3: broken" in (r.error or "")
    assert r.state["agent"]["exit_code"] == 3


class _SilentBash(BashAgent):
    """A model agent that exits 0 without reaching the proxy (as a misconfigured one does)."""

    def command(self, ctx: AgentContext) -> str:
        return "true"


def test_a_model_agent_never_calling_the_model_is_an_error_and_a_command_is_scored(tmp_path: Path) -> None:
    """One rule, whatever the environment (issue 47.16): the agent decides."""
    env = task_env()
    (silent,) = env.evaluate(
        "scripted:solve", agent=AgentRun(_SilentBash(), runtime="bwrap"), progress=False
    ).rollouts
    assert silent.stop_reason == "error" and "made no model call" in (silent.error or "")
    assert math.isnan(silent.reward)
    r = _run("command:true", tmp_path)
    assert r.stop_reason == "completed" and r.error is None and r.state["agent"]["no_model_call"]
    assert r.reward == 0.0  # scored as it stands: the file was never written


@pytest.mark.parametrize(
    ("mode", "status", "said"),
    [("malformed", 400, "JSON"), ("dialect", 404, "/completions"), ("stolen-key", 401, "key")],
)
def test_refused_calls_are_recorded_and_named(tmp_path: Path, mode: str, status: int, said: str) -> None:
    r = _run(f"command:python3 /agent/bad.py {mode}", tmp_path)
    assert r.stop_reason == "error" and math.isnan(r.reward)
    assert f"exited with code 1: HTTP {status}" in (r.error or "")
    if mode != "stolen-key":  # a call without this session's key never reaches the session
        (call,) = r.model_calls
        assert call.status == status and said.lower() in (call.error or "").lower()
        assert f"the proxy refused its last call ({status})" in (r.error or "")


@pytest.mark.bwrap
@pytest.mark.parametrize(
    "runtime",
    [pytest.param("bwrap", id="bwrap"), pytest.param(DOCKER, id="docker", marks=pytest.mark.docker)],
)
def test_hanging_agent_is_killed_at_its_time_limit(tmp_path: Path, runtime: str) -> None:
    r = _run("command:sleep 60", tmp_path, runtime=runtime, timeout=1.5)
    assert r.stop_reason == "timeout" and r.error is None
    assert r.state["agent"]["timed_out"] is True and r.state["agent"]["seconds"] < 10


@pytest.mark.docker
def test_flooding_agent_keeps_the_tail_and_finishes(tmp_path: Path) -> None:
    flood = (
        "command:head -c 3000000 /dev/zero | tr '\\0' x; echo END; python3 /agent/chat.py {instruction_file}"
    )
    r = _run(flood, tmp_path, runtime=DOCKER)
    assert r.error is None and r.reward == 1.0
    agent = r.state["agent"]
    assert agent["stdout_bytes"] > 3_000_000 and len(agent["stdout"]) <= 16 * 1024
    assert "final: the file is written" in agent["stdout"]


def test_budget_of_model_calls_ends_the_episode(tmp_path: Path) -> None:
    env_turns = 1  # the agent needs two calls; the second is refused and the budget names the stop
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "chat.py").write_text(CHAT_AGENT)
    env = task_env()
    env.max_turns = env_turns
    run = AgentRun("command:python3 /agent/chat.py {instruction_file}", files=str(folder))
    (r,) = env.evaluate("scripted:solve", agent=run, progress=False).rollouts
    assert r.stop_reason == "max_turns" and r.error is None
    assert r.turns == 1 and r.reward == 1.0  # the file was written in the one call it had


# Thirty model calls at once, each from its own thread and connection; the statuses it got.
BURST_AGENT = r"""
import json, os, threading, urllib.request, urllib.error
body = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
start, statuses = threading.Barrier(30), []
def call():
    request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions", data=body,
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"})
    start.wait()
    try:
        statuses.append(urllib.request.urlopen(request, timeout=60).status)
    except urllib.error.HTTPError as exc:
        statuses.append(exc.code)
threads = [threading.Thread(target=call) for _ in range(30)]
for t in threads: t.start()
for t in threads: t.join()
print(sorted(statuses))
"""


async def _slow_model(messages: list[dict[str, Any]], tools: Any) -> str:
    await asyncio.sleep(0.5)  # every call is still in flight when the others arrive
    return "hi"


def test_calls_sent_at_once_cannot_pass_the_budget(tmp_path: Path) -> None:
    """Issue 45.6: under max_turns=2, a rollout recorded 20 answered calls sent at once."""
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "burst.py").write_text(BURST_AGENT)
    env = task_env()
    env.max_turns = 2
    env.scripted_policies = {"slow": _slow_model}
    run = AgentRun("command:python3 /agent/burst.py", files=str(folder))
    (r,) = env.evaluate("scripted:slow", agent=run, progress=False).rollouts
    assert r.turns == 2 and r.stop_reason == "max_turns" and r.error is None
    assert sorted(c.status for c in r.model_calls) == [200, 200] + [400] * 28
    assert f"{[200, 200] + [400] * 28}" in r.state["agent"]["stdout"]


@pytest.mark.bwrap
@pytest.mark.parametrize(
    "runtime",
    [pytest.param("bwrap", id="bwrap"), pytest.param(DOCKER, id="docker", marks=pytest.mark.docker)],
)
def test_an_agent_reaching_past_its_socket_gets_nowhere(tmp_path: Path, runtime: str) -> None:
    with socket.create_server(("127.0.0.1", 0)) as host_server:  # a host service the agent must not reach
        port = host_server.getsockname()[1]
        probe = (
            "import socket, sys\n"
            f"for address in [('127.0.0.1', {port}), ('10.255.255.1', 80)]:\n"
            "    try:\n"
            "        socket.create_connection(address, timeout=2)\n"
            "    except OSError as exc:\n"
            "        print(address, exc)\n"
            "    else:\n"
            "        sys.exit(f'reached {address}')\n"
            "sys.exit('no network')\n"
        )
        (tmp_path / "agent").mkdir()
        (tmp_path / "agent" / "probe.py").write_text(probe)
        r = _run("command:python3 /agent/probe.py", tmp_path, runtime=runtime)
    assert r.stop_reason == "error" and "exited with code 1: no network" in (r.error or "")
    assert (
        "refused" in r.state["agent"]["stdout"].lower()
        and "unreachable" in r.state["agent"]["stdout"].lower()
    )
