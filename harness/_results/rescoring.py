"""Score saved rollouts again with an environment's current rubric, without model calls.

Why a library function: `rubric score` is one caller; a notebook that changed a reward
function is another, and both should get the same copies, limits and metadata.
"""

from __future__ import annotations

import asyncio
import math
import time
from pathlib import Path

from harness._core.aio import run_sync
from harness._core.defaults import DEFAULT_CONCURRENCY
from harness._core.errors import ConfigError, ResultsError, describe_error
from harness._core.protocol import EnvironmentProtocol, RescoresFailed, ScoresGroups, scores_groups
from harness._core.run.dirs import rescored_path
from harness._core.types import Rollout
from harness._results.eval_results import EvalResults


def _unscored_copy(rollout: Rollout) -> Rollout:
    copy = rollout.model_copy(deep=True)
    copy.reward, copy.scores, copy.score_errors, copy.score_details = math.nan, {}, {}, {}
    return copy


async def arescore(
    results: EvalResults,
    env: EnvironmentProtocol,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    failed_only: bool = False,
) -> EvalResults:
    """Re-score copies of `results`' rollouts with `env`'s rubric; `results` is left untouched.

    An environment whose rubric compares the rollouts of one example (`ScoresGroups`) scores
    each example's saved rollouts together, as the run did.

    Args:
        results: A run, e.g. from `harness.load_results(DIR)`.
        env: The environment whose `score` (its rubric) grades the copies.
        concurrency: Most rollouts (or groups) scored at once.
        failed_only: Score again only the nodes that failed (NaN); every node that scored
            keeps its saved score (the environment must implement `RescoresFailed`).

    Returns:
        The re-scored rollouts in the same order, with the run's metadata plus
        `rescored_with` (the environment's name) and a fresh summary, whose wall time is
        the re-scoring's own. A rollout whose
        scoring raised is NaN with the reason in `score_errors`, never a silent 0.
    """
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigError(f"concurrency must be an integer >= 1, got {concurrency!r}")
    started = time.perf_counter()
    if failed_only:
        fresh = [r.model_copy(deep=True) for r in results.rollouts]
        if not isinstance(env, RescoresFailed):
            raise ConfigError(
                f"{type(env).__name__} cannot re-score only what failed (it lacks rescore_failed); "
                "re-score everything without --failed-only"
            )
        await env.rescore_failed(fresh, concurrency=concurrency)
        return _rescored(results, fresh, env.name, time.perf_counter() - started)
    fresh = [_unscored_copy(r) for r in results.rollouts]
    if isinstance(env, ScoresGroups) and scores_groups(env):
        await _score_groups(env, fresh, concurrency)
        return _rescored(results, fresh, env.name, time.perf_counter() - started)
    limit = asyncio.Semaphore(concurrency)

    async def one(rollout: Rollout) -> None:
        async with limit:
            try:
                await env.score(rollout)
            except Exception as exc:  # env.score should not raise; if it does, record it
                rollout.reward = math.nan
                rollout.score_errors[""] = f"scoring failed: {describe_error(exc)}"

    await asyncio.gather(*(one(r) for r in fresh))
    return _rescored(results, fresh, env.name, time.perf_counter() - started)


async def _score_groups(env: ScoresGroups, rollouts: list[Rollout], concurrency: int) -> None:
    """Each example's rollouts scored together, at most `concurrency` groups at once."""
    groups: dict[str, list[Rollout]] = {}
    for r in rollouts:
        groups.setdefault(str(r.example_id), []).append(r)
    limit = asyncio.Semaphore(concurrency)

    async def one(group: list[Rollout]) -> None:
        async with limit:
            try:
                await env.score_group(group)
            except Exception as exc:  # score_group should not raise; if it does, record it
                for rollout in group:
                    rollout.reward = math.nan
                    rollout.score_errors[""] = f"scoring failed: {describe_error(exc)}"

    await asyncio.gather(*(one(g) for g in groups.values()))


def _rescored(results: EvalResults, fresh: list[Rollout], name: str, took: float) -> EvalResults:
    # The summary's wall time is the re-scoring's own, never the original run's.
    metadata = {**results.metadata, "rescored_with": name, "summary": {"wall_seconds": max(took, 1e-9)}}
    return EvalResults(fresh, metadata=metadata)


def rescore(
    results: EvalResults,
    env: EnvironmentProtocol,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    failed_only: bool = False,
) -> EvalResults:
    """Synchronous `arescore` (works in scripts and inside Jupyter).

    Args:
        results: A run, e.g. from `harness.load_results(DIR)`.
        env: The environment whose `score` (its rubric) grades the copies.
        concurrency: Most rollouts (or groups) scored at once.
        failed_only: Score again only the nodes that failed (NaN).

    Returns:
        The re-scored copy of `results` (see `arescore`).
    """
    return run_sync(arescore(results, env, concurrency=concurrency, failed_only=failed_only))


def rescore_to(
    results: EvalResults,
    env: EnvironmentProtocol,
    out: str | Path | None = None,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    source: str | Path | None = None,
    spec: str | None = None,
    failed_only: bool = False,
) -> tuple[EvalResults, Path]:
    """`rescore`, written to a new results file, as `rubric score` does.

    Args:
        results: A run, e.g. from `harness.load_results(DIR)`.
        env: The environment whose `score` (its rubric) grades the copies.
        out: The results file to write (default: a new `results.rescored-<time>.jsonl` in
            `source`).
        concurrency: Most rollouts (or groups) scored at once.
        source: The run directory `results` came from, recorded in the new metadata.
        spec: How the environment was named (`rubric score DIR ENV`), recorded too.
        failed_only: Score again only the nodes that failed (NaN).

    Returns:
        The re-scored copy and the file it was written to.

    Raises:
        ConfigError: Neither `out` nor `source` was given.
        ResultsError: `out` already exists (nothing is overwritten).
    """
    if out is None and source is None:
        raise ConfigError("rescore_to needs out= or source= (the run directory)")
    path = Path(out) if out is not None else rescored_path(Path(str(source)))
    if path.exists():
        raise ResultsError(f"{path} already exists; choose another -o/--output")
    new = rescore(results, env, concurrency=concurrency, failed_only=failed_only)
    new.metadata.update(rescored_from=str(source), rescored_with=spec, rescored_failed_only=failed_only)
    new.to_jsonl(path)
    return new, path


__all__ = [
    "arescore",
    "rescore",
    "rescore_to",
]
