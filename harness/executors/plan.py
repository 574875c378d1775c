"""Which executor runs a run's jobs: the driver's own event loop, worker processes, or Ray.

The one place that knows every executor, so the executors need not know each other
(`workers` and `ray_cluster` share the scheduler in `workers`; neither imports this module).
Ray itself is imported only inside `ray_cluster.ray_executor`, when asked for.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from harness.errors import ConfigError
from harness.executors.ray_cluster import ray_executor
from harness.executors.scheduler import Job, PoolReport
from harness.executors.workers import check_workers, run_local, worker_specs
from harness.types import Rollout

Executor = Callable[[Sequence[Job], Callable[[Rollout], None]], Awaitable["PoolReport"]]


def plan_executor(
    env: Any,
    client: Any,
    *,
    workers: int,
    executor: str,
    ray_address: str | None,
    concurrency: int,
    sampling: Mapping[str, Any] | None,
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
    specs = worker_specs(env, client, workers=workers, concurrency=concurrency, sampling=sampling)
    if executor == "ray":
        return ray_executor(specs, ray_address)
    return functools.partial(run_local, specs)


__all__ = ["Executor", "plan_executor"]
