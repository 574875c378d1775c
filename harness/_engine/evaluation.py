"""Run an environment over many examples: concurrency, streaming to disk, resume, summary.

A fixed pool of `concurrency` workers pulls (example, rollout_index) jobs from one shared
iterator, so 100,000 rollouts cost 100,000 small records, not 100,000 pending tasks. Each
finished rollout is appended to `results.jsonl` at once; a resumed run reads that file and
runs only the pairs that are missing.

Over 500 lines because a run is one sequence (check, plan, open or resume the directory,
run, summarise) whose steps share the run's state; results, executors and views are apart.
"""

from __future__ import annotations

import asyncio
import json
import math
import sys
import time
import warnings
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Unpack

from harness._core.aio import run_sync
from harness._core.defaults import DEFAULT_CONCURRENCY
from harness._core.errors import (
    ConfigError,
    ConfigTypeError,
    EndpointError,
    ResultsError,
    TooManyErrorsError,
    WorkersHint,
)
from harness._core.protocol import (
    EnvironmentProtocol,
    Episodes,
    HoldsResources,
    Preflight,
    Reloadable,
    plays_groups,
    protocol_members,
)
from harness._core.run.calls import CALL_LOG, CALLS_FILE, CallLog
from harness._core.run.dirs import drop_partial_groups
from harness._core.run.limits import check_limits, check_planned
from harness._core.run.options import EvaluateOptions, ExecutorName, Shard, check_evaluate_options
from harness._core.run.storage import (
    METADATA_FILE,
    ResultsWriter,
    RunLock,
    clear_run,
    prepare_directory,
    read_metadata,
    write_json_atomic,
)
from harness._core.run.summary import RunningSummary
from harness._core.types import Rollout, jsonable
from harness._endpoint.client import Client, check_sampling
from harness._engine.executors.groups import GroupScorer, run_scoring_groups
from harness._engine.executors.jobs import Plan
from harness._engine.executors.plan import Executor, plan_executor, workers_hint
from harness._engine.executors.scheduler import Job, PoolReport
from harness._engine.executors.workers import peak_rss_mib
from harness._engine.runner import rollout as run_rollout
from harness._engine.runner import rollout_group
from harness._results.eval_results import EvalResults, node_paths, success_of
from harness._results.sharding import shard_metadata
from harness._views.progress import ProgressDisplay, RunStats

# Arguments that only change how fast a run goes, so a resumed run may change them.
_FREE_ON_RESUME = {"concurrency", "progress", "workers", "executor", "ray_address"}
# Client settings that identify what answers (base_url/timeout/retries are just transport:
# a resumed `scripted:` run even gets a new port).
_MODEL_IDENTITY = ("model", "sampling")
_VERSIONED = ("rubric-rl", "openai", "datasets", "pydantic", "rich")


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


def _shown(value: Any, missing: object) -> str:
    return "(absent)" if value is missing else json.dumps(value, default=str)[:80]


def _check_arguments(
    env: object, client: object, num_examples: int | None, rollouts_per_example: int, concurrency: int
) -> None:
    if not isinstance(client, Client):
        raise ConfigTypeError(
            f"client must be a harness.Client, got {type(client).__name__}; "
            "build one with harness.Client(model, base_url=...)"
        )
    if not isinstance(env, EnvironmentProtocol):
        missing = [m for m in protocol_members(EnvironmentProtocol) if not hasattr(env, m)]
        raise TypeError(
            f"{type(env).__name__} is not an environment: it lacks {', '.join(missing)} "
            f"(see harness._core.protocol.EnvironmentProtocol; envs.Environment provides them)"
        )
    for name, value, low in (
        ("rollouts_per_example", rollouts_per_example, 1),
        ("concurrency", concurrency, 1),
    ):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")
    if num_examples is not None and (
        not isinstance(num_examples, int) or isinstance(num_examples, bool) or num_examples < 1
    ):
        raise ConfigError(f"num_examples must be None (all) or an integer >= 1, got {num_examples!r}")


