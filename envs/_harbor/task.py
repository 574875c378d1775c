"""Harbor's task folder, read with the standard library (`tomllib`) and a pydantic model.

    task/
      task.toml        schema_version (or version), [task] name/description/authors/keywords,
                       [verifier] and [agent] timeout_sec, env, user, network_mode;
                       [solution] env; [environment] build_timeout_sec, cpus, memory_mb (or
                       memory "2G"), storage_mb (or storage "10G"), docker_image, os, gpus,
                       env, workdir, healthcheck, skills_dir, mcp_servers, network_mode (or
                       allow_internet); [metadata] free-form; [verifier]
                       environment_mode / [verifier.environment] / [[verifier.collect]] and the
                       top-level artifacts (`envs._harbor.separate`)
      instruction.md   what the agent is asked to do
      environment/     a Dockerfile and its build context (unless docker_image names an image),
                       and docker-compose.yaml for sidecar services (`main` is the agent's)
      tests/test.sh    the verifier: writes /logs/verifier/reward.txt or reward.json
      solution/solve.sh  the reference solution (optional; only the oracle sees it)
      steps/NAME/      a multi-step task (`[[steps]]`): each step's instruction.md, tests/ (over
                       the task's tests/), solution/ and workdir/ (with its setup.sh)

Every file is read through `envs._harbor.files` (a regular file inside the folder, size-capped,
or the task is refused naming it). Harbor's own package needs Python 3.12, so the format is
parsed here. Fields this model does
not know are kept (`HarborTask.unknown`) and recorded in the rollout's info.

What rubric cannot honour is refused here, naming the field (`refusals`): a Windows image, GPUs,
a per-host allowlist, a network that differs between the agent and the verifier (both run in
one sandbox), a `${VAR}` the host lacks. `${VAR}` and `${VAR:-default}` in an `env` table are
resolved from the host's environment when used (`resolved_env`), never stored on a rollout.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from envs._harbor.dataset import dataset_task_folders, is_dataset
from envs._harbor.files import HarborTaskError, check_task_folder, read_task_file
from harness._core.errors import ConfigError
from harness.runtimes._compose import load_compose

#: Harbor's defaults (seconds, CPUs, MB).
DEFAULT_TIMEOUT_SEC = 600.0
#: The task.toml schema versions this model reads (Harbor's 1.x).
SCHEMA_MAJOR = "1"
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
#: A `[task] name`: "name" or Harbor's "org/name".
TASK_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")
NetworkMode = Literal["public", "no-network", "allowlist"]
REQUIRED_FILES = ("task.toml", "instruction.md", "tests/test.sh")
#: A multi-step task's steps live in steps/NAME/, each with these optional folders.
STEPS_DIR = "steps"
STEP_FOLDERS = ("tests", "solution", "workdir")
#: A multi-container environment (Harbor's docker environment prefers it when present).
COMPOSE_FILE = "environment/docker-compose.yaml"
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KMGT]?)i?B?\s*$", re.IGNORECASE)
_UNITS = {"": 1 / (1 << 20), "K": 1 / 1024, "M": 1, "G": 1024, "T": 1024 * 1024}


def size_mb(value: Any, field: str) -> int:
    """Megabytes from Harbor's size strings ("2G", "512M") or a number of bytes."""
    if isinstance(value, int | float):
        return max(1, int(value / (1 << 20)))
    match = _SIZE.match(str(value))
    if match is None:
        raise ValueError(f"{field} {value!r} is not a size such as '2G' or '512M'")
    return max(1, int(float(match.group(1)) * _UNITS[match.group(2).upper()]))


