"""Processes: the real `rubric` executable (`run`, `at_a_terminal`), servers in subprocesses
(`serving`, `rubric_serve`), what a test left running (`processes_with`), and `Reaped`, a
command run under a subreaper that lists every process it left behind."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from tests.helpers.endpoints import free_port

#: The installed `rubric` console script (None when the project is not installed).
RUBRIC = shutil.which("rubric")


def processes_with(marker: str) -> list[int]:
    """Live (not zombie) processes with `marker` as one word of their command line, from /proc."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue  # gone meanwhile
        if marker.encode() in words and state != "Z":
            found.append(int(entry.name))
    return found


def run(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 90
) -> subprocess.CompletedProcess[str]:
    """`rubric *args` in a subprocess, wide enough that rich does not wrap what tests read."""
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run(
        [RUBRIC or "rubric", *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout
    )


def at_a_terminal(
    *args: str, cwd: Path, answer: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`rubric *args` with a pseudo-terminal as stdin, answering its [y/N] question with `answer`."""
    leader, follower = pty.openpty()
    try:
        os.write(leader, f"{answer}\n".encode())
        return subprocess.run(
            [RUBRIC or "rubric", *args],
            cwd=cwd,
            env={**os.environ, "COLUMNS": "200", **(env or {})},
            stdin=follower,
            capture_output=True,
            text=True,
            timeout=120,
        )
    finally:
        os.close(leader)
        os.close(follower)


@dataclass
class ServerProcess:
    """A server running in a subprocess (see `serving`); `stop()` ends it and returns its stdout
    and stderr (again on later calls)."""

    proc: subprocess.Popen[str]
    output: tuple[str, str] | None = None

    def stop(self) -> tuple[str, str]:
        if self.output is None:
            self.proc.terminate()
            try:
                self.output = self.proc.communicate(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.output = self.proc.communicate(timeout=10)
        return self.output


def _listening_pids(port: int) -> set[int]:
    """The pids holding a socket that listens on TCP `port` (IPv4 or IPv6, any address)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError), open(table) as lines:
            for line in list(lines)[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:
                    inodes.add(f"socket:[{fields[9]}]")
    pids = set()
    for entry in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError):
            if any(os.readlink(f"/proc/{entry}/fd/{fd}") in inodes for fd in os.listdir(f"/proc/{entry}/fd")):
                pids.add(int(entry))
    return pids


def _process_tree(root: int) -> set[int]:
    """`root` and every process descended from it."""
    parents: dict[int, int] = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        with contextlib.suppress(OSError, IndexError, ValueError):
            stat = Path(f"/proc/{entry}/stat").read_text()
            parents[int(entry)] = int(stat.rsplit(")", 1)[1].split()[1])
    tree, grew = {root}, True
    while grew:
        grew = False
        for pid, ppid in parents.items():
            if ppid in tree and pid not in tree:
                tree.add(pid)
                grew = True
    return tree


@contextlib.contextmanager
def serving(
    command: list[str], port: int, *, env: Mapping[str, str] | None = None, timeout: float = 60
) -> Iterator[ServerProcess]:
    """`command` run as a server in a subprocess (`env` added to its environment), yielded once
    it accepts connections on 127.0.0.1:`port` (within `timeout` seconds); stopped after the block."""
    full_env = {**os.environ, **(env or {})}
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full_env)
    server = ServerProcess(proc)
    deadline = time.monotonic() + timeout
    try:
        while True:
            # Ours, not another test's: under pytest-xdist a free port can be taken by a server
            # of the other worker between `free_port()` and our server's bind.
            if _listening_pids(port) & _process_tree(proc.pid):
                break
            if server.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{command} did not start listening on {port}: {server.stop()}")
            time.sleep(0.1)
        yield server
    finally:
        server.stop()


@contextlib.contextmanager
def rubric_serve(*args: str) -> Iterator[str]:
    """`rubric serve ARGS --port P` in a subprocess; its URL once it accepts connections.

    After the block it checks that the server said where it served and logged no traceback
    (a client ending its session is no error)."""
    port = free_port()
    with serving([str(RUBRIC), "serve", *args, "--port", str(port)], port) as server:
        yield f"http://127.0.0.1:{port}"
    out, err = server.stop()
    assert f"to OpenEnv clients at http://127.0.0.1:{port}" in out
    assert "Traceback" not in err


# Runs COMMAND as a child subreaper (Linux): every process COMMAND leaves behind, even one that
# started a session of its own, is re-parented here. Prints COMMAND's pid, waits for it, gives
# what it left SETTLE seconds to go, then prints {"returncode": ..., "left": {pid: cmdline}} and
# kills what is left. Arguments: SETTLE LOGFILE COMMAND...
_SUBREAPER = """
import ctypes, json, os, signal, subprocess, sys, time
ctypes.CDLL(None, use_errno=True).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
settle, log = float(sys.argv[1]), open(sys.argv[2], "wb")
# COMMAND starts with SIGHUP and SIGINT at their defaults, as from a terminal, even when the
# suite runs under nohup or as a background job of a script (which starts with SIGINT ignored):
# an ignored signal is inherited, and rubric, as Python, rightly leaves an ignored one ignored.
signal.signal(signal.SIGHUP, signal.SIG_DFL)
signal.signal(signal.SIGINT, signal.SIG_DFL)
child = subprocess.Popen(sys.argv[3:], stdout=log, stderr=subprocess.STDOUT)
print(child.pid, flush=True)
code = child.wait()

def reap():
    while True:
        try:
            if os.waitpid(-1, os.WNOHANG)[0] == 0:
                return
        except ChildProcessError:
            return

def ours():
    found = {}
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            state, ppid = open(f"/proc/{entry}/stat").read().rsplit(")", 1)[1].split()[:2]
            cmdline = open(f"/proc/{entry}/cmdline", "rb").read().replace(b"\\0", b" ").decode()
        except OSError:
            continue
        if int(ppid) == os.getpid() and state != "Z":
            found[entry] = cmdline.strip()
    return found

deadline = time.monotonic() + settle
while ours() and time.monotonic() < deadline:
    reap()
    time.sleep(0.1)
left = ours()
for pid in left:
    os.kill(int(pid), signal.SIGKILL)
time.sleep(0.2)
reap()
print(json.dumps({"returncode": code, "left": left}), flush=True)
"""


@dataclass
class Reaped:
    """A command run under a subreaper (`Reaped.start`), so that what it leaves behind is seen.

    `pid` is the command's own pid (signal it); `finish()` waits for it and returns its exit
    code and the processes it left (pid -> command line), which are then killed.
    """

    wrapper: subprocess.Popen[str]
    pid: int
    log: Path

    @classmethod
    def start(
        cls,
        command: list[str],
        *,
        log: Path,
        cwd: Path,
        env: Mapping[str, str] | None = None,
        settle: float = 10,
    ) -> Reaped:
        wrapper = subprocess.Popen(
            [sys.executable, "-c", _SUBREAPER, str(settle), str(log), *command],
            stdout=subprocess.PIPE,
            text=True,
            cwd=cwd,
            env={**os.environ, **(env or {})},
        )
        assert wrapper.stdout is not None
        return cls(wrapper, int(wrapper.stdout.readline()), log)

    def running(self) -> bool:
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        return state != "Z"

    def finish(self, timeout: float = 120) -> tuple[int, dict[str, str]]:
        out, _ = self.wrapper.communicate(timeout=timeout)
        report = json.loads(out.strip().splitlines()[-1])
        return report["returncode"], report["left"]
