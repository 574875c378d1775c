"""Where a plain `def` tool runs: a worker thread, or inline on the event loop once proven fast.

Why: a worker-thread hop per call (executor queue, a thread waking, the GIL changing hands,
a wake-up of the loop) costs more than a typical tool such as `add(a, b)` itself. On a busy
loop running hundreds of rollouts that hop was most of the harness's own overhead. Running a
call inline is free, but a call that blocks inline stalls every rollout sharing the loop, and
a call that hangs inline cannot be abandoned (a thread can be left behind; the loop cannot).

The rule for `blocking=None` (the default; `blocking=True` pins a tool to the thread pool,
`blocking=False` runs it inline always). A call is *slow* when it takes longer than
`INLINE_MAX_SECONDS` of wall time.

1. A new sync tool runs in the thread pool and every call is timed ("measuring"): unknown
   code is never trusted with the loop, so its first calls may block or hang safely.
2. Once its last `PROMOTE_AFTER_CALLS` calls were all fast, it runs inline, still timed.
3. `PIN_AFTER_SLOW_CALLS` slow calls within `SLOW_WINDOW` consecutive calls, or one call that
   runs past its timeout, put it in the thread pool for good.

Why several slow calls and not one: on a loaded machine a call of microseconds is sometimes
measured at milliseconds (the thread was preempted, waited for the GIL, or was charged for
interrupt work), and one such accident must not undo the fast path for the rest of a run.
The price: a proven-fast tool that turns slow stalls the loop at most that many times, each
for that call's duration, before it leaves. A tool slow from the start never runs inline.

The trade-off that remains: a proven-fast tool that later hangs inline blocks its event loop
until it returns, and no timeout can interrupt it. `_Watchdog` (a daemon thread) notices an
inline call running past its tool's timeout, logs a warning naming the tool and moves it to
the thread pool; when the call returns, its result is replaced by the usual timeout failure.
Tools that may wait on I/O, locks or other processes should say `blocking=True`.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal

INLINE_MAX_SECONDS: float = 0.001
"""A sync tool whose calls each finish within this many seconds may run on the event loop."""

PROMOTE_AFTER_CALLS: int = 8
"""Fast calls in a row (timed in a worker thread) before an adaptive sync tool runs inline."""

PIN_AFTER_SLOW_CALLS: int = 3
"""Slow calls within `SLOW_WINDOW` calls that put a sync tool in the thread pool for good."""

SLOW_WINDOW: int = 100
"""The span of consecutive calls over which slow calls are counted."""

MAX_TOOL_THREADS: int = 64
"""Threads for sync tools. asyncio's default pool is min(32, cpus + 4) threads, which on a
small machine would let a handful of slow sync tools stall every concurrent rollout."""

WATCHDOG_INTERVAL: float = 0.25
"""Seconds between the watchdog's looks at inline calls."""

Where = Literal["thread", "inline", "measuring"]

_log = logging.getLogger("envs._tools.functions")
_executor: ThreadPoolExecutor | None = None
_executor_lock = threading.Lock()


def thread_pool() -> ThreadPoolExecutor:
    """The process-wide pool that runs sync tools off the event loop (created on first use)."""
    global _executor
    if _executor is None:
        with _executor_lock:
            if _executor is None:
                _executor = ThreadPoolExecutor(max_workers=MAX_TOOL_THREADS, thread_name_prefix="rubric-tool")
    return _executor