def _example_ids(examples: list[Mapping[str, Any]]) -> list[str]:
    ids: list[str] = []
    seen: set[str] = set()
    for position, example in enumerate(examples):
        if "example_id" not in example:
            raise ConfigError(
                f"example {position} from get_dataset has no 'example_id' (keys: "
                f"{', '.join(map(str, example))}); the environment must give every example a stable id"
            )
        key = str(example["example_id"])
        if key in seen:
            raise ConfigError(
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
            out.append(f"{prefix}{key}: was {_shown(old, missing)}, now {_shown(new, missing)}")
    return out


def _check_resumable(directory: Path, saved: Mapping[str, Any], current: Mapping[str, Any]) -> None:
    """Raise ResultsError listing every setting that differs from the run being resumed."""
    diffs = _differences(saved.get("env") or {}, current["env"], "env.")
    saved_episodes, episodes = saved.get("episodes"), current.get("episodes")
    if isinstance(saved_episodes, Mapping) and isinstance(episodes, Mapping):
        diffs += _differences(saved_episodes, episodes, "episodes.")
    elif saved_episodes != episodes:  # who played: an agent, or the chat loop (absent)
        was, now = (_shown(e, None) if e is not None else "the chat loop" for e in (saved_episodes, episodes))
        diffs.append(f"episodes: was {was}, now {now}")
    saved_model, model = saved.get("model") or {}, current["model"]
    diffs += _differences(
        {k: saved_model.get(k) for k in _MODEL_IDENTITY}, {k: model.get(k) for k in _MODEL_IDENTITY}, "model."
    )
    saved_args = {k: v for k, v in (saved.get("arguments") or {}).items() if k not in _FREE_ON_RESUME}
    args = {k: v for k, v in current["arguments"].items() if k not in _FREE_ON_RESUME}
    diffs += _differences(saved_args, args, "arguments.")
    if diffs:
        raise ResultsError(
            f"cannot resume {directory}: it was run with different settings:\n  "
            + "\n  ".join(diffs)
            + "\nrun with the original settings (only concurrency and progress may change), or use a new output_dir"
        )


def _finite(value: Any) -> Any:
    """`value` with every NaN or ±inf float replaced by None: metadata.json is strict JSON."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def _stop_if_refused(client: Client, stats: RunStats) -> None:
    """Raise when the endpoint refused the run's first requests (401, 403, unknown model)."""
    refused = client.refused
    if refused is not None:
        raise EndpointError(
            f"stopped early after {stats.ran} rollout(s): the endpoint refused the first requests: {refused}",
            status=refused.status,
        )


#: A run with an output directory keeps at most this many rollouts in memory; past it, only its
#: summary is kept (built as rollouts finish) and `EvalResults` reads the rollouts back from
#: results.jsonl when asked, so the driver's memory stays flat however long the run.
KEPT_IN_MEMORY = 1000


class _Run:
    """Book-keeping of one evaluate call: the plan, what finished, what goes to disk."""

    def __init__(self, directory: Path | None, metadata: dict[str, Any], stats: RunStats) -> None:
        self.directory = directory
        self.metadata = metadata
        self.stats = stats
        # The rollouts, while the run is small enough to hand back from memory (None after:
        # the results are read back from results.jsonl when asked for).
        self.rollouts: list[Rollout] | None = []
        self.summary = RunningSummary(success_of(metadata))
        self.writer: ResultsWriter | None = None
        self.calls: CallLog | None = None
        self.lock: RunLock | None = None
        self.plan: Plan | None = None
        self.started = time.perf_counter()

    @classmethod
    def open(
        cls, directory: Path | None, metadata: dict[str, Any], plan: Plan, previous: list[Rollout]
    ) -> _Run:
        """Start the run: resumed rollouts counted, metadata.json written, results.jsonl open."""
        run = cls(directory, metadata, RunStats(total=plan.size, done=len(plan.done)))
        run.plan = plan
        seen: set[tuple[str, int]] = set()
        for r in previous:  # a rollout repeated in the file counts once, as the plan counts it
            if r.key not in seen:
                seen.add(r.key)
                run.keep(r)
        if directory is not None:
            run.save_metadata()
            run.writer = ResultsWriter(directory / "results.jsonl")
            run.calls = CallLog(directory / CALLS_FILE)
        return run

    @property
    def log_target(self) -> tuple[str, str] | None:
        """Where worker processes and Ray actors append the episodes' model calls."""
        return self.calls.target if self.calls is not None else None

    def keep(self, rollout: Rollout) -> None:
        """Count a finished rollout in the summary; hold it in memory only while the run is
        small (`KEPT_IN_MEMORY`) or has no directory to read it back from."""
        self.summary.add(rollout)
        if self.rollouts is None:
            return
        self.rollouts.append(rollout)
        if self.directory is not None and len(self.rollouts) > KEPT_IN_MEMORY:
            self.rollouts = None

    def finished(self, rollout: Rollout) -> None:
        if self.writer is not None:
            self.writer.write(rollout)
        self.keep(rollout)
        self.stats.add(rollout)

    def record_workers(self, executor: str, report: PoolReport) -> None:
        """Note in this session's metadata how the worker processes or actors fared."""
        self.metadata["sessions"][-1]["workers"] = {
            "executor": executor,
            "workers": report.workers,
            "requeued": report.requeued,
            "lost": report.lost_workers,
            "driver_peak_rss_mib": round(peak_rss_mib(), 1),
        }

    def save_metadata(self) -> None:
        if self.directory is not None:
            write_json_atomic(self.directory / METADATA_FILE, _finite(self.metadata))

    def close(self, status: str, *, ran: int, max_k: int) -> EvalResults:
        """Finalize metadata.json (status, summary), close results.jsonl, release the lock:
        whatever happened, including a summary that cannot be computed."""
        try:
            return self._finalize(status, ran=ran, max_k=max_k)
        except Exception as exc:
            self.metadata.update(status="failed", finished_at=_now(), summary=None)
            self.metadata["error"] = f"the run could not be summarized: {type(exc).__name__}: {exc}"
            self.save_metadata()
            raise
        finally:
            if self.writer is not None:
                self.writer.close()
            if self.calls is not None:
                self.calls.close()
            if self.lock is not None:
                self.lock.release()

    def _finalize(self, status: str, *, ran: int, max_k: int) -> EvalResults:
        wall = time.perf_counter() - self.started
        summary = self.summary.summary(
            wall_seconds=wall,
            timed_rollouts=ran,
            max_k=max_k,
            node_order=node_paths(self.metadata),
            planned=self.stats.total,
        )
        session = self.metadata["sessions"][-1]
        session.update(status=status, finished_at=_now(), rollouts_ran=ran, wall_seconds=wall)
        summary = summary.model_copy(update={"total_wall_seconds": _total_wall(self.metadata["sessions"])})
        self.metadata.update(
            status=status, finished_at=session["finished_at"], summary=summary.model_dump(mode="json")
        )
        if self.writer is not None:
            self.writer.close()
        self.save_metadata()
        if self.rollouts is None and self.directory is not None:
            return EvalResults.read_back(self.directory, metadata=self.metadata, summary=summary)
        rollouts = self.rollouts or []
        ordered = self.plan.sort(rollouts) if self.plan is not None else rollouts
        return EvalResults(ordered, metadata=self.metadata, summary=summary)


def _total_wall(sessions: list[Any]) -> float:
    """The wall time of every session that recorded one (a session killed outright has none)."""
    walls = (s.get("wall_seconds") for s in sessions if isinstance(s, dict))
    return math.fsum(
        w for w in walls if isinstance(w, (int, float)) and not isinstance(w, bool) and 0 <= w < math.inf
    )


def _select_examples(
    env: EnvironmentProtocol, split: str, num_examples: int | None, seed: int | None, shard: Shard | None
) -> tuple[list[Mapping[str, Any]], list[str], dict[str, Any]]:
    """The examples this run covers, their ids, and the shard's metadata (empty without one)."""
    examples = list(env.get_dataset(split, n=num_examples, seed=seed))
    ids = _example_ids(examples)
    if shard is None:
        return examples, ids, {}
    return shard.select(examples), shard.select(ids), {"shard": shard_metadata(shard, ids)}


def _load_previous(
    directory: Path | None, resume: bool, overwrite: bool, current: Mapping[str, Any]
) -> tuple[list[Rollout], dict[str, Any] | None, RunLock | None]:
    """The rollouts and metadata of the run being resumed (nothing for a fresh directory),
    read under the directory's one-writer lock, which the caller then holds."""
    if directory is None:
        return [], None, None
    if overwrite and not resume:
        clear_run(directory)
    lock = RunLock(directory)
    try:
        previous = prepare_directory(directory, resume=resume, lock=lock)
        saved = read_metadata(directory)
        if saved is not None:
            _check_resumable(directory, saved, current)
    except BaseException:
        lock.release()
        raise
    return previous, saved, lock


def _start_metadata(
    current: Mapping[str, Any],
    saved: Mapping[str, Any] | None,
    plan: Plan,
    sharding: Mapping[str, Any],
    provenance: Any = None,
) -> dict[str, Any]:
    """metadata.json of a run that starts now, continuing the sessions of `saved` if resumed.

    `provenance` (where the env came from, as `envs.load_environment` records it) is kept from
    the first session at the top and per session, so a changed environment shows.
    """
    started_at = _now()
    saved = saved or {}
    session = {"started_at": started_at, "status": "running", "rollouts_planned": len(plan.jobs)}
    return {
        "status": "running",
        **current,
        "versions": _versions(),
        "provenance": saved.get("provenance", provenance),
        "started_at": saved.get("started_at", started_at),
        "finished_at": None,
        "sessions": [*(saved.get("sessions") or []), {**session, "provenance": provenance}],
        "summary": None,
        **sharding,
        # Dataset order, so `load_results` gives rollouts back in the order evaluate does.
        "example_ids": plan.ids,
    }


async def run_in_process(
    env: EnvironmentProtocol,
    client: Client,
    jobs: Iterable[Job],
    *,
    concurrency: int,
    sampling: Mapping[str, Any] | None,
    on_finished: Callable[[Rollout], None],
    episodes: Episodes | None = None,
    group_size: int | None = None,
) -> None:
    """Run `jobs` in this process with at most `concurrency` rollouts in flight.

    The seam of `evaluate`: everything before it plans, everything after it summarises, and
    `on_finished` is called (on this event loop) once per finished rollout, which streams it
    to disk and the progress bar. The executors of `harness._engine.executors.workers` (processes, Ray) stand
    in for it and call `on_finished` the same way. With `group_size`, each job is a group of
    that many rollouts, played and scored together (`runner.rollout_group`).
    """
    params = dict(sampling or {})
    pending: Iterator[Job] = iter(jobs)
    score = not GroupScorer.needed(env)  # else the driver's GroupScorer scores whole groups
    limit = asyncio.Semaphore(concurrency)

    async def worker() -> None:
        # All workers share one iterator: taking a job is a plain next(), no queue needed.
        for example, indices in pending:
            if group_size is not None:
                for r in await rollout_group(
                    env, client, example, indices, sampling=params, episodes=episodes, limit=limit
                ):
                    on_finished(r)
            else:
                (index,) = indices
                on_finished(
                    await run_rollout(
                        env, client, example, index, sampling=params, score=score, episodes=episodes
                    )
                )
            if client.refused is not None:
                return  # the endpoint refuses this key or model: every request would fail alike

    # Groups hold their members' sandboxes until scored: as many groups as fill `concurrency`.
    tasks = concurrency if group_size is None else max(1, -(-concurrency // group_size))
    async with asyncio.TaskGroup() as group:
        for _ in range(tasks):
            group.create_task(worker())


async def _then_release(
    env: EnvironmentProtocol, episodes: Episodes | None, work: Coroutine[Any, Any, None]
) -> None:
    """Await the run's `work` (rollouts, then group scoring), then, however it ended, close
    what the episodes hold (sandboxes, the capture proxy) and let the environment stop what it
    started on this loop: MCP servers, its judges' HTTP pools. Last, so that no group judged
    after the rollouts reopens a pool."""
    try:
        await work
    finally:
        try:
            if episodes is not None:
                await episodes.close()
        finally:
            if isinstance(env, HoldsResources):
                await env.release()


# Over 60 lines only through its signature and docstring (the body is four named steps).
async def aevaluate(
    env: EnvironmentProtocol,
    client: Client,
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
    executor: ExecutorName = "local",
    ray_address: str | None = None,
    fail_on_error: float | None = None,
    episodes: Episodes | None = None,
) -> EvalResults:
    """Run `rollouts_per_example` rollouts of each example of `env` against `client`.

    With `output_dir`, rollouts stream to `results.jsonl` and settings to `metadata.json`;
    `resume=True` continues such a directory, running only the missing rollouts;
    `overwrite=True` replaces the results of an earlier run there (re-running a notebook
    cell). Failures
    inside a rollout are recorded on it; the batch always finishes. On cancellation or
    Ctrl-C the workers stop, finished rollouts stay on disk, metadata says "interrupted",
    and the interruption propagates (asyncio.run turns a Ctrl-C cancellation into
    KeyboardInterrupt).

    Args:
        env: The environment (anything implementing `harness._core.protocol.EnvironmentProtocol`).
        client: The endpoint client.
        num_examples: How many examples of the split to run (None: all).
        rollouts_per_example: Rollouts of each example (pass@k needs k of them).
        concurrency: Most rollouts in flight at once.
        output_dir: Where results stream to (None: kept in memory only).
        resume: Continue the run in `output_dir`, running only what is missing.
        overwrite: Replace the results of an earlier run in `output_dir`.
        progress: Show the live progress bar.
        seed: Shuffle the examples with this seed.
        split: "eval" or "train".
        sampling: Sampling arguments merged over the environment's and the client's.
        shard: "i/N" runs only slice i of N of the examples (see `harness._results.sharding`; merge the
            shards' directories with `harness._results.sharding.merge_results`).
        workers: Run the rollouts in this many worker processes (see `harness._engine.executors.workers`);
            `concurrency` is the total across them. Only this process writes results.
        executor: "local" (processes) or "ray" (Ray actors).
        ray_address: The Ray cluster for executor="ray" (None: a local one).
        fail_on_error: Raise when more than this many rollouts errored, as Inspect's option:
            a share below 1 (0: any error) or a count from 1 (None: never; the run always
            finishes and is saved first).
        episodes: Who plays the episodes instead of the chat loop (`envs.agents.AgentRun`:
            an agent in a sandbox; `harness._core.protocol.Episodes`). Recorded in
            metadata.json; a resume with other settings is refused.

    Returns:
        Every rollout of the run (resumed ones included) in dataset order, with its summary
        and metadata.

    Raises:
        ConfigError: An argument is out of range or the dataset's example ids are unusable.
        ResultsError: `output_dir` cannot be resumed with these settings.
        TooManyErrorsError: More rollouts errored than `fail_on_error` allows (the results
            are on it, as `.results`).
    """
    # Over 60 lines only through its signature and docstring: the body is the named steps.
    await _check_run(
        env, client, num_examples, rollouts_per_example, concurrency, seed, fail_on_error, sampling, episodes
    )
    run_elsewhere = plan_executor(
        env,
        client,
        workers=workers,
        executor=executor,
        ray_address=ray_address,
        concurrency=concurrency,
        sampling=sampling,
        rollouts_per_example=rollouts_per_example,
        episodes=episodes,
    )
    chosen = Shard.parse(shard) if shard is not None else None
    examples, ids, sharding = _select_examples(env, split, num_examples, seed, chosen)
    check_planned(len(examples), rollouts_per_example)
    plan = Plan(examples, ids, rollouts_per_example)
    arguments = {
        "num_examples": num_examples,
        "rollouts_per_example": rollouts_per_example,
        "seed": seed,
        "split": split,
        "sampling": jsonable(dict(sampling or {})),
        "concurrency": concurrency,
        "progress": progress,
    }
    if chosen is not None:  # absent otherwise, so runs from before sharding still resume
        arguments["shard"] = str(chosen)
    if run_elsewhere is not None:
        arguments.update(workers=workers, executor=executor)
    current = {"env": jsonable(env.config()), "model": jsonable(client.config()), "arguments": arguments}
    if episodes is not None:  # absent otherwise, so runs of the chat loop from before still resume
        current["episodes"] = jsonable(episodes.config())
    directory = Path(output_dir) if output_dir is not None else None
    run = _open_run(env, directory, current, plan, sharding, resume=resume, overwrite=overwrite)
    if run_elsewhere is not None:  # said before any rollout runs, once
        hint = workers_hint(
            workers=workers, rollouts=len(plan.jobs), concurrency=concurrency, base_url=client.base_url
        )
        if hint is not None:
            warnings.warn(hint, WorkersHint, stacklevel=2)
    logging_calls = CALL_LOG.set(run.calls)  # the episodes append each model call as it finishes
    try:
        work = _start_work(env, client, run, plan, run_elsewhere, executor, concurrency, sampling, episodes)
        results = await _finish(run, work, client, directory, progress=progress, max_k=rollouts_per_example)
    finally:
        CALL_LOG.reset(logging_calls)
    _raise_if_too_many_errors(results, fail_on_error, directory)
    return results


async def _check_run(
    env: EnvironmentProtocol,
    client: Client,
    num_examples: int | None,
    rollouts_per_example: int,
    concurrency: int,
    seed: int | None,
    fail_on_error: float | None,
    sampling: Mapping[str, Any] | None,
    episodes: Episodes | None,
) -> None:
    """Every check that can fail before a rollout runs: arguments, limits, key, preflight, the
    episodes' runtime, sampling."""
    _check_arguments(env, client, num_examples, rollouts_per_example, concurrency)
    check_limits(
        {
            "num_examples": num_examples,
            "rollouts_per_example": rollouts_per_example,
            "concurrency": concurrency,
            "seed": seed,
            "fail_on_error": fail_on_error,
        }
    )
    client.check_credentials()  # no key for OpenAI: one clear error, not N failed rollouts
    if isinstance(env, Preflight):  # e.g. a judge with no key: one clear error before anything runs
        await env.preflight()
    if episodes is not None:
        if not isinstance(episodes, Episodes):
            missing = [m for m in protocol_members(Episodes) if not hasattr(episodes, m)]
            raise ConfigTypeError(
                f"episodes must be an envs.agents.AgentRun (or have {', '.join(protocol_members(Episodes))}); "
                f"{type(episodes).__name__} lacks {', '.join(missing)}"
            )
        await episodes.check(env)  # e.g. no Docker daemon: one clear error before anything runs
        episodes.plan(rollouts_per_example)
    check_sampling(dict(sampling or {}))
    # The client's and the environment's defaults go into every request too (a server that
    # ignores `n` would otherwise answer with one choice: a silent wrong result).
    check_sampling(client.sampling, "the client's sampling")
    check_sampling(dict(env.sampling), f"environment {env.name!r} sampling")


def _start_work(
    env: EnvironmentProtocol,
    client: Client,
    run: _Run,
    plan: Plan,
    run_elsewhere: Executor | None,
    executor: str,
    concurrency: int,
    sampling: Mapping[str, Any] | None,
    episodes: Episodes | None,
) -> Coroutine[Any, Any, None]:
    """The run's work: rollouts here or in workers, group scoring after, resources released last.

    A run whose episodes hold what scoring reads (an agent's sandboxes) and whose rubric
    compares groups hands out whole groups instead: each is played and scored where it runs,
    its members' sandboxes open until then."""
    if plays_groups(env, episodes):
        jobs = plan.groups()
        if run_elsewhere is None:
            size = plan.rollouts_per_example
            work = run_in_process(
                env, client, jobs, concurrency=concurrency, sampling=sampling,
                on_finished=run.finished, episodes=episodes, group_size=size,
            )  # fmt: skip
        else:
            work = _record_workers(run, executor, run_elsewhere(jobs, run.finished, run.log_target))
        return _then_release(env, episodes, work)
    groups = GroupScorer.of(env, plan.rollouts_per_example, run.finished)  # None: rollouts score alone
    on_finished = groups.add if groups is not None else run.finished
    if run_elsewhere is None:
        work = run_in_process(
            env,
            client,
            plan.jobs,
            concurrency=min(concurrency, len(plan.jobs)),
            sampling=sampling,
            on_finished=on_finished,
            episodes=episodes,
        )
    else:
        work = _record_workers(run, executor, run_elsewhere(plan.jobs, on_finished, run.log_target))
    if groups is not None:  # scored when its last member finishes, saved whole
        work = run_scoring_groups(work, groups)
    return _then_release(env, episodes, work)


def _raise_if_too_many_errors(
    results: EvalResults, fail_on_error: float | None, directory: Path | None
) -> None:
    failed = results.summary.too_many_errors(fail_on_error) if fail_on_error is not None else None
    if failed:
        where = f" (saved in {directory})" if directory else ""
        raise TooManyErrorsError(f"{failed}; the results{where} are on this error as .results", results)


def evaluate(env: EnvironmentProtocol, client: Client, **options: Unpack[EvaluateOptions]) -> EvalResults:
    """`aevaluate`, synchronously: blocks until the run ends, and works inside a running event
    loop too (a Jupyter cell), where it runs on a helper thread. Same options and results.
    SIGTERM and SIGHUP stop it as Ctrl-C does (`harness._core.aio.Stopped`, a KeyboardInterrupt).

    Args:
        env: The environment (anything implementing `harness._core.protocol.EnvironmentProtocol`).
        client: The endpoint client.
        **options: `aevaluate`'s options (`num_examples`, `rollouts_per_example`,
            `concurrency`, `output_dir`, `resume`, ...), each described there.

    Returns:
        The run's `EvalResults`.
    """
    check_evaluate_options(options, "evaluate")
    return run_sync(aevaluate(env, client, **options))


def _open_run(
    env: EnvironmentProtocol,
    directory: Path | None,
    current: dict[str, Any],
    plan: Plan,
    sharding: Mapping[str, Any],
    *,
    resume: bool,
    overwrite: bool,
) -> _Run:
    """Take the directory's lock, load what a resumed run already has, and start metadata."""
    previous, saved, lock = _load_previous(directory, resume, overwrite, current)
    if GroupScorer.needed(env):  # an example whose group was saved only in part runs again, whole
        previous = drop_partial_groups(directory, previous, plan.rollouts_per_example)
    origin = jsonable(env.provenance) if isinstance(env, Reloadable) else None
    try:
        plan.skip_finished(previous, directory)
        run = _Run.open(directory, _start_metadata(current, saved, plan, sharding, origin), plan, previous)
    except BaseException:
        if lock is not None:
            lock.release()
        raise
    run.lock = lock
    return run


async def _record_workers(run: _Run, executor: str, pool: Awaitable[PoolReport]) -> None:
    run.record_workers(executor, await pool)


async def _finish(
    run: _Run,
    work: Coroutine[Any, Any, None],
    client: Client,
    directory: Path | None,
    *,
    progress: bool,
    max_k: int,
) -> EvalResults:
    """Await the rollouts (with the progress display), then close the run as completed,
    interrupted or failed; an interruption propagates with a note saying how far it got."""
    status = "failed"
    try:
        with ProgressDisplay(run.stats, enabled=progress):
            await work
        _stop_if_refused(client, run.stats)
        status = "completed"
    except (KeyboardInterrupt, asyncio.CancelledError) as exc:
        status = "interrupted"
        where = f"; they are in {directory}, and resume=True continues the run" if directory else ""
        exc.add_note(
            f"evaluation interrupted: {run.stats.done} of {run.stats.total} rollouts finished{where}"
        )
        raise
    finally:
        work.close()  # no-op once awaited; an unstarted one must not warn "never awaited"
        results = run.close(status, ran=run.stats.ran, max_k=max_k)
    return results


__all__ = [
    "DEFAULT_CONCURRENCY",
    "EvaluateOptions",
    "aevaluate",
    "check_evaluate_options",
    "evaluate",
    "run_in_process",
]
