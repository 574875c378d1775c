"""`envs.from_harbor(PATH)`: a folder of Harbor tasks as an ordinary `Environment`.

One row per task folder (`example_id` = its name, prompt = instruction.md). Each task's
episodes run in sandboxes of its own image (a checked copy of environment/ built once per
content hash, or `[environment] docker_image`) with its limits (cpus, memory_mb, storage_mb) and its Dockerfile's
WORKDIR, within `[agent] timeout_sec`; then `HarborVerifier` runs its tests. A task folder that
cannot be read is kept as a row whose rollouts fail with the reason: the rest of the dataset runs.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from envs._environment import Environment
from envs._harbor.files import HarborTaskError, read_task_file, staged_task_folder
from envs._harbor.task import HarborTask, load_task, task_folders
from envs._harbor.verifier import INFO_KEY, HarborVerifier
from envs.agents import Agent, AgentContext, AgentEpisodes, OracleAgent
from harness._core.types import Rollout
from harness._endpoint.client import Client
from harness.runtimes import SandboxError, get_runtime
from harness.runtimes._docker import build_context
from harness.scripted import ShellScript
from rubrics._module import Rubric

SOLUTION_DIR = "/solution"


class HarborOracle(OracleAgent):
    """The oracle for Harbor tasks: uploads the task's solution/ to /solution and runs solve.sh."""

    async def prepare(self, ctx: AgentContext) -> None:
        task = Path(str(ctx.example.get(INFO_KEY, {}).get("path", "")))
        if not (task / "solution" / "solve.sh").is_file():
            await super().prepare(ctx)  # no solution/: the generic oracle's error
            return
        async with staged_task_folder(task, "solution") as solution:
            await ctx.sandbox.upload(solution, SOLUTION_DIR)

    def command(self, ctx: AgentContext) -> str:
        return f"bash {SOLUTION_DIR}/solve.sh"


def _row(folder: Path) -> dict[str, Any]:
    """The dataset row of one task folder (an unreadable one carries its error)."""
    try:
        task = load_task(folder)
    except HarborTaskError as exc:
        return {"example_id": folder.name, "prompt": f"(Harbor task {folder.name} cannot be read)",
                "info": {INFO_KEY: {"path": str(folder), "error": str(exc)}}}  # fmt: skip
    config = task.config
    info: dict[str, Any] = {
        "path": str(task.path),
        "runtime": task.runtime_spec,
        "workdir": task.workdir,
        "agent_timeout_sec": config.agent.timeout_sec,
        "verifier_timeout_sec": config.verifier.timeout_sec,
        "cpus": config.environment.cpus,
        "memory_mb": config.environment.memory_mb,
        "storage_mb": config.environment.storage_mb,
        "allow_internet": config.environment.allow_internet,
        "metadata": config.metadata,
    }
    if task.unknown:
        info["unknown"] = task.unknown
    return {"example_id": task.name, "prompt": task.instruction, "info": {INFO_KEY: info}}


class HarborScript:
    """The scripted policy `harbor`: plays each task through the `bash` agent by running its
    solution/solve.sh as one shell command (found by the instruction it is given), then stops.
    A reference that needs no model, as the gsm8k and wordle policies are."""

    def __init__(self, tasks: Mapping[str, HarborTask]) -> None:
        self.scripts = {
            task.instruction.strip(): ShellScript(
                [read_task_file(task.path, "solution/solve.sh").decode()], "done"
            )
            for task in tasks.values()
            if task.has_solution
        }

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Any:
        asked = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
        script = self.scripts.get(asked.strip())
        return script(messages, tools) if script is not None else "I do not know this task."


