"""Run an environment over many examples: concurrency, streaming to disk, resume, summary.

A fixed pool of `concurrency` workers pulls (example, rollout_index) jobs from one shared
iterator, so 100,000 rollouts cost 100,000 small records, not 100,000 pending tasks. Each
finished rollout is appended to `results.jsonl` at once; a resumed run reads that file and
runs only the pairs that are missing.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from harness.progress import ProgressDisplay, RunStats
from harness.protocol import EnvironmentProtocol
from harness.results import EvalResults, node_paths
from harness.runner import rollout as run_rollout
from harness.sharding import Shard, shard_metadata
from harness.storage import (
    METADATA_FILE,
    ResultsWriter,
    clear_run,
    prepare_directory,
    read_metadata,
    write_json_atomic,
)
from harness.summary import summarize
from harness.types import Rollout
from harness.workers import peak_rss_mib, plan_executor

# Arguments that only change how fast a run goes, so a resumed run may change them.
_FREE_ON_RESUME = {"concurrency", "progress", "workers", "executor", "ray_address"}
# Client settings that identify what answers (base_url/timeout/retries are just transport:
# a resumed `scripted:` run even gets a new port).
_MODEL_IDENTITY = ("model", "sampling")
_VERSIONED = ("rubric-rl", "openai", "datasets", "pydantic", "rich")


DEFAULT_CONCURRENCY = 64


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def _versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": sys.version.split()[0]}
    for name in _VERSIONED:
        try:
            found[name] = version(name)
        except PackageNotFoundError:
            found[name] = "not installed"
    return found


def _jsonable(value: Any) -> Any:
    """The value as it will read back from metadata.json (so comparisons are like for like)."""
    return json.loads(json.dumps(value, default=str))


def _client_config(client: Any) -> dict[str, Any]:
    config = getattr(client, "config", None)
    if callable(config):
        return _jsonable(config())
    return {
        "model": getattr(client, "model", None),
        "sampling": dict(getattr(client, "sampling", None) or {}),
    }


def _check_arguments(env: Any, num_examples: int | None, rollouts_per_example: int, concurrency: int) -> None:
    if not isinstance(env, EnvironmentProtocol):
        wanted = [
            "name",
            "max_turns",
            "sampling",
            "tool_schemas",
            "get_dataset",
            "setup_rollout",
            "respond",
            "stop_reason",
            "score",
            "config",
        ]
        missing = [m for m in wanted if not hasattr(env, m)]
        raise TypeError(
            f"{type(env).__name__} is not an environment: it lacks {', '.join(missing)} "
            f"(see harness.protocol.EnvironmentProtocol; envs.Environment provides them)"
        )
    for name, value, low in (
        ("rollouts_per_example", rollouts_per_example, 1),
        ("concurrency", concurrency, 1),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ValueError(f"{name} must be an integer >= {low}, got {value!r}")
    if num_examples is not None and (
        not isinstance(num_examples, int) or isinstance(num_examples, bool) or num_examples < 1
    ):
        raise ValueError(f"num_examples must be None (all) or an integer >= 1, got {num_examples!r}")


def _example_ids(examples: list[Mapping[str, Any]]) -> list[str]:
    ids: list[str] = []
    seen: set[str] = set()
    for position, example in enumerate(examples):
        if "example_id" not in example:
            raise ValueError(
                f"example {position} from get_dataset has no 'example_id' (keys: "
                f"{', '.join(map(str, example))}); the environment must give every example a stable id"
            )
        key = str(example["example_id"])
        if key in seen:
            raise ValueError(
                f"example_id {key!r} appears twice in the dataset; ids must be unique so "
                f"results can be matched on resume"
            )
        seen.add(key)
        ids.append(key)
    return ids


def _differences(before: Mapping[str, Any], now: Mapping[str, Any], prefix: str) -> list[str]:
    keys = sorted(set(before) | set(now))
    missing = object()
    out = []
    for key in keys:
        old, new = before.get(key, missing), now.get(key, missing)
        if old != new:
            show = lambda v: "(absent)" if v is missing else json.dumps(v, default=str)[:80]  # noqa: E731
            out.append(f"{prefix}{key}: was {show(old)}, now {show(new)}")
    return out


def _check_resumable(directory: Path, saved: Mapping[str, Any], current: Mapping[str, Any]) -> None:
    """Raise ValueError listing every setting that differs from the run being resumed."""
    diffs = _differences(saved.get("env") or {}, current["env"], "env.")
    saved_model, model = saved.get("model") or {}, current["model"]
    diffs += _differences(
        {k: saved_model.get(k) for k in _MODEL_IDENTITY}, {k: model.get(k) for k in _MODEL_IDENTITY}, "model."
    )
    saved_args = {k: v for k, v in (saved.get("arguments") or {}).items() if k not in _FREE_ON_RESUME}
    args = {k: v for k, v in current["arguments"].items() if k not in _FREE_ON_RESUME}
    diffs += _differences(saved_args, args, "arguments.")
    if diffs:
        raise ValueError(
            f"cannot resume {directory}: it was run with different settings:\n  "
            + "\n  ".join(diffs)
            + "\nrun with the original settings (only concurrency and progress may change), or use a new output_dir"
        )


class _Run:
    """Book-keeping of one evaluate call: the plan, what finished, what goes to disk."""

    def __init__(self, directory: Path | None, metadata: dict[str, Any], stats: RunStats) -> None:
        self.directory = directory
        self.metadata = metadata
        self.stats = stats
        self.rollouts: list[Rollout] = []
        self.writer: ResultsWriter | None = None
        self.started = time.perf_counter()

    def finished(self, rollout: Rollout) -> None:
        self.rollouts.append(rollout)
        if self.writer is not None:
            self.writer.write(rollout)
        self.stats.add(rollout)

    def save_metadata(self) -> None:
        if self.directory is not None:
            write_json_atomic(self.directory / METADATA_FILE, self.metadata)

    def close(self, status: str, *, ran: int, max_k: int) -> EvalResults:
        wall = time.perf_counter() - self.started
        summary = summarize(
            self.rollouts,
            wall_seconds=wall,
            timed_rollouts=ran,
            max_k=max_k,
            node_order=node_paths(self.metadata),
            planned=self.stats.total,
        )
        session = self.metadata["sessions"][-1]
        session.update(status=status, finished_at=_now(), rollouts_ran=ran, wall_seconds=wall)
        self.metadata.update(
            status=status, finished_at=session["finished_at"], summary=summary.model_dump(mode="json")
        )
        if self.writer is not None:
            self.writer.close()
        self.save_metadata()
        return EvalResults(self.rollouts, metadata=self.metadata, summary=summary)


async def evaluate(
    env: EnvironmentProtocol,
    client: Any,
    *,
    num_examples: int | None = None,
    rollouts_per_example: int = 1,
    concurrency: int = DEFAULT_CONCURRENCY,
    output_dir: str | Path | None = None,
    resume: bool = False,
    overwrite: bool = False,
    progress: bool = True,
    seed: int | None = None,
    split: str = "eval",
    sampling: Mapping[str, Any] | None = None,
    shard: Shard | str | None = None,
    workers: int = 1,
    executor: str = "local",
    ray_address: str | None = None,
) -> EvalResults:
    """Run `rollouts_per_example` rollouts of each example of `env` against `client`.

    With `output_dir`, rollouts stream to `results.jsonl` and settings to `metadata.json`;
    `resume=True` continues such a directory, running only the missing rollouts;
    `overwrite=True` replaces the results of an earlier run there (re-running a notebook
    cell). Failures
    inside a rollout are recorded on it; the batch always finishes. On cancellation or
    Ctrl-C the workers stop, finished rollouts stay on disk, metadata says "interrupted",
    and the interruption propagates (asyncio.run turns a Ctrl-C cancellation into
    KeyboardInterrupt). `shard="i/N"` runs only slice i of N of the examples (see
    `harness.sharding`; merge the shards' directories with `harness.sharding.merge_results`).
    `workers=N` runs the rollouts in N worker processes (`executor="ray"`: Ray actors, on the
    cluster at `ray_address` or a local one), `concurrency` being the total across them; see
    `harness.workers`. Only this process writes results.
    """
    _check_arguments(env, num_examples, rollouts_per_example, concurrency)
    run_elsewhere = plan_executor(
        env,
        client,
        workers=workers,
        executor=executor,
        ray_address=ray_address,
        concurrency=concurrency,
        sampling=sampling,
    )
    chosen = Shard.parse(shard) if shard is not None else None
    examples = list(env.get_dataset(split, n=num_examples, seed=seed))
    ids = _example_ids(examples)
    sharding: dict[str, Any] = {}
    if chosen is not None:
        sharding = {"shard": shard_metadata(chosen, ids)}
        examples, ids = chosen.select(examples), chosen.select(ids)
    arguments = {
        "num_examples": num_examples,
        "rollouts_per_example": rollouts_per_example,
        "seed": seed,
        "split": split,
        "sampling": _jsonable(dict(sampling or {})),
        "concurrency": concurrency,
        "progress": progress,
    }
    if chosen is not None:  # absent otherwise, so runs from before sharding still resume
        arguments["shard"] = str(chosen)
    if run_elsewhere is not None:
        arguments.update(workers=workers, executor=executor)
    current = {"env": _jsonable(env.config()), "model": _client_config(client), "arguments": arguments}

    directory = Path(output_dir) if output_dir is not None else None
    previous: list[Rollout] = []
    saved: dict[str, Any] | None = None
    if directory is not None:
        if overwrite and not resume:
            clear_run(directory)
        previous = prepare_directory(directory, resume=resume)
        saved = read_metadata(directory)
        if saved is not None:
            _check_resumable(directory, saved, current)

    plan = {
        (key, index): position * rollouts_per_example + index
        for position, key in enumerate(ids)
        for index in range(rollouts_per_example)
    }
    done: dict[tuple[str, int], Rollout] = {}
    for r in previous:
        if r.key not in plan:
            raise ValueError(
                f"cannot resume {directory}: its results.jsonl holds rollout {r.key} "
                f"(example_id, rollout_index), which this run would not produce; "
                f"use the original settings or a new output_dir"
            )
        done.setdefault(r.key, r)
    jobs = [
        (example, index)
        for example, key in zip(examples, ids)
        for index in range(rollouts_per_example)
        if (key, index) not in done
    ]

    started_at = _now()
    metadata = {
        "status": "running",
        **current,
        "versions": _versions(),
        "started_at": (saved or {}).get("started_at", started_at),
        "finished_at": None,
        "sessions": [
            *((saved or {}).get("sessions") or []),
            {"started_at": started_at, "status": "running", "rollouts_planned": len(jobs)},
        ],
        "summary": None,
        **sharding,
        # Dataset order, so `load_results` gives rollouts back in the order evaluate does.
        "example_ids": ids,
    }
    stats = RunStats(total=len(plan), done=len(done))
    run = _Run(directory, metadata, stats)
    run.rollouts.extend(done.values())
    if directory is not None:
        run.save_metadata()
        run.writer = ResultsWriter(directory / "results.jsonl")

    params = dict(sampling or {})
    pending: Iterator[tuple[Mapping[str, Any], int]] = iter(jobs)

    async def worker() -> None:
        # All workers share one iterator: taking a job is a plain next(), no queue needed.
        for example, index in pending:
            run.finished(await run_rollout(env, client, example, index, sampling=params))

    status = "failed"
    try:
        with ProgressDisplay(stats, enabled=progress):
            if run_elsewhere is None:
                async with asyncio.TaskGroup() as group:
                    for _ in range(min(concurrency, len(jobs))):
                        group.create_task(worker())
            else:
                report = await run_elsewhere(jobs, run.finished)
                metadata["sessions"][-1]["workers"] = {
                    "executor": executor,
                    "workers": report.workers,
                    "requeued": report.requeued,
                    "lost": report.lost_workers,
                    "driver_peak_rss_mib": round(peak_rss_mib(), 1),
                }
        status = "completed"
    except (KeyboardInterrupt, asyncio.CancelledError) as exc:
        status = "interrupted"
        where = f"; they are in {directory}, and resume=True continues the run" if directory else ""
        exc.add_note(f"evaluation interrupted: {stats.done} of {stats.total} rollouts finished{where}")
        raise
    finally:
        results = run.close(status, ran=stats.ran, max_k=rollouts_per_example)
    results.rollouts.sort(key=lambda r: plan.get(r.key, len(plan)))
    return results


__all__ = ["evaluate"]