class _Section(BaseModel):
    model_config = ConfigDict(extra="allow")

    def unknown(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


class ArtifactSection(_Section):
    """One entry of `artifacts` (top level or a step's): a path copied out of the agent's
    sandbox once it has finished (a bare string is its `source`), kept with the rollout and,
    for a separate verifier, put at the same path in the verifier's sandbox."""

    source: str = Field(pattern=r"^/")
    destination: str | None = None
    service: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _bare(cls, data: Any) -> Any:
        return {"source": data} if isinstance(data, str) else data


class CollectHook(_Section):
    """`[[verifier.collect]]`: a command run in the agent's sandbox (as root, in its working
    folder) after the agent and before the artifacts are copied out."""

    command: str = Field(min_length=1)
    service: str | None = None
    timeout_sec: float = Field(60.0, gt=0)


class SeparateVerifier(BaseModel):
    """`[verifier] environment_mode`, `[verifier.environment]` and `[[verifier.collect]]`
    (mixed into `VerifierSection`): where the tests run and what runs before."""

    environment_mode: Literal["shared", "separate"] | None = None
    environment: EnvironmentSection | None = None
    collect: list[CollectHook] = Field(default_factory=list)

    @property
    def separate(self) -> bool:
        """Whether the tests run in a sandbox of their own (`[verifier.environment]` alone means so)."""
        return self.environment_mode == "separate" or (
            self.environment_mode is None and self.environment is not None
        )

    @model_validator(mode="after")
    def _modes(self) -> SeparateVerifier:
        if self.environment_mode == "shared" and self.environment is not None:
            raise ValueError(
                'environment_mode = "shared" with a [verifier.environment]: a shared verifier runs in the '
                'agent\'s sandbox; set environment_mode = "separate" or drop [verifier.environment]'
            )
        return self


class _Phase(_Section):
    """What `[agent]` and `[verifier]` share: the phase's time, its own variables (secrets
    only it sees), its OS user and its network (None: the environment's)."""

    timeout_sec: float = Field(DEFAULT_TIMEOUT_SEC, gt=0)
    env: dict[str, str] = Field(default_factory=dict)
    user: str | None = Field(None, min_length=1)
    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] = Field(default_factory=list)


class VerifierSection(_Phase, SeparateVerifier):
    """`[verifier]`: how long test.sh may run, its variables, user and network (and where:
    `SeparateVerifier`)."""


class AgentSection(_Phase):
    """`[agent]`: how long the agent may run, its variables, user and network."""


class SolutionSection(_Section):
    """`[solution]`: the variables solution/solve.sh runs with (the oracle's)."""

    env: dict[str, str] = Field(default_factory=dict)


class HealthcheckSection(_Section):
    """`[environment.healthcheck]`: a command that must pass in the sandbox before the agent
    starts (Harbor's fields and defaults: every `interval_sec` after `start_period_sec`,
    each run within `timeout_sec`, failing the rollout after `retries` failures)."""

    command: str = Field(min_length=1)
    interval_sec: float = Field(5.0, ge=0)
    timeout_sec: float = Field(30.0, gt=0)
    start_period_sec: float = Field(0.0, ge=0)
    start_interval_sec: float = Field(5.0, ge=0)
    retries: int = Field(3, ge=0)


class McpServerSection(_Section):
    """One `[[environment.mcp_servers]]`: a server the agent registers (`stdio`: a command in
    the sandbox; `sse` / `streamable-http`: a URL)."""

    name: str = Field(pattern=r"^[A-Za-z0-9_-]+$")
    transport: Literal["stdio", "sse", "streamable-http"] = "sse"
    url: str | None = None
    command: str | None = None
    args: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _target(self) -> McpServerSection:
        if self.transport == "stdio" and not self.command:
            raise ValueError(f"MCP server {self.name!r} (transport stdio) needs a command")
        if self.transport != "stdio" and not self.url:
            raise ValueError(f"MCP server {self.name!r} (transport {self.transport}) needs a url")
        return self


