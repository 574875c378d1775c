"""Where an agent episode's sandbox comes from, and what the run's sandboxes are while it lasts.

For each rollout, the run's settings and its task's (`TaskSandbox`, from the environment's
`task_sandbox` hook) are resolved, the run's winning one by one:

    runtime: the run's, else the task's (a function, such as one building the task's image,
    is called now), else "bwrap"; the agent may derive its own from it (`Agent.sandbox_runtime`);
    one `harness.runtimes.Runtime` per runtime string, kept for the run
    limits (cpus, memory_mb, pids, disk_mb): the run's `sandbox` over the task's, key by key
    workdir, variables and network: the task's ("public": Docker's bridge; a runtime with no
    network of its own, bwrap, gives none and one warning per task says so, and the rollout's
    `state["sandbox"]` records the network given); the agent's packages mounted read-only

Set up once per group, fork per rollout: for a task that declares a setup step
(`setup_sandbox`, e.g. cloning a repository or installing dependencies), it runs once per
example in a template sandbox when the run has several rollouts of each example
(`group_size > 1`, from `-r`); each rollout gets a `fork()` of the template, and the template
is closed when the group's last fork is made (or at `close_all`: an error, a cancel, the end
of the run). With one rollout per example the setup runs in the rollout's own sandbox.

Every sandbox opened is in `live` until it is closed, so `close_all` leaves nothing behind
whatever ended the run.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from envs.agents._base import Agent, AgentError
from envs.agents._installed import amounts
from envs.agents._task import AgentTask, TaskSandbox, declares_setup
from harness._core.errors import ConfigError
from harness._core.types import Rollout
from harness.runtimes import Runtime, Sandbox, SandboxConfig, get_runtime
from harness.runtimes._base import Network

DEFAULT_RUNTIME = "bwrap"
#: The sandbox limits a run (and a task) may set.
LIMITS = ("cpus", "memory_mb", "pids", "disk_mb")
#: The processes and threads a Docker sandbox holds at once when neither the run nor the task
#: caps them (a Harbor task has no pids field): room for Node or Rust agents' threads and a
#: build's workers, not for a fork bomb. A bwrap sandbox is capped only when asked (its cap
#: needs a cgroup, which not every host gives).
DEFAULT_DOCKER_PIDS = 4096


@dataclass
class _Template:
    """One example's set-up sandbox, forked for each rollout of its group."""

    sandbox: Sandbox | None = None
    error: str | None = None
    forks: int = 0
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)


