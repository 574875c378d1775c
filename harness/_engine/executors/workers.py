"""Run an evaluation's rollouts in worker processes, each with its own event loop and HTTP pool.

One Python process tops out near the OpenAI SDK's own CPU cost per completion; N worker
processes multiply that ceiling. The driver (the process that called `evaluate`) keeps every
duty that must happen once: it plans the jobs, hands them out, receives finished rollouts and
is the only writer of `results.jsonl`, so resume, the file lock, the summary and the progress
bar are unchanged. A worker only runs rollouts:

- it rebuilds the environment from its *spec* (the registered name, path or `module:function`
  plus arguments it was loaded with), never from a pickled object, and checks that what it
  built has the driver's `config()`;
- it builds its own `Client` from the driver's settings; every Client in the worker (the
  policy's and any judge's) takes the worker's share of its `max_concurrency`
  (`harness.Client.set_concurrency_share`), so limits stay run-wide;
- it receives examples as plain dicts, so it never needs `datasets` for them;
- with `episodes` (an agent plays them), it rebuilds those from their source too (the agent's
  name, runtime and limits as plain data) and checks they have the driver's `config()`; its
  sandboxes are its own. A run that scores groups then hands a worker whole groups: the
  members' sandboxes are open where the group is scored.

The scheduler (`harness._engine.executors.scheduler.run_jobs`) hands out the jobs and re-queues those
of a worker that dies. Local workers are subprocesses talking length-prefixed pickle frames over their stdin/stdout;
`harness._engine.executors.ray_cluster` runs the same `WorkerRuntime` as Ray actors.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import pickle
import resource
import signal
import struct
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import FrameType
from typing import Any

from harness._core.aio import STOP_SIGNALS
from harness._core.errors import ConfigError, WorkerError, describe_error
from harness._core.protocol import (
    EnvironmentProtocol,
    EnvironmentSource,
    Episodes,
    EpisodesSource,
    HoldsResources,
    Reloadable,
    plays_groups,
    scores_groups,
)
from harness._core.run.calls import CALL_LOG, CallLog
from harness._core.types import Rollout, jsonable
from harness._endpoint.client import Client
from harness._engine.executors.scheduler import Job, PoolReport, WorkerLost, prefetch, run_jobs
from harness._engine.runner import rollout, rollout_group

START_TIMEOUT = 300.0  # seconds a worker may take to import and build the environment
STOP_TIMEOUT = 10.0
_FRAME = struct.Struct("!I")


@dataclass(frozen=True)
class WorkerSpec:
    """Everything a worker needs to rebuild the environment and client: plain, picklable data.

    Attributes:
        source: how the worker builds the environment (`source.load(worker=True)`).
        env_overrides: attributes set after loading (the driver may have changed `max_turns`).
        env_config: the driver's `env.config()`; the worker's must equal it.
        client_kwargs: `harness._endpoint.client.Client(**client_kwargs)` (holds the API key).
        sampling: per-run sampling arguments for `harness._engine.runner.rollout`.
        concurrency: rollouts this worker runs at once.
        index / count: this worker's number and the number of workers (for concurrency shares).
        sys_path: the driver's `sys.path`, so `module:function` specs import the same modules.
        rollouts_per_example: the run's `-r` (`harness._core.protocol.Episodes.plan`).
        episodes: how the worker builds the run's `Episodes` (None: the chat loop).
        episodes_config: the driver's `episodes.config()`; the worker's must equal it.
        group_jobs: each job is a group, played and scored in the worker (`rollout_group`).
        call_log: the run's call log to append the episodes' model calls to (`CallLog.target`;
            None: the run has no output folder).
    """

    source: EnvironmentSource
    env_overrides: dict[str, Any]
    env_config: dict[str, Any]
    client_kwargs: dict[str, Any]
    sampling: dict[str, Any]
    concurrency: int
    index: int = 0
    count: int = 1
    sys_path: list[str] = field(default_factory=list)
    rollouts_per_example: int = 1
    episodes: EpisodesSource | None = None
    episodes_config: dict[str, Any] | None = None
    group_jobs: bool = False
    call_log: tuple[str, str] | None = None

    @property
    def capacity(self) -> int:
        """Jobs a worker holds at once: its concurrency plus a small prefetch, or, for group
        jobs, as many groups as its concurrency fills (each holds its members' sandboxes)."""
        if self.group_jobs:
            return max(1, -(-self.concurrency // self.rollouts_per_example))
        return self.concurrency + prefetch(self.concurrency)


def split_evenly(total: int, parts: int) -> list[int]:
    """`total` split into `parts` integers differing by at most one (largest first)."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def check_workers(workers: Any, concurrency: int) -> int:
    """Validate `workers` against `concurrency`; warn (RuntimeWarning) above the CPU count."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ConfigError(f"workers must be an integer >= 1, got {workers!r}")
    if workers > concurrency:
        raise ConfigError(
            f"workers={workers} is more than concurrency={concurrency}: concurrency is the total "
            f"across workers, so each needs at least 1; raise concurrency or lower workers"
        )
    cpus = os.cpu_count() or 1
    if workers > cpus:
        import warnings

        warnings.warn(
            f"workers={workers} is more than the {cpus} CPUs here; they will share CPUs "
            f"(allowed, but {cpus} is usually as fast)",
            RuntimeWarning,
            stacklevel=3,
        )
    return workers


def worker_specs(
    env: EnvironmentProtocol,
    client: Any,
    *,
    workers: int,
    concurrency: int,
    sampling: Mapping[str, Any] | None,
    rollouts_per_example: int = 1,
    episodes: Episodes | None = None,
) -> list[WorkerSpec]:
    """One WorkerSpec per worker, read from an environment built from a spec and a harness Client
    (and the run's episodes, rebuilt in each worker from their source)."""
    source = env.source if isinstance(env, Reloadable) else None
    if source is None:
        raise ConfigError(
            f"workers>1 needs an environment built from a spec, so each worker can load its own; "
            f"{type(env).__name__} {env.name!r} was built directly (no source). Load it "
            f"with envs.load_environment('name' | 'path.py' | 'module:function', ...), or use workers=1"
        )
    replica = getattr(client, "replica_kwargs", None)
    if not callable(replica):
        raise ConfigError(
            f"workers>1 needs a harness.Client (each worker builds its own), got {type(client).__name__}"
        )
    if episodes is not None and episodes.source is None:
        raise ConfigError(
            f"workers>1 rebuilds the run's episodes in each worker, and {episodes!r} cannot be rebuilt "
            "(an agent given as an object, not by name): give the agent by name, or use workers=1"
        )
    base = WorkerSpec(
        source=source,
        env_overrides={"max_turns": env.max_turns, "sampling": dict(env.sampling)},
        env_config=jsonable(env.config()),
        client_kwargs=replica(),
        sampling=dict(sampling or {}),
        concurrency=1,
        count=workers,
        sys_path=list(sys.path),
        rollouts_per_example=rollouts_per_example,
        episodes=episodes.source if episodes is not None else None,
        episodes_config=jsonable(episodes.config()) if episodes is not None else None,
        group_jobs=plays_groups(env, episodes),
    )
    return [
        WorkerSpec(**{**base.__dict__, "concurrency": share, "index": i})
        for i, share in enumerate(split_evenly(concurrency, workers))
    ]


# ---------------------------------------------------------------------------------------------
# the worker side (the same for a subprocess and a Ray actor)


def peak_rss_mib() -> float:
    """This process's peak resident set size, MiB.

    Read from /proc (VmHWM) where there is one: `ru_maxrss` survives exec, so a worker would
    report the driver's peak from before it was started.
    """
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


class WorkerRuntime:
    """A worker's environment, client and episodes: loads them once, then runs one job per call."""

    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self.env: Any = None
        self.client: Any = None
        self.episodes: Episodes | None = None
        self.rollouts = 0
        self.calls: CallLog | None = None
        self._limit: asyncio.Semaphore | None = None

    def load(self) -> None:
        """Build the environment and client; raise WorkerError saying why when it cannot."""
        spec = self.spec
        for entry in reversed(spec.sys_path):
            if entry not in sys.path:
                sys.path.insert(0, entry)
        Client.set_concurrency_share(spec.index, spec.count)
        try:
            env = spec.source.load(worker=True)
        except Exception as exc:
            raise WorkerError(
                f"worker {spec.index} cannot load environment '{spec.source}': {type(exc).__name__}: {exc}"
            ) from exc
        for name, value in spec.env_overrides.items():
            setattr(env, name, value)
        config = jsonable(env.config())
        if config != spec.env_config:
            changed = sorted(
                k for k in set(config) | set(spec.env_config) if config.get(k) != spec.env_config.get(k)
            )
            raise WorkerError(
                f"worker {spec.index} loaded '{spec.source}' but got a different environment than the "
                f"driver's (differs in: {', '.join(changed)}); an environment changed after loading cannot "
                f"run in workers: put the change in its load_environment arguments, or use workers=1"
            )
        self.episodes = self._load_episodes()
        self.env, self.client = env, Client(**spec.client_kwargs)
        if spec.call_log is not None:
            self.calls = CallLog.join(spec.call_log)

    def _load_episodes(self) -> Episodes | None:
        """The run's episodes, built from their source and checked against the driver's."""
        spec = self.spec
        if spec.episodes is None:
            return None
        try:
            episodes = spec.episodes.load()
        except Exception as exc:
            raise WorkerError(
                f"worker {spec.index} cannot build the run's episodes {spec.episodes!r}: {type(exc).__name__}: {exc}"
            ) from exc
        config = jsonable(episodes.config())
        if config != spec.episodes_config:
            raise WorkerError(
                f"worker {spec.index} built the run's episodes with different settings than the driver's "
                f"({config} against {spec.episodes_config}); give the agent by name, or use workers=1"
            )
        episodes.plan(spec.rollouts_per_example)
        return episodes

    async def run(self, example: Mapping[str, Any], indices: tuple[int, ...]) -> list[Rollout]:
        """One job: a rollout, or a group played and scored together (at most
        `spec.concurrency` rollouts at once); never raises for a failed episode."""
        if self._limit is None:
            self._limit = asyncio.Semaphore(self.spec.concurrency)
        logging_calls = CALL_LOG.set(self.calls)  # this job's episodes append to the run's log
        try:
            results = await self._play(example, indices)
        finally:
            CALL_LOG.reset(logging_calls)
        self.rollouts += len(results)
        return results

    async def _play(self, example: Mapping[str, Any], indices: tuple[int, ...]) -> list[Rollout]:
        assert self._limit is not None
        if self.spec.group_jobs:
            results = await rollout_group(
                self.env,
                self.client,
                example,
                indices,
                sampling=self.spec.sampling,
                episodes=self.episodes,
                limit=self._limit,
            )
        else:
            (index,) = indices
            async with self._limit:
                results = [
                    await rollout(
                        self.env,
                        self.client,
                        example,
                        index,
                        sampling=self.spec.sampling,
                        score=not scores_groups(self.env),  # the driver scores whole groups
                        episodes=self.episodes,
                    )
                ]
        return results

    async def close(self) -> dict[str, Any]:
        """Close the HTTP pool, the episodes' sandboxes and what the environment holds; return
        this worker's report."""
        if self.client is not None:
            await self.client.aclose()
        if self.episodes is not None:
            await self.episodes.close()
        if isinstance(self.env, HoldsResources):
            await self.env.release()
        if self.calls is not None:
            self.calls.close()
        return self.report()

    def report(self) -> dict[str, Any]:
        return {
            "index": self.spec.index,
            "pid": os.getpid(),
            "rollouts": self.rollouts,
            "concurrency": self.spec.concurrency,
            "peak_rss_mib": round(peak_rss_mib(), 1),
            "cpu_seconds": round(time.process_time(), 2),
            "imported_datasets": "datasets" in sys.modules,
            "calls_logged": self.calls is not None,
        }


def sendable(results: list[Rollout]) -> list[Rollout]:
    """`results` with each rollout that cannot be pickled replaced by `unsendable`'s copy."""
    out = []
    for result in results:
        try:
            pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            result = unsendable(result, exc)
        out.append(result)
    return out


def unsendable(result: Rollout, exc: Exception) -> Rollout:
    """The rollout with its `state` replaced by its repr and the reason recorded, for a rollout
    whose state cannot leave the worker (the run goes on; the failure is on the rollout)."""
    copy = result.model_copy(update={"state": {"unsendable_state": repr(result.state)[:2000]}})
    copy.error = f"worker could not send the rollout: {describe_error(exc)}"
    copy.stop_reason = "error"
    return copy


# ---------------------------------------------------------------------------------------------
# local workers: subprocesses speaking length-prefixed pickle frames on stdin/stdout


def _frame(message: Any) -> bytes:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _FRAME.pack(len(data)) + data


async def _read_frame(reader: asyncio.StreamReader) -> Any:
    (size,) = _FRAME.unpack(await reader.readexactly(_FRAME.size))
    return pickle.loads(await reader.readexactly(size))


class ProcessWorker:
    """A worker subprocess (`python -m harness._engine.executors.workers`), driven over its stdin/stdout."""

    def __init__(self, spec: WorkerSpec) -> None:
        self.spec = spec
        self.index = spec.index
        self.capacity = spec.capacity
        self._proc: asyncio.subprocess.Process | None = None
        self._futures: dict[int, asyncio.Future[list[Rollout]]] = {}
        self._reader: asyncio.Task[None] | None = None
        self._bye: asyncio.Future[dict[str, Any]] | None = None

    async def start(self) -> None:
        self._proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "harness._engine.executors.workers",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            limit=2**26,
        )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        self._proc.stdin.write(_frame(("init", self.spec)))
        try:
            kind, value = await asyncio.wait_for(_read_frame(self._proc.stdout), START_TIMEOUT)
        except (asyncio.IncompleteReadError, TimeoutError, ConnectionError) as exc:
            self.kill()
            code = self._proc.returncode
            raise WorkerError(
                f"worker {self.index} did not start ({type(exc).__name__}; exit code {code}); "
                f"see its messages above"
            ) from None
        if kind == "error":
            self.kill()
            raise WorkerError(value)
        self._bye = asyncio.get_running_loop().create_future()
        self._reader = asyncio.create_task(self._read_results())

    async def _read_results(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None and self._bye is not None
        try:
            while True:
                kind, job_id, value = await _read_frame(self._proc.stdout)
                if kind == "bye":
                    self._bye.set_result(value)
                    return
                future = self._futures.pop(job_id, None)
                if future is not None and not future.done():
                    future.set_result(value)
        except (asyncio.IncompleteReadError, ConnectionError, pickle.UnpicklingError, EOFError):
            pass
        finally:  # the worker is gone (or being killed): its unfinished jobs go elsewhere
            for future in self._futures.values():
                if not future.done():
                    future.set_exception(WorkerLost(f"worker {self.index} exited"))
            self._futures.clear()
            if not self._bye.done():
                self._bye.set_result({"index": self.index, "pid": self.pid, "lost": True})

    async def run(self, job_id: int, example: Mapping[str, Any], indices: tuple[int, ...]) -> list[Rollout]:
        assert self._proc is not None and self._proc.stdin is not None and self._reader is not None
        if self._reader.done():
            raise WorkerLost(f"worker {self.index} exited")
        future = asyncio.get_running_loop().create_future()
        self._futures[job_id] = future
        try:
            self._proc.stdin.write(_frame(("job", job_id, (dict(example), indices))))
            await self._proc.stdin.drain()
        except (ConnectionError, RuntimeError) as exc:
            self._futures.pop(job_id, None)
            raise WorkerLost(f"worker {self.index}: {exc}") from None
        return await future

    async def stop(self) -> dict[str, Any]:
        assert self._proc is not None and self._proc.stdin is not None and self._bye is not None
        try:
            self._proc.stdin.write(_frame(("stop", None, None)))
            await self._proc.stdin.drain()
            report = await asyncio.wait_for(asyncio.shield(self._bye), STOP_TIMEOUT)
            await asyncio.wait_for(self._proc.wait(), STOP_TIMEOUT)
        except (ConnectionError, TimeoutError):
            report = {"index": self.index, "pid": self._proc.pid, "lost": True}
        finally:
            self.kill()
        return report

    def kill(self) -> None:
        if self._proc is not None and self._proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._proc.kill()
        if self._reader is not None and not self._reader.done():
            self._reader.cancel()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None


def logging_to(specs: Sequence[WorkerSpec], call_log: tuple[str, str] | None) -> list[WorkerSpec]:
    """The specs with the run's call log (known once the run is open) to append to."""
    return [dataclasses.replace(spec, call_log=call_log) for spec in specs]


async def run_local(
    specs: Sequence[WorkerSpec],
    jobs: Sequence[Job],
    finished: Callable[[Rollout], None],
    call_log: tuple[str, str] | None = None,
) -> PoolReport:
    """`run_jobs` on one local worker subprocess per spec, appending to the run's call log."""
    handles = [ProcessWorker(spec) for spec in logging_to(specs, call_log)]
    try:
        return await run_jobs(handles, jobs, finished)
    finally:
        for handle in handles:
            handle.kill()
            if handle._proc is not None:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(handle._proc.wait(), STOP_TIMEOUT)


# -- the subprocess's main ----------------------------------------------------------------------


def _protocol_pipes() -> tuple[int, int]:
    """Move the protocol to private descriptors: stdout becomes stderr, so a print() in user
    code (the environment, a tool, a reward function) can never corrupt a frame."""
    read_fd, write_fd = os.dup(0), os.dup(1)
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(2, 1)
    return read_fd, write_fd


async def _worker_main(read_fd: int, write_fd: int) -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=2**26)
    pipe, _ = await loop.connect_read_pipe(
        lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb")
    )
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, os.fdopen(write_fd, "wb")
    )
    writer = asyncio.StreamWriter(transport, protocol, None, loop)

    _, spec = await _read_frame(reader)
    runtime = WorkerRuntime(spec)
    try:
        runtime.load()
    except Exception as exc:
        writer.write(_frame(("error", str(exc) if isinstance(exc, WorkerError) else repr(exc))))
        await writer.drain()
        pipe.close()
        return
    writer.write(_frame(("ready", os.getpid())))

    async def one(job_id: int, example: Mapping[str, Any], indices: tuple[int, ...]) -> None:
        results = await runtime.run(example, indices)
        try:
            frame = _frame(("done", job_id, results))
        except Exception:  # e.g. an object in rollout.state that cannot be pickled
            frame = _frame(("done", job_id, sendable(results)))
        writer.write(frame)
        await writer.drain()

    tasks: set[asyncio.Task[None]] = set()
    try:
        while True:
            kind, job_id, payload = await _read_frame(reader)
            if kind == "stop":
                break
            task = asyncio.create_task(one(job_id, *payload))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
    except asyncio.IncompleteReadError:  # the driver is gone: stop at once
        for task in tasks:
            task.cancel()
        pipe.close()
        return
    pipe.close()  # "stop" was the last frame; closed here, it is not left to the garbage collector
    await asyncio.gather(*tasks)
    report = await runtime.close()
    writer.write(_frame(("bye", None, report)))
    await writer.drain()
    writer.close()


def _driver_stops_us(signum: int, frame: FrameType | None) -> None:
    """A stop signal reached a worker: nothing to do, the driver ends the workers."""


def main() -> None:
    """Entry point of a worker subprocess (`python -m harness._engine.executors.workers`); the driver starts it."""
    # Ctrl-C, SIGTERM and SIGHUP sent to the whole process group (a terminal, `timeout`, Slurm)
    # reach the driver too, which stops us (and a driver that dies closes our stdin). A no-op
    # handler, not SIG_IGN: an ignored signal stays ignored in what we start (tools, servers).
    for sig in (signal.SIGINT, *STOP_SIGNALS):
        signal.signal(sig, _driver_stops_us)
    read_fd, write_fd = _protocol_pipes()
    asyncio.run(_worker_main(read_fd, write_fd))


if __name__ == "__main__":
    main()


__all__ = [
    "ProcessWorker",
    "WorkerRuntime",
    "WorkerSpec",
    "check_workers",
    "run_local",
    "sendable",
    "worker_specs",
]
