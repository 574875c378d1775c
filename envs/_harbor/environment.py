"""`envs.from_harbor(PATH)`: a folder of Harbor tasks as an ordinary `Environment`.

One row per task folder (`example_id` = its `[task] name`, else its folder name; prompt =
instruction.md). The environment
holds the tasks, not who plays them: an agent run (`--agent NAME`, `evaluate(agent=...)`) plays
each task in a sandbox the task names through its hook (`task_sandbox`): its own image (a
checked copy of environment/ built once per content hash, or `[environment] docker_image`)
with its limits (cpus, memory_mb, storage_mb) and its Dockerfile's WORKDIR, within
`[agent] timeout_sec`; then `HarborVerifier` runs its tests. `--agent oracle` runs the task's
solution/solve.sh (the `solution` hook). A multi-step task's steps (`[[steps]]`) are played in
turn in one sandbox, each tested before the next (`task_steps`, `envs._harbor.steps`). A task folder that cannot be read is kept as a row
whose rollouts fail with the reason: the rest of the dataset runs.

The sandbox also carries the task's variables (`[environment] env` for every command, `[agent]
env` for the agent's process only; `[verifier] env` reaches test.sh alone, read by the
verifier from task.toml, so no value is ever stored on a rollout), `[agent] user`, its network
(`network_mode` / `allow_internet`: Docker's bridge or none), `[environment.healthcheck]` (run
before the agent starts), `skills_dir` and `[[environment.mcp_servers]]` (for the agents that
take them). Keys task.toml has that rubric does not know are named in one warning per task.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import shlex
import warnings
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from envs._environment import Environment
from envs._harbor.files import HarborTaskError, read_task_file, staged_task_folder
from envs._harbor.registry import registry_task_folders
from envs._harbor.steps import task_steps
from envs._harbor.task import (
    COMPOSE_FILE,
    STEPS_DIR,
    HarborTask,
    HealthcheckSection,
    load_task,
    resolved_env,
    task_config,
    task_folders,
)
from envs._harbor.verifier import INFO_KEY, HarborVerifier
from envs.agents import AgentError, TaskSandbox, TaskStep
from envs.agents._task import McpServer, TaskRuntime
from harness._core.types import Rollout
from harness.runtimes import Sandbox, SandboxError
from harness.runtimes._compose import ComposeRuntime
from harness.runtimes._docker import build_context
from harness.scripted import ShellScript
from rubrics._tree.module import Rubric

SOLUTION_DIR = "/solution"
#: The `[solution] env` file the oracle's command sources.
SOLUTION_ENV = f"{SOLUTION_DIR}/.rubric-env"


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
        "runtime": task.runtime,
        "workdir": config.environment.workdir or task.workdir,  # task.toml's over the Dockerfile's
        "agent_timeout_sec": config.agent.timeout_sec,
        "verifier_timeout_sec": config.verifier.timeout_sec,
        "cpus": config.environment.cpus,
        "memory_mb": config.environment.memory_mb,
        "storage_mb": config.environment.storage_mb,
        "allow_internet": config.environment.allow_internet,
        "network_mode": config.network("agent"),
        "agent_user": config.agent.user,
        "verifier_user": config.verifier.user,
        "env_keys": {  # the names only: a value may be a secret
            phase: sorted(getattr(config, phase).env)
            for phase in ("environment", "agent", "verifier", "solution")
            if getattr(config, phase).env
        },
        "healthcheck": config.environment.healthcheck.command if config.environment.healthcheck else None,
        "skills_dir": config.environment.skills_dir,
        "mcp_servers": [server.name for server in config.environment.mcp_servers],
        "task": config.task.model_dump(exclude_none=True),
        "metadata": config.metadata,
    }
    if config.steps:  # a multi-step task: its steps in order, and how their rewards roll up
        info["steps"] = [step.name for step in config.steps]
        info["multi_step_reward_strategy"] = config.multi_step_reward_strategy
    if task.unknown:
        info["unknown"] = task.unknown
    return {"example_id": task.name, "prompt": task.instruction, "info": {INFO_KEY: info}}


class HarborScript:
    """The scripted policy `harbor`: plays each task through the `bash` agent by running its
    solution/solve.sh as one shell command (found by the instruction it is given), then stops.
    A reference that needs no model, as the gsm8k and wordle policies are."""

    def __init__(self, tasks: Mapping[str, HarborTask]) -> None:
        solutions = {}  # instruction -> the solution's path in the task
        for task in tasks.values():
            if not task.config.steps and task.has_solution:
                solutions[task.instruction.strip()] = (task, "solution/solve.sh")
            for step in task.config.steps:  # a multi-step task: each step's, by its instruction
                if task.step_has(step.name, "solution/solve.sh"):
                    solve = f"{STEPS_DIR}/{step.name}/solution/solve.sh"
                    solutions[task.step_instructions[step.name].strip()] = (task, solve)
        self.scripts = {
            asked: ShellScript([read_task_file(task.path, solve).decode()], "done")
            for asked, (task, solve) in solutions.items()
        }

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Any:
        asked = next((str(m.get("content") or "") for m in messages if m.get("role") == "user"), "")
        script = self.scripts.get(asked.strip())
        return script(messages, tools) if script is not None else "I do not know this task."


class HarborEnvironment(Environment):
    """Harbor tasks: each task's episodes in sandboxes of its own image and limits.

    The task hooks say what each task asks of the run that plays it: `task_sandbox` its image
    (named, or built once from a checked copy of its environment/), cpus, memory, storage,
    WORKDIR and `[agent] timeout_sec`; `solution` its solution/solve.sh (what `--agent oracle`
    runs). The run's own runtime and limits, when it gives them, win. `folders` gives the task
    folders instead of those PATH names (a registry dataset's, fetched into the cache).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        rubric: Rubric | None = None,
        name: str | None = None,
        folders: Sequence[Path] | None = None,
    ) -> None:
        folders = list(folders) if folders is not None else task_folders(path)
        rows = [_row(folder) for folder in folders]
        self.tasks = {
            row["example_id"]: load_task(row["info"][INFO_KEY]["path"])
            for row in rows
            if "error" not in row["info"][INFO_KEY]
        }
        #: The task folders that cannot be read: name -> why (their rollouts fail with it).
        self.broken = {row["example_id"]: row["info"][INFO_KEY]["error"] for row in rows if "error" in row["info"][INFO_KEY]}  # fmt: skip
        _refuse_twice_named(rows)
        for task in self.tasks.values():
            line = task.unknown_line()
            if line is not None:
                warnings.warn(line, UserWarning, stacklevel=1)  # one place: shown once per task
        super().__init__(rows, rubric or HarborVerifier(), name=name or Path(path).resolve().name)
        self._images: dict[str, str] = {}  # task -> the image built from its environment/
        self._building: dict[str, asyncio.Lock] = {}
        self.scripted_policies = {"harbor": HarborScript(self.tasks)}

    def named_runtimes(self) -> dict[str, str]:
        """Each task's image: `docker:IMAGE` it names, or `docker:FOLDER` of its environment/."""
        return {name: task.runtime for name, task in self.tasks.items()}

    def task_sandbox(self, rollout: Rollout) -> TaskSandbox:
        """The task's sandbox: its image (named, or built from environment/ when first asked
        for), its cpus, memory_mb, storage_mb (as disk_mb), WORKDIR and agent timeout.

        Raises:
            HarborTaskError: The task's folder cannot be read (its rollouts fail with why).
        """
        info = rollout.info.get(INFO_KEY) or {}
        if "error" in info:
            raise HarborTaskError(info["error"])
        task = self.tasks.get(str(rollout.example_id))
        runtime: TaskRuntime = str(info["runtime"])
        if task is not None and (not task.config.environment.docker_image or task.has_compose):
            runtime = functools.partial(self._built_image, task)
        sandbox = TaskSandbox(
            runtime=runtime,
            cpus=info["cpus"],
            memory_mb=info["memory_mb"],
            disk_mb=info["storage_mb"],
            workdir=info.get("workdir"),
            timeout=float(info["agent_timeout_sec"]),
        )
        return sandbox if task is None else _with_task_settings(sandbox, task)

    def task_steps(self, rollout: Rollout) -> list[TaskStep] | None:
        """A multi-step task's steps (`envs._harbor.steps`): each its instruction, workdir/ and
        setup.sh, tests (checked before the next step) and solution; None for a one-step task."""
        task = self.tasks.get(str(rollout.example_id))
        if task is None or not task.config.steps:
            return None
        verifier = self.rubric if isinstance(self.rubric, HarborVerifier) else None
        return task_steps(task, rollout, empty_first=verifier.empty_first if verifier is not None else True)

    async def _built_image(self, task: HarborTask) -> str:
        """The task's image built (once per run, cached by content by Docker) from a checked copy
        of environment/, with no network unless the task allows internet; a compose task's
        sidecars are built here too, so with the task's network."""
        async with self._building.setdefault(task.name, asyncio.Lock()):
            if task.name not in self._images:
                image = task.config.environment.docker_image or await build_task_image(task)
                if task.has_compose:  # the runtime made from the spec finds them built (by content)
                    network = task.config.network("environment") == "public"
                    file = task.path / COMPOSE_FILE
                    await ComposeRuntime(
                        task.runtime, "", file, main_image=image, build_network=network
                    ).sidecar_images()
                self._images[task.name] = image
        return task.runtime_with(self._images[task.name])

    async def solution(self, sandbox: Sandbox, rollout: Rollout) -> str | None:
        """The task's solution/ uploaded to /solution (only now: the agent never sees it) and
        `bash /solution/solve.sh`; a task without one has none."""
        task = Path(str((rollout.info.get(INFO_KEY) or {}).get("path", "")))
        if not (task / "solution" / "solve.sh").is_file():
            return await super().solution(sandbox, rollout)
        async with staged_task_folder(task, "solution") as solution:
            await sandbox.upload(solution, SOLUTION_DIR)
        env = resolved_env(task_config(task).solution.env, "[solution]")
        if not env:
            return f"bash {SOLUTION_DIR}/solve.sh"
        # `[solution] env` in a file only the oracle's sandbox gets, so no value is in the
        # command the rollout records.
        exports = "".join(f"export {key}={shlex.quote(value)}\n" for key, value in env.items())
        await sandbox.write(SOLUTION_ENV, exports)
        return f". {SOLUTION_ENV} && bash {SOLUTION_DIR}/solve.sh"