class EnvironmentSection(_Section):
    """`[environment]`: the image and the sandbox's limits (memory/storage also as "2G")."""

    build_timeout_sec: float = Field(DEFAULT_TIMEOUT_SEC, gt=0)
    docker_image: str | None = None
    cpus: float = Field(1, gt=0)
    memory_mb: int = Field(2048, gt=0)
    storage_mb: int = Field(10240, gt=0)
    gpus: int = Field(0, ge=0)
    allow_internet: bool = True
    gpu_types: list[str] = Field(default_factory=list)
    os: Literal["linux", "windows"] = "linux"
    env: dict[str, str] = Field(default_factory=dict)
    workdir: str | None = Field(None, pattern=r"^/")
    healthcheck: HealthcheckSection | None = None
    skills_dir: str | None = Field(None, pattern=r"^/")
    mcp_servers: list[McpServerSection] = Field(default_factory=list)
    network_mode: NetworkMode | None = None
    allowed_hosts: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _sizes(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            for old, new in (("memory", "memory_mb"), ("storage", "storage_mb")):
                if old in data:
                    data.setdefault(new, size_mb(data.pop(old), old))
        return data


class TaskSection(_Section):
    """`[task]` (schema 1.1+): who made the task and what it is about."""

    name: str | None = Field(None, pattern=TASK_NAME.pattern)
    description: str | None = None
    authors: list[Any] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)


class StepAgentSection(_Section):
    """`[steps.agent]`: the step's agent settings; unset ones fall back to the task's `[agent]`."""

    timeout_sec: float | None = Field(None, gt=0)


class StepVerifierSection(_Section):
    """`[steps.verifier]`: the step's verifier settings; unset ones fall back to `[verifier]`."""

    timeout_sec: float | None = Field(None, gt=0)


class StepSection(_Section):
    """One `[[steps]]` entry: its folder steps/NAME/, the least reward that lets the next step
    run (`min_reward`: one number, or a least value per reward key), its own agent and
    verifier settings and the artifacts collected after it."""

    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
    min_reward: float | dict[str, float] | None = None
    agent: StepAgentSection = Field(default_factory=StepAgentSection)  # type: ignore[arg-type]
    verifier: StepVerifierSection = Field(default_factory=StepVerifierSection)  # type: ignore[arg-type]
    artifacts: list[ArtifactSection] = Field(default_factory=list)


class TaskConfig(_Section):
    """The whole of task.toml (`schema_version`, or the legacy `version`)."""

    schema_version: str | None = None
    version: str = "1.0"
    task: TaskSection = Field(default_factory=TaskSection)  # type: ignore[arg-type]
    metadata: dict[str, Any] = Field(default_factory=dict)
    verifier: VerifierSection = Field(default_factory=VerifierSection)  # type: ignore[arg-type]
    agent: AgentSection = Field(default_factory=AgentSection)  # type: ignore[arg-type]
    environment: EnvironmentSection = Field(default_factory=EnvironmentSection)  # type: ignore[arg-type]
    solution: SolutionSection = Field(default_factory=SolutionSection)
    # multi-step tasks (`steps/NAME/...`): the steps in order and how their rewards roll up
    steps: list[StepSection] = Field(default_factory=list)
    multi_step_reward_strategy: Literal["mean", "final"] = "mean"
    artifacts: list[ArtifactSection] = Field(default_factory=list)

    @model_validator(mode="after")
    def _schema(self) -> TaskConfig:
        declared = self.schema_version or self.version
        if declared.split(".")[0] != SCHEMA_MAJOR:
            raise ValueError(
                f"schema_version {declared!r} is not one rubric reads (Harbor's {SCHEMA_MAJOR}.x)"
            )
        return self

    def network(self, phase: Literal["environment", "agent", "verifier"]) -> NetworkMode:
        """The network a phase has: its own `network_mode`, else the environment's, else
        `allow_internet` (false: "no-network"); an allowlist of no hosts allows nothing."""
        env = self.environment
        mode = env.network_mode or ("public" if env.allow_internet else "no-network")
        hosts = env.allowed_hosts
        if phase != "environment" and getattr(self, phase).network_mode is not None:
            mode, hosts = getattr(self, phase).network_mode, getattr(self, phase).allowed_hosts
        return "no-network" if mode == "allowlist" and not hosts else mode


