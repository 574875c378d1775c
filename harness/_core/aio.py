"""Async core, sync face: run a coroutine to completion from synchronous code.

Every sync entry point (`rubric(x)`, `env.evaluate(...)`) funnels through `run_sync`. The
coroutine always runs on one long-lived background event loop, so it works the same in a
script and inside Jupyter's already-running loop, and objects bound to a loop (HTTP
connection pools) stay valid across calls. While the main thread waits there, SIGTERM (what
Slurm and Kubernetes send) and SIGHUP (a closed terminal) stop the work as Ctrl-C does
(`Stopped`), so a run still ends with its status and summary.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import inspect
import os
import signal
import socket
import threading
import urllib.parse
from collections.abc import Awaitable, Callable, Coroutine, Iterator
from types import FrameType
from typing import Any, TypeVar

T = TypeVar("T")

CANCEL_GRACE_SECONDS = 10.0
STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)

_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None
_lock = threading.Lock()
_BLOCKED_LOOP: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar(
    "rubric_blocked_loop", default=None
)


def _background_loop() -> asyncio.AbstractEventLoop:
    global _loop, _thread
    with _lock:
        if _loop is None or _loop.is_closed() or _thread is None or not _thread.is_alive():
            loop = asyncio.new_event_loop()
            thread = threading.Thread(target=loop.run_forever, name="rubric-sync-loop", daemon=True)
            thread.start()
            _loop, _thread = loop, thread
        return _loop


class Stopped(KeyboardInterrupt):
    """The process was told to stop by a signal (SIGTERM, SIGHUP) while `run_sync` waited.

    A KeyboardInterrupt, so everything that handles Ctrl-C (cancelling the work, recording an
    "interrupted" run with its summary, ending worker processes) handles it the same way.

    Args:
        signum: The signal's number (`signal.SIGTERM`, `signal.SIGHUP`).
    """

    def __init__(self, signum: int) -> None:
        super().__init__(f"stopped by {signal.Signals(signum).name}")
        self.signum = signum


class _StopSignals:
    """SIGTERM and SIGHUP turned into `Stopped` in the main thread, once `arm()` is called.

    Only signals left at their default (which would end the process with no cleanup) are
    taken: a handler of the caller's own, or SIGHUP ignored under `nohup`, stays in charge.
    The handlers are installed before the work is scheduled, so no signal finds the default
    action (death) in between; one that arrives before `arm()` is held, and `arm()` raises it,
    where the caller can cancel the work. The first signal raises; later ones are ignored, so
    the cleanup gets its grace (Slurm and Kubernetes send SIGKILL after theirs; `timeout`
    signals the process and then its group).
    """

    def __init__(self) -> None:
        self.received: int | None = None
        self.armed = False
        self.owner = os.getpid()

    def handle(self, signum: int, frame: FrameType | None) -> None:
        if os.getpid() != self.owner:  # a child forked meanwhile (multiprocessing) ends as by default
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
            return
        if self.received is None:
            self.received = signum
            if self.armed:
                raise Stopped(signum)

    def arm(self) -> None:
        """From here on a signal raises `Stopped`; one that came earlier raises it now."""
        self.armed = True
        # A signal handled between the line above and this check has raised already (received
        # was None when it came); one handled before the line above is raised here.
        if self.received is not None:
            raise Stopped(self.received)


@contextlib.contextmanager
def _stop_signals_interrupt() -> Iterator[_StopSignals]:
    """While the block runs, SIGTERM and SIGHUP left at their default are taken (`_StopSignals`);
    the block calls `arm()` once the work it may cancel is scheduled."""
    stop = _StopSignals()
    if threading.current_thread() is not threading.main_thread():
        yield stop  # only the main thread can set handlers (and receives the signals)
        return
    taken = [sig for sig in STOP_SIGNALS if signal.getsignal(sig) is signal.SIG_DFL]
    for sig in taken:
        signal.signal(sig, stop.handle)
    try:
        yield stop
    finally:
        for sig in taken:
            signal.signal(sig, signal.SIG_DFL)


def run_sync(coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` and return its result, whether or not this thread already runs a loop.

    Called from the background loop's own thread (a sync call nested inside async code
    that is itself running there) it would deadlock, so that case raises instead.

    Args:
        coro: The coroutine to run to completion.

    Returns:
        What `coro` returned.

    Raises:
        RuntimeError: Called from the background loop's own thread.
    """
    loop = _background_loop()
    if threading.current_thread() is _thread:
        coro.close()
        raise RuntimeError(
            "a synchronous rubric/environment call was made from inside rubric's own event loop; "
            "use the async form (await .ascore(...) / .aevaluate(...)) there"
        )
    finished = threading.Event()

    async def tracked() -> T:
        try:
            return await coro
        finally:
            finished.set()

    # The work runs in a copy of this thread's context (run_coroutine_threadsafe keeps it):
    # a loop this call blocks (Jupyter's) is recorded there, so a client can tell at once
    # that its server is on that loop and would never answer (see `blocked_loop_serves`).
    try:
        caller: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
    except RuntimeError:
        caller = None
    # The stop signals are taken before the work is scheduled: work that starts at once (and
    # signals, or is signalled) must not find the default action, which kills the process.
    with _stop_signals_interrupt() as stop:
        token = _BLOCKED_LOOP.set(caller)
        try:
            future = asyncio.run_coroutine_threadsafe(tracked(), loop)
        finally:
            _BLOCKED_LOOP.reset(token)
        try:
            stop.arm()
            return future.result()
        except KeyboardInterrupt:  # Ctrl-C, or Stopped (SIGTERM, SIGHUP)
            # It lands in this thread; cancel the work and give its cleanup (closing files,
            # writing an "interrupted" status) a bounded moment before the interrupt propagates.
            future.cancel()
            finished.wait(timeout=CANCEL_GRACE_SECONDS)
            raise