class Placement:
    """Where one sync tool's calls run, learned from timing them (thread-safe).

    Args:
        name: The tool's name, for log messages.
        blocking: True pins the tool to the thread pool, False runs it inline always,
            None (adaptive) decides from timed calls by the rule in the module docstring.
    """

    def __init__(self, name: str, blocking: bool | None) -> None:
        self.name = name
        self.blocking = blocking
        self.where: Where = "measuring" if blocking is None else ("thread" if blocking else "inline")
        self.calls = 0
        self.fast_streak = 0
        self._slow_calls: deque[int] = deque(maxlen=PIN_AFTER_SLOW_CALLS)  # their call numbers
        self._lock = threading.Lock()

    def __getstate__(self) -> dict[str, Any]:
        # A lock cannot be copied or pickled; a copied Tool gets its own (copy.deepcopy(tool)).
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.Lock()

    def observe(self, seconds: float) -> None:
        """Count one timed call of an adaptive tool; move the tool when the rule says so."""
        with self._lock:
            self.calls += 1
            if seconds <= INLINE_MAX_SECONDS:
                self.fast_streak += 1
                if self.where == "measuring" and self.fast_streak >= PROMOTE_AFTER_CALLS:
                    self._move(
                        "inline", f"{self.fast_streak} calls in a row took under {INLINE_MAX_SECONDS:g} s"
                    )
                return
            self.fast_streak = 0
            self._slow_calls.append(self.calls)
            if (
                len(self._slow_calls) == PIN_AFTER_SLOW_CALLS
                and self.calls - self._slow_calls[0] < SLOW_WINDOW
            ):
                self._move(
                    "thread", f"{PIN_AFTER_SLOW_CALLS} of its last calls took over {INLINE_MAX_SECONDS:g} s"
                )

    def demote(self, why: str) -> None:
        """Move an adaptive tool to the thread pool for good (an explicit `blocking=` is kept)."""
        if self.blocking is None:
            with self._lock:
                self._move("thread", why)

    def _move(self, where: Where, why: str) -> None:
        if self.where != where and self.where != "thread":  # "thread" is for good
            _log.debug(
                "tool %r now runs %s: %s", self.name, "inline" if where == "inline" else "in a thread", why
            )
            self.where = where

    def run_measured(self, fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        """Call `fn` in the current (worker) thread, timed unless the tool's place is settled."""
        if self.where == "thread":
            return fn(*args, **kwargs)
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            self.observe(time.perf_counter() - started)

    def run_inline(
        self, fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any], timeout: float | None
    ) -> Any:
        """Call `fn` on the event loop's thread, timed, under the watchdog's eye.

        Raises:
            CallTimedOut: the call returned (or raised) after `timeout` seconds. Its outcome is
                dropped, as a thread's late result would be, so a timeout reads the same everywhere.
        """
        started = _watchdog.begin(self, timeout)
        try:
            value = fn(*args, **kwargs)
        except BaseException as exc:
            overran = self._finish_inline(started, timeout)
            if overran and isinstance(exc, Exception):
                raise CallTimedOut from exc
            raise
        if self._finish_inline(started, timeout):
            raise CallTimedOut
        return value

    def _finish_inline(self, started: float, timeout: float | None) -> bool:
        """Record an inline call's end and its timing. True if it ran past `timeout`."""
        seconds = time.perf_counter() - started
        _watchdog.end()
        if self.blocking is None:
            self.observe(seconds)
        return timeout is not None and seconds > timeout


class CallTimedOut(Exception):
    """A tool call ran past its timeout (abandoned in a thread, or finished late inline)."""


class _Watchdog:
    """A daemon thread that notices an inline tool call blocking its loop past the tool's timeout.

    It cannot stop the call (nothing can, short of killing the process); it logs a warning
    naming the tool and moves it to the thread pool, so the user learns why the run froze and
    later calls are safe. `begin`/`end` are a dict store and pop: cheap enough for every call.
    """

    def __init__(self) -> None:
        self._calls: dict[int, tuple[Placement, float, float]] = {}  # thread id -> call
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def begin(self, placement: Placement, timeout: float | None) -> float:
        started = time.perf_counter()
        if timeout is not None:
            if self._thread is None:
                self._start()
            self._calls[threading.get_ident()] = (placement, started, timeout)
        return started

    def end(self) -> None:
        self._calls.pop(threading.get_ident(), None)

    def _start(self) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="rubric-tool-watchdog", daemon=True)
                self._thread.start()

    def _watch(self) -> None:
        warned: set[tuple[Placement, float, float]] = set()
        while True:
            time.sleep(WATCHDOG_INTERVAL)
            now = time.perf_counter()
            running = set(self._calls.values())  # one C-level copy under the GIL: no lock needed
            warned &= running
            for call in running - warned:
                placement, started, timeout = call
                if now - started > timeout:
                    warned.add(call)
                    self._report(placement, now - started, timeout)

    @staticmethod
    def _report(placement: Placement, seconds: float, timeout: float) -> None:
        keep = " (blocking=False keeps it there)" if placement.blocking is False else ""
        _log.warning(
            "tool %r has blocked the event loop for %.1f s, past its %g s timeout: every rollout on "
            "this loop waits until it returns, and then its result is reported as a timeout%s. "
            "A call running inline cannot be abandoned; give a tool that can hang blocking=True "
            "(envs.tool(fn, blocking=True)) so it always runs in a worker thread.",
            placement.name,
            seconds,
            timeout,
            keep,
        )
        placement.demote(f"a call blocked the event loop past its {timeout:g} s timeout")

    def _reset_after_fork(self) -> None:
        self._calls = {}
        self._thread = None
        self._lock = threading.Lock()


_watchdog = _Watchdog()


def _reset_after_fork() -> None:
    # A forked child inherits these objects but not their threads: start afresh on first use.
    global _executor, _executor_lock
    _executor, _executor_lock = None, threading.Lock()
    _watchdog._reset_after_fork()


os.register_at_fork(after_in_child=_reset_after_fork)
