"""`task_digest(folder)`: the content digest of a Harbor task folder, as Harbor's dataset
manifests pin a task: sha256 over the sorted records `relative_path NUL file_sha256 LF` of
task.toml, instruction.md, README.md, trajectory.json and every file under environment/,
tests/, solution/ and steps/ (caches and editor leftovers left out). Any change to one of those
files changes the digest; nothing else does (a run folder beside the task, a `.git`)."""

from __future__ import annotations

import fnmatch
import hashlib
from pathlib import Path

from envs._harbor.files import MAX_FOLDER_BYTES, read_task_file, task_folder_files

#: The files at the top of a task folder that belong to the task.
SINGLE_FILES = ("task.toml", "instruction.md", "README.md", "trajectory.json")
#: The folders whose every file belongs to the task.
DIRECTORIES = ("environment", "tests", "solution", "steps")
#: Names never part of a task's content (caches, editor leftovers).
IGNORED = ("__pycache__", "*.pyc", ".DS_Store", "*.swp", "*.swo", "*~")


def _ignored(relative: str) -> bool:
    return any(fnmatch.fnmatch(part, pattern) for part in relative.split("/") for pattern in IGNORED)


def _covered(folder: Path) -> dict[str, bytes]:
    """The task's files by relative path, each read through the checked reader (a regular
    file inside the folder, size-capped: `envs._harbor.files`)."""
    found = {name: read_task_file(folder, name, limit=MAX_FOLDER_BYTES) for name in SINGLE_FILES if (folder / name).exists()}  # fmt: skip
    for directory in DIRECTORIES:
        if (folder / directory).is_dir():
            found.update(task_folder_files(folder, directory))
    return {path: data for path, data in found.items() if not _ignored(path)}


def task_digest(folder: str | Path) -> str:
    """The task folder's content digest, `"sha256:<hex>"`.

    Args:
        folder: A Harbor task folder.

    Returns:
        sha256 over the sorted `relative_path NUL file_sha256 LF` records of its files.

    Raises:
        HarborTaskError: A file is a link leading outside the folder, not a regular file, or
            too large (`envs._harbor.files`).
    """
    digest = hashlib.sha256()
    for relative, data in sorted(_covered(Path(folder)).items()):
        digest.update(f"{relative}\0{hashlib.sha256(data).hexdigest()}\n".encode())
    return f"sha256:{digest.hexdigest()}"


__all__ = ["task_digest"]
