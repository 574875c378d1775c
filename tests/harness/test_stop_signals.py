"""`run_sync` turns SIGTERM and SIGHUP into `Stopped` while it waits, and leaves a caller's own handling alone."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_SCRIPT = textwrap.dedent(
    """
    import asyncio, os, signal, sys
    from harness._core.aio import Stopped, run_sync

    sig = getattr(signal, sys.argv[1])
    mode = sys.argv[2]
    heard = []
    if mode == "own":
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
