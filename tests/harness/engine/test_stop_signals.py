"""`run_sync` turns SIGTERM and SIGHUP into `Stopped` while it waits, and leaves a caller's own handling alone."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]

_SCRIPT = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from harness._core.aio import Stopped, run_sync

    sig = getattr(signal, sys.argv[1])
    mode = sys.argv[2]
    heard = []
    if mode == "default":  # as started from a shell, even when the suite runs under nohup
        signal.signal(sig, signal.SIG_DFL)
    elif mode == "own":
        signal.signal(sig, lambda signum, frame: heard.append(signum))
    elif mode == "ignored":
        signal.signal(sig, signal.SIG_IGN)

    async def signalled():
        os.kill(os.getpid(), sig)
        await asyncio.sleep(1)
        return "finished"

    try:
        print(run_sync(signalled()), heard == [sig])
    except Stopped as exc:
        print("stopped", exc.signum == sig, isinstance(exc, KeyboardInterrupt))
    print(signal.getsignal(sig) in (signal.SIG_DFL, signal.SIG_IGN) or mode == "own")
    """
)


# The work signals the process as soon as it starts, and `run_sync` is held (its scheduling call
# waits) until the signal has been sent: the signal always arrives as `run_sync` starts its work,
# the moment a signal once killed the process (it found no handler yet).
_SCRIPT_SIGNALLED_AS_IT_STARTS = textwrap.dedent(
    """
    import asyncio, os, signal, sys, threading
    from harness._core.aio import Stopped, run_sync

    sig = getattr(signal, sys.argv[1])
    signal.signal(sig, signal.SIG_DFL)
    sent = threading.Event()
    schedule = asyncio.run_coroutine_threadsafe

    def schedule_then_wait_for_the_signal(coro, loop):
        future = schedule(coro, loop)
        sent.wait()
        return future

    asyncio.run_coroutine_threadsafe = schedule_then_wait_for_the_signal

    async def signalled():
        os.kill(os.getpid(), sig)
        sent.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            print("cancelled")
            raise
        return "finished"

    try:
        print(run_sync(signalled()))
    except Stopped as exc:
        print("stopped", exc.signum == sig)
    """
)


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("default", "stopped True True\nTrue"),  # as Ctrl-C: the work is cancelled, Stopped raised
        ("own", "finished True\nTrue"),  # the caller's handler stays in charge
        ("ignored", "finished False\nTrue"),  # nohup: an ignored signal stays ignored
    ],
)
def test_stop_signals_during_run_sync(sig: str, mode: str, said: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT, sig, mode], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == said


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGHUP"])
def test_a_stop_signal_as_run_sync_starts_its_work_stops_it(sig: str) -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _SCRIPT_SIGNALLED_AS_IT_STARTS, sig],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, f"died of the signal ({proc.returncode}): {proc.stderr}"
    assert proc.stdout.split() == ["cancelled", "stopped", "True"]
