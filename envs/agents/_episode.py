"""One agent episode in its sandbox: a proxy session on the sandbox's socket, the agent's command, the record.

    the run's proxy listens on the sandbox's Unix socket; one session (secret key, budgets,
    bound to that socket) -> relay to http://127.0.0.1:18080 inside -> /agent files,
    instruction file -> the agent's command, its output to files (a flood costs the sandbox's
    disk, not our memory) -> until it exits, its time runs out, or a budget ends the session
    -> the proxy stops listening there (the key is dead) -> every process in the sandbox ended
    (`Sandbox.end_processes`: nothing the agent left running, a loop or a daemon, lives on
    while the rubric looks) -> every model call recorded as a turn -> the sandbox stays open
    for the rubric (`envs.agents.AgentRun` releases it after scoring).

How an episode ends (`rollout.stop_reason`; an `error` leaves the reward NaN with the reason):
- the agent exits 0 after calling the model: "completed";
- a budget ends the session (`max_turns`, `max_tokens`, `timeout`): that name; the agent
  is given `GRACE_SECONDS` to exit on its own, then killed;
- its command outlives the time limit: "timeout";
- it exits non-zero: "error" ("agent NAME exited with code N: ..." with its last stderr line
  and the proxy's last refusal, e.g. an unknown model or malformed JSON);
- it never calls the model (and should have): "error" ("made no model call").
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envs.agents._base import (
    AGENT_DIR,
    HOME_DIR,
    INSTRUCTION_FILE,
    NO_MODEL,
    RELAY_PORT,
    STATE_DIR,
    Agent,
    AgentContext,
    AgentError,
    McpServer,
)
from harness._core.run.calls import CALL_LOG
from harness._core.types import Rollout
from harness._endpoint.client import Client
from harness.proxy._server import CaptureProxy
from harness.proxy._session import ProxyBudgets, ProxySession
from harness.runtimes import Sandbox, SandboxError

#: Seconds an agent whose session a budget ended may take to exit before it is killed.
GRACE_SECONDS = 5.0
#: The most of an agent's stdout / stderr kept on the rollout (its last bytes).
OUTPUT_TAIL = 16 * 1024


@dataclass(frozen=True)
class Episode:
    """What one episode is played with (the run's settings, resolved for its task).

    Attributes:
        agent: The agent.
        files: The host folder uploaded to /agent, if any.
        timeout: Seconds the episode may take (the session's clock and the command's).
        max_turns: The most model calls (the environment's `max_turns`).
        instruction: What the agent is asked to do.
        must_call_model: An agent exiting 0 with no answered model call is an error (the
            agent's `must_call_model`; else it is scored as it stands).
        solution: The task's `solution` hook for this sandbox (what the oracle runs).
        env: The task's variables for the agent's process (under the proxy's own).
        user: The OS user the agent runs as (None: the sandbox's); its folders are given to it.
        mcp_servers: The task's MCP servers, for the agent to register.
        skills_dir: The task's skills folder in the sandbox, for the agent to install.
    """

    agent: Agent
    files: Path | None
    timeout: float
    max_turns: int
    instruction: str
    must_call_model: bool
    solution: Callable[[], Awaitable[str | None]]
    env: Mapping[str, str] = field(default_factory=dict)
    user: str | None = None
    mcp_servers: tuple[McpServer, ...] = ()
    skills_dir: str | None = None


async def play_episode(
    episode: Episode,
    proxy: CaptureProxy,
    sandbox: Sandbox,
    rollout: Rollout,
    client: Client,
    sampling: Mapping[str, Any],
) -> None:
    """Play one episode into `rollout` in `sandbox` (see the module docstring); the sandbox stays open."""
    agent = episode.agent
    socket = await proxy.alisten_unix(sandbox.socket_path)
    try:
        session = proxy.open_session(
            f"{rollout.example_id}/{rollout.rollout_index}",
            budgets=ProxyBudgets(max_turns=episode.max_turns, max_seconds=episode.timeout),
            client=client,
            sampling=sampling,
            socket_path=socket,
        )
        log = CALL_LOG.get()
        if log is not None:  # each call reaches the run folder as it finishes (a crash keeps it)
            session.on_finish = functools.partial(log.write, rollout.example_id, rollout.rollout_index)
        ctx = await _prepared(episode, sandbox, session, rollout, client, await sandbox.relay(RELAY_PORT))
        command = agent.command(ctx)
        record: dict[str, Any] = {"name": agent.name, "command": command}
        rollout.state["agent"] = record
        exit_code, timed_out = await _execute(sandbox, session, ctx, command, episode.timeout, episode.user)
    finally:
        await proxy.aclose_unix(socket)  # no call is served after this: its key is dead
    await sandbox.end_processes()  # nothing the agent left running lives on into scoring
    session.record_into(rollout)
    record.update(exit_code=exit_code, timed_out=timed_out, **await _outputs(sandbox))
    _conclude(rollout, agent, session, exit_code, timed_out, episode.must_call_model)
    if client.model == NO_MODEL and session.turns and rollout.error:  # it called a model the run lacks
        rollout.error += "; the run has no model (no -m): pass -m MODEL for an agent that calls one"


async def _prepared(
    episode: Episode, sandbox: Sandbox, session: ProxySession, rollout: Rollout, client: Client, url: str
) -> AgentContext:
    """The agent's context, its folders, instruction file and files in place, its `prepare` run."""
    agent = episode.agent
    ctx = AgentContext(
        sandbox,
        episode.instruction,
        env={
            **episode.env,
            "OPENAI_BASE_URL": f"{url}/v1",
            "OPENAI_API_KEY": session.key,
            "ANTHROPIC_BASE_URL": url,
            "ANTHROPIC_API_KEY": session.key,
            "RUBRIC_MODEL": client.model,
            "HOME": HOME_DIR,
        },
        model=client.model,
        files=episode.files,
        example=rollout.info,
        solution=episode.solution,
        mcp_servers=episode.mcp_servers,
        skills_dir=episode.skills_dir,
    )
    prepared = await sandbox.exec(["mkdir", "-p", HOME_DIR, AGENT_DIR])
    if not prepared.ok:
        raise AgentError(f"cannot prepare the sandbox for agent {agent.name!r}: {prepared.stderr.strip()}")
    await sandbox.write(INSTRUCTION_FILE, episode.instruction)
    if episode.files is not None:
        await sandbox.upload(episode.files, AGENT_DIR)
    await agent.prepare(ctx)
    if episode.user is not None:  # the agent's folders are its own
        await _check_user(sandbox, episode.user)
        given = await sandbox.exec(["chown", "-R", episode.user, STATE_DIR, AGENT_DIR], user="0")
        if not given.ok:
            raise AgentError(
                f"cannot give the agent's folders to user {episode.user!r} (the task's [agent] user): "
                f"{given.stderr.strip()[-300:]}"
            )
    return ctx


async def _check_user(sandbox: Sandbox, user: str) -> None:
    """Fail now, naming the task's user, when the sandbox cannot run a command as it (no such
    user in the image; a bwrap sandbox, which maps only this process's user)."""
    try:
        result = await sandbox.exec(["true"], user=user, timeout=30)
    except SandboxError as exc:
        said = str(exc)
    else:
        said = (
            ""
            if result.ok
            else (result.stderr or result.stdout).strip()[-300:] or f"exit code {result.exit_code}"
        )
    if said:
        raise AgentError(f"the agent cannot run as the task's user {user!r} (Harbor [agent] user): {said}")


async def _execute(
    sandbox: Sandbox,
    session: ProxySession,
    ctx: AgentContext,
    command: str,
    timeout: float,
    user: str | None = None,
) -> tuple[int | None, bool]:
    """Run the command until it exits, times out, or a budget ends the session (then it
    has `GRACE_SECONDS` to exit); its exit code (None: killed) and whether it timed out."""
    redirected = f'/bin/sh -c "$1" > {STATE_DIR}/stdout 2> {STATE_DIR}/stderr < /dev/null'
    argv = ["/bin/sh", "-c", redirected, "sh", command]
    running = asyncio.create_task(sandbox.exec(argv, env=ctx.env, timeout=timeout, user=user))
    stopped = asyncio.create_task(session.wait_stopped())
    try:
        await asyncio.wait({running, stopped}, return_when=asyncio.FIRST_COMPLETED)
        if not running.done():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(running), GRACE_SECONDS)
        if not running.done():
            running.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await running
            return None, False
        result = running.result()
        return result.exit_code, result.timed_out
    finally:
        for task in (running, stopped):
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task


async def _outputs(sandbox: Sandbox) -> dict[str, Any]:
    """The last `OUTPUT_TAIL` bytes of the agent's stdout and stderr, and their sizes."""
    found: dict[str, Any] = {}
    for name in ("stdout", "stderr"):
        path = f"{STATE_DIR}/{name}"
        # Bounded twice: `tail` keeps the end, and whatever answers for it is cut past that.
        script = f"wc -c < {path}; tail -c {OUTPUT_TAIL} {path}"
        result = await sandbox.exec(script, timeout=30, max_output=OUTPUT_TAIL + 64)
        size, _, tail = result.stdout.partition("\n")
        found[name] = tail
        found[f"{name}_bytes"] = int(size) if size.strip().isdigit() else 0
    return found


def _conclude(
    rollout: Rollout,
    agent: Agent,
    session: ProxySession,
    exit_code: int | None,
    timed_out: bool,
    must_call_model: bool = True,
) -> None:
    """The stop reason (or error) of a finished agent episode."""
    if session.stop_reason is not None and session.stop_reason != "closed":
        rollout.stop_reason = session.stop_reason  # a budget ended it: scored as it stands
        return
    if timed_out:
        rollout.stop_reason = "timeout"
        return
    refusal = next((t for t in reversed(session.turns) if t.error), None)
    said = f"; the proxy refused its last call ({refusal.status}): {refusal.error}" if refusal else ""
    state = rollout.state["agent"]
    if exit_code != 0:
        last = (state.get("stderr") or state.get("stdout") or "").strip().splitlines()
        rollout.stop_reason = "error"
        rollout.error = (
            f"AgentError: agent {agent.name!r} exited with code {exit_code}"
            f"{': ' + last[-1][:300] if last else ''}{said}"
        )
        return
    if agent.calls_model and session.num_answered == 0 and not must_call_model:
        state["no_model_call"] = True
    elif agent.calls_model and session.num_answered == 0:
        rollout.stop_reason = "error"
        rollout.error = (
            f"AgentError: agent {agent.name!r} exited 0 but made no model call that was answered"
            f"{said or ': check that it reads OPENAI_BASE_URL / ANTHROPIC_BASE_URL and its API key from the environment'}"
        )
        return
    rollout.stop_reason = "completed"


__all__ = ["GRACE_SECONDS", "OUTPUT_TAIL", "Episode", "play_episode"]
