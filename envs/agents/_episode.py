"""One agent episode: a sandbox, a proxy session on its socket, the agent's command, the record.

    sandbox (runtime.open) -> proxy on the sandbox's Unix socket, one session (secret key,
    budgets) -> relay to http://127.0.0.1:18080 inside -> /agent files, instruction file ->
    the agent's command, its output to files (a flood costs the sandbox's disk, not our
    memory) -> until it exits, its time runs out, or a budget ends the session -> every
    process in the sandbox ended (`Sandbox.end_processes`: nothing the agent left running,
    a loop or a daemon, lives on while the rubric looks) -> every model call recorded as a
    turn -> the sandbox stays open for the rubric, then is released.

Set up once per group, fork per rollout: an environment that declares a setup step
(`sandbox_setup`, e.g. cloning a repository or installing dependencies) has it run once per
example in a template sandbox when the run has several rollouts of each example
(`group_size > 1`, from `-r`); each rollout gets a `fork()` of the template, and the template
is closed when the group's last fork is made (or at `release_all`: an error, a cancel, the
end of the run). With one rollout per example the setup runs in the rollout's own sandbox.

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
import dataclasses
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envs.agents._base import (
    AGENT_DIR,
    HOME_DIR,
    INSTRUCTION_FILE,
    RELAY_PORT,
    STATE_DIR,
    Agent,
    AgentContext,
    AgentError,
)
from envs.agents._installed import amounts
from harness._core.errors import ConfigError
from harness._core.types import Rollout
from harness._endpoint.client import Client
from harness.proxy._server import CaptureProxy
from harness.proxy._session import ProxyBudgets, ProxySession
from harness.runtimes import Runtime, Sandbox, SandboxConfig, get_runtime

DEFAULT_RUNTIME = "bwrap"
DEFAULT_TIMEOUT = 600.0
#: Seconds an agent whose session a budget ended may take to exit before it is killed.
GRACE_SECONDS = 5.0
#: The most of an agent's stdout / stderr kept on the rollout (its last bytes).
OUTPUT_TAIL = 16 * 1024
_SANDBOX_KEYS = ("cpus", "memory_mb", "pids", "disk_mb")

#: An environment's setup step: prepares a fresh sandbox for the rollouts of one example.
SandboxSetup = Callable[[Sandbox, Rollout], Awaitable[None]]


@dataclass
class _Template:
    """One example's set-up sandbox, forked for each rollout of its group."""

    sandbox: Sandbox | None = None
    error: str | None = None
    forks: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


@dataclass
class AgentSetup:
    """How an environment runs its episodes with an agent.

    Attributes:
        agent: The agent.
        runtime: The runtime spec of its sandboxes ("bwrap", "docker:IMAGE", ...).
        files: A host folder uploaded to /agent before it starts (`--agent-files`).
        timeout: Seconds an episode may take (the proxy session's clock and the command's).
        sandbox: Limits of each sandbox (cpus, memory_mb, pids, disk_mb).
    """

    agent: Agent
    runtime: str = DEFAULT_RUNTIME
    files: Path | None = None
    timeout: float = DEFAULT_TIMEOUT
    sandbox: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.files is not None:
            self.files = Path(self.files).expanduser().resolve()
            if not self.files.is_dir():
                raise ConfigError(
                    f"--agent-files {str(self.files)!r} is not a folder; give the folder to upload to /agent"
                )
        if not self.timeout > 0:
            raise ConfigError(f"agent timeout must be a positive number of seconds, got {self.timeout!r}")
        unknown = sorted(set(self.sandbox) - set(_SANDBOX_KEYS))
        if unknown:
            raise ConfigError(
                f"agent sandbox limits {unknown} are unknown; the limits are {', '.join(_SANDBOX_KEYS)}"
            )

    def config(self) -> dict[str, Any]:
        """What identifies the setup in metadata.json."""
        return {
            **self.agent.config(),
            "runtime": self.runtime,
            "files": str(self.files) if self.files else None,
            "timeout": self.timeout,
            **({"sandbox": dict(self.sandbox)} if self.sandbox else {}),
        }


