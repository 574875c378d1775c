"""A Harbor task folder's digest, as Harbor's package manifests and `dataset.toml` define it.

Harbor names one version of a task by a content digest, `sha256:<hex>`: `harbor publish`
records it, a dataset's `dataset.toml` pins each task by it (`[[tasks]] name, digest`), and
`harbor sync` recomputes it. It covers the files that make the task:

- `task.toml`, `instruction.md`, `README.md`, `trajectory.json` (those present), and every file
  under `environment/`, `tests/`, `solution/` and `steps/`;
- less the files a `.harborignore` leaves out: one may sit in any folder of `tests/`,
  `solution/`, `steps/*/tests/` and `steps/*/solution/` and holds gitignore patterns relative
  to its folder (inner ones win; the `.harborignore` files themselves never count);
- less the files the task's own `.gitignore` matches, or without one Harbor's defaults
  (`__pycache__/`, `*.pyc`, `.DS_Store`, `*.swp`, `*.swo`, `*~`).

The files are sorted by their path inside the task ("/"-separated, by code point), and the
digest is the SHA-256 of one record per file: `PATH`, a NUL byte, the file's own SHA-256 in
lowercase hex, a newline.

Every file is read through `envs._harbor.files` (a regular file inside the task, or refused
naming it). A link to a folder is refused: Harbor skips such a link, so its digest would not
cover files our sandboxes do receive. Patterns are matched with `pathspec`, the gitignore
matcher Harbor itself uses.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any

from pathspec import GitIgnoreSpec, PathSpec

from envs._harbor.files import HarborTaskError, open_task_file, read_task_file, task_folder_paths

#: How a digest is written: `sha256:` and 64 lowercase hex digits.
DIGEST_PREFIX = "sha256:"
#: The task's files at its top that count, when present.
SINGLE_FILES = ("task.toml", "instruction.md", "README.md", "trajectory.json")
#: The task's folders whose every file counts.
FOLDERS = ("environment", "tests", "solution", "steps")
#: What is left out when the task has no `.gitignore` of its own.
DEFAULT_IGNORES = ("__pycache__/", "*.pyc", ".DS_Store", "*.swp", "*.swo", "*~")
IGNORE_FILE = ".harborignore"
#: Where `.harborignore` files apply (the verifier's and the solution's inputs).
_IGNORE_SCOPES = GitIgnoreSpec.from_lines(["/tests/", "/solution/", "/steps/*/tests/", "/steps/*/solution/"])
_CHUNK = 1 << 20


class _HarborIgnore:
    """The `.harborignore` files of one task, read once each (through the checked reader)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._specs: dict[str, GitIgnoreSpec] = {}

    def _spec(self, folder: str) -> GitIgnoreSpec:
        if folder not in self._specs:
            relative = f"{folder}/{IGNORE_FILE}"
            lines: list[str] = []
            if os.path.lexists(self.root / relative):
                lines = read_task_file(self.root, relative).decode(errors="replace").splitlines()
            self._specs[folder] = GitIgnoreSpec.from_lines(lines)
        return self._specs[folder]

    def excludes(self, path: str, root: Path) -> bool:
        """Whether a file (its path inside the task) is left out, or the file a link of the
        task leads to is (the task's files are checked to stay inside it)."""
        if self._excludes(path):
            return True
        target = Path(os.path.realpath(root / path))
        return target != root / path and self._excludes(target.relative_to(root).as_posix())

    def _excludes(self, path: str) -> bool:
        """A `.harborignore` itself, or a file one of whose folders, or itself, is matched by
        the last deciding pattern of the `.harborignore` files above it, outer first."""
        parts = path.split("/")
        if parts[-1] == IGNORE_FILE:
            return True
        if not _IGNORE_SCOPES.match_file(path):
            return False
        for depth in range(1, len(parts) + 1):
            candidate = "/".join(parts[:depth]) + ("" if depth == len(parts) else "/")
            if not _IGNORE_SCOPES.match_file(candidate):
                continue
            excluded = False
            for above in range(1, depth):
                folder = "/".join(parts[:above])
                if not _IGNORE_SCOPES.match_file(folder + "/"):
                    continue
                decided = self._spec(folder).check_file(candidate[len(folder) + 1 :]).include
                if decided is not None:
                    excluded = decided
            if excluded:
                return True
        return False


def _ignored(root: Path) -> PathSpec[Any]:
    """The task's `.gitignore` (it replaces the defaults), else Harbor's default patterns."""
    if os.path.lexists(root / ".gitignore"):
        return PathSpec.from_lines("gitignore", read_task_file(root, ".gitignore").decode(errors="replace").splitlines())  # fmt: skip
    return PathSpec.from_lines("gitignore", DEFAULT_IGNORES)


def task_files(folder: str | Path) -> list[str]:
    """The files a task's digest covers: their paths inside the task, in the digest's order.

    Args:
        folder: The task folder.

    Raises:
        HarborTaskError: `folder` is not a folder, or one of its files leads outside it, is not a
            regular file, or is a link to a folder.
    """
    root = Path(os.path.realpath(Path(folder).expanduser()))
    if not root.is_dir():
        raise HarborTaskError(
            f"Harbor task {str(folder)!r} is not a folder; a task digest is taken of a task folder"
        )
    found = [name for name in SINGLE_FILES if os.path.lexists(root / name)]
    harborignore = _HarborIgnore(root)
    for top in FOLDERS:
        if os.path.isdir(root / top):
            if os.path.islink(root / top):
                raise HarborTaskError(f"Harbor task {root}: {top}/ is a link to a folder, which a task digest cannot hold")  # fmt: skip
            found += [path for path in task_folder_paths(root, top, folder_links=False) if not harborignore.excludes(path, root)]  # fmt: skip
    ignored = _ignored(root)
    return sorted(path for path in found if not ignored.match_file(path))


def file_sha256(folder: str | Path, relative: str) -> str:
    """The SHA-256 (lowercase hex) of one file of a task, read in chunks through the checked reader."""
    digest = hashlib.sha256()
    with open_task_file(Path(folder), relative) as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def task_digest(folder: str | Path) -> str:
    """A Harbor task folder's digest, `sha256:<hex>`, as Harbor computes it (module docstring).

    Args:
        folder: The task folder.

    Returns:
        The digest, e.g. "sha256:9f86d0...", as `dataset.toml` pins it.

    Raises:
        HarborTaskError: As `task_files`.
    """
    root = Path(os.path.realpath(Path(folder).expanduser()))
    outer = hashlib.sha256()
    for path in task_files(root):
        outer.update(f"{path}\0{file_sha256(root, path)}\n".encode())
    return DIGEST_PREFIX + outer.hexdigest()


__all__ = ["DIGEST_PREFIX", "task_digest", "task_files"]
