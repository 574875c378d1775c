"""A run's directory on disk: `results.jsonl` (one Rollout per line) and `metadata.json`.

Written so that a run killed at any instant (SIGKILL, power loss) can be resumed exactly:
every rollout is one line written in a single call and flushed; a torn last line can only
come from the kill and is cut off before appending; metadata is replaced atomically.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

from harness.errors import ResultsError
from harness.types import Rollout

RESULTS_FILE = "results.jsonl"
METADATA_FILE = "metadata.json"


def write_json_atomic(path: Path, data: Any) -> None:
    """Write `data` as JSON to `path` so readers see the old file or the new one, never half."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2, default=str, allow_nan=False)
            handle.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def read_metadata(directory: Path) -> dict[str, Any] | None:
    """The run's metadata, or None when the directory has none."""
    path = directory / METADATA_FILE
    if not path.exists():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{path} is not valid JSON ({exc}); fix or delete it") from exc


def _complete_lines(data: bytes) -> tuple[list[bytes], int]:
    """The newline-terminated lines of `data` and the byte length they cover."""
    end = data.rfind(b"\n") + 1
    return data[:end].splitlines(), end


def iter_rollouts(path: Path, *, repair: bool = False) -> Iterator[Rollout]:
    """Rollouts stored in a results file. A last line without its newline is a write torn by
    a kill: it is skipped, and with `repair=True` cut off the file so appends start clean."""
    data = path.read_bytes()
    lines, end = _complete_lines(data)
    if repair and end < len(data):
        with open(path, "r+b") as handle:
            handle.truncate(end)
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield Rollout.model_validate_json(line)
        except ValueError as exc:
            raise ResultsError(
                f"{path}, line {number}: not a valid rollout ({exc.__class__.__name__}: "
                f"{str(exc).splitlines()[0]}); the file was edited or corrupted"
            ) from exc


class ResultsWriter:
    """Appends rollouts to `results.jsonl`, one flushed line each."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._handle: IO[bytes] | None = open(path, "ab")

    def write(self, rollout: Rollout) -> None:
        if self._handle is None:
            raise ValueError(f"{self.path} is closed; the run already finished")
        self._handle.write(rollout.model_dump_json().encode() + b"\n")
        self._handle.flush()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()
            self._handle = None


def prepare_directory(directory: Path, *, resume: bool) -> list[Rollout]:
    """Create `directory` or check it may be continued; return the rollouts already there.

    Refuses a non-empty directory unless `resume` is set, so a run is never mixed into
    another by accident.
    """
    if directory.exists() and not directory.is_dir():
        raise NotADirectoryError(f"output_dir {directory} is a file; pass a directory path")
    if directory.exists() and any(directory.iterdir()) and not resume:
        raise FileExistsError(
            f"output directory {directory} already exists and is not empty; pass resume=True to "
            f"continue that run, overwrite=True to replace it, or choose another output_dir"
        )
    directory.mkdir(parents=True, exist_ok=True)
    results = directory / RESULTS_FILE
    if not results.exists():
        return []
    return list(iter_rollouts(results, repair=True))


def clear_run(directory: Path) -> None:
    """Delete an earlier run's files from `directory` (for `overwrite=True`); a directory
    holding anything else is refused rather than emptied, since it may not be a run at all."""
    if not directory.is_dir():
        return
    ours = {RESULTS_FILE, METADATA_FILE}
    others = sorted(p.name for p in directory.iterdir() if p.name not in ours and not p.name.startswith("."))
    if others:
        raise FileExistsError(
            f"overwrite=True would replace the run in {directory}, but it also holds "
            f"{', '.join(others[:5])}; it does not look like a results directory: choose another output_dir"
        )
    for name in ours:
        (directory / name).unlink(missing_ok=True)


__all__ = [
    "METADATA_FILE",
    "RESULTS_FILE",
    "ResultsWriter",
    "clear_run",
    "iter_rollouts",
    "prepare_directory",
    "read_metadata",
    "write_json_atomic",
]