class HarborTask(BaseModel):
    """One parsed task folder.

    Attributes:
        path: The folder (absolute).
        name: Its `[task] name` when it has one, else its folder name (the rollouts' example_id).
        config: task.toml.
        instruction: instruction.md.
        workdir: The Dockerfile's last WORKDIR (the agent starts there), if any.
    """

    path: Path
    name: str
    config: TaskConfig
    instruction: str
    workdir: str | None = None
    step_instructions: dict[str, str] = Field(default_factory=dict)

    @property
    def unknown(self) -> dict[str, Any]:
        """task.toml fields this model does not know, by section ("" for the top level)."""
        found = {
            section: getattr(self.config, section).unknown()
            for section in ("task", "verifier", "agent", "environment", "solution")
        }
        found[""] = self.config.unknown()
        if self.config.environment.healthcheck is not None:
            found["environment.healthcheck"] = self.config.environment.healthcheck.unknown()
        for server in self.config.environment.mcp_servers:
            found[f"environment.mcp_servers.{server.name}"] = server.unknown()
        found.update(self._nested_unknown())
        return {k: v for k, v in found.items() if v}

    def _nested_unknown(self) -> dict[str, Any]:
        """Unknown fields of the tables inside tables: each step's, the verifier's environment,
        each artifact and collect hook (by where they are, e.g. "steps.one.agent")."""
        config = self.config
        found: dict[str, Any] = {"verifier.environment": config.verifier.environment.unknown() if config.verifier.environment else {}}  # fmt: skip
        for i, hook in enumerate(config.verifier.collect):
            found[f"verifier.collect.{i}"] = hook.unknown()
        for i, artifact in enumerate(config.artifacts):
            found[f"artifacts.{i}"] = artifact.unknown()
        for step in config.steps:
            where = f"steps.{step.name}"
            found[where] = step.unknown()
            found[f"{where}.agent"] = step.agent.unknown()
            found[f"{where}.verifier"] = step.verifier.unknown()
            for i, artifact in enumerate(step.artifacts):
                found[f"{where}.artifacts.{i}"] = artifact.unknown()
        return found

    def unknown_line(self) -> str | None:
        """One line naming the task.toml keys this model does not know, or None."""
        keys = [
            f"{section + '.' if section else ''}{key}"
            for section, found in self.unknown.items()
            for key in found
        ]
        if not keys:
            return None
        return (
            f"Harbor task {self.name}: task.toml keys rubric does not know, ignored (kept on the "
            f"rollouts' info): {', '.join(keys)}"
        )

    @property
    def runtime(self) -> str:
        """The task's sandbox runtime: its named image, or its environment/ folder (built once);
        a compose project (`compose:FILE`) when environment/docker-compose.yaml exists."""
        image = self.config.environment.docker_image
        if self.has_compose:
            return self.runtime_with(image) if image else f"compose:{self.path / COMPOSE_FILE}"
        return f"docker:{image}" if image else f"docker:{self.path / 'environment'}"

    @property
    def has_compose(self) -> bool:
        """Whether its environment is a compose project (environment/docker-compose.yaml)."""
        return (self.path / COMPOSE_FILE).is_file()

    def runtime_with(self, image: str) -> str:
        """The runtime whose main image is `image` (its compose project's, when it has one)."""
        return f"compose:{self.path / COMPOSE_FILE}?main={image}" if self.has_compose else f"docker:{image}"

    @property
    def has_solution(self) -> bool:
        """Whether it ships solution/solve.sh (a multi-step task: whether any step does)."""
        steps = any(self.step_has(step.name, "solution/solve.sh") for step in self.config.steps)
        return steps or (self.path / "solution" / "solve.sh").is_file()

    @property
    def verifier_environment(self) -> EnvironmentSection:
        """A separate verifier's table: `[verifier.environment]`, else a copy of `[environment]`."""
        return self.config.verifier.environment or self.config.environment

    def step_has(self, step: str, relative: str) -> bool:
        """Whether step `step`'s folder (steps/STEP/) holds `relative` as a regular file."""
        return (self.path / STEPS_DIR / step / relative).is_file()


