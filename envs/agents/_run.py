"""`AgentRun`: an agent plays a run's episodes, each in a sandbox, through one capture proxy.

How a task is played is a run setting, not part of the task (Harbor's job config, Inspect's
`eval(task, solver=, sandbox=)`): the `Environment` holds the task (its rows, prompt, rubric
and task hooks, `envs.agents._task`), and an `AgentRun` holds the agent, the runtime and the
limits, and is handed to the engine: `harness.evaluate(env, client, episodes=AgentRun(...))`,
or `env.evaluate(model, agent="bash", runtime="bwrap")`, which builds one for the call.

It reaches the engine through one protocol, `harness._core.protocol.Episodes`:

    plan(rollouts_per_example)  -> a task's setup step runs once per example, forked per rollout
    check(env)                  -> the runtime can make sandboxes (before any rollout)
    play(env, rollout, client, sampling)
        -> the task's sandbox (`envs.agents._sandboxes`: the run's runtime and limits over the task's)
        -> the run's one `CaptureProxy` listens on that sandbox's socket; one session, bound to it
        -> the episode (`envs.agents._episode`; a multi-step task's steps in turn, each
           checked before the next: `envs.agents._steps`) -> {"sandbox": sandbox} for scoring
    release({"sandbox": ...})   -> after the rollout (or its group) is scored: the sandbox closes
    close()                     -> every sandbox still open, the proxy; a later play starts again

One proxy serves the whole run (started at the first episode, on the client that episode is
given; each session carries its own client and sampling), with one Unix listener per sandbox
(removed when its episode ends, which kills the session's key) and one session per rollout.

Workers and Ray rebuild it from `source` (`AgentRunSpec`: the agent's name, the runtime, the
files folder, the limits, as plain data), never from a pickled object; its `config()` is recorded
in metadata.json, so a resume with other agent settings is refused.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import math
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envs.agents._base import Agent, AgentError
from envs.agents._builtin import get_agent
from envs.agents._episode import Episode, play_episode
from envs.agents._sandboxes import DEFAULT_RUNTIME, LIMITS, Sandboxes
from envs.agents._steps import play_steps
from envs.agents._task import AgentTask, TaskSandbox, names_sandboxes
from harness._core.errors import ConfigError
from harness._core.protocol import SANDBOX, EnvironmentProtocol, Resources
from harness._core.types import Rollout
from harness._endpoint.client import Client
from harness.proxy._server import CaptureProxy
from harness.runtimes import Sandbox

DEFAULT_TIMEOUT = 600.0
#: Model calls an agent episode may make when neither the run (`max_calls`, `--max-turns`)
#: nor the environment (its own `max_turns`) says: real Codex or Claude Code episodes take
#: dozens to hundreds; the episode's time limit bounds it too.
DEFAULT_MAX_CALLS = 250
#: The resource under which an episode hands its rollout's `timing` to `release`.
TIMING = "timing"


@dataclass(frozen=True)
class AgentRunSpec:
    """How to build an `AgentRun` again in another process: plain, picklable data.

    Attributes:
        agent: The agent's name (`command:CMD`, `bash`, ...).
        runtime: The sandboxes' runtime (None: each task's own, else bwrap).
        files: The host folder uploaded to /agent (an absolute path), if any.
        timeout: Seconds per episode (None: each task's own, else 600).
        sandbox: Limits of every sandbox.
        max_calls: The most model calls per episode (None: see `AgentRun`).
    """

    agent: str
    runtime: str | None = None
    files: str | None = None
    timeout: float | None = None
    sandbox: dict[str, Any] = field(default_factory=dict)
    max_calls: int | None = None

    def load(self) -> AgentRun:
        """The `AgentRun` these settings make."""
        return AgentRun(
            self.agent,
            runtime=self.runtime,
            files=self.files,
            timeout=self.timeout,
            sandbox=self.sandbox,
            max_calls=self.max_calls,
        )


class AgentRun:
    """An agent playing a run's episodes in sandboxes (implements `harness._core.protocol.Episodes`).

    Each rollout's task (an `envs.Environment`, through its task hooks) gives the instruction,
    the sandbox it asks for and an optional setup step; the agent runs in that sandbox, its
    model calls go through the run's capture proxy to the run's model and are recorded as the
    rollout's turns, and reward nodes read the sandbox (a `sandbox` parameter,
    `envs.agents.command_passes`, `file_contains`) before it closes. An episode makes at most
    `max_calls` model calls (then the next is refused and the episode ends `max_turns`): the
    run's, else the environment's own `max_turns` when it sets one, else `DEFAULT_MAX_CALLS`
    (250); its time limit (`timeout`) bounds it too.

    Args:
        agent: "command:CMD", "bash", "mini-swe-agent", "codex", "claude-code", "oracle", or an
            `envs.agents.Agent` (then the run takes no workers: they rebuild agents by name).
        runtime: The sandboxes' runtime ("bwrap", "docker:IMAGE", "docker:DIR", ...); None:
            each task's own (`TaskSandbox.runtime`, e.g. a Harbor task's image), else "bwrap".
        files: A host folder uploaded to /agent in each sandbox before the agent starts.
        timeout: Seconds per episode; None: each task's own, else 600.
        sandbox: Limits of every sandbox (cpus, memory_mb, pids, disk_mb), over each task's.
        max_calls: The most model calls per episode (None: the environment's own `max_turns`
            when it sets one, else 250).

    Raises:
        AgentError: No agent of that name.
        ConfigError: A runtime outside the grammar, a files folder that does not exist, a
            timeout that is not positive, a limit that does not exist, or `max_calls` below 1.
    """

    def __init__(
        self,
        agent: str | Agent,
        *,
        runtime: str | None = None,
        files: str | Path | None = None,
        timeout: float | None = None,
        sandbox: Mapping[str, Any] | None = None,
        max_calls: int | None = None,
    ) -> None:
        self.agent = get_agent(agent)
        if max_calls is not None and (
            isinstance(max_calls, bool) or not isinstance(max_calls, int) or max_calls < 1
        ):
            raise ConfigError(f"agent max_calls must be an integer >= 1, got {max_calls!r}")
        self.max_calls = max_calls
        self._name = agent if isinstance(agent, str) else None
        self.runtime = runtime
        self.files = _folder(files)
        if timeout is not None and (isinstance(timeout, bool) or not timeout > 0 or math.isinf(timeout)):
            raise ConfigError(f"agent timeout must be a positive number of seconds, got {timeout!r}")
        self.timeout = timeout
        self.sandbox = dict(sandbox or {})
        unknown = sorted(set(self.sandbox) - set(LIMITS))
        if unknown:
            raise ConfigError(
                f"agent sandbox limits {unknown} are unknown; the limits are {', '.join(LIMITS)}"
            )
        self.sandboxes = Sandboxes(self.agent, runtime, self.sandbox)
        if runtime is not None:  # a runtime outside the grammar fails here, before any rollout
            self.sandboxes.runtime_for(runtime)
        #: The run's capture proxy while episodes play (started by the first one).
        self.proxy: CaptureProxy | None = None
        #: How many proxies this run has started (one per run; a figure for tests and benchmarks).
        self.proxies_started = 0
        self._starting = asyncio.Lock()

    def __repr__(self) -> str:
        return f"AgentRun({self._name or self.agent!r}, runtime={self.runtime!r})"

    # -- the run's settings ----------------------------------------------------------------

    def config(self) -> dict[str, Any]:
        """What identifies the run's agent settings in metadata.json (compared on resume)."""
        return {
            "agent": self._name,
            **self.agent.config(),
            "runtime": self.runtime,
            "files": str(self.files) if self.files else None,
            "timeout": self.timeout,
            **({"sandbox": dict(self.sandbox)} if self.sandbox else {}),
            **({"max_calls": self.max_calls} if self.max_calls is not None else {}),
        }

    @property
    def source(self) -> AgentRunSpec | None:
        """How workers build it again (None for an agent given as an object, not by name)."""
        if self._name is None:
            return None
        files = str(self.files) if self.files else None
        return AgentRunSpec(self._name, self.runtime, files, self.timeout, dict(self.sandbox), self.max_calls)

    def calls_cap(self, env: EnvironmentProtocol) -> int:
        """The most model calls an episode of `env` may make: the run's `max_calls`, else the
        environment's own `max_turns` when it set one, else `DEFAULT_MAX_CALLS`."""
        if self.max_calls is not None:
            return self.max_calls
        own = getattr(env, "max_turns", None) if getattr(env, "max_turns_set", False) else None
        return own if isinstance(own, int) else DEFAULT_MAX_CALLS

    def plan(self, rollouts_per_example: int) -> None:
        """The run's rollouts per example: with more than one, a task's setup step runs once
        per example and each rollout gets a fork of the set-up sandbox."""
        self.sandboxes.group_size = rollouts_per_example

    async def check(self, env: EnvironmentProtocol) -> None:
        """Fail now, with the fix, when the run's runtime cannot make sandboxes (no daemon, no
        bwrap). Tasks that name their own runtime are checked as their rollouts open them."""
        task = _task(env)
        replaced = {name: own for name, own in task.named_runtimes().items() if own != self.runtime}
        if self.runtime is not None and replaced:
            shown = ", ".join(f"{name} ({own})" for name, own in list(replaced.items())[:3])
            more = f" and {len(replaced) - 3} more" if len(replaced) > 3 else ""
            warnings.warn(
                f"--runtime {self.runtime} replaces the image each task names: {shown}{more} run in "
                f"{self.runtime} instead, where what their images install is missing; drop --runtime to "
                "run each task in its own image",
                stacklevel=2,
            )
        if self.runtime is not None or not names_sandboxes(task):
            await self.sandboxes.runtime_for(self.runtime or DEFAULT_RUNTIME).check()

    # -- the episodes ----------------------------------------------------------------------

    async def play(
        self, env: EnvironmentProtocol, rollout: Rollout, client: Client, sampling: Mapping[str, Any]
    ) -> Resources:
        """Play one episode into `rollout`; its sandbox stays open for scoring (`release` it)."""
        started = time.monotonic()
        limits: dict[str, Any] = {}
        try:
            task = _task(env)
            asked = task.task_sandbox(rollout)
            if asked is not None:
                refuse_unsupported(self.agent, asked)
            proxy = await self._proxy(client)
            sandbox = await self.sandboxes.open(task, rollout, asked)
            try:
                if asked is not None and asked.ready is not None:
                    await asked.ready(sandbox)  # a failed check fails the rollout; no agent runs
                episode = self._episode(env, task, rollout, sandbox, asked)
                limits = {"max_calls": episode.max_turns, "timeout": episode.timeout}
                steps = task.task_steps(rollout)
                if steps and self.timeout is not None:  # the run's time wins over each step's
                    steps = [dataclasses.replace(step, timeout=None) for step in steps]
                if steps:  # a multi-step task: each step's episode in this sandbox, checked in turn
                    play = functools.partial(
                        play_episode,
                        proxy=proxy,
                        sandbox=sandbox,
                        rollout=rollout,
                        client=client,
                        sampling=sampling,
                    )
                    await play_steps(steps, episode, sandbox, rollout, play)
                else:
                    await play_episode(episode, proxy, sandbox, rollout, client, sampling)
            except BaseException:
                await self.sandboxes.close(sandbox)  # a setup failure or a cancel: nothing stays behind
                raise
        finally:
            record = rollout.state.setdefault("agent", {})
            record.update(limits, seconds=round(time.monotonic() - started, 3))
        return {SANDBOX: sandbox, TIMING: rollout.timing}

    def _episode(
        self,
        env: EnvironmentProtocol,
        task: AgentTask,
        rollout: Rollout,
        sandbox: Sandbox,
        asked: TaskSandbox | None,
    ) -> Episode:
        """The settings of one episode: the run's, the task's where the run gives none."""
        timeout = self.timeout or (asked.timeout if asked is not None else None) or DEFAULT_TIMEOUT

        async def solution() -> str | None:
            return await task.solution(sandbox, rollout)

        return Episode(
            agent=self.agent,
            files=self.files,
            timeout=timeout,
            max_turns=self.calls_cap(env),
            instruction=task.instruction(rollout),
            must_call_model=self.agent.must_call_model,
            solution=solution,
            env=dict(asked.agent_env) if asked is not None else {},
            user=asked.user if asked is not None else None,
            mcp_servers=asked.mcp_servers if asked is not None else (),
            skills_dir=asked.skills_dir if asked is not None else None,
        )

    async def _proxy(self, client: Client) -> CaptureProxy:
        """The run's proxy, started at the first episode (agents ask for their own model names:
        all mean the served one; what Chat Completions cannot express is dropped, recorded)."""
        async with self._starting:
            if self.proxy is None:
                proxy = CaptureProxy(client, model_aliases=["*"], untranslatable="drop")
                await proxy.astart()
                self.proxy, self.proxies_started = proxy, self.proxies_started + 1
            return self.proxy

    async def release(self, resources: Resources) -> None:
        """Close the episode's sandbox (after scoring); safe to call twice."""
        sandbox = resources.get(SANDBOX)
        if isinstance(sandbox, Sandbox):
            t0 = time.perf_counter()
            await self.sandboxes.close(sandbox)
            timing = resources.get(TIMING)
            if isinstance(timing, dict):  # the rollout's: its record is written after this
                timing["sandbox_close"] = time.perf_counter() - t0

    async def close(self) -> None:
        """Close every sandbox still open and the proxy (the run ended or was interrupted); a
        later episode starts a new proxy."""
        try:
            await self.sandboxes.close_all()
        finally:
            proxy, self.proxy = self.proxy, None
            self._starting = asyncio.Lock()  # a later run may play on another event loop
            if proxy is not None:
                await proxy.aclose()