def _with_task_settings(sandbox: TaskSandbox, task: HarborTask) -> TaskSandbox:
    """The rest of task.toml on the sandbox: workdir, variables, user, network, healthcheck,
    MCP servers and skills (each resolved now, from the host's environment)."""
    config = task.config
    env = config.environment
    servers = tuple(
        McpServer(s.name, s.transport, url=s.url, command=s.command, args=tuple(s.args))
        for s in env.mcp_servers
    )
    ready = functools.partial(wait_healthy, env.healthcheck) if env.healthcheck is not None else None
    return dataclasses.replace(
        sandbox,
        network="public" if config.network("agent") == "public" else "none",
        env=resolved_env(env.env, "[environment]"),
        agent_env=resolved_env(config.agent.env, "[agent]"),
        user=config.agent.user,
        ready=ready,
        mcp_servers=servers,
        skills_dir=env.skills_dir,
    )


async def wait_healthy(check: HealthcheckSection, sandbox: Sandbox) -> None:
    """Run `[environment.healthcheck]` in `sandbox` until it passes, as Docker runs a
    HEALTHCHECK: every `start_interval_sec` during `start_period_sec` (failures there do not
    count), then every `interval_sec`; `retries` failures in a row fail it.

    Raises:
        AgentError: it failed `retries` times in a row (its last output is in the message).
    """
    loop = asyncio.get_running_loop()
    started, failures = loop.time(), 0
    while True:
        result = await sandbox.exec(check.command, timeout=check.timeout_sec, user="0")
        if result.ok:
            return
        starting = loop.time() - started < check.start_period_sec
        failures += 0 if starting else 1
        if failures >= max(1, check.retries):
            said = "timed out" if result.timed_out else f"exited {result.exit_code}"
            tail = (result.stderr or result.stdout).strip().splitlines()
            raise AgentError(
                f"[environment.healthcheck] {check.command!r} failed {failures} time(s) in a row (last: {said}"
                f"{': ' + tail[-1][:200] if tail else ''}); the agent did not start"
            )
        await asyncio.sleep(check.start_interval_sec if starting else check.interval_sec)


