"""The server supervisor (harness/_core/child.py) run for real: what it leaves behind on each exit path."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness._core.child import wrap
from tests.helpers.processes import processes_with

pytestmark = [pytest.mark.timeout(60), pytest.mark.slow]

# A server that starts a sleeper with MARKER on its command line, then lives on (or exits with
# 3 after `crash`). `daemon`: the sleeper double-forks into a session of its own (its parent
# exits at once), so it is an orphan outside the server's process group.
SERVER = """
import os, subprocess, sys, time
marker, how, then = sys.argv[1:4]
sleeper = [sys.executable, "-c", "import time; time.sleep(300)", marker]
if how == "daemon":
    spawn = "import subprocess, sys; subprocess.Popen(sys.argv[1:], start_new_session=True)"
    subprocess.run([sys.executable, "-c", spawn, *sleeper], check=True)
else:
    subprocess.Popen(sleeper, start_new_session=how == "setsid")
print("started", flush=True)
if then == "crash":
    os._exit(3)
time.sleep(300)
"""


@pytest.mark.parametrize("how", ["group", "setsid", "daemon"])
@pytest.mark.parametrize("then", ["crash", "stop"])
def test_nothing_the_server_started_outlives_the_supervisor(how: str, then: str, tmp_path: Path) -> None:
    marker = f"rubric-child-test-{os.getpid()}-{how}-{then}"
    command = wrap([sys.executable, "-c", SERVER, marker, how, then])
    supervisor = subprocess.Popen(command, stdout=subprocess.PIPE, start_new_session=True)
    try:
        assert supervisor.stdout is not None and supervisor.stdout.readline() == b"started\n"
        deadline = time.monotonic() + 10
        while not processes_with(marker):
            assert time.monotonic() < deadline, "the sleeper never started"
            time.sleep(0.05)
        if then == "stop":
            supervisor.send_signal(signal.SIGTERM)  # as the MCP SDK stops a stdio server
        started = time.monotonic()
        code = supervisor.wait(15)
        assert processes_with(marker) == []
        if then == "crash":
            assert code == 3  # the server's own exit code
        else:  # within the SDK's 2 s between its SIGTERM and its SIGKILL of the supervisor
            assert time.monotonic() - started < 2
    finally:
        for pid in processes_with(marker):  # the old supervisor: do not leave them behind after the failure
            os.kill(pid, signal.SIGKILL)
        supervisor.kill()
        supervisor.wait()
        assert supervisor.stdout is not None
        supervisor.stdout.close()
