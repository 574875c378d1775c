"""Run a server command so that neither it nor anything it starts outlives the process that started it.

`python harness/_core/child.py PARENT_PID -- COMMAND [ARGS...]` (see `wrap`) starts COMMAND in a session (and
process group) of its own, sharing this process's stdin, stdout and stderr, and waits for it.
It ends COMMAND and every process it started (SIGTERM, then SIGKILL after `GRACE` seconds) when:
- COMMAND exits or crashes (its children do not stay behind it);
- PARENT_PID is gone, even after a SIGKILL, which no cleanup code of the parent can see (a
  poll of the parent pid, as `harness.scripted._endpoint` does: PR_SET_PDEATHSIG fires when the forking
  *thread* ends, and exists only on Linux);
- this process gets SIGTERM or SIGINT (the parent closing the server the ordinary way).
"Every process" is COMMAND's process group everywhere. On Linux this process is also a child
subreaper (PR_SET_CHILD_SUBREAPER): a descendant orphaned by its parent's exit becomes our
child instead of init's, so every descendant stays in our tree in /proc, even one that left
the group with `setsid()` or double-forked, and it is ended and reaped with the rest. What
escapes: a process started on COMMAND's behalf by something outside the tree (a daemon such as
dockerd or systemd, over a socket), and descendants of a supervisor that is itself SIGKILLed.
Its exit code is COMMAND's. `envs._tools.mcp` starts stdio MCP servers through it, so an `npx ...`
server and the node process it spawns both go when `rubric eval` goes.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from types import FrameType

GRACE = 1.0
"""Seconds between SIGTERM and SIGKILL. Under the MCP SDK's own stop (SIGTERM, then SIGKILL of
this supervisor 2 s later) the whole tree must be ended well before that SIGKILL."""
POLL = 0.2
_PR_SET_CHILD_SUBREAPER = 36  # linux/prctl.h


def wrap(command: Sequence[str]) -> list[str]:
    """The command line that runs `command` under this supervisor, tied to this process.

    By file path, not `-m`: a server's environment is often reduced to a few variables (the
    mcp SDK keeps HOME, PATH and the like), so PYTHONPATH may not lead to this package.
    """
    return [sys.executable, "-I", os.path.abspath(__file__), str(os.getpid()), "--", *command]


def _become_subreaper() -> bool:
    """Make orphaned descendants our children (Linux only); whether that worked."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def _descendants() -> list[int]:
    """Every live (not zombie) process below this one, from /proc (empty where there is none)."""
    children: dict[int, list[int]] = {}
    try:
        entries = [entry.name for entry in os.scandir("/proc") if entry.name.isdigit()]
    except OSError:
        return []
    for name in entries:
        try:
            with open(f"/proc/{name}/stat", encoding="utf-8", errors="replace") as stat:
                state, ppid = stat.read().rsplit(")", 1)[1].split()[:2]
        except (OSError, ValueError):
            continue  # gone meanwhile
        if state not in ("Z", "X"):
            children.setdefault(int(ppid), []).append(int(name))
    found: list[int] = []
    queue = [os.getpid()]
    while queue:
        for pid in children.get(queue.pop(), []):
            found.append(pid)
            queue.append(pid)
    return found


def _reap_orphans(child: subprocess.Popen[bytes]) -> None:
    """Collect the exit status of every inherited descendant that ended (never `child`'s)."""
    while True:
        try:
            info = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:
            return
        if info is None or info.si_pid == child.pid:
            return  # `child` is waited for by its Popen
        try:
            os.waitpid(info.si_pid, 0)
        except ChildProcessError:
            return


def _end_all(child: subprocess.Popen[bytes]) -> int:
    """SIGTERM the child's group and every descendant, SIGKILL them after GRACE; the child's exit code.

    Waits until the group and the tree are empty, not only for the child: a process that
    outlives it (the child crashed, its own child ignores SIGTERM) is still ours to end.
    """
    for sig in (signal.SIGTERM, signal.SIGKILL):
        signalled: set[int] = set()
        deadline = time.monotonic() + GRACE
        while True:
            child.poll()
            _reap_orphans(child)
            alive = _descendants()
            if child.returncode is not None and not alive and not _group_alive(child.pid):
                return child.returncode
            if time.monotonic() > deadline:
                break
            for pid in [child.pid, *alive]:
                if pid not in signalled:  # the group once, and each descendant found since
                    signalled.add(pid)
                    _send(pid, sig, group=pid == child.pid)
            time.sleep(0.02)
    return child.wait()


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def _send(pid: int, sig: signal.Signals, *, group: bool) -> None:
    try:
        if group:
            os.killpg(pid, sig)
        else:
            os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def supervise(parent: int, command: Sequence[str]) -> int:
    """Run `command` until it exits, `parent` goes away, or we are told to stop; then end what it left."""
    _become_subreaper()
    try:
        child = subprocess.Popen(list(command), start_new_session=True)
    except OSError as exc:
        print(f"cannot start {command[0]!r}: {exc.strerror or exc}", file=sys.stderr, flush=True)
        return 127
    stopping: list[int] = []

    def stop(signum: int, frame: FrameType | None) -> None:
        stopping.append(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while not stopping and os.getppid() == parent and child.poll() is None:
        _reap_orphans(child)
        try:
            child.wait(POLL)
        except subprocess.TimeoutExpired:
            continue
    return _end_all(child)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or not args[0].isdigit() or args[1] != "--":
        print("usage: python harness/_core/child.py PARENT_PID -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    return supervise(int(args[0]), args[2:])


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["GRACE", "supervise", "wrap"]