class AgentEpisodes:
    """Runs an environment's episodes with one `AgentSetup`.

    It holds each rollout's sandbox until `release(rollout)` (after scoring).

    Args:
        setup: The agent, its runtime, files and budgets.
        workdir: The agent's working folder in the sandbox (default: the image's).
        require_model_call: An episode in which the agent made no model call is an error.
        sandbox_setup: The environment's setup step, run once per example and forked per
            rollout when `group_size > 1` (see the module docstring).
        build_network: Whether building the runtime's image (`docker:PATH/TO/DIR`) may use
            the network (a Harbor task's `allow_internet`); False builds with none."""

    def __init__(
        self,
        setup: AgentSetup,
        *,
        workdir: str | None = None,
        require_model_call: bool = True,
        sandbox_setup: SandboxSetup | None = None,
        build_network: bool = True,
    ) -> None:
        self.setup = setup
        self.sandbox_setup = sandbox_setup
        #: Rollouts of each example in this run (`rollouts_per_example`; None: not told, as 1).
        self.group_size: int | None = None
        #: How many times the setup step ran (a figure for tests and benchmarks).
        self.setups = 0
        self._templates: dict[str, _Template] = {}
        #: The sandboxes' working directory (None: the runtime's default), e.g. an image's WORKDIR.
        self.workdir = workdir
        #: False where a verifier judges what the agent left (Harbor tasks): an agent that exits 0
        #: without calling the model is then scored as it stands (recorded as `no_model_call`).
        self.require_model_call = require_model_call
        try:  # a spec outside the grammar fails here, before any rollout
            spec = setup.agent.runtime_spec(setup.runtime)
            self.runtime: Runtime = get_runtime(spec, build_network=build_network)
        except ConfigError as exc:
            raise ConfigError(f"--runtime {setup.runtime!r}: {exc}") from None
        self._live: dict[int, Sandbox] = {}

    async def check(self) -> None:
        """Fail now, with the fix, when the runtime cannot make sandboxes (no daemon, no bwrap)."""
        await self.runtime.check()

    async def run(
        self, rollout: Rollout, client: Client, sampling: Mapping[str, Any], instruction: str, max_turns: int
    ) -> None:
        """Play one episode into `rollout` (see the module docstring); the sandbox stays open."""
        started = time.monotonic()
        setup = self.setup
        limits = {k: setup.sandbox[k] for k in _SANDBOX_KEYS if k in setup.sandbox}
        mounts = await amounts(setup.agent)
        config = SandboxConfig(**limits, mounts=mounts)
        if self.workdir:
            config = dataclasses.replace(config, workdir=self.workdir)
        sandbox = await self._open(rollout, config)
        self._live[id(rollout)] = sandbox
        rollout.attach_sandbox(sandbox)
        try:
            await self._play(sandbox, rollout, client, sampling, instruction, max_turns)
        except BaseException:
            await self.release(rollout)  # a setup failure or a cancel: nothing stays behind
            raise
        finally:
            rollout.state.setdefault("agent", {})["seconds"] = round(time.monotonic() - started, 3)

    async def _open(self, rollout: Rollout, config: SandboxConfig) -> Sandbox:
        """The rollout's sandbox: fresh, set up, or forked from its group's set-up template."""
        if self.sandbox_setup is None:
            return await self.runtime.open(config)
        if (self.group_size or 1) <= 1:
            sandbox = await self.runtime.open(config)
            try:
                await self._set_up(sandbox, rollout)
            except BaseException:
                await sandbox.close()
                raise
            return sandbox
        key = str(rollout.example_id)
        template = self._templates.setdefault(key, _Template())
        try:
            async with template.lock:  # the first rollout of the group sets up; the others wait
                if template.sandbox is None and template.error is None:
                    opened = await self.runtime.open(config)
                    try:
                        await self._set_up(opened, rollout)
                    except Exception as exc:  # every rollout of the group fails with it, once
                        await opened.close()
                        template.error = f"{type(exc).__name__}: {exc}"
                    except BaseException:  # a cancel: the next rollout of the group sets up again
                        await opened.close()
                        raise
                    else:
                        template.sandbox = opened
                if template.error is not None:
                    raise AgentError(f"the setup step of example {key!r} failed: {template.error}")
                assert template.sandbox is not None
                return await template.sandbox.fork()
        finally:
            template.forks += 1
            if template.forks >= (self.group_size or 1) and self._templates.get(key) is template:
                del self._templates[key]  # the group's last rollout: the template is done
                if template.sandbox is not None:
                    await template.sandbox.close()

    async def _set_up(self, sandbox: Sandbox, rollout: Rollout) -> None:
        assert self.sandbox_setup is not None
        self.setups += 1
        await self.sandbox_setup(sandbox, rollout)

    async def _play(
        self,
        sandbox: Sandbox,
        rollout: Rollout,
        client: Client,
        sampling: Mapping[str, Any],
        instruction: str,
        max_turns: int,
    ) -> None:
        setup, agent = self.setup, self.setup.agent
        proxy = CaptureProxy(
            client,
            sampling=sampling,
            budgets=ProxyBudgets(max_turns=max_turns, max_seconds=setup.timeout),
            model_aliases=["*"],  # agents ask for their own model names; all mean the served one
            untranslatable="drop",  # agents declare tools Chat Completions cannot express
        )
        try:
            await proxy.astart(socket_path=sandbox.socket_path)
            session = proxy.open_session(f"{rollout.example_id}/{rollout.rollout_index}")
            url = await sandbox.relay(RELAY_PORT)
            ctx = AgentContext(
                sandbox,
                instruction,
                env={
                    "OPENAI_BASE_URL": f"{url}/v1",
                    "OPENAI_API_KEY": session.key,
                    "ANTHROPIC_BASE_URL": url,
                    "ANTHROPIC_API_KEY": session.key,
                    "RUBRIC_MODEL": client.model,
                    "HOME": HOME_DIR,
                },
                model=client.model,
                files=setup.files,
                example=rollout.info,
            )
            prepared = await sandbox.exec(["mkdir", "-p", HOME_DIR, AGENT_DIR])
            if not prepared.ok:
                raise AgentError(
                    f"cannot prepare the sandbox for agent {agent.name!r}: {prepared.stderr.strip()}"
                )
            await sandbox.write(INSTRUCTION_FILE, instruction)
            if setup.files is not None:
                await sandbox.upload(setup.files, AGENT_DIR)
            await agent.prepare(ctx)
            command = agent.command(ctx)
            record: dict[str, Any] = {"name": agent.name, "command": command}
            rollout.state["agent"] = record
            exit_code, timed_out = await self._execute(sandbox, session, ctx, command)
        finally:
            await proxy.aclose()
        await sandbox.end_processes()  # nothing the agent left running lives on into scoring
        session.record_into(rollout)
        record.update(exit_code=exit_code, timed_out=timed_out, **await _outputs(sandbox))
        _conclude(rollout, agent, session, exit_code, timed_out, self.require_model_call)

    async def _execute(
        self, sandbox: Sandbox, session: ProxySession, ctx: AgentContext, command: str
    ) -> tuple[int | None, bool]:
        """Run the command until it exits, times out, or a budget ends the session (then it
        has `GRACE_SECONDS` to exit); its exit code (None: killed) and whether it timed out."""
        redirected = f'/bin/sh -c "$1" > {STATE_DIR}/stdout 2> {STATE_DIR}/stderr < /dev/null'
        argv = ["/bin/sh", "-c", redirected, "sh", command]
        running = asyncio.create_task(sandbox.exec(argv, env=ctx.env, timeout=self.setup.timeout))
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

    async def release(self, rollout: Rollout) -> None:
        """Close the rollout's sandbox (after scoring); safe to call twice."""
        sandbox = self._live.pop(id(rollout), None)
        rollout.attach_sandbox(None)
        if sandbox is not None:
            await sandbox.close()

    async def release_all(self) -> None:
        """Close every sandbox still open (the run ended or was interrupted)."""
        live, self._live = list(self._live.values()), {}
        templates, self._templates = list(self._templates.values()), {}
        live += [t.sandbox for t in templates if t.sandbox is not None]
        for sandbox in live:
            await sandbox.close()


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
    require_model_call: bool = True,
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
    if agent.calls_model and session.num_answered == 0 and not require_model_call:
        state["no_model_call"] = True
    elif agent.calls_model and session.num_answered == 0:
        rollout.stop_reason = "error"
        rollout.error = (
            f"AgentError: agent {agent.name!r} exited 0 but made no model call that was answered"
            f"{said or ': check that it reads OPENAI_BASE_URL / ANTHROPIC_BASE_URL and its API key from the environment'}"
        )
        return
    rollout.stop_reason = "completed"
