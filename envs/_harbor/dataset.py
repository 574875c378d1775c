"""A Harbor dataset folder: `dataset.toml` and the task folders beside it, each digest verified.

    my-dataset/
      dataset.toml     [dataset] name = "org/name", version, description, authors, keywords;
                       [[tasks]] name = "org/task", digest = "sha256:<hex>" (one per task);
                       [[files]] path, digest (dataset-level files such as metric.py); [metadata]
      count-words/     a task folder whose task.toml says [task] name = "org/count-words"
      ...

A task is found by the name its task.toml gives (`[task] name`), as Harbor's `harbor sync`
finds it, not by its folder's name. Every task `dataset.toml` lists is run, and only those;
each must have the digest it pins (`envs._harbor.digest`), else the dataset is refused with one
line naming the task and both digests: what runs is what the dataset names.
"""

from __future__ import annotations

import hashlib
import os
import tomllib
import warnings
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from envs._harbor.digest import DIGEST_PREFIX, task_digest
from envs._harbor.files import HarborTaskError, read_task_file

DATASET_FILE = "dataset.toml"
_NAME = r"^[a-zA-Z0-9][a-zA-Z0-9._-]*/[a-zA-Z0-9][a-zA-Z0-9._-]*$"
_DIGEST = r"^sha256:[a-f0-9]{64}$"


class DatasetTask(BaseModel):
    """One `[[tasks]]` entry: a task by its `org/name`, pinned by its digest."""

    name: str = Field(pattern=_NAME)
    digest: str = Field(pattern=_DIGEST)


class DatasetFile(BaseModel):
    """One `[[files]]` entry: a file beside dataset.toml (no folders), pinned by its sha256."""

    path: str = Field(pattern=r"^[^/\\]+$")
    digest: str = Field("", pattern=r"^(sha256:[a-f0-9]{64})?$")


class DatasetInfo(BaseModel):
    """`[dataset]`: what the dataset is called."""

    model_config = ConfigDict(extra="allow")

    name: str = Field(pattern=_NAME)
    version: str | None = Field(None, min_length=1)
    description: str = ""
    authors: list[Any] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)


class DatasetManifest(BaseModel):
    """The whole of dataset.toml."""

    model_config = ConfigDict(extra="allow")

    schema_version: str = "1.0"
    dataset: DatasetInfo
    metadata: dict[str, Any] = Field(default_factory=dict)
    tasks: list[DatasetTask] = Field(default_factory=list)
    files: list[DatasetFile] = Field(default_factory=list)


def is_dataset(folder: str | Path) -> bool:
    """Whether a folder holds a Harbor `dataset.toml`."""
    return (Path(folder) / DATASET_FILE).is_file()


def load_manifest(folder: str | Path) -> DatasetManifest:
    """Parse a dataset folder's dataset.toml (read through the checked reader).

    Raises:
        HarborTaskError: It does not parse (line and column) or holds a bad value (the field).
    """
    root = Path(os.path.realpath(Path(folder).expanduser()))
    where = root / DATASET_FILE
    try:
        raw = tomllib.loads(read_task_file(root, DATASET_FILE).decode(errors="replace"))
    except tomllib.TOMLDecodeError as exc:
        raise HarborTaskError(f"{where} does not parse: {exc}; fix the TOML there") from None
    try:
        return DatasetManifest.model_validate(raw)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise HarborTaskError(f"{where} has bad values: {problems}") from None


def _task_name(folder: Path) -> str | None:
    """The `[task] name` of a task folder's task.toml, or None (no task.toml, no name, or
    one that does not parse: such a folder is no task of the dataset's)."""
    try:
        raw = tomllib.loads(read_task_file(folder, "task.toml").decode())
    except (HarborTaskError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    section = raw.get("task")
    name = section.get("name") if isinstance(section, dict) else None
    return name if isinstance(name, str) else None


def local_tasks(folder: str | Path) -> dict[str, Path]:
    """The task folders beside a dataset.toml by their `[task] name` (the first of a name wins)."""
    root = Path(os.path.realpath(Path(folder).expanduser()))
    found: dict[str, Path] = {}
    for child in sorted(root.iterdir()):
        if child.is_dir() and not child.name.startswith(".") and (child / "task.toml").is_file():
            name = _task_name(child)
            if name is not None:
                found.setdefault(name, child.resolve())
    return found


def _check_files(root: Path, manifest: DatasetManifest) -> None:
    """The dataset-level files: present, and as pinned when a digest is given."""
    for entry in manifest.files:
        if not (root / entry.path).exists():
            raise HarborTaskError(f"{root / DATASET_FILE}: [[files]] {entry.path} is missing from {root}")
        actual = DIGEST_PREFIX + hashlib.sha256(read_task_file(root, entry.path, limit=64 << 20)).hexdigest()
        if entry.digest and entry.digest != actual:
            raise HarborTaskError(
                f"{root / DATASET_FILE}: file {entry.path} has digest {actual}, dataset.toml pins {entry.digest}"
            )
        if entry.path == "metric.py":
            warnings.warn(
                f"{root / DATASET_FILE}: rubric does not run a dataset's metric.py; each task's reward is "
                "reported and the run's mean is the plain mean",
                UserWarning,
                stacklevel=3,
            )


def dataset_task_folders(folder: str | Path) -> list[Path]:
    """The task folders a dataset.toml names, in its order (each once), each digest verified.

    Args:
        folder: The folder holding dataset.toml and the task folders.

    Raises:
        HarborTaskError: dataset.toml is bad or names no task; a task it names is not there (the
            names found are listed); or a task's digest is not the one it pins (one line naming
            the task and both digests).
    """
    root = Path(os.path.realpath(Path(folder).expanduser()))
    manifest = load_manifest(root)
    where = root / DATASET_FILE
    if not manifest.tasks:
        raise HarborTaskError(f"{where} names no task; add [[tasks]] entries (name, digest)")
    _check_files(root, manifest)
    found = local_tasks(root)
    folders: list[Path] = []
    digests: dict[Path, str] = {}
    for entry in manifest.tasks:
        task = found.get(entry.name)
        if task is None:
            names = ", ".join(sorted(found)) or "none"
            raise HarborTaskError(
                f"{where}: task {entry.name} is not in {root} (the task folders there, by their task.toml "
                f"[task] name: {names})"
            )
        if task not in digests:
            digests[task] = task_digest(task)
        actual = digests[task]
        if actual != entry.digest:
            raise HarborTaskError(
                f"{where}: task {entry.name} ({task.name}/) has digest {actual}, dataset.toml pins "
                f"{entry.digest}; the task changed since the dataset named it"
            )
        if task not in folders:
            folders.append(task)
    return folders


__all__ = ["DATASET_FILE", "DatasetManifest", "dataset_task_folders", "is_dataset", "load_manifest"]
