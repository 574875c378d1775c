"""Run an evaluation's workers as Ray actors, for more machines than one (`executor="ray"`).

The actors run the very `harness._engine.executors.workers.WorkerRuntime` the local worker processes run:
each loads the environment from its spec (so the environment's package must be installed on
every node) and builds its own client. The driver keeps the same guarantees as with local
workers, because it is the same scheduler (`harness._engine.executors.scheduler.run_jobs`): one writer, resume,
and an actor that dies has its unfinished jobs handed to the others.

`ray` is an optional extra (`pip install 'rubric-rl[ray]'`), imported only here. With an
address, the driver joins that cluster (`ray.init(address=...)`); without one it starts a
local Ray for the run and shuts it down after. A Ray session that is already initialised
(a notebook, a test) is used as it is and left running.
"""

from __future__ import annotations

import asyncio
import logging
import os
import pickle
import uuid
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness._core.errors import ConfigError, WorkerError
from harness._core.types import Rollout
from harness._engine.executors.scheduler import Job, PoolReport, WorkerLost, run_jobs
from harness._engine.executors.workers import (
    START_TIMEOUT,
    STOP_TIMEOUT,
    WorkerRuntime,
    WorkerSpec,
    logging_to,
    sendable,
)

INSTALL_HINT = "pip install 'rubric-rl[ray]'"
ACTOR_PREFIX = "rubric-worker"


def _import_ray() -> Any:
    # Ray's crash handler in this (the driver's) process takes SIGTERM and aborts the process 3 s
    # later, cutting short the cleanup of a run stopped by SIGTERM (its status and summary, the
    # actors): off unless the user turned it on. Read when ray is imported.
    os.environ.setdefault("RAY_DISABLE_FAILURE_SIGNAL_HANDLER", "1")
    try:
        import ray
    except ImportError:
        raise ConfigError(
            f"Ray is not installed, and --ray / executor='ray' needs it: {INSTALL_HINT}"
        ) from None
    if getattr(ray, "__file__", None) is None or not hasattr(ray, "is_initialized"):
        # A folder named `ray` on sys.path (the working folder, the temp folder where Ray keeps
        # its sessions) imports as an empty namespace package where Ray is missing.
        where = ", ".join(str(p) for p in getattr(ray, "__path__", [])) or "?"
        raise ConfigError(
            f"`import ray` found a folder ({where}), not the Ray package: {INSTALL_HINT}, or run "
            "from another folder"
        )
    return ray


class _Actor:
    """The body of one Ray actor: a WorkerRuntime fed and drained in batches.

    One Ray call per rollout costs more than the rollout itself on a fast endpoint, so the
    driver sends jobs in batches (`submit`) and collects whatever has finished with one
    long-polling `poll`; the rollouts run as tasks on the actor's own event loop meanwhile.
    """

    def __init__(self, spec: WorkerSpec) -> None:
        self.runtime = WorkerRuntime(spec)
        self._done: list[tuple[int, list[Rollout] | str]] = []
        self._ready: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[None]] = set()

    def load(self) -> int:
        self.runtime.load()
        return os.getpid()

    async def submit(self, jobs: list[tuple[int, dict[str, Any], tuple[int, ...]]]) -> None:
        for job_id, example, indices in jobs:
            task = asyncio.create_task(self._one(job_id, example, indices))
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _one(self, job_id: int, example: Mapping[str, Any], indices: tuple[int, ...]) -> None:
        outcome: list[Rollout] | str
        try:
            results = await self.runtime.run(example, indices)
        except Exception as exc:  # run() records episode failures itself: this is a worker bug
            outcome = f"worker {self.runtime.spec.index} failed a rollout: {type(exc).__name__}: {exc}"
        else:
            try:
                pickle.dumps(results, protocol=pickle.HIGHEST_PROTOCOL)
                outcome = results
            except Exception:  # e.g. an object in rollout.state that cannot be pickled
                outcome = sendable(results)
        self._done.append((job_id, outcome))
        self._event().set()

    def _event(self) -> asyncio.Event:
        if self._ready is None:
            self._ready = asyncio.Event()
        return self._ready

    async def poll(self) -> list[tuple[int, list[Rollout] | str]]:
        """Every rollout finished since the last poll, waiting until there is one."""
        ready = self._event()
        await ready.wait()
        ready.clear()
        done, self._done = self._done, []
        return done

    async def stop(self) -> dict[str, Any]:
        await asyncio.gather(*self._tasks)
        return await self.runtime.close()


