"""A run's directory on disk: `results.jsonl` (one Rollout per line) and `metadata.json`.

Written so that a run killed at any instant (SIGKILL, power loss) can be resumed exactly:
every rollout is one line written in a single call and flushed; a torn last line can only
come from the kill and is cut off before appending; metadata is replaced atomically.

A run folder may come from someone else (a shared results folder), so its own files are
never opened through a symbolic link, nor when they are not plain files with one name: a link
planted as `results.jsonl` or `.lock` would otherwise make a resume truncate or append to a
file outside the folder. Whole files (metadata, reports, exports) are written to a temporary
file and renamed into place, which replaces a planted link instead of writing through it.

One writer at a time: a writer holds an OS lock (`flock`) on `DIR/.lock`, which the kernel
releases when the process ends however it ends, so a lock is never stale. Readers are
forgiving: a line that is not a valid rollout is skipped and a repeated
(example_id, rollout_index) is ignored, and both are reported as a `ResultsWarning`.

File modes: both files are created like any other file of the user's (0666 minus the umask,
usually 0644): they hold prompts and replies, never an API key.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import stat
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import IO, Any

from harness._core.errors import ResultsError, ResultsWarning
from harness._core.types import Rollout

RESULTS_FILE = "results.jsonl"
#: The run's model-call log (harness._core.run.calls).
CALLS_FILE = "calls.jsonl"
METADATA_FILE = "metadata.json"
LOCK_FILE = ".lock"


def section(metadata: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """`metadata[key]` when it is an object, else {}: metadata.json is data, and an edited
    file must not make a reader crash or show a section it does not have."""
    value = metadata.get(key)
    return value if isinstance(value, Mapping) else {}


def run_title(metadata: Mapping[str, Any]) -> str:
    """ "env · model" from a run's metadata ("evaluation" when it names neither)."""
    env, model = section(metadata, "env"), section(metadata, "model")
    title = (
        f"{env.get('name', '?')} · {model.get('model', '?')}"
        if env.get("name") or model.get("model")
        else "evaluation"
    )
    scores = metadata.get("scores_from")  # a re-scored copy of the run: say whose scores these are
    return f"{title} · scores from {scores}" if isinstance(scores, str) else title


