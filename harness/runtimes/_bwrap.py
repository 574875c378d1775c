"""bubblewrap sandboxes: one namespace set per sandbox, alive for its whole life, entered per command.

`bwrap` starts once per sandbox with fresh user, PID, mount, network, IPC, UTS and cgroup
namespaces and a small init (`sleep infinity`); each `exec` enters those namespaces with
`nsenter`, then drops every capability (`setpriv`) before running the command. So the files a
command writes, the processes it leaves running and the state of the machine last from one
command to the next, as in a container, while starting in milliseconds.

The file system: an empty root holding read-only binds of either the host's system folders
(`bwrap`: /usr and the /bin, /lib symlinks; every `site-packages`/`dist-packages` and rubric data
folder covered) or every top-level folder of a root filesystem (`bwrap:ROOTFS_DIR`, e.g. one
made by `debootstrap`), plus the private writable layer: size-capped tmpfs at `/tmp` and the
working directory (charged to the sandbox's memory cgroup; gone with the namespaces), and the
Unix socket folder at /run/rubric. Limits: a cgroup (pids, memory, CPU quota) when this
process may create one, and RLIMIT_FSIZE for the largest file. Everything dies with the
sandbox: bwrap's init is PID 1 of the namespace and bwrap dies with its parent
(`--die-with-parent`), so even a SIGKILLed harness leaves no process (only its host folder,
removed by `prune`).
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import json
import os
import shutil
import signal
import stat
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from harness.runtimes import _cgroups as cgroups
from harness.runtimes._base import (
    SOCKET_DIR,
    Capture,
    RawResult,
    Runtime,
    RuntimeUnavailableError,
    Sandbox,
    SandboxConfig,
    SandboxError,
    communicate,
    quote,
    reap,
    spawn,
)
from harness.runtimes._state import TOKEN_VAR, SandboxState

INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap util-linux) on Linux with user namespaces enabled"
_SKIP_TOP = {"proc", "dev", "sys", "tmp", "run", "lost+found"}
_ENTER = 'for f; do shift; [ "$f" = -- ] && break; echo $$ > "$f" || exit 125; done; exec "$@"'
_CHDIR = 'cd -- "$1" 2>/dev/null || { echo "rubric: no working directory $1 in the sandbox" >&2; exit 125; }; shift; exec "$@"'
_DEFAULT_DISK_MB = 1024
_START_TIMEOUT = 30  # the writable tmpfs layer's size when no disk_mb is given
_END_TIMEOUT = 5.0  # seconds `end_processes` keeps killing before it gives up


def _host_entries() -> list[tuple[str, str]]:
    """(kind, path) of the host system folders a `bwrap` sandbox sees read-only."""
    entries = [("bind", "/usr")]
    for name in ("/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"):
        if os.path.islink(name):
            entries.append(("link", name))
        elif os.path.isdir(name):
            entries.append(("bind", name))
    for name in ("/etc/ld.so.cache", "/etc/localtime", "/etc/passwd", "/etc/group", "/etc/alternatives"):
        if os.path.exists(name):
            entries.append(("bind", name))
    return entries


def _masks() -> list[str]:
    """Folders under /usr a `bwrap` sandbox must not see: installed packages (this project, its
    dependencies) and rubric's data (answer keys)."""
    patterns = [
        "/usr/lib/python3*/site-packages",
        "/usr/lib/python3*/dist-packages",
        "/usr/local/lib/python3*/site-packages",
        "/usr/local/lib/python3*/dist-packages",
        "/usr/share/rubric",
        "/usr/local/share/rubric",
    ]
    return sorted({p for pattern in patterns for p in glob.glob(pattern) if os.path.isdir(p)})


def _rootfs_entries(rootfs: Path) -> list[tuple[str, str]]:
    entries = []
    for child in sorted(rootfs.iterdir()):
        if child.name in _SKIP_TOP:
            continue
        entries.append(("link" if child.is_symlink() else "bind", f"/{child.name}"))
    return entries


def _descendants(pid: int) -> list[int]:
    """Host pids of every process below `pid` (children first found, from /proc)."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            parents.setdefault(int(stat.rsplit(")", 1)[1].split()[1]), []).append(int(entry))
    found, stack = [], [pid]
    while stack:
        for child in parents.get(stack.pop(), []):
            found.append(child)
            stack.append(child)
    return found


def _namespace_processes(init_pid: int) -> list[int]:
    """Host pids of the live processes in `init_pid`'s PID namespace but its init (namespace
    pid 1, bwrap's) and keeper (namespace pid 2, the `sleep` bwrap started first)."""
    namespace = os.stat(f"/proc/{init_pid}/ns/pid")
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            inside = os.stat(f"/proc/{entry}/ns/pid")
            if (inside.st_dev, inside.st_ino) != (namespace.st_dev, namespace.st_ino):
                continue
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:  # gone meanwhile, or not ours to look at (then not in our namespace)
            continue
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        if fields.get("State", "").strip().startswith(("Z", "X")):
            continue  # a zombie runs nothing; its parent reaps it
        if fields.get("NSpid", "").split()[-1:] in (["1"], ["2"]):
            continue
        found.append(int(entry))
    return found


