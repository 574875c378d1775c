"""Nothing outlives a SIGKILLed run: the scripted endpoint's child process dies with its parent."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow]

REPO = Path(__file__).resolve().parents[3]


def _alive(pid: int) -> bool:
    try:
        return "State:\tZ" not in Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False


def test_scripted_endpoint_child_dies_with_a_sigkilled_parent() -> None:
    script = textwrap.dedent(
        """
        import time
        from harness.scripted._endpoint import ScriptedEndpoint
        endpoint = ScriptedEndpoint(lambda messages, tools: "ok", process=True).start()
        print(endpoint._child.pid, flush=True)
        time.sleep(60)
        """
    )
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert _alive(child)
    finally:
        os.kill(parent.pid, signal.SIGKILL)
        parent.communicate(timeout=5)  # waits, and closes its pipe
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not _alive(child), "the scripted endpoint outlived its SIGKILLed parent"