def is_harbor_task(folder: str | Path) -> bool:
    """Whether a folder is a Harbor task (it has a task.toml).

    Args:
        folder: The folder to look at.

    Returns:
        True when it holds a task.toml.
    """
    return (Path(folder) / "task.toml").is_file()


def load_task(folder: str | Path) -> HarborTask:
    """Parse one task folder.

    Raises:
        HarborTaskError: a required file is missing (named), task.toml does not parse (line
            and column) or holds a bad value (the field), or no image is given.
    """
    path = Path(folder).expanduser().resolve()
    if not path.is_dir():
        raise HarborTaskError(f"Harbor task {str(folder)!r} is not a folder")
    if not (path / "task.toml").is_file():
        raise HarborTaskError(
            f"{path} is not a Harbor task: it has no task.toml (a task folder holds task.toml, "
            "instruction.md, environment/Dockerfile or [environment] docker_image, tests/test.sh)"
        )
    config = _parse_config(path)
    _check_verifier(path, config)
    missing = [f for f in _required_files(path, config) if not (path / f).is_file()]
    if missing:
        raise HarborTaskError(
            f"{path} is not a Harbor task: it has no {', '.join(missing)} (a task folder holds task.toml, "
            "instruction.md, environment/Dockerfile or [environment] docker_image, tests/test.sh; a "
            "multi-step task steps/NAME/instruction.md and a test.sh in steps/NAME/tests/ or tests/)"
        )
    dockerfile = path / "environment" / "Dockerfile"
    if config.environment.docker_image is None and not dockerfile.is_file():
        raise HarborTaskError(
            f"{path} is not a Harbor task: it has no environment/Dockerfile and task.toml names no "
            "[environment] docker_image; add one of them"
        )
    refused = refusals(config)
    if refused:
        raise HarborTaskError(f"{path / 'task.toml'}: {'; '.join(refused)}")
    workdir = dockerfile_workdir(path, "environment/Dockerfile") if dockerfile.is_file() else None
    steps = {step.name: _text(path, f"{STEPS_DIR}/{step.name}/instruction.md") for step in config.steps}
    instruction = _text(path, "instruction.md") if not steps else "\n\n".join(steps.values())
    _check_folders(path, config, list(steps))
    name = config.task.name or path.name
    return HarborTask(
        path=path,
        name=name,
        config=config,
        instruction=instruction,
        workdir=workdir,
        step_instructions=steps,
    )


def _parse_config(path: Path) -> TaskConfig:
    """task.toml, parsed and validated (the line and column, or the field, named when not)."""
    text = _text(path, "task.toml")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise HarborTaskError(f"{path / 'task.toml'} does not parse: {exc}; fix the TOML there") from None
    try:
        return TaskConfig.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'task.toml'}: {e['msg']}" for e in exc.errors()
        )
        raise HarborTaskError(f"{path / 'task.toml'} has bad values: {problems}") from None


def _check_folders(path: Path, config: TaskConfig, steps: list[str]) -> None:
    """Refuse now, naming the file, what would fail when a sandbox starts or a folder is
    uploaded: a bad compose file, and a folder breaking the task-file rules."""
    if (path / COMPOSE_FILE).is_file():
        _text(path, COMPOSE_FILE)
        check_task_folder(path, "environment")  # the sidecars' build contexts are in it
        try:
            load_compose(path / COMPOSE_FILE)
        except ConfigError as exc:
            raise HarborTaskError(f"Harbor task {path}: {exc}") from None
    folders = ["tests", "solution", "environment"]
    folders += [f"{STEPS_DIR}/{step}/{part}" for step in steps for part in STEP_FOLDERS]
    for folder in folders:
        if (path / folder).is_dir() and (folder != "environment" or config.environment.docker_image is None):
            check_task_folder(path, folder)