class BwrapSandbox(Sandbox):
    """A bubblewrap sandbox (see the module docstring)."""

    kind = "bwrap"

    def __init__(self, config: SandboxConfig, state: SandboxState, runtime: BwrapRuntime) -> None:
        super().__init__(config, state)
        self.runtime = runtime
        self._process: asyncio.subprocess.Process | None = None
        self._init_pid = 0
        self._cgroup: cgroups.Cgroup | None = None
        self._groups: set[int] = set()
        self._packed: bytes | None = None  # the writable layer as a tar, for forks

    def _layer_args(self) -> list[str]:
        rootfs = self.runtime.rootfs
        source = rootfs or Path("/")
        entries = _rootfs_entries(rootfs) if rootfs else _host_entries()
        args: list[str] = []
        for kind, path in entries:
            real = source / path.lstrip("/")
            if kind == "link":
                args += ["--symlink", os.readlink(real), path]
            else:
                args += ["--ro-bind", str(real), path]
        if rootfs is None:
            for path in _masks():
                args += ["--tmpfs", path]
        size = str((self.config.disk_mb or _DEFAULT_DISK_MB) << 20)
        writable = ["/tmp"]
        if not (self.workdir == "/tmp" or self.workdir.startswith("/tmp/")):
            writable.append(self.workdir)
        for path in writable:
            args += ["--size", size, "--tmpfs", path]
        for host, inside in self.config.mounts.items():
            args += ["--ro-bind", host, inside]
        args += ["--tmpfs", "/run", "--bind", str(self.state.directory / "socket"), SOCKET_DIR]
        return args

    def _bwrap_args(self, info_fd: int) -> list[str]:
        args = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session"]
        if self.config.network == "host":
            args.append("--share-net")
        args += self._layer_args()
        if self.config.network == "host":
            for name in ("/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/ssl"):
                if self.runtime.rootfs is None:
                    args += ["--ro-bind-try", name, name]
        args += ["--proc", "/proc", "--dev", "/dev", "--dir", self.workdir, "--chdir", self.workdir]
        args += ["--hostname", "sandbox", "--clearenv", "--setenv", "PATH", "/usr/bin:/bin"]
        args += [
            "--info-fd",
            str(info_fd),
            "--",
            "/bin/sh",
            "-c",
            "echo ready; exec sleep infinity </dev/null >/dev/null 2>&1",
        ]
        return args

    async def _start(self) -> None:
        where = cgroups.parents()
        config = self.config
        if where and (config.pids or config.memory_mb or config.cpus):
            memory = (config.memory_mb + (config.disk_mb or _DEFAULT_DISK_MB)) if config.memory_mb else None
            self._cgroup = cgroups.Cgroup(where, pids=config.pids, memory_mb=memory, cpus=config.cpus)
        read_end, write_end = os.pipe()
        try:
            command = self._bwrap_args(write_end)
            if self._cgroup is not None:  # join before bwrap starts: every descendant is inside
                command = ["/bin/sh", "-c", _ENTER, "sh", *self._cgroup.procs, "--", *command]
            self._process = await spawn(
                *command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                pass_fds=(write_end,),
                # The token proves to a later `prune` that these processes are this sandbox's.
                env={"PATH": "/usr/bin:/bin", TOKEN_VAR: self.state.token},
                start_new_session=True,
            )
            os.close(write_end)
            write_end = -1
            assert self._process.stdout is not None and self._process.stderr is not None
            try:
                line = await asyncio.wait_for(self._process.stdout.readline(), _START_TIMEOUT)
            except TimeoutError:
                line = b"(no ready line within %d s)" % _START_TIMEOUT
                self._process.kill()
            if line.strip() != b"ready":
                error = (await self._process.stderr.read()).decode(errors="replace").strip()
                raise SandboxError(
                    f"bubblewrap did not start: {error or 'no message'}; command: {quote(command)}"
                )
            info = json.loads(os.read(read_end, 65536).decode())
            self._init_pid = int(info["child-pid"])
        finally:
            os.close(read_end)
            if write_end >= 0:
                os.close(write_end)
        self.state.hold(self._process.pid)
        self.state.hold(self._init_pid)
        self.state.save()

    def _enter_args(self, cwd: str, user: str | None) -> list[str]:
        limits = ["prlimit", "--core=0"]
        if self.config.disk_mb:
            limits.append(f"--fsize={self.config.disk_mb << 20}")
        if self.config.pids and self._cgroup is None and os.geteuid() != 0:
            limits.append(f"--nproc={self.config.pids}")
        enter = ["nsenter", "-t", str(self._init_pid), "-U", "--preserve-credentials"]
        enter += ["-m", "-p", "-n", "-i", "-u", "-C", "-r"]
        drop = ["/usr/bin/setpriv", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
        if user is not None:
            uid, _, gid = user.partition(":")
            if not uid.isdigit() or (gid and not gid.isdigit()):
                raise SandboxError(f"bwrap sandboxes take a numeric user ('UID' or 'UID:GID'), got {user!r}")
            if int(uid) != os.geteuid():
                raise SandboxError(
                    f"bwrap sandboxes map only this process's user ({os.geteuid()}), so user={user!r} "
                    "cannot run; use a docker: runtime for other users"
                )
        # setsid: the command leads its own session inside, so kill(0) there cannot reach the
        # host-side helpers (nsenter, prlimit) that share the caller's process group.
        command = [*limits, "--", *enter, "--", *drop, "--", "setsid", "/bin/sh", "-c", _CHDIR, "sh", cwd]
        if self._cgroup is not None:
            command = ["/bin/sh", "-c", _ENTER, "sh", *self._cgroup.procs, "--", *command]
        return command

    async def _run(
        self,
        argv: list[str],
        *,
        stdin: bytes | None,
        timeout: float | None,
        env: Mapping[str, str],
        cwd: str,
        user: str | None,
        out: Capture,
        err: Capture,
    ) -> RawResult:
        start = time.monotonic()
        self._packed = None  # any command may change the files a fork copies
        if self._process is None or self._process.returncode is not None:
            raise SandboxError("the bwrap sandbox has ended (its init process is gone); open a new one")
        process = await spawn(
            *self._enter_args(cwd, user),
            *argv,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env),
            start_new_session=True,
        )
        self._groups.add(process.pid)
        try:
            timed_out = await communicate(process, stdin, timeout, out, err)
        finally:
            if process.returncode is None:  # a timeout or a cancel: the command and what it started go
                for victim in [*_descendants(process.pid), process.pid]:
                    with contextlib.suppress(ProcessLookupError, PermissionError):
                        os.kill(victim, signal.SIGKILL)
            await reap(process)
            self._groups.discard(process.pid)
        code = None if timed_out else process.returncode
        if code is not None and code > 128 and code - 128 in signal.valid_signals():
            code = -(code - 128)
        if code == 125 and err.value().startswith(b"rubric: no working directory"):
            raise SandboxError(f"working directory {cwd!r} does not exist in the sandbox; create it first")
        return RawResult.of(code, out, err, timed_out, start)

    async def _stop(self) -> None:
        for group in list(self._groups):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
        if self._init_pid:  # the namespace's init: with it, everything inside ends
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self._init_pid, signal.SIGKILL)
        if self._process is not None:
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()
            await reap(self._process)
        if self._cgroup is not None:
            self._cgroup.remove()
        if self._init_pid and Path(f"/proc/{self._init_pid}").exists():  # not yet gone: once more
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(self._init_pid, signal.SIGKILL)

    async def _end_processes(self) -> int:
        """SIGKILL every process in the sandbox's PID namespace but bwrap's init and keeper,
        from the host, until a scan finds none (what a dying process forked is in the next
        scan); the pids cgroup, where there is one, bounds how many a loop can make."""
        if self._process is None or self._process.returncode is not None:
            raise SandboxError("the bwrap sandbox has ended (its init process is gone); open a new one")
        ended = 0
        deadline = time.monotonic() + _END_TIMEOUT
        while victims := _namespace_processes(self._init_pid):
            if time.monotonic() > deadline:
                raise SandboxError(
                    f"{len(victims)} processes are still running in the bwrap sandbox after "
                    f"{_END_TIMEOUT:g} s of SIGKILL (host pids {victims[:10]})"
                )
            for victim in victims:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(victim, signal.SIGKILL)
            ended += len(victims)
            await asyncio.sleep(0.002)
        return ended

    async def _changed_files(self) -> dict[str, str]:
        """What lies on the sandbox's writable layers outside /tmp and the working directory,
        read through the host (`/proc/PID/root`, links never followed): bubblewrap's root
        (where it made its mount points and the /bin, /lib links) and every other tmpfs
        (the masks over site-packages, /run). A link bubblewrap made that now points
        elsewhere is "changed", one gone "deleted"; any other file is "added"."""
        root = f"/proc/{self._init_pid}/root"
        links = self._links()
        found: dict[str, str] = {}
        for path, target in links.items():
            if not os.path.lexists(root + path):
                found[path] = "deleted"
            elif not os.path.islink(root + path) or os.readlink(root + path) != target:
                found[path] = "changed"  # pointed elsewhere, or made a folder or a file
        for mount in self._writable_mounts():
            top = os.lstat(root + mount).st_dev
            stack = [mount]
            while stack:
                folder = stack.pop()
                with os.scandir(root + folder) as entries:
                    for entry in entries:
                        path = f"{folder.rstrip('/')}/{entry.name}"
                        info = entry.stat(follow_symlinks=False)
                        if info.st_dev != top or self._private(path):
                            continue  # another mount (a read-only bind) or the task's own area
                        if stat.S_ISDIR(info.st_mode):
                            stack.append(path)
                        elif path not in links:
                            found[path] = "added"
        return found

    def _links(self) -> dict[str, str]:
        """The symbolic links bubblewrap made: sandbox path -> target."""
        args = self._layer_args()
        return {args[i + 2]: args[i + 1] for i, arg in enumerate(args) if arg == "--symlink"}

    def _writable_mounts(self) -> list[str]:
        """Mount points of the sandbox's writable tmpfs layers (from its mountinfo), less
        /tmp, the working directory, /dev and /proc."""
        mounts = []
        for line in Path(f"/proc/{self._init_pid}/mountinfo").read_text().splitlines():
            fields = line.split()
            point, options = fields[4], fields[5].split(",")
            kind = fields[fields.index("-") + 1]
            if kind == "tmpfs" and "rw" in options and not self._private(point) and point != "/dev":
                mounts.append(point.replace("\\040", " "))
        return mounts

    async def _fork(self) -> Sandbox:
        """A new sandbox of the same runtime and settings, with `/tmp` and the workdir copied
        (one tar of both: one command to pack, one to unpack)."""
        if self._packed is None:  # packed once, reused by every fork until a command runs here
            folders = ["tmp"] if self.workdir.startswith("/tmp") else ["tmp", self.workdir.lstrip("/")]
            # Whole (no cap): a fork needs every byte, and the tmpfs layers' size caps bound it.
            done = await self._checked_run(["tar", "-c", "-C", "/", "--", *folders], out=Capture(None))
            if done.exit_code != 0:
                raise SandboxError(f"fork: cannot pack {folders}: {done.stderr.decode(errors='replace')}")
            self._packed = done.stdout
        copy = await self.runtime.open(self.config)
        try:
            unpacked = await copy._checked_run(["tar", "-x", "-C", "/"], stdin=self._packed)
            if unpacked.exit_code != 0:
                raise SandboxError(f"fork: cannot unpack: {unpacked.stderr.decode(errors='replace')}")
        except BaseException:
            await copy.close()
            raise
        return copy

    def describe(self) -> str:
        caps = "cgroup (pids, memory, cpu) + rlimits" if self._cgroup else "rlimits"
        root = (
            f"root filesystem {self.runtime.rootfs}" if self.runtime.rootfs else "the host's /usr read-only"
        )
        return f"bwrap: user/pid/mount/net/ipc/uts/cgroup namespaces, {root}, network {self.config.network}, caps by {caps}"


