"""The driver's scheduler, the same for every kind of worker (processes, Ray actors).

`run_jobs` gives each worker at most its concurrency plus a small prefetch of jobs; a worker
that dies has its unfinished jobs handed to the others, and each job is finished exactly
once: a result is accepted only from the worker that holds the job. A worker is anything
with the `WorkerHandle` methods (`workers.ProcessWorker`, `ray_cluster.RayWorker`).
"""

from __future__ import annotations

import asyncio
import collections
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from harness._core.errors import WorkerError
from harness._core.types import Rollout

START_TIMEOUT = 300.0  # seconds a worker may take to import and build the environment
STOP_TIMEOUT = 10.0
_FRAME = struct.Struct("!I")

#: (example, rollout indices): one rollout, or the rollouts of a group played and scored together.
Job = tuple[Mapping[str, Any], tuple[int, ...]]


class WorkerLost(Exception):
    """The worker running a job is gone; the job goes back to the queue."""


class WorkerHandle(Protocol):
    """The driver's view of one worker."""

    index: int
    capacity: int  # jobs it may hold at once: its concurrency plus a small prefetch

    async def start(self) -> None: ...

    async def run(
        self, job_id: int, example: Mapping[str, Any], indices: tuple[int, ...]
    ) -> list[Rollout]: ...

    async def stop(self) -> dict[str, Any]: ...

    def kill(self) -> None: ...


def prefetch(concurrency: int) -> int:
    """Jobs a worker holds beyond those it is running, so it never waits for the driver."""
    return max(2, concurrency // 4)


@dataclass
class PoolReport:
    """What `run_jobs` reports: each worker's numbers, and how many jobs were handed out again."""

    workers: list[dict[str, Any]]
    requeued: int = 0
    lost_workers: list[int] = field(default_factory=list)


class _Scheduler:
    """Hands jobs out to workers' slots; a lost worker's jobs go back to the front of the queue."""

    def __init__(self, jobs: Sequence[Job], finished: Callable[[Rollout], None]) -> None:
        self.jobs = jobs
        self.finished = finished
        self.next_job = 0  # jobs are handed out in order, without a queue of every id
        self.requeued: collections.deque[int] = collections.deque()  # a lost worker's jobs, first
        self.in_flight = 0
        self.changed = asyncio.Condition()
        self.report = PoolReport(workers=[])
        self.alive = 0

    @property
    def pending(self) -> int:
        """Jobs not handed out yet (re-queued ones included)."""
        return len(self.requeued) + len(self.jobs) - self.next_job

    async def _next(self) -> int | None:
        async with self.changed:
            while not self.pending:
                if self.in_flight == 0:
                    return None
                await self.changed.wait()
            self.in_flight += 1
            if self.requeued:
                return self.requeued.popleft()
            self.next_job += 1
            return self.next_job - 1

    async def _settle(self, job_id: int, lost: bool) -> None:
        async with self.changed:
            self.in_flight -= 1
            if lost:  # one idle slot (of a live worker, or it passes the job on) takes it
                self.requeued.appendleft(job_id)
                self.report.requeued += 1
                self.changed.notify(1)
            elif self.in_flight == 0 and not self.pending:  # all done: every idle slot ends
                self.changed.notify_all()

    async def slot(self, worker: WorkerHandle, dead: asyncio.Event) -> None:
        while not dead.is_set():
            job_id = await self._next()
            if job_id is None:
                return
            example, indices = self.jobs[job_id]
            try:
                results = await worker.run(job_id, example, indices)
            except WorkerLost:
                dead.set()
                await self._settle(job_id, lost=True)
                return
            for result in results:
                self.finished(result)
            await self._settle(job_id, lost=False)

    async def serve(self, worker: WorkerHandle) -> None:
        """Run the worker's slots until the queue is empty; account for its death."""
        dead = asyncio.Event()
        async with asyncio.TaskGroup() as group:
            for _ in range(worker.capacity):
                group.create_task(self.slot(worker, dead))
        if dead.is_set():
            self.report.lost_workers.append(worker.index)
            self.alive -= 1
            worker.kill()
            async with self.changed:
                if self.alive == 0 and self.pending:
                    raise WorkerError(
                        f"every worker died with {self.pending} rollout(s) left; what finished is "
                        f"saved (resume to continue); see the workers' messages above"
                    )
                self.changed.notify_all()
        else:
            self.report.workers.append(await worker.stop())


async def run_jobs(
    handles: Sequence[WorkerHandle], jobs: Sequence[Job], finished: Callable[[Rollout], None]
) -> PoolReport:
    """Run every job on the workers; `finished(rollout)` is called once per rollout of each
    job, in the driver.

    Workers start concurrently; one that cannot start fails the run (its environment would
    fail the same way everywhere). On cancellation (Ctrl-C) every worker is killed at once.
    """
    scheduler = _Scheduler(jobs, finished)
    try:
        await asyncio.gather(*(h.start() for h in handles))
        scheduler.alive = len(handles)
        try:
            async with asyncio.TaskGroup() as group:
                for handle in handles:
                    group.create_task(scheduler.serve(handle))
        except* WorkerError as raised:  # from one worker's task: report it as itself
            raise raised.exceptions[0] from None
    except BaseException:
        for handle in handles:
            handle.kill()
        raise
    scheduler.report.workers.sort(key=lambda w: w["index"])
    return scheduler.report


__all__ = ["Job", "PoolReport", "WorkerHandle", "WorkerLost", "prefetch", "run_jobs"]