def _file_mode() -> int:
    """The mode `open()` gives a new file: 0666 minus the process umask."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return 0o666 & ~int(line.split()[1], 8)
    mask = os.umask(0o022)  # no /proc (macOS): read the umask by setting it back at once
    os.umask(mask)
    return 0o666 & ~mask


def open_owned(path: Path, flags: int) -> int:
    """A descriptor for a file the run folder owns: never through a symbolic link, and only a
    plain file with one name (not a hard link to a file elsewhere, a FIFO or a device).

    Raises:
        ResultsError: `path` is a link or not a plain file (the fix: remove it).
        FileNotFoundError: it does not exist (and `flags` has no O_CREAT).
    """
    try:  # O_NONBLOCK: opening a planted FIFO must not hang; plain files ignore it
        fd = os.open(path, flags | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK, 0o666)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ResultsError(
                f"{path} is a symbolic link; rubric never reads or writes a run folder's own files through "
                f"a link (it could reach a file outside the folder): remove the link"
            ) from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
        os.close(fd)
        what = "has other names (a hard link)" if stat.S_ISREG(info.st_mode) else "is not a plain file"
        raise ResultsError(f"{path} {what}; a run folder's own files must be plain files: remove it")
    fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    return fd


def write_atomic(path: Path, text: str | bytes) -> None:
    """Write `path` so readers see the old file or the new one, never half; a link at `path`
    is replaced, never written through."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, _file_mode())  # mkstemp makes 0600; every file follows results.jsonl's rule
        with os.fdopen(fd, "wb") as handle:
            handle.write(text.encode("utf-8") if isinstance(text, str) else text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_json_atomic(path: Path, data: Any) -> None:
    """Write `data` as JSON to `path` atomically (see `write_atomic`)."""
    write_atomic(path, json.dumps(data, indent=2, default=str, allow_nan=False) + "\n")


def read_owned(path: Path) -> bytes:
    """The bytes of a file the run folder owns (see `open_owned`)."""
    with os.fdopen(open_owned(path, os.O_RDONLY), "rb") as handle:
        return handle.read()


def read_metadata(directory: Path) -> dict[str, Any] | None:
    """The run's metadata, or None when the directory has none."""
    path = directory / METADATA_FILE
    if not path.exists() and not path.is_symlink():
        return None
    try:
        metadata: dict[str, Any] = json.loads(read_owned(path).decode("utf-8"))
        return metadata
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ResultsError(f"{path} is not valid JSON ({exc}); fix or delete it") from exc


def _complete_lines(data: bytes) -> tuple[list[bytes], int]:
    """The newline-terminated lines of `data` and the byte length they cover."""
    end = data.rfind(b"\n") + 1
    return data[:end].splitlines(), end


def iter_rollouts(path: Path, *, repair: bool = False) -> Iterator[Rollout]:
    """Rollouts stored in a results file, each (example_id, rollout_index) once.

    A last line without its newline is a write torn by a kill: it is skipped, and with
    `repair=True` cut off the file so appends start clean. Any other line that is not a valid
    rollout (corrupt, edited, or without its example_id and rollout_index) is skipped, and so
    is a repeat of a pair already read (two writers); both are reported, with their line
    numbers, as one `ResultsWarning` once the file has been read.
    """
    data = read_owned(path)
    lines, end = _complete_lines(data)
    if repair and end < len(data):
        with os.fdopen(open_owned(path, os.O_RDWR), "r+b") as handle:
            handle.truncate(end)
    corrupt: list[int] = []
    repeated: list[int] = []
    seen: set[tuple[str, int]] = set()
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        rollout = _parse_line(line)
        if rollout is None:
            corrupt.append(number)
        elif rollout.key in seen:
            repeated.append(number)
        else:
            seen.add(rollout.key)
            yield rollout
    _report(path, corrupt, repeated)


def _parse_line(line: bytes) -> Rollout | None:
    """The rollout on one line, or None when it is not a complete, valid one."""
    try:
        rollout = Rollout.model_validate_json(line)
    except ValueError:
        return None
    return rollout if {"example_id", "rollout_index"} <= rollout.model_fields_set else None


def _line_list(numbers: list[int]) -> str:
    shown = ", ".join(map(str, numbers[:20]))
    return shown + (f" and {len(numbers) - 20} more" if len(numbers) > 20 else "")


def _report(path: Path, corrupt: list[int], repeated: list[int]) -> None:
    problems = []
    if corrupt:
        problems.append(
            f"skipped {len(corrupt)} line(s) that are not valid rollouts (line {_line_list(corrupt)}); "
            f"--resume runs those rollouts again"
        )
    if repeated:
        problems.append(
            f"ignored {len(repeated)} repeated rollout(s) with an (example_id, rollout_index) read "
            f"earlier (line {_line_list(repeated)}); the first of each is kept"
        )
    if problems:
        warnings.warn(f"{path}: {'; '.join(problems)}", ResultsWarning, stacklevel=3)


class RunLock:
    """The one-writer lock of a run directory: `flock` on `DIR/.lock`, holding the writer's PID.

    The kernel drops the lock when the holding process exits (even by SIGKILL), so it is
    never stale; a second writer is refused with the holder's PID.
    """

    def __init__(self, directory: Path) -> None:
        self.path = directory / LOCK_FILE
        self._handle: IO[str] | None = None

    def acquire(self) -> None:
        """Take the lock, or raise ResultsError naming the process that holds it."""
        handle = os.fdopen(open_owned(self.path, os.O_RDWR | os.O_CREAT), "a+", encoding="utf-8")
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            handle.close()
            raise ResultsError(
                f"{self.path.parent} is being written by another run (process {holder}); wait for "
                f"it to finish or stop it, or write to another directory"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        self._handle = handle

    def release(self) -> None:
        """Let the next writer in (idempotent)."""
        if self._handle is not None:
            self._handle.close()  # closing the file drops the flock
            self._handle = None


class ResultsWriter:
    """Appends rollouts to `results.jsonl`, one flushed line each."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: IO[bytes] | None = os.fdopen(
            open_owned(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT), "ab"
        )

    def write(self, rollout: Rollout) -> None:
        if self._handle is None:
            raise ValueError(f"{self.path} is closed; the run already finished")
        self._handle.write(rollout.model_dump_json().encode() + b"\n")
        self._handle.flush()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def prepare_directory(directory: Path, *, resume: bool, lock: RunLock | None = None) -> list[Rollout]:
    """Create `directory` or check it may be continued; return the rollouts already there.

    Refuses a non-empty directory unless `resume` is set, so a run is never mixed into
    another by accident. With `lock`, it is taken before anything is read (see `RunLock`).
    """
    if directory.exists() and not directory.is_dir():
        raise NotADirectoryError(f"output_dir {directory} is a file; pass a directory path")
    if directory.exists() and any(p.name != LOCK_FILE for p in directory.iterdir()) and not resume:
        raise FileExistsError(
            f"output directory {directory} already exists and is not empty; pass resume=True to "
            f"continue that run, overwrite=True to replace it, or choose another output_dir"
        )
    directory.mkdir(parents=True, exist_ok=True)
    if lock is not None:
        lock.acquire()
    results = directory / RESULTS_FILE
    if not results.exists() and not results.is_symlink():
        return []
    return list(iter_rollouts(results, repair=True))


def clear_run(directory: Path) -> None:
    """Delete an earlier run's files from `directory` (for `overwrite=True`); a directory
    holding anything else is refused rather than emptied, since it may not be a run at all."""
    if not directory.is_dir():
        return
    ours = {RESULTS_FILE, METADATA_FILE, CALLS_FILE}
    others = sorted(p.name for p in directory.iterdir() if p.name not in ours and not p.name.startswith("."))
    if others:
        raise FileExistsError(
            f"overwrite=True would replace the run in {directory}, but it also holds "
            f"{', '.join(others[:5])}; it does not look like a results directory: choose another output_dir"
        )
    for name in ours:
        (directory / name).unlink(missing_ok=True)


__all__ = [
    "LOCK_FILE",
    "METADATA_FILE",
    "RESULTS_FILE",
    "ResultsWriter",
    "RunLock",
    "clear_run",
    "iter_rollouts",
    "open_owned",
    "prepare_directory",
    "read_metadata",
    "read_owned",
    "run_title",
    "section",
    "write_atomic",
    "write_json_atomic",
]