class BwrapRuntime(Runtime):
    """Makes bubblewrap sandboxes over the host's system (`bwrap`) or a root filesystem
    folder (`bwrap:ROOTFS_DIR`)."""

    def __init__(self, spec: str, run_id: str, rootfs: Path | None = None) -> None:
        super().__init__(spec, run_id)
        self.rootfs = rootfs
        self._checked = False

    @property
    def kind_name(self) -> str:
        return "bwrap"

    def _make(self, config: SandboxConfig, state: SandboxState) -> Sandbox:
        return BwrapSandbox(config, state, self)

    async def check(self) -> None:
        if self._checked:
            return
        if not sys.platform.startswith("linux"):
            raise RuntimeUnavailableError(
                f"bwrap sandboxes need Linux namespaces, not available on {sys.platform}"
            )
        missing = [tool for tool in ("bwrap", "nsenter", "setpriv", "prlimit") if shutil.which(tool) is None]
        if missing:
            raise RuntimeUnavailableError(
                f"cannot make bwrap sandboxes: {', '.join(missing)} not found; {INSTALL_HINT}"
            )
        if self.rootfs is not None:
            needed = ["bin/sh", "usr/bin/setpriv", "bin/sleep"]
            absent = [
                n for n in needed if not (self.rootfs / n).exists() and not (self.rootfs / "usr" / n).exists()
            ]
            if absent:
                raise RuntimeUnavailableError(
                    f"root filesystem {self.rootfs} lacks {', '.join(absent)}: a sandbox needs a shell, "
                    "coreutils and util-linux's setpriv (debootstrap --variant=minbase has them)"
                )
        self._checked = True

    def describe(self) -> str:
        return f"bwrap ({self.rootfs or 'host system, read-only'})"