class HarborEnvironment(Environment):
    """Harbor tasks: each task's episodes in sandboxes of its own image and limits."""

    def __init__(self, path: str | Path, *, rubric: Rubric | None = None, name: str | None = None) -> None:
        folders = task_folders(path)
        rows = [_row(folder) for folder in folders]
        self.tasks = {
            row["example_id"]: load_task(row["info"][INFO_KEY]["path"])
            for row in rows
            if "error" not in row["info"][INFO_KEY]
        }
        #: The task folders that cannot be read: name -> why (their rollouts fail with it).
        self.broken = {row["example_id"]: row["info"][INFO_KEY]["error"] for row in rows if "error" in row["info"][INFO_KEY]}  # fmt: skip
        super().__init__(rows, rubric or HarborVerifier(), name=name or Path(path).resolve().name)
        self.runtime_override: str | None = None
        self._per_task: dict[str, AgentEpisodes] = {}
        self._owner: dict[int, AgentEpisodes] = {}
        self._images: dict[str, str] = {}  # task -> the image built from its environment/
        self._building: dict[str, asyncio.Lock] = {}
        self.scripted_policies = {"harbor": HarborScript(self.tasks)}

    def set_agent(
        self,
        agent: str | Agent | None,
        *,
        runtime: str | None = None,
        files: str | None = None,
        timeout: float | None = None,
        sandbox: Mapping[str, Any] | None = None,
    ) -> None:
        """As `Environment.set_agent`; `runtime` (default: each task's own image) overrides
        every task's; `oracle` runs each task's solution/solve.sh."""
        if agent == "oracle":
            agent = HarborOracle()
        self.runtime_override = runtime
        self._per_task = {}
        super().set_agent(
            agent,
            runtime=runtime or "docker:rubric-harbor-unused",
            files=files,
            timeout=timeout,
            sandbox=sandbox,
        )

    async def _episodes(self, rollout: Rollout) -> AgentEpisodes:
        info = rollout.info.get(INFO_KEY) or {}
        if "error" in info:
            raise HarborTaskError(info["error"])
        if self.agent is None:
            raise HarborTaskError("Harbor tasks run with an agent: rubric eval harbor:PATH --agent NAME")
        episodes = self._per_task.get(str(rollout.example_id))
        if episodes is None:
            setup = dataclasses.replace(
                self.agent,
                runtime=await self._runtime(str(rollout.example_id), info),
                timeout=float(info["agent_timeout_sec"]),
                sandbox={
                    "cpus": info["cpus"],
                    "memory_mb": info["memory_mb"],
                    "disk_mb": info["storage_mb"],
                    **self.agent.sandbox,
                },
            )
            # The task's verifier judges what the agent left: doing nothing is a 0, not an error.
            # Its own image builds with no network unless the task allows internet.
            episodes = AgentEpisodes(
                setup,
                workdir=info.get("workdir"),
                require_model_call=False,
                build_network=bool(info["allow_internet"]) or self.runtime_override is not None,
            )
            self._per_task[str(rollout.example_id)] = episodes
        return episodes

    async def _runtime(self, name: str, info: Mapping[str, Any]) -> str:
        """The task's runtime: the one given for every task, its named image, or the image
        built (once per run, cached by content by Docker) from a checked copy of environment/."""
        task = self.tasks.get(name)
        if self.runtime_override or task is None or task.config.environment.docker_image:
            return self.runtime_override or str(info["runtime"])
        async with self._building.setdefault(name, asyncio.Lock()):
            if name not in self._images:
                self._images[name] = await build_task_image(task)
        return f"docker:{self._images[name]}"

    async def preflight(self) -> None:
        """Fail before any rollout when the rubric cannot score or the runtime cannot make
        sandboxes (no Docker daemon)."""
        await self.rubric.acheck_ready()
        if self.tasks and self.agent is not None:
            first = next(iter(self.tasks.values()))
            await get_runtime(self.runtime_override or first.runtime_spec).check()

    async def run_episode(self, rollout: Rollout, client: Client, sampling: Mapping[str, Any]) -> None:
        """Let the agent play the task in a sandbox of the task's image (tests not in it)."""
        episodes = await self._episodes(rollout)
        self._owner[id(rollout)] = episodes
        await episodes.run(rollout, client, sampling, self.instruction(rollout), self.max_turns)
        await self.score_while_open(rollout)

    async def release_rollout(self, rollout: Rollout) -> None:
        """Close the rollout's sandbox (after the verifier ran)."""
        episodes = self._owner.pop(id(rollout), None)
        if episodes is not None:
            await episodes.release(rollout)
        await super().release_rollout(rollout)

    async def release(self) -> None:
        """Close every sandbox still open."""
        for episodes in list(self._per_task.values()):
            await episodes.release_all()
        self._owner.clear()
        await super().release()


async def build_task_image(task: HarborTask) -> str:
    """Build a task's environment/ from a checked copy (`staged_task_folder`): the build
    context never holds a link or a file from outside the task. Returns the image's tag."""
    async with staged_task_folder(task.path, "environment") as context:
        try:
            return await build_context(context, network=task.config.environment.allow_internet)
        except SandboxError as exc:  # name the task's folder, not the temporary copy
            raise SandboxError(str(exc).replace(str(context), str(task.path / "environment"))) from None


def from_harbor(
    path: str | Path,
    *,
    agent: str | Agent | None = None,
    runtime: str | None = None,
    rubric: Rubric | None = None,
    name: str | None = None,
) -> Environment:
    """Harbor tasks as an `Environment`: PATH is one task folder or a folder of task folders.

    Args:
        path: The task or dataset folder.
        agent: The agent playing the episodes ("bash", "command:CMD", "oracle", ...); also
            settable later (`evaluate(..., agent=...)`, `rubric eval --agent`).
        runtime: A runtime for every task instead of each task's own image.
        rubric: The reward tree (default `HarborVerifier()` alone; put it in your own tree to
            combine the task's tests with other nodes).
        name: The environment's name (default: the folder's).

    Raises:
        HarborTaskError: PATH is not a folder, or one task folder given alone is not a task.
    """
    folders = task_folders(path)
    if len(folders) == 1 and Path(path).expanduser().resolve() == folders[0]:
        load_task(folders[0])  # one task given alone: its error now, not on its rollouts
    env = HarborEnvironment(path, rubric=rubric, name=name)
    if agent is not None:
        env.set_agent(agent, runtime=runtime)
    return env


def load_environment(path: str, **kwargs: Any) -> Environment:
    """The loader behind the `harbor:PATH` spec (`rubric eval harbor:PATH --agent NAME`)."""
    return from_harbor(path, **kwargs)


__all__ = ["HarborEnvironment", "HarborOracle", "HarborScript", "from_harbor"]