def _cause(exc: BaseException) -> str:
    """The message of the error raised inside an actor, without Ray's traceback wrapping."""
    cause = getattr(exc, "cause", None)
    if isinstance(cause, BaseException):
        return str(cause)
    return str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__


class RayWorker:
    """The driver's handle on one actor (implements `harness._engine.executors.workers.WorkerHandle`).

    `run` queues a job and waits for its rollout; the jobs queued in one turn of the event
    loop go to the actor in one `submit` call, and a poller task hands each finished rollout
    to its waiter. When the actor dies, every job it held fails with WorkerLost, so the
    scheduler hands it to another worker: each job still finishes exactly once.
    """

    def __init__(self, ray: Any, actor_class: Any, spec: WorkerSpec, run_id: str) -> None:
        self.ray = ray
        self.spec = spec
        self.index = spec.index
        self.capacity = spec.capacity
        self.name = f"{ACTOR_PREFIX}-{run_id}-{spec.index}"
        self.actor: Any = actor_class.options(
            name=self.name,
            num_cpus=1,
            max_concurrency=8,  # load, submit, poll and stop: the rollouts are tasks inside
            max_restarts=0,
            scheduling_strategy="SPREAD",
        ).remote(spec)
        self._waiting: dict[int, asyncio.Future[list[Rollout]]] = {}
        self._outbox: list[tuple[int, dict[str, Any], tuple[int, ...]]] = []
        self._calls: set[asyncio.Future[Any]] = set()
        self._poller: asyncio.Task[None] | None = None
        self._lost: str | None = None

    async def start(self) -> None:
        try:
            await asyncio.wait_for(self.actor.load.remote(), START_TIMEOUT)
        except TimeoutError:
            raise WorkerError(
                f"Ray did not start worker {self.index} within {START_TIMEOUT:.0f}s; each worker needs "
                f"1 CPU of the cluster: {self.ray.cluster_resources().get('CPU', 0):.0f} CPUs there"
            ) from None
        except Exception as exc:  # the environment failed to load inside the actor
            raise WorkerError(_cause(exc)) from None
        self._poller = asyncio.create_task(self._poll())

    async def run(self, job_id: int, example: Mapping[str, Any], indices: tuple[int, ...]) -> list[Rollout]:
        if self._lost is not None:
            raise WorkerLost(self._lost)
        future: asyncio.Future[list[Rollout]] = asyncio.get_running_loop().create_future()
        self._waiting[job_id] = future
        if not self._outbox:  # the first job of this loop turn: send the batch at its end
            asyncio.get_running_loop().call_soon(self._flush)
        self._outbox.append((job_id, dict(example), indices))
        return await future

    def _flush(self) -> None:
        batch, self._outbox = self._outbox, []
        if not batch or self._lost is not None:
            return
        call = asyncio.ensure_future(self.actor.submit.remote(batch))
        self._calls.add(call)
        call.add_done_callback(self._submitted)

    def _submitted(self, call: asyncio.Future[Any]) -> None:
        self._calls.discard(call)
        if not call.cancelled() and call.exception() is not None:  # the poller sees the death too
            self._lose(f"Ray worker {self.index} died: {_cause(call.exception())}")  # type: ignore[arg-type]

    async def _poll(self) -> None:
        try:
            while True:
                for job_id, outcome in await self.actor.poll.remote():
                    future = self._waiting.pop(job_id, None)
                    if future is None or future.done():
                        continue
                    if isinstance(outcome, str):
                        future.set_exception(WorkerError(outcome))
                    else:
                        future.set_result(outcome)
        except Exception as exc:  # RayActorError, or an answer Ray could not carry
            self._lose(f"Ray worker {self.index} died: {_cause(exc)}")

    def _lose(self, why: str) -> None:
        """Fail every job this worker holds with WorkerLost, so they run elsewhere."""
        self._lost = self._lost or why
        waiting, self._waiting, self._outbox = self._waiting, {}, []
        for future in waiting.values():
            if not future.done():
                future.set_exception(WorkerLost(self._lost))

    async def stop(self) -> dict[str, Any]:
        try:
            report: dict[str, Any] = await asyncio.wait_for(self.actor.stop.remote(), STOP_TIMEOUT)
        except (TimeoutError, self.ray.exceptions.RayActorError):
            report = {"index": self.index, "lost": True}
        self.kill()
        return report

    def kill(self) -> None:
        if self._poller is not None:
            self._poller.cancel()
        for call in self._calls:
            call.cancel()
        try:
            self.ray.kill(self.actor, no_restart=True)
        except Exception:  # already gone: nothing left to stop
            return


