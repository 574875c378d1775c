"""Where a run is written: a new directory's default name, a resumable one, re-scored copies.

What `rubric eval` / `rubric score` / `rubric view --rescored` and a Python user decide the
same way: a new run goes to `runs/<env>--<model>--<time>` unless told otherwise and never
into a directory that already holds something; a resume needs an earlier run there;
`--retry-errors` takes the errored rollouts out so the resume runs them again; a re-scored
copy sits beside the results it re-scored, named by time.
"""

from __future__ import annotations

import re
import secrets
import time
from collections import Counter
from pathlib import Path

from harness._core.errors import ResultsError
from harness._core.run.storage import METADATA_FILE, RESULTS_FILE, RunLock, iter_rollouts, write_atomic
from harness._core.types import Rollout

RUNS_DIR = Path("runs")
RESCORED_GLOB = "results.rescored-*.jsonl"


def slug(text: str) -> str:
    """`text` as a safe piece of a file name (letters, digits, `.`, `_`, `-`)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-") or "run"


def default_run_dir(env_name: str, model: str) -> Path:
    """`runs/<env>--<model>--<YYYYmmdd-HHMMSS>-<6 hex>` (relative to the working directory).

    Sorted by start time; the random tail keeps runs started in the same second (a job array,
    two terminals) apart, where the time alone would send the second into the first's folder.
    """
    while True:
        path = (
            RUNS_DIR
            / f"{slug(env_name)}--{slug(model)}--{time.strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(3)}"
        )
        if not path.exists():
            return path


def new_run_dir(path: str | Path) -> Path:
    """`path` for a new run; ResultsError when it already holds something (resume it instead)."""
    path = Path(path)
    if path.exists() and any(path.iterdir()):
        raise ResultsError(
            f"output directory {path} already exists and is not empty; "
            f"pass --resume {path} (resume=True) to continue it or choose another -o/--output-dir"
        )
    return path


def resumable_run_dir(path: str | Path) -> Path:
    """`path` when an earlier run is there to continue; ResultsError otherwise."""
    path = Path(path)
    if not (path / RESULTS_FILE).exists() and not (path / METADATA_FILE).exists():
        raise ResultsError(
            f"--resume {path}: no earlier run there (no {RESULTS_FILE}/{METADATA_FILE}); "
            f"check the path or start a new run with -o"
        )
    return path


def drop_errored(folder: str | Path) -> int:
    """Take the errored rollouts out of `folder`'s results (under the run's lock), so a resume
    runs them again; returns how many were taken out."""
    results = Path(folder) / RESULTS_FILE
    if not results.exists():
        return 0
    lock = RunLock(Path(folder))
    try:
        lock.acquire()  # refused while another run writes there
        rollouts = list(iter_rollouts(results, repair=True))
        kept = [r for r in rollouts if r.error is None]
        write_atomic(results, b"".join(r.model_dump_json().encode() + b"\n" for r in kept))
        return len(rollouts) - len(kept)
    finally:
        lock.release()


def drop_partial_groups(directory: Path | None, rollouts: list[Rollout], group_size: int) -> list[Rollout]:
    """`rollouts` without the examples that have fewer than `group_size` of them saved; with
    `directory`, its results.jsonl is rewritten without them too (the caller holds the run's lock).

    For a run whose rubric compares the rollouts of one example: the group was cut short (a
    kill while it was written, `--retry-errors` taking an errored member out), so the whole
    example runs again and its group is scored whole.
    """
    counts = Counter(str(r.example_id) for r in rollouts)
    partial = {key for key, n in counts.items() if n < group_size}
    if not partial:
        return rollouts
    kept = [r for r in rollouts if str(r.example_id) not in partial]
    if directory is not None:
        results = directory / RESULTS_FILE
        write_atomic(results, b"".join(r.model_dump_json().encode() + b"\n" for r in kept))
    return kept


def rescored_path(folder: str | Path) -> Path:
    """Where `rubric score` writes a new re-scored copy of `folder`'s results."""
    return Path(folder) / f"results.rescored-{time.strftime('%Y%m%d-%H%M%S')}.jsonl"


def newest_rescored(folder: str | Path) -> Path:
    """The newest re-scored copy of a run's results (`rubric score` writes them).

    Args:
        folder: A run directory.

    Returns:
        Its newest `results.rescored-<time>.jsonl`, for `load_results`.

    Raises:
        ResultsError: The folder holds no re-scored results.
    """
    found = sorted(Path(folder).glob(RESCORED_GLOB))
    if not found:
        raise ResultsError(
            f"{folder} has no re-scored results ({RESCORED_GLOB}); run rubric score {folder} first"
        )
    return found[-1]


__all__ = [
    "RESCORED_GLOB",
    "RUNS_DIR",
    "default_run_dir",
    "drop_errored",
    "new_run_dir",
    "newest_rescored",
    "rescored_path",
    "resumable_run_dir",
    "slug",
]