def blocked_loop_serves(url: str) -> bool:
    """True when `url`'s loopback port is listened on by the event loop that the current
    synchronous call (`run_sync`) is blocking: a request there would wait forever, e.g. a sync
    `judge(x)` in Jupyter against a server started on the notebook's own loop."""
    loop = _BLOCKED_LOOP.get()
    if loop is None:
        return False
    parsed = urllib.parse.urlsplit(url)
    if parsed.hostname not in {"127.0.0.1", "localhost", "::1", "0.0.0.0"}:
        return False
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    selector = getattr(loop, "_selector", None)  # selector loops (the default on Linux/macOS)
    if selector is None:
        return False
    for key in list(selector.get_map().values()):
        if _is_listening_on(key.fd, port):
            return True
    return False


def _is_listening_on(fd: int, port: int) -> bool:
    try:
        copy = os.dup(fd)
    except OSError:
        return False
    try:
        sock = socket.socket(fileno=copy)
    except OSError:  # not a socket (a pipe, an eventfd): close the copy, or its peer never sees EOF
        os.close(copy)
        return False
    with sock:
        try:
            listening = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ACCEPTCONN)
            return bool(listening) and sock.getsockname()[1] == port
        except (OSError, IndexError, TypeError):
            return False


async def maybe_await(value: T | Awaitable[T]) -> T:
    """Await `value` if it is awaitable, else return it: lets hooks and leaves be sync or async."""
    if inspect.isawaitable(value):
        return await value
    return value


def is_async_callable(fn: Callable[..., Any]) -> bool:
    """True for `async def` functions and objects whose `__call__` is `async def`."""
    while hasattr(fn, "func") and not inspect.isfunction(fn):  # functools.partial
        fn = fn.func
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(getattr(fn, "__call__", None))


async def unreachable(base_url: str, timeout: float = 5.0) -> str | None:
    """Why nothing answers at `base_url`'s host and port (a TCP connect), or None when it does."""
    parts = urllib.parse.urlsplit(base_url)
    if not parts.hostname:
        return f"{base_url!r} has no host"
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        _, writer = await asyncio.wait_for(asyncio.open_connection(parts.hostname, port), timeout)
    except (OSError, TimeoutError) as exc:
        return f"{type(exc).__name__}: {exc.strerror if isinstance(exc, OSError) and exc.strerror else exc}"
    writer.close()
    with contextlib.suppress(OSError):
        await writer.wait_closed()
    return None


__all__ = [
    "STOP_SIGNALS",
    "Stopped",
    "blocked_loop_serves",
    "is_async_callable",
    "maybe_await",
    "run_sync",
    "unreachable",
]