def refuse_unsupported(agent: Agent, asked: TaskSandbox) -> None:
    """Refuse, naming the field, a task asking the agent for what it cannot take (MCP servers,
    skills): the task would silently be played without them.

    Raises:
        AgentError: the agent takes no MCP servers, or no skills, and the task gives some.
    """
    if asked.mcp_servers and not agent.takes_mcp_servers:
        names = ", ".join(server.name for server in asked.mcp_servers)
        raise AgentError(
            f"the task gives MCP servers ({names}; Harbor [[environment.mcp_servers]]), which agent "
            f"{agent.name!r} cannot take; play it with an agent that does: codex or claude-code"
        )
    if asked.skills_dir and not agent.takes_skills:
        raise AgentError(
            f"the task gives skills (Harbor [environment] skills_dir = {asked.skills_dir!r}), which agent "
            f"{agent.name!r} cannot take; play it with an agent that does: codex or claude-code"
        )


def _task(env: EnvironmentProtocol) -> AgentTask:
    if not isinstance(env, AgentTask):
        raise ConfigError(
            f"an agent plays the tasks of an envs.Environment (its task hooks: instruction, task_sandbox, "
            f"setup_sandbox); {type(env).__name__} has none"
        )
    return env


def _folder(files: str | Path | None) -> Path | None:
    """`--agent-files` as an absolute folder, or a ConfigError naming the fix."""
    if files is None:
        return None
    folder = Path(files).expanduser().resolve()
    if not folder.is_dir():
        raise ConfigError(
            f"--agent-files {str(folder)!r} is not a folder; give the folder to upload to /agent"
        )
    return folder


__all__ = ["DEFAULT_TIMEOUT", "AgentRun", "AgentRunSpec"]
