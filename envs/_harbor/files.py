"""Reading a Harbor task folder's files: regular files inside the folder, size-capped, or refused.

A task folder comes from someone else, and what rubric reads from it reaches a prompt, a
sandbox, an image build and `results.jsonl`. So every such read goes through this module:
task.toml, instruction.md and the Dockerfile (`read_task_file`), and tests/, solution/ and the
environment/ build context (`check_task_folder` when the task loads, `copy_task_folder` when
they are uploaded or built). Each file must be a regular file whose real path (links
resolved) lies inside the task folder, at most `MAX_FILE_BYTES` (one file read whole) or
`MAX_FOLDER_BYTES` (a folder in all); otherwise the task is refused with one line naming the
file. So `instruction.md -> /proc/self/environ` (the harness's API keys), a FIFO that never
ends or `/dev/zero` never reaches the model or a sandbox. The file is checked again once
open (its descriptor's real path and type), so a link swapped after the check is caught too.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import BinaryIO

from harness._core.errors import RubricError

#: The most one file read whole may hold (task.toml, instruction.md, the Dockerfile).
MAX_FILE_BYTES = 1 << 20
#: The most a folder of the task (tests/, solution/, environment/) may hold in all.
MAX_FOLDER_BYTES = 512 << 20
#: The most files such a folder may hold.
MAX_FOLDER_FILES = 20_000
_CHUNK = 1 << 20


class HarborTaskError(RubricError):
    """A Harbor task folder that cannot be used (a file missing, task.toml not parsing...)."""


def _refuse(root: Path, relative: str, why: str) -> HarborTaskError:
    return HarborTaskError(
        f"Harbor task {root}: {relative} {why}; a task's files must be regular files inside its folder"
    )


def _checked(root: Path, relative: str) -> Path:
    """The real path of `root/relative`, once it is proven a regular file inside `root`."""
    real = Path(os.path.realpath(root / relative))
    if real != root and root not in real.parents:
        raise _refuse(root, relative, f"leads outside the task folder (to {real})")
    try:
        mode = os.stat(real).st_mode
    except OSError as exc:
        raise _refuse(root, relative, f"cannot be read ({exc.strerror})") from None
    if not stat.S_ISREG(mode):
        raise _refuse(root, relative, f"is not a regular file ({_kind(mode)})")
    return real


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a device"),
                       (stat.S_ISBLK, "a device"), (stat.S_ISSOCK, "a socket")):  # fmt: skip
        if test(mode):
            return name
    return "not a file"


def _open(root: Path, relative: str) -> int:
    """A descriptor of the checked file, checked again once open (type, real path)."""
    real = _checked(root, relative)
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        raise _refuse(root, relative, f"cannot be opened ({exc.strerror})") from None
    opened = Path(f"/proc/self/fd/{fd}")
    held = Path(os.path.realpath(opened)) if opened.exists() else real
    if not stat.S_ISREG(os.fstat(fd).st_mode) or (held != root and root not in held.parents):
        os.close(fd)
        raise _refuse(root, relative, "changed into something else while it was opened")
    return fd


def read_task_file(root: Path, relative: str, *, limit: int = MAX_FILE_BYTES) -> bytes:
    """The bytes of one file of a task folder (see the module docstring).

    Args:
        root: The task folder.
        relative: The file's path inside it, e.g. "instruction.md".
        limit: The most bytes it may hold.

    Raises:
        HarborTaskError: It leads outside the folder, is not a regular file, or is larger than `limit`.
    """
    root = Path(os.path.realpath(root))
    fd = _open(root, relative)
    with os.fdopen(fd, "rb") as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise _refuse(root, relative, f"is larger than {limit >> 10} KiB")
    return data


def _files(root: Path, relative: str, *, folder_links: bool = True) -> Iterator[tuple[str, int]]:
    """(path inside the task, size) of every file under `root/relative`, each checked; a link
    to a folder inside the task is walked as a folder, unless it leads back up (a loop), or is
    refused when `folder_links` is False."""
    root = Path(os.path.realpath(root))
    stack: list[tuple[str, frozenset[Path]]] = [(relative, frozenset())]
    count = total = 0
    while stack:
        folder, above = stack.pop()
        real = Path(os.path.realpath(root / folder))
        if real != root and root not in real.parents:
            raise _refuse(root, folder + "/", f"leads outside the task folder (to {real})")
        if real in above:
            raise _refuse(root, folder + "/", "is a link back to a folder above it (a loop)")
        for entry in sorted(os.listdir(real), reverse=True):
            path = f"{folder}/{entry}"
            if os.path.isdir(root / path):
                if not folder_links and os.path.islink(root / path):
                    raise _refuse(root, path, "is a link to a folder, which a task digest cannot hold")
                stack.append((path, above | {real}))
                continue
            size = os.stat(_checked(root, path)).st_size
            count, total = count + 1, total + size
            if count > MAX_FOLDER_FILES or total > MAX_FOLDER_BYTES:
                raise _refuse(root, relative + "/", f"holds more than {MAX_FOLDER_FILES} files or {MAX_FOLDER_BYTES >> 20} MiB")  # fmt: skip
            yield path, size


def check_task_folder(root: Path, relative: str) -> int:
    """Check every file of one folder of a task (tests/, solution/, environment/) without
    reading it; returns how many bytes they hold.

    Raises:
        HarborTaskError: A file leads outside the task, is not a regular file, or the folder
            holds more than `MAX_FOLDER_FILES` files or `MAX_FOLDER_BYTES`.
    """
    return sum(size for _, size in _files(root, relative))


def task_folder_files(root: Path, relative: str) -> Iterator[tuple[str, bytes]]:
    """(path inside the task, bytes) of every file of one folder of a task, each checked."""
    root = Path(os.path.realpath(root))
    for path, _ in _files(root, relative):
        fd = _open(root, path)
        with os.fdopen(fd, "rb") as handle:
            yield path, handle.read(MAX_FOLDER_BYTES + 1)


def task_folder_paths(root: Path, relative: str, *, folder_links: bool = True) -> list[str]:
    """The paths inside the task of every file of one folder of a task, each checked, sorted.

    Args:
        root: The task folder.
        relative: The folder inside it, e.g. "tests".
        folder_links: Whether a link to a folder inside the task is walked (False: refused).

    Raises:
        HarborTaskError: As `check_task_folder`, or a link to a folder when `folder_links` is False.
    """
    return sorted(
        path for path, _ in _files(Path(os.path.realpath(root)), relative, folder_links=folder_links)
    )


def open_task_file(root: Path, relative: str) -> BinaryIO:
    """One file of a task opened for reading in binary, checked as `read_task_file` checks it
    (a regular file inside the folder, also once open), for reading it in chunks.

    Raises:
        HarborTaskError: It leads outside the folder or is not a regular file.
    """
    return os.fdopen(_open(Path(os.path.realpath(root)), relative), "rb")


def copy_task_folder(root: Path, relative: str, target: Path) -> None:
    """Copy one folder of a task into `target` as plain folders and regular files (modes kept,
    links resolved), each file checked as it is opened; `target` exists and is empty.

    Raises:
        HarborTaskError: As `check_task_folder`.
    """
    root, copied = Path(os.path.realpath(root)), 0
    for path, _ in _files(root, relative):
        destination = target / Path(path).relative_to(relative)
        destination.parent.mkdir(parents=True, exist_ok=True)
        fd = _open(root, path)
        with os.fdopen(fd, "rb") as source, open(destination, "xb") as sink:
            mode = os.fstat(source.fileno()).st_mode
            while chunk := source.read(_CHUNK):
                copied += len(chunk)
                if copied > MAX_FOLDER_BYTES:
                    raise _refuse(root, relative + "/", f"holds more than {MAX_FOLDER_BYTES >> 20} MiB")
                sink.write(chunk)
        destination.chmod(mode & 0o755 | 0o644)


@asynccontextmanager
async def staged_task_folder(root: Path, relative: str) -> AsyncIterator[Path]:
    """A private temporary copy of one folder of a task (`copy_task_folder`), removed on exit:
    what is uploaded to a sandbox or sent to an image build is this copy, never the folder."""
    stage = Path(tempfile.mkdtemp(prefix="rubric-task-"))
    try:
        copy_task_folder(root, relative, stage)
        yield stage
    finally:
        shutil.rmtree(stage, ignore_errors=True)