class Sandboxes:
    """The sandboxes of one agent run: made per rollout, forked per group, closed at the end.

    Args:
        agent: The run's agent (its mounts, its runtime for a given one).
        runtime: The run's runtime, or None (each task's own, else `DEFAULT_RUNTIME`).
        limits: The run's limits, over every task's.
    """

    def __init__(self, agent: Agent, runtime: str | None, limits: Mapping[str, Any]) -> None:
        self.agent = agent
        self.runtime = runtime
        self.limits = dict(limits)
        #: Rollouts of each example in this run (`rollouts_per_example`; None: not told, as 1).
        self.group_size: int | None = None
        #: How many times a setup step ran (a figure for tests and benchmarks).
        self.setups = 0
        #: Every sandbox of the run that is open, templates aside.
        self.live: set[Sandbox] = set()
        self._runtimes: dict[str, Runtime] = {}
        self._templates: dict[str, _Template] = {}
        self._said_network: set[str] = set()  # tasks told their network is not given

    def runtime_for(self, runtime: str, *, named: str = "--runtime") -> Runtime:
        """The `Runtime` for a runtime string (made once per run); a bad one is a ConfigError."""
        chosen = self.agent.sandbox_runtime(runtime)
        found = self._runtimes.get(chosen)
        if found is None:
            try:
                found = get_runtime(chosen)
            except ConfigError as exc:
                raise ConfigError(f"{named} {runtime!r}: {exc}") from None
            self._runtimes[chosen] = found
        return found

    async def open(self, task: AgentTask, rollout: Rollout, asked: TaskSandbox | None) -> Sandbox:
        """The rollout's sandbox: fresh, set up, or forked from its group's set-up template.
        Seconds go to `rollout.timing`: `image` (the task's image named, or built the first
        time), `sandbox_start` (made, set up or forked)."""
        t0 = time.perf_counter()
        runtime = await self._runtime(asked)
        config = await self._config(asked)
        if config.pids is None and runtime.kind_name == "docker":
            config = dataclasses.replace(config, pids=DEFAULT_DOCKER_PIDS)
        config = self._network(config, runtime, asked, rollout)
        t1 = time.perf_counter()
        sandbox = await self._open(runtime, config, task, rollout)
        rollout.timing.update(image=t1 - t0, sandbox_start=time.perf_counter() - t1)
        self.live.add(sandbox)
        return sandbox

    async def _runtime(self, asked: TaskSandbox | None) -> Runtime:
        if self.runtime is not None:
            return self.runtime_for(self.runtime)
        if asked is None or asked.runtime is None:
            return self.runtime_for(DEFAULT_RUNTIME)
        runtime = asked.runtime if isinstance(asked.runtime, str) else await asked.runtime()
        return self.runtime_for(runtime, named="the task's runtime")

    async def _config(self, asked: TaskSandbox | None) -> SandboxConfig:
        task_limits = {
            k: getattr(asked, k) for k in LIMITS if asked is not None and getattr(asked, k) is not None
        }
        limits = {**task_limits, **{k: self.limits[k] for k in LIMITS if k in self.limits}}
        config = SandboxConfig(**limits, mounts=await amounts(self.agent))
        if asked is not None and asked.workdir:
            config = dataclasses.replace(config, workdir=asked.workdir)
        if asked is not None and asked.env:
            config = dataclasses.replace(config, env={**config.env, **asked.env})
        return config

    def _network(
        self, config: SandboxConfig, runtime: Runtime, asked: TaskSandbox | None, rollout: Rollout
    ) -> SandboxConfig:
        """The task's network on `config`: "public" is Docker's bridge; a runtime with no network
        of its own gives none, said once per task. Recorded in `rollout.state["sandbox"]`."""
        wanted = asked.network if asked is not None else config.network
        given: Network = "none" if wanted == "public" else wanted
        if wanted == "public":
            given = "bridge" if runtime.own_network else "none"
            if given == "none" and str(rollout.example_id) not in self._said_network:
                self._said_network.add(str(rollout.example_id))
                warnings.warn(
                    f"task {rollout.example_id} asks for a network (network_mode public / allow_internet); "
                    f"its sandbox ({runtime.describe()}) has none of its own to give (a bwrap sandbox's only choice, "
                    "the machine's network, would share 127.0.0.1 with the host and every sandbox; a "
                    "compose project has only its private loopback), so it runs with no network",
                    UserWarning,
                    stacklevel=2,
                )
        not_given = wanted == "public" and given == "none"
        rollout.state["sandbox"] = {"network": given, **({"asked": wanted} if not_given else {})}
        return dataclasses.replace(config, network=given) if given != config.network else config

    async def _open(
        self, runtime: Runtime, config: SandboxConfig, task: AgentTask, rollout: Rollout
    ) -> Sandbox:
        if not declares_setup(task):
            return await runtime.open(config)
        if (self.group_size or 1) <= 1:
            sandbox = await runtime.open(config)
            try:
                await self._set_up(task, sandbox, rollout)
            except BaseException:
                await sandbox.close()
                raise
            return sandbox
        return await self._fork(runtime, config, task, rollout)

    async def _fork(
        self, runtime: Runtime, config: SandboxConfig, task: AgentTask, rollout: Rollout
    ) -> Sandbox:
        """A fork of the example's set-up template (set up by the group's first rollout)."""
        key = str(rollout.example_id)
        template = self._templates.setdefault(key, _Template())
        try:
            async with template.lock:  # the first rollout of the group sets up; the others wait
                if template.sandbox is None and template.error is None:
                    opened = await runtime.open(config)
                    try:
                        await self._set_up(task, opened, rollout)
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

    async def _set_up(self, task: AgentTask, sandbox: Sandbox, rollout: Rollout) -> None:
        self.setups += 1
        await task.setup_sandbox(sandbox, rollout)

    @property
    def templates(self) -> int:
        """Set-up templates still open (a figure for tests)."""
        return len(self._templates)

    async def close(self, sandbox: Sandbox) -> None:
        """Close one sandbox of the run; safe to call twice."""
        self.live.discard(sandbox)
        await sandbox.close()

    async def close_all(self) -> None:
        """Close every sandbox and template still open (the run ended or was interrupted)."""
        live, self.live = list(self.live), set()
        templates, self._templates = list(self._templates.values()), {}
        live += [t.sandbox for t in templates if t.sandbox is not None]
        for sandbox in live:
            await sandbox.close()


__all__ = ["DEFAULT_RUNTIME", "LIMITS", "Sandboxes"]
