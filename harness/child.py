"""Run a server command so that it never outlives the process that started it.

`python harness/child.py PARENT_PID -- COMMAND [ARGS...]` (see `wrap`) starts COMMAND in a session (and
process group) of its own, sharing this process's stdin, stdout and stderr, and waits for it.
It ends COMMAND's whole process group (SIGTERM, then SIGKILL after `GRACE` seconds) when:
- COMMAND exits or crashes (its children do not stay behind it);
- PARENT_PID is gone, even after a SIGKILL, which no cleanup code of the parent can see (a
  poll of the parent pid, as `harness.scripted.endpoint` does: PR_SET_PDEATHSIG fires when the forking
  *thread* ends, and exists only on Linux);
- this process gets SIGTERM or SIGINT (the parent closing the server the ordinary way).
Its exit code is COMMAND's. `envs.tools.mcp` starts stdio MCP servers through it, so an `npx ...`
server and the node process it spawns both go when `rubric eval` goes.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from types import FrameType

GRACE = 1.0
"""Seconds between SIGTERM and SIGKILL. Under the MCP SDK's own stop (SIGTERM, then SIGKILL of
this supervisor 2 s later) the whole group must be ended well before that SIGKILL."""
POLL = 0.2


def wrap(command: Sequence[str]) -> list[str]:
    """The command line that runs `command` under this supervisor, tied to this process.

    By file path, not `-m`: a server's environment is often reduced to a few variables (the
    mcp SDK keeps HOME, PATH and the like), so PYTHONPATH may not lead to this package.
    """
    return [sys.executable, "-I", os.path.abspath(__file__), str(os.getpid()), "--", *command]


def _end_group(child: subprocess.Popen[bytes]) -> int:
    """SIGTERM the child's process group, SIGKILL it after GRACE; the child's exit code.

    Waits for the whole group, not only the child: a member that outlives it (the child
    crashed, its own child ignores SIGTERM) is still ours to end.
    """
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(child.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        deadline = time.monotonic() + GRACE
        while time.monotonic() < deadline:
            if child.poll() is not None and not _group_alive(child.pid):
                return child.returncode
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


def supervise(parent: int, command: Sequence[str]) -> int:
    """Run `command` until it exits, `parent` goes away, or we are told to stop; then end its group."""
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
        try:
            child.wait(POLL)
        except subprocess.TimeoutExpired:
            continue
    return _end_group(child)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 3 or not args[0].isdigit() or args[1] != "--":
        print("usage: python harness/child.py PARENT_PID -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    return supervise(int(args[0]), args[2:])


if __name__ == "__main__":
    sys.exit(main())


__all__ = ["GRACE", "supervise", "wrap"]