def _refuse_twice_named(rows: list[dict[str, Any]]) -> None:
    """Two task folders with one `[task] name` would share an example_id: refused."""
    seen: dict[str, str] = {}
    for row in rows:
        name, path = str(row["example_id"]), str(row["info"][INFO_KEY]["path"])
        if name in seen:
            raise HarborTaskError(
                f"Harbor tasks {seen[name]} and {path} are both named {name!r} ([task] name, else the "
                "folder name); rename one"
            )
        seen[name] = path


async def build_task_image(task: HarborTask) -> str:
    """Build a task's environment/ from a checked copy (`staged_task_folder`): the build
    context never holds a link or a file from outside the task. Returns the image's tag."""
    async with staged_task_folder(task.path, "environment") as context:
        try:
            return await build_context(
                context,
                network=task.config.network("environment") == "public",
                timeout=task.config.environment.build_timeout_sec,
            )
        except SandboxError as exc:  # name the task's folder, not the temporary copy
            raise SandboxError(str(exc).replace(str(context), str(task.path / "environment"))) from None


def from_harbor(
    path: str | Path,
    *,
    rubric: Rubric | None = None,
    name: str | None = None,
    registry: str | None = None,
) -> Environment:
    """Harbor tasks as an `Environment`: PATH is one task folder, a folder of task folders, a
    dataset folder (its dataset.toml names the tasks and pins their digests), or with
    `registry` a dataset `NAME@VERSION` of a Harbor registry (its tasks fetched once with git
    into a cache, `envs._harbor.registry`).

    Play them with an agent: `env.evaluate(model, agent="bash")` (`runtime=` for every task
    instead of each task's own image), `rubric eval harbor:PATH --agent NAME`,
    `rubric eval harbor:NAME@VERSION --registry REGISTRY --agent NAME`.

    Args:
        path: The task or dataset folder; with `registry`, the dataset's `NAME@VERSION` (or `NAME`).
        rubric: The reward tree (default `HarborVerifier()` alone; put it in your own tree to
            combine the task's tests with other nodes).
        name: The environment's name (default: the folder's; a registry dataset's `NAME@VERSION`).
        registry: A registry.json: a path, a `file://` or an `http(s)://` URL.

    Raises:
        HarborTaskError: PATH is not a folder, or one task folder given alone is not a task; a
            dataset.toml or a registry names a task that is not there or has another digest.
    """
    if registry is not None:
        dataset, fetched = registry_task_folders(str(path), registry)
        default = f"{dataset.name.replace('/', '-')}@{dataset.version}"
        return HarborEnvironment(path, rubric=rubric, name=name or default, folders=fetched)
    if "@" in str(path) and not Path(path).expanduser().exists():
        raise HarborTaskError(
            f"harbor:{path}: no such folder; for a dataset of a Harbor registry give the registry: "
            "--registry PATH_OR_URL (registry= in Python)"
        )
    folders = task_folders(path)
    if len(folders) == 1 and Path(path).expanduser().resolve() == folders[0]:
        load_task(folders[0])  # one task given alone: its error now, not on its rollouts
    return HarborEnvironment(path, rubric=rubric, name=name)


def load_environment(path: str, **kwargs: Any) -> Environment:
    """The loader behind the `harbor:PATH` spec (`rubric eval harbor:PATH --agent NAME`)."""
    return from_harbor(path, **kwargs)


__all__ = ["HarborEnvironment", "HarborScript", "from_harbor"]