def loaded_task(folder: Path) -> HarborTask:
    """A task folder `load_task` accepted, parsed once per process and version of its
    task.toml (what the verifier reads again at each rollout: its artifacts, collect commands
    and verifier environment); a task.toml edited since is read again."""
    return _loaded_task(folder, (folder / "task.toml").stat().st_mtime_ns)


@functools.lru_cache(maxsize=1024)
def _loaded_task(folder: Path, _version: int) -> HarborTask:
    return load_task(folder)


@functools.lru_cache(maxsize=1024)
def task_config(folder: Path) -> TaskConfig:
    """The task.toml of a task folder `load_task` accepted, parsed once per process (what the
    verifier and the oracle read again at each rollout: its variables and users)."""
    return load_task(folder).config


def resolved_env(env: Mapping[str, str], where: str) -> dict[str, str]:
    """An `env` table with `${VAR}` and `${VAR:-default}` filled from the host's environment
    (as a shell fills them: the default when VAR is unset or empty).

    Args:
        env: The table, as task.toml writes it.
        where: Its section, for the error ("[verifier]").

    Raises:
        HarborTaskError: a `${VAR}` without a default that the host does not set (named).
    """

    def fill(key: str, value: str) -> str:
        def one(match: re.Match[str]) -> str:
            found = os.environ.get(match.group(1))
            if found:
                return found
            if match.group(2) is not None:
                return match.group(2)
            if found is not None:
                return found
            raise HarborTaskError(
                f"{where} env.{key} = {value!r} needs ${match.group(1)}, which this machine does not set; "
                f"set it, or give a default as ${{{match.group(1)}:-VALUE}}"
            )

        return _VARIABLE.sub(one, str(value))

    return {str(key): fill(str(key), value) for key, value in env.items()}


def refusals(config: TaskConfig) -> list[str]:
    """What in task.toml rubric cannot honour, one line per field naming it and why."""
    env = config.environment
    found = []
    if env.os == "windows":
        found.append(
            '[environment] os = "windows": rubric runs Linux sandboxes only (Docker Linux containers, '
            "bwrap); this task needs a Windows host"
        )
    if env.gpus > 0:
        types = f" (gpu_types {env.gpu_types})" if env.gpu_types else ""
        why = (
            "this machine has no GPU (no nvidia-smi)"
            if shutil.which("nvidia-smi") is None
            else "rubric's sandboxes do not pass GPUs through"
        )
        found.append(f"[environment] gpus = {env.gpus}{types}: {why}, so the task cannot get one")
    for phase in ("environment", "agent", "verifier"):
        section = getattr(config, phase)
        if config.network(phase) == "allowlist":
            found.append(
                f'[{phase}] network_mode = "allowlist" (allowed_hosts {section.allowed_hosts or env.allowed_hosts}): '
                'rubric\'s sandboxes have a network or none, never a per-host allowlist; use "public" or "no-network"'
            )
    agent, verifier = config.network("agent"), config.network("verifier")
    if agent != verifier and "allowlist" not in (agent, verifier):
        found.append(
            f'[verifier] network_mode "{verifier}" differs from the agent\'s "{agent}": rubric runs the '
            "agent and tests/test.sh in one sandbox and cannot switch its network between them; give both "
            "phases one network_mode"
        )
    for where, table in (
        ("[environment]", env.env),
        ("[agent]", config.agent.env),
        ("[verifier]", config.verifier.env),
        ("[solution]", config.solution.env),
    ):
        try:
            resolved_env(table, where)
        except HarborTaskError as exc:
            found.append(str(exc))
    return found


