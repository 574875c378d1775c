"""Harbor's task folder, read with the standard library (`tomllib`) and a pydantic model.

    task/
      task.toml        schema_version (or version), [task] name/description/authors/keywords,
                       [verifier] timeout_sec, [agent] timeout_sec, [environment] build_timeout_sec,
                       cpus, memory_mb (or memory "2G"), storage_mb (or storage "10G"),
                       docker_image, allow_internet; [metadata] free-form; [verifier]
                       environment_mode / [verifier.environment] / [[verifier.collect]] and the
                       top-level artifacts (`envs._harbor.separate`)
      instruction.md   what the agent is asked to do
      environment/     a Dockerfile and its build context (unless docker_image names an image)
      tests/test.sh    the verifier: writes /logs/verifier/reward.txt or reward.json
      solution/solve.sh  the reference solution (optional; only the oracle sees it)
      steps/NAME/      a multi-step task (`[[steps]]`): each step's instruction.md, tests/ (over
                       the task's tests/), solution/ and workdir/ (with its setup.sh)

Every file is read through `envs._harbor.files` (a regular file inside the folder, size-capped,
or the task is refused naming it). Harbor's own package needs Python 3.12, so the format is
parsed here. Fields this model does
not know are kept (`HarborTask.unknown`) and recorded in the rollout's info.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from envs._harbor.files import HarborTaskError, check_task_folder, read_task_file

#: Harbor's defaults (seconds, CPUs, MB).
DEFAULT_TIMEOUT_SEC = 600.0
REQUIRED_FILES = ("task.toml", "instruction.md", "tests/test.sh")
#: A multi-step task's steps live in steps/NAME/, each with these optional folders.
STEPS_DIR = "steps"
STEP_FOLDERS = ("tests", "solution", "workdir")
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


class VerifierSection(_Section, SeparateVerifier):
    """`[verifier]`: how long test.sh may run (and where: `SeparateVerifier`)."""

    timeout_sec: float = Field(DEFAULT_TIMEOUT_SEC, gt=0)


class AgentSection(_Section):
    """`[agent]`: how long the agent may run."""

    timeout_sec: float = Field(DEFAULT_TIMEOUT_SEC, gt=0)


class EnvironmentSection(_Section):
    """`[environment]`: the image and the sandbox's limits (memory/storage also as "2G")."""

    build_timeout_sec: float = Field(DEFAULT_TIMEOUT_SEC, gt=0)
    docker_image: str | None = None
    cpus: float = Field(1, gt=0)
    memory_mb: int = Field(2048, gt=0)
    storage_mb: int = Field(10240, gt=0)
    gpus: int = Field(0, ge=0)
    allow_internet: bool = True

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

    name: str | None = None
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
    task: TaskSection = Field(default_factory=TaskSection)
    metadata: dict[str, Any] = Field(default_factory=dict)
    verifier: VerifierSection = Field(default_factory=VerifierSection)  # type: ignore[arg-type]
    agent: AgentSection = Field(default_factory=AgentSection)  # type: ignore[arg-type]
    environment: EnvironmentSection = Field(default_factory=EnvironmentSection)  # type: ignore[arg-type]
    # multi-step tasks (`steps/NAME/...`): the steps in order and how their rewards roll up
    steps: list[StepSection] = Field(default_factory=list)
    multi_step_reward_strategy: Literal["mean", "final"] = "mean"
    artifacts: list[ArtifactSection] = Field(default_factory=list)


class HarborTask(BaseModel):
    """One parsed task folder.

    Attributes:
        path: The folder (absolute).
        name: Its folder name (the rollouts' example_id).
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
            for section in ("task", "verifier", "agent", "environment")
        }
        found[""] = self.config.unknown()
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

    @property
    def runtime(self) -> str:
        """The task's sandbox runtime: its named image, or its environment/ folder (built once)."""
        image = self.config.environment.docker_image
        return f"docker:{image}" if image else f"docker:{self.path / 'environment'}"

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
    text = _text(path, "task.toml")
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise HarborTaskError(f"{path / 'task.toml'} does not parse: {exc}; fix the TOML there") from None
    try:
        config = TaskConfig.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'task.toml'}: {e['msg']}" for e in exc.errors()
        )
        raise HarborTaskError(f"{path / 'task.toml'} has bad values: {problems}") from None
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
    workdir = dockerfile_workdir(path, "environment/Dockerfile") if dockerfile.is_file() else None
    steps = {step.name: _text(path, f"{STEPS_DIR}/{step.name}/instruction.md") for step in config.steps}
    instruction = _text(path, "instruction.md") if not steps else "\n\n".join(steps.values())
    folders = ["tests", "solution", "environment"]
    folders += [f"{STEPS_DIR}/{step}/{part}" for step in steps for part in STEP_FOLDERS]
    for folder in folders:  # refused now, not when uploaded
        if (path / folder).is_dir() and (folder != "environment" or config.environment.docker_image is None):
            check_task_folder(path, folder)
    return HarborTask(
        path=path,
        name=path.name,
        config=config,
        instruction=instruction,
        workdir=workdir,
        step_instructions=steps,
    )


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
                f"{where}: service {service!r} in artifacts or [[verifier.collect]]: this task has one "
                "container (main); drop service or give the task an environment/docker-compose.yaml"
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
    """The task folders `path` names: itself when it is a task, else its sub-folders (sorted).

    Raises:
        HarborTaskError: `path` is not a folder, or holds neither a task.toml nor sub-folders.
    """
    root = Path(path).expanduser()
    if not root.is_dir():
        raise HarborTaskError(
            f"harbor:{path}: no such folder; give a task folder or a folder of task folders"
        )
    if is_harbor_task(root):
        return [root.resolve()]
    folders = sorted(p.resolve() for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    if not folders:
        raise HarborTaskError(
            f"harbor:{path} is neither a Harbor task (no task.toml) nor a folder of tasks (no sub-folders)"
        )
    return folders
