"""A cgroup per bubblewrap sandbox: caps processes, memory and CPU for everything inside it.

Made beside this process's own cgroup (v1: one folder per controller; v2: one folder), named
`rubric-rt-<owner pid>-<owner start time>-<n>`, so a dead owner's groups are found and removed
by `prune` (only groups this user made).
Where this process may not create cgroups (an unprivileged user without delegation), sandboxes
get no cgroup caps and say so in `describe()`.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import signal
import stat
import time
from pathlib import Path

from harness.runtimes._state import owner_alive, process_start

PREFIX = "rubric-rt-"
_CONTROLLERS = ("pids", "memory", "cpu")
_counter = itertools.count()


def _own_paths() -> dict[str, str]:
    paths: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                paths[controller] = path
    return paths


@functools.cache
def parents() -> dict[str, Path]:
    """controller ("" for v2) -> the folder new groups go in; {} when none can be made here."""
    paths = _own_paths()
    root = Path("/sys/fs/cgroup")
    v1 = {c: root / c / paths[c].lstrip("/") for c in _CONTROLLERS if c in paths}
    v1 = {c: p for c, p in v1.items() if (p / "cgroup.procs").exists()}
    found: dict[str, Path] = {}
    if {"pids", "memory"} <= set(v1):
        found = v1
    else:
        base = root / paths.get("", "/").lstrip("/")
        with contextlib.suppress(OSError):
            enabled = (base / "cgroup.subtree_control").read_text().split()
            if not {"pids", "memory"} <= set(enabled):
                (base / "cgroup.subtree_control").write_text("+pids +memory +cpu")
            found = {"": base}
    if not found:
        return {}
    try:  # probe: may we make one here?
        Cgroup(found, pids=None, memory_mb=None, cpus=None).remove()
    except OSError:
        return {}
    return found


class Cgroup:
    """One sandbox's cgroup (a folder per controller)."""

    def __init__(
        self, where: dict[str, Path], *, pids: int | None, memory_mb: int | None, cpus: float | None
    ) -> None:
        name = f"{PREFIX}{os.getpid()}-{process_start(os.getpid())}-{next(_counter)}"
        self.dirs = [parent / name for parent in where.values()]
        self.v2 = v2 = "" in where
        settings: dict[str, str] = {}
        if pids is not None:
            settings["pids.max"] = str(pids)
        if memory_mb is not None:
            settings["memory.max" if v2 else "memory.limit_in_bytes"] = str(memory_mb << 20)
            settings["memory.swap.max"] = "0"
        if cpus is not None:
            period = 100_000
            if v2:
                settings["cpu.max"] = f"{int(cpus * period)} {period}"
            else:
                settings["cpu.cfs_period_us"] = str(period)
                settings["cpu.cfs_quota_us"] = str(int(cpus * period))
        for directory in self.dirs:
            directory.mkdir()
            for key, value in settings.items():
                if (directory / key).exists():
                    (directory / key).write_text(value)

    @property
    def procs(self) -> list[str]:
        """The files a process writes `0` to, to join with everything it starts later: on v1
        each controller's `tasks`, where a single-threaded process moving itself skips the
        kernel's global lock and its RCU grace period (about 6-8 ms a move on a busy machine,
        against 0.1 ms; `cgroup.procs` always waits for it); on v2 `cgroup.procs`."""
        return [str(d / ("cgroup.procs" if self.v2 else "tasks")) for d in self.dirs]

    def remove(self) -> None:
        """Kill whatever is left inside and delete the group."""
        _remove(self.dirs)


def _remove(dirs: list[Path]) -> None:
    deadline = time.monotonic() + 2.0
    for directory in dirs:
        while directory.exists():
            with contextlib.suppress(OSError):
                for pid in (directory / "cgroup.procs").read_text().split():
                    with contextlib.suppress(OSError):
                        os.kill(int(pid), signal.SIGKILL)
                directory.rmdir()
            if directory.exists():
                if time.monotonic() > deadline:
                    break
                time.sleep(0.005)


def prune_groups() -> int:
    """Remove the sandbox cgroups of owners that are gone; returns how many.

    Only groups this user made (owned by it, named with a dead owner's pid and start time): what
    they hold is ours by construction, since no other user can move a process into them.
    """
    removed = 0
    for parent in parents().values():
        for directory in parent.glob(f"{PREFIX}*"):
            parts = directory.name[len(PREFIX) :].split("-")
            if len(parts) != 3 or not parts[0].isdigit() or owner_alive(int(parts[0]), parts[1]):
                continue
            with contextlib.suppress(OSError):
                info = directory.lstat()
                if info.st_uid == os.geteuid() and stat.S_ISDIR(info.st_mode):
                    _remove([directory])
                    removed += not directory.exists()
    return removed
