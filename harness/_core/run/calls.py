"""A run's model-call log: `calls.jsonl`, each agent model call appended as it completes.

`results.jsonl` gets a rollout when its episode has been played and scored; an episode in
flight when the driver is SIGKILLed, or its node preempted, would lose every call it made. So
the run also appends each finished call of an agent episode (through the capture proxy) to
`calls.jsonl`, one line each, written by one write(2): the rollout's `example_id` and
`rollout_index`, the run session's `attempt` (a resumed run appends under a new one) and the
`ModelCall` as `rollout.model_calls` holds it. The write puts the line in the kernel's page
cache before the next call is served, so it outlives the process (not a power loss: no fsync
per call). Worker processes and Ray actors on this machine append to the same file, under the
same attempt (`CallLog.join`); O_APPEND keeps their lines whole.

Reading back: the calls of a rollout that never reached `results.jsonl` are an incomplete
episode (`incomplete_rollouts`), shown by `rubric view` and `EvalResults.incomplete`, marked
so; `--resume` plays those rollouts again, as it plays every rollout not in `results.jsonl`.
The engine opens the log for a run with an output directory and hands it to the episodes
through `CALL_LOG`, a context variable, as the scoring scope hands the sandbox to the rubric.
"""

from __future__ import annotations

import contextvars
import json
import os
import threading
import uuid
from collections.abc import Iterable
from pathlib import Path
from typing import IO, Any

from harness._core.run.storage import CALLS_FILE, open_owned, read_owned
from harness._core.types import ModelCall, Rollout

#: What marks a rollout read back from the call log: its episode never finished.
INCOMPLETE = "incomplete: the run stopped during this episode; its finished model calls are kept from calls.jsonl"  # fmt: skip


class CallLog:
    """Appends finished model calls to a run's `calls.jsonl`, one flushed line each.

    Args:
        path: The file (created with the run folder's file mode, appended to).
    """

    def __init__(self, path: Path, *, attempt: str | None = None) -> None:
        self.path = path
        self.attempt = attempt or uuid.uuid4().hex[:12]
        self._lock = threading.Lock()  # workers' threads and the event loop may both write
        fd = open_owned(path, os.O_RDWR | os.O_APPEND | (os.O_CREAT if attempt is None else 0))
        if attempt is None:  # the run's own log; a worker joining it never cuts (see `join`)
            data = os.pread(fd, os.fstat(fd).st_size, 0)
            os.ftruncate(fd, data.rfind(b"\n") + 1)  # a line torn by a kill: appends start clean
        self._handle: IO[bytes] | None = os.fdopen(fd, "ab", buffering=0)  # a line is one write(2)

    @property
    def target(self) -> tuple[str, str]:
        """What a worker process or Ray actor needs to append to this log (`join`)."""
        return str(self.path), self.attempt

    @classmethod
    def join(cls, target: tuple[str, str]) -> CallLog | None:
        """The run's log opened again from a worker process or a Ray actor, appending under the
        run's attempt. Each line is one `write` to a file opened with O_APPEND, so the lines of
        the driver's processes never interleave. None where the run folder is not on this
        machine (a Ray node without the driver's file system: its calls are then only in the
        rollouts it sends back)."""
        path, attempt = target
        try:
            return cls(Path(path), attempt=attempt)
        except FileNotFoundError:
            return None

    def write(self, example_id: int | str, rollout_index: int, call: ModelCall) -> None:
        """Append one finished call of rollout (`example_id`, `rollout_index`)."""
        head = {"example_id": example_id, "rollout_index": rollout_index, "attempt": self.attempt}
        # The call serialised once, by pydantic's own JSON writer (a dict first costs 4x).
        data = (
            json.dumps(head, separators=(",", ":"))[:-1].encode()
            + b',"call":'
            + call.model_dump_json().encode()
            + b"}\n"
        )
        with self._lock:
            if self._handle is None:
                return  # the run closed the log: a call finishing after it is in the rollout
            self._handle.write(data)  # one write(2) with O_APPEND: processes' lines never interleave

    def close(self) -> None:
        """Close the file; later writes are dropped."""
        with self._lock:
            if self._handle is not None:
                self._handle.close()
                self._handle = None


#: The log of the run being played, for the episodes to append to (None: no run folder).
CALL_LOG: contextvars.ContextVar[CallLog | None] = contextvars.ContextVar("rubric_call_log", default=None)


def read_calls(directory: Path) -> dict[tuple[int | str, int, str], list[ModelCall]]:
    """The logged calls by (example_id, rollout_index, attempt), in the order written;
    a torn last line (the writer was killed mid-line) and lines that do not parse are skipped."""
    path = directory / CALLS_FILE
    calls: dict[tuple[int | str, int, str], list[ModelCall]] = {}
    if not path.exists() and not path.is_symlink():
        return calls
    data = read_owned(path)  # never through a link (see `open_owned`)
    for raw in data[: data.rfind(b"\n") + 1].splitlines():
        if not raw.strip():
            continue
        try:
            line: dict[str, Any] = json.loads(raw)
            call = ModelCall.model_validate(line["call"])
            example_id = line["example_id"]
            key = (example_id, int(line["rollout_index"]), str(line["attempt"]))
        except (ValueError, KeyError, TypeError):
            continue
        if isinstance(example_id, (int, str)):
            calls.setdefault(key, []).append(call)
    return calls


def incomplete_rollouts(directory: Path, finished: Iterable[Rollout]) -> list[Rollout]:
    """The episodes the log has calls of and `results.jsonl` has no rollout of: each as a
    rollout holding those calls, its `error` saying it is incomplete (never scored: reward NaN).
    Of several attempts at one rollout, the last one logged."""
    done = {(r.example_id, r.rollout_index) for r in finished}
    latest: dict[tuple[int | str, int], list[ModelCall]] = {}
    for (example_id, index, _attempt), calls in read_calls(directory).items():
        if (example_id, index) not in done:
            latest[(example_id, index)] = calls  # dicts keep insertion order: the last attempt wins
    return [
        Rollout(
            example_id=example_id,
            rollout_index=index,
            model_calls=calls,
            stop_reason="incomplete",
            error=f"{INCOMPLETE} ({len(calls)} calls)",
        )
        for (example_id, index), calls in latest.items()
    ]


__all__ = ["CALLS_FILE", "CALL_LOG", "INCOMPLETE", "CallLog", "incomplete_rollouts", "read_calls"]