def _probe(address: str, timeout: float = 5.0) -> None:
    """Fail in seconds when nothing listens at a host:port address (Ray itself retries for
    minutes). Addresses such as "auto" are left to Ray, which answers those at once."""
    import socket

    host, _, port = address.removeprefix("ray://").rpartition(":")
    if not host or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise ConfigError(
            f"cannot connect to the Ray cluster at {address}: nothing answers there ({exc.strerror or exc}); "
            f"check the address (`ray status` on the head node shows it) or run --ray without an address "
            f"for a local Ray"
        ) from None


def connect(address: str | None, *, num_cpus: int | None = None) -> tuple[Any, bool]:
    """Ray, initialised: the given cluster, a session already open, or a new local one.

    Returns ray and whether this call started the session (so the run shuts it down after).
    """
    ray = _import_ray()
    if address:
        _probe(address)
    if ray.is_initialized():
        return ray, False
    options: dict[str, Any] = {"include_dashboard": False, "logging_level": logging.WARNING}
    try:
        if address:
            ray.init(address=address, **options)
        else:  # enough CPUs for every worker actor, which asks for one
            ray.init(num_cpus=max(os.cpu_count() or 1, num_cpus or 1), **options)
    except Exception as exc:  # ConnectionError, or Ray's own exceptions for a bad address
        where = f"the Ray cluster at {address}" if address else "a local Ray"
        raise ConfigError(
            f"cannot connect to {where}: {_cause(exc)}; check the address (ray status on the head node "
            f"shows it) or run --ray without an address for a local Ray"
        ) from None
    return ray, True


def ray_executor(
    specs: Sequence[WorkerSpec], address: str | None
) -> Callable[[Sequence[Job], Callable[[Rollout], None], tuple[str, str] | None], Any]:
    """A function that runs the jobs on one Ray actor per spec. Connects to Ray now, so a
    missing installation or an unreachable address fails before anything is written."""
    ray, started = connect(address, num_cpus=len(specs))
    actor_class = ray.remote(_Actor)

    async def execute(
        jobs: Sequence[Job], finished: Callable[[Rollout], None], call_log: tuple[str, str] | None = None
    ) -> PoolReport:
        run_id = uuid.uuid4().hex[:8]
        handles = [RayWorker(ray, actor_class, spec, run_id) for spec in logging_to(specs, call_log)]
        try:
            return await run_jobs(handles, jobs, finished)
        finally:
            for handle in handles:
                handle.kill()
            if started:
                ray.shutdown()

    return execute


__all__ = ["ACTOR_PREFIX", "INSTALL_HINT", "RayWorker", "connect", "ray_executor"]