def _check_verifier(path: Path, config: TaskConfig) -> None:
    """Refuse, with the fix, a separate verifier with nothing to run, and services this task
    cannot have (its only container is the agent's, `main`).

    Raises:
        HarborTaskError: the first problem found.
    """
    where = path / "task.toml"
    artifacts = [*config.artifacts, *(a for step in config.steps for a in step.artifacts)]
    services = [a.service for a in artifacts] + [hook.service for hook in config.verifier.collect]
    for service in services:
        if service not in (None, "main"):
            raise HarborTaskError(
                f"{where}: service {service!r} in artifacts or [[verifier.collect]]: rubric copies artifacts "
                "and runs collect commands in the agent's container (main) only; drop service"
            )
    if config.verifier.separate and config.steps:
        raise HarborTaskError(
            f'{where}: [verifier] environment_mode = "separate" with [[steps]] is not supported (which '
            "tests/ each step's verifier image holds is not settled); use the shared verifier for a multi-step task"
        )
    for step in config.steps:
        overrides = sorted({"environment_mode", "environment"} & set(step.verifier.unknown()))
        if overrides:
            raise HarborTaskError(
                f"{where}: [steps.verifier] {', '.join(overrides)} of step {step.name!r} is not supported: "
                "set the verifier's environment for the whole task in [verifier]"
            )
    if config.verifier.separate and not (path / "tests" / "Dockerfile").is_file():
        if (config.verifier.environment or config.environment).docker_image is None:
            raise HarborTaskError(
                f'{where}: [verifier] environment_mode = "separate" needs the verifier\'s image: a '
                "tests/Dockerfile (that puts test.sh at /tests/test.sh) or [verifier.environment] docker_image"
            )


def _required_files(path: Path, config: TaskConfig) -> list[str]:
    """The files a task must have: instruction.md and tests/test.sh, or for a multi-step task
    each step's instruction.md and a test.sh in its own tests/ or the task's."""
    if not config.steps:
        return list(REQUIRED_FILES)
    names = [step.name for step in config.steps]
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise HarborTaskError(
            f"{path / 'task.toml'}: [[steps]] names {twice} more than once; name each step once"
        )
    shared = (path / "tests" / "test.sh").is_file()
    required = ["task.toml"]
    for name in names:
        required.append(f"{STEPS_DIR}/{name}/instruction.md")
        if not shared:
            required.append(f"{STEPS_DIR}/{name}/tests/test.sh")
    return required


def dockerfile_workdir(path: Path, relative: str) -> str | None:
    """A Dockerfile's last absolute WORKDIR (where its image's commands start), if any."""
    workdir = None
    for line in _text(path, relative).splitlines():
        words = line.strip().split(maxsplit=1)
        if len(words) == 2 and words[0].upper() == "WORKDIR" and words[1].startswith("/"):
            workdir = words[1].strip()
    return workdir


def _text(path: Path, relative: str) -> str:
    """One text file of the task, through `read_task_file` (inside the folder, size-capped)."""
    data = read_task_file(path, relative)
    try:
        return data.decode()
    except UnicodeDecodeError as exc:
        raise HarborTaskError(
            f"Harbor task {path}: {relative} is not UTF-8 text ({exc.reason} at byte {exc.start})"
        ) from None


def task_folders(path: str | Path) -> list[Path]:
    """The task folders `path` names: itself when it is a task; the tasks its dataset.toml
    names, each digest verified (`envs._harbor.dataset`); else its sub-folders (sorted).

    Raises:
        HarborTaskError: `path` is not a folder, or holds neither a task.toml nor sub-folders;
            its dataset.toml is bad, names a task not there or pins another digest.
    """
    root = Path(path).expanduser()
    if not root.is_dir():
        raise HarborTaskError(
            f"harbor:{path}: no such folder; give a task folder or a folder of task folders"
        )
    if is_harbor_task(root):
        return [root.resolve()]
    if is_dataset(root):
        return dataset_task_folders(root)
    folders = sorted(p.resolve() for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not folders:
        raise HarborTaskError(
            f"harbor:{path} is neither a Harbor task (no task.toml) nor a folder of tasks (no sub-folders)"
        )
    return folders
