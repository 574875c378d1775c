"""Which executor runs a run's jobs: the driver's own event loop, worker processes, or Ray.

The one place that knows every executor, so the executors need not know each other
(`workers` and `ray_cluster` share the scheduler in `workers`; neither imports this module).
Ray itself is imported only inside `ray_cluster.ray_executor`, when asked for.
"""

from __future__ import annotations

import functools
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from harness._core.errors import ConfigError
from harness._core.protocol import Episodes
from harness._core.run.options import ExecutorName
from harness._core.types import Rollout
from harness._engine.executors.ray_cluster import ray_executor
from harness._engine.executors.scheduler import Job, PoolReport
from harness._engine.executors.workers import check_workers, run_local, worker_specs

#: Runs the jobs elsewhere: (jobs, on_finished, the run's call log as `CallLog.target`).
Executor = Callable[
    [Sequence[Job], Callable[[Rollout], None], tuple[str, str] | None], Awaitable["PoolReport"]
]


def plan_executor(
    env: Any,
    client: Any,
    *,
    workers: int,
    executor: ExecutorName,
    ray_address: str | None,
    concurrency: int,
    sampling: Mapping[str, Any] | None,
    rollouts_per_example: int = 1,
    episodes: Episodes | None = None,
) -> Executor | None:
    """What runs the jobs: None for the driver's own event loop (workers=1, local), else a
    function running them on worker processes or Ray actors. Every setting is checked here,
    before anything is written or started."""
    if executor not in ("local", "ray"):
        raise ConfigError(f"executor must be 'local' or 'ray', got {executor!r}")
    if ray_address is not None and executor != "ray":
        raise ConfigError(f"ray_address={ray_address!r} needs executor='ray'")
    check_workers(workers, concurrency)
    if executor == "local" and workers == 1:
        return None
    specs = worker_specs(
        env,
        client,
        workers=workers,
        concurrency=concurrency,
        sampling=sampling,
        rollouts_per_example=rollouts_per_example,
        episodes=episodes,
    )
    if executor == "ray":
        return ray_executor(specs, ray_address)
    return functools.partial(run_local, specs)


#: Completions per second one process keeps up with on a fast endpoint (README, "Scaling out").
PROCESS_COMPLETIONS_PER_SECOND = 500
#: A worker takes a second or more to start (Python, imports, the environment), in which one
#: process would have run about this many rollouts: below it per worker, workers cost time.
MIN_ROLLOUTS_PER_WORKER = 1_000
#: Seconds a model on another machine rarely answers faster than.
REMOTE_LATENCY_FLOOR = 0.5
_LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1", "0.0.0.0"})


def workers_hint(*, workers: int, rollouts: int, concurrency: int, base_url: str) -> str | None:
    """Why `workers` worker processes cannot speed up a run of `rollouts` rollouts at
    `concurrency` against `base_url`, with what to do instead; None when they may.

    Workers only lift one process's CPU ceiling (about `PROCESS_COMPLETIONS_PER_SECOND`), at a
    start-up cost of a second or more each. A run too small to earn that back, or one whose
    endpoint answers more slowly than that ceiling (a remote endpoint at this concurrency),
    is as fast or faster in one process.
    """
    if workers <= 1 or rollouts == 0:
        return None
    if rollouts < workers * MIN_ROLLOUTS_PER_WORKER:
        return (
            f"workers={workers} will not speed up {rollouts:,} rollouts: each worker takes seconds to start, "
            f"while one process runs about {PROCESS_COMPLETIONS_PER_SECOND} rollouts/s; workers pay off "
            f"from about {MIN_ROLLOUTS_PER_WORKER:,} rollouts per worker, so run this one without them"
        )
    host = urllib.parse.urlsplit(base_url).hostname or base_url
    fastest = concurrency / REMOTE_LATENCY_FLOOR  # completions/s if every answer took the floor
    if host not in _LOOPBACK and fastest < PROCESS_COMPLETIONS_PER_SECOND:
        return (
            f"workers={workers} will not speed up this run: at concurrency {concurrency}, {host} delivers at "
            f"most {fastest:,.0f} completions/s unless it answers in under {REMOTE_LATENCY_FLOOR}s, below the "
            f"{PROCESS_COMPLETIONS_PER_SECOND}/s one process keeps up with; raise concurrency instead"
        )
    return None


__all__ = [
    "MIN_ROLLOUTS_PER_WORKER",
    "PROCESS_COMPLETIONS_PER_SECOND",
    "REMOTE_LATENCY_FLOOR",
    "Executor",
    "plan_executor",
    "workers_hint",
]
