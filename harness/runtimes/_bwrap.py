"""bubblewrap sandboxes: one namespace set per sandbox, alive for its whole life, entered per command.

`bwrap` starts once per sandbox with fresh user, PID, mount, network, IPC, UTS and cgroup
namespaces and a small init (`sleep infinity`); each `exec` enters those namespaces with
`nsenter`, then drops every capability (`setpriv`) before running the command. So the files a
command writes, the processes it leaves running and the state of the machine last from one
command to the next, as in a container, while starting in milliseconds. `runtime.run(cmd)`
starts a sandbox around one command instead: the command is the namespace's first process
under bwrap's init, nothing is entered, and the sandbox ends with it.

The file system (`_bwrap_view`): the host's system read-only, or a root filesystem folder,
with every installed package folder in view covered, plus the private writable layer
(size-capped tmpfs at `/tmp` and the working directory, charged to the sandbox's memory cgroup,
so its files and its processes share `memory_mb`; gone with the namespaces), and the Unix
socket folder at /run/rubric. Limits: a cgroup (pids, memory, CPU quota) when this process
may create one, and rlimits (largest file; processes where there is no cgroup). bwrap is in
its cgroup and under its rlimits before it makes a namespace (`_launch`), so nothing inside
ever runs outside them and the sandbox's cgroup namespace is rooted at its own group.
Everything dies with the sandbox: bwrap's init is PID 1 of the namespace and bwrap dies with
its parent (`--die-with-parent`), so even a SIGKILLed harness leaves no process (only its
host folder, removed by `prune`).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import shutil
import signal
import stat
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from harness.runtimes import _cgroups as cgroups
from harness.runtimes._base import (
    Capture,
    RawResult,
    Runtime,
    RuntimeUnavailableError,
    Sandbox,
    SandboxConfig,
    SandboxError,
    command_env,
    communicate,
    quote,
    reap,
    spawn,
)
from harness.runtimes._bwrap_view import host_entries, layer_args, sandbox_args
from harness.runtimes._state import TOKEN_VAR, SandboxState

INSTALL_HINT = "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap util-linux) on Linux with user namespaces enabled"
_ENTER = 'for f; do shift; [ "$f" = -- ] && break; echo 0 > "$f" || exit 125; done; exec "$@"'
_CHDIR = 'cd -- "$1" 2>/dev/null || { echo "rubric: no working directory $1 in the sandbox" >&2; exit 125; }; shift; exec "$@"'
_KEEPER = ["/bin/sh", "-c", "echo ready; exec sleep infinity </dev/null >/dev/null 2>&1"]
_HOST_PATH = {"PATH": "/usr/bin:/bin"}
_START_TIMEOUT = 30  # seconds bubblewrap may take to make a sandbox
_END_TIMEOUT = 5.0  # seconds `end_processes` keeps killing before it gives up
_PRLIMIT_FLAGS = {
    resource.RLIMIT_CORE: "--core",
    resource.RLIMIT_FSIZE: "--fsize",
    resource.RLIMIT_NPROC: "--nproc",
}
_probed: dict[str, str] = {}  # bwrap's path -> why it cannot make namespaces ("" when it can)


def _cgroup(config: SandboxConfig) -> cgroups.Cgroup | None:
    """A new cgroup with `config`'s caps, or None when it has none or none can be made here.

    Its memory cap is `memory_mb`, no more: no process of the sandbox gets more. The kernel
    charges a tmpfs page to the memory cgroup of the process that writes it, and no unprivileged
    setting charges it elsewhere, so the files on the writable tmpfs layers count toward that cap
    too (a sandbox holding 100 MB of files has `memory_mb - 100` left for its processes), while
    each layer is also capped at `disk_mb`."""
    wanted = {"pids": config.pids, "memory": config.memory_mb, "cpu": config.cpus}
    where = {c: p for c, p in cgroups.parents().items() if wanted.get(c, True)}  # v2's "": one for all
    if not where or not any(wanted.values()):
        return None
    return cgroups.Cgroup(where, pids=config.pids, memory_mb=config.memory_mb, cpus=config.cpus)


def _rlimits(config: SandboxConfig, cgroup: cgroups.Cgroup | None) -> dict[int, int]:
    """The rlimits of every command: no core files, the largest file (`disk_mb`), and the
    process count where no cgroup caps it (the kernel does not apply it to root, whom `check`
    refuses then)."""
    limits = {resource.RLIMIT_CORE: 0}
    if config.disk_mb:
        limits[resource.RLIMIT_FSIZE] = config.disk_mb << 20
    if config.pids and cgroup is None and os.geteuid() != 0:
        limits[resource.RLIMIT_NPROC] = config.pids
    return limits


def _check_user(user: str | None) -> None:
    """Refuse a user a bwrap sandbox cannot run as (it maps only this process's user)."""
    if user is None:
        return
    uid, _, gid = user.partition(":")
    if not uid.isdigit() or (gid and not gid.isdigit()):
        raise SandboxError(f"bwrap sandboxes take a numeric user ('UID' or 'UID:GID'), got {user!r}")
    if int(uid) != os.geteuid():
        raise SandboxError(
            f"bwrap sandboxes map only this process's user ({os.geteuid()}), so user={user!r} "
            "cannot run; use a docker: runtime for other users"
        )


def _exit_code(code: int | None) -> int | None:
    """bwrap reports a command killed by signal N as 128 + N; give it back as -N."""
    if code is not None and code > 128 and code - 128 in signal.valid_signals():
        return -(code - 128)
    return code


async def _launch(
    bwrap: str,
    options: Sequence[str],
    command: Sequence[str],
    *,
    cgroup: cgroups.Cgroup | None,
    rlimits: Mapping[int, int],
    env: Mapping[str, str],
    stdin: int,
    pass_fds: Sequence[int] = (),
) -> asyncio.subprocess.Process:
    """Start `bwrap OPTIONS -- COMMAND` inside `cgroup` and `rlimits` before it makes anything.

    A shell joins `cgroup` by moving itself (the cheap move, see `Cgroup.procs`), then becomes
    bwrap; bwrap waits for its options on a pipe (`--args`) before it makes a namespace, and
    meanwhile gets `rlimits`. So every process of the sandbox is born inside both, and its
    cgroup namespace is rooted at its own cgroup. (Python cannot reach clone3's
    CLONE_INTO_CGROUP. `rlimits` must not hold RLIMIT_NPROC: set on bwrap, outside the
    sandbox's user namespace, it would count every process of this user.)

    Returns:
        The process (stdout and stderr piped). A shell that could not join exits 125, saying
        why on stderr.

    Raises:
        SandboxError: bwrap could not be given its limits.
    """
    join = ["/bin/sh", "-c", _ENTER, "sh", *cgroup.procs, "--"] if cgroup is not None else []
    hold, feed = os.pipe()
    try:
        process = await spawn(
            *join, bwrap, "--args", str(hold), "--", *command, stdin=stdin, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, pass_fds=(hold, *pass_fds), env=dict(env), start_new_session=True,
        )  # fmt: skip
        os.close(hold)
        hold = -1
        try:
            for kind, value in rlimits.items():
                resource.prlimit(process.pid, kind, (value, value))
        except OSError as exc:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await reap(process)
            raise SandboxError(f"bubblewrap could not be given its limits: {exc}") from exc
        data = b"".join(option.encode() + b"\0" for option in options)
        # One write into the empty pipe (a few KB; 64 KB fit): bwrap gets all its options or,
        # should this process die first, none, and then makes an empty root where the
        # command does not even exist. It reads them whole before anything else.
        with contextlib.suppress(BrokenPipeError):  # it ended already: its stderr says why
            while data:
                data = data[os.write(feed, data) :]
        return process
    finally:
        for fd in (hold, feed):
            if fd >= 0:
                os.close(fd)


async def _namespaces_problem(bwrap: str) -> str:
    """Why bubblewrap cannot make namespaces here ("" when it can): one real try per process."""
    if bwrap not in _probed:
        args = [bwrap, "--unshare-all", "--die-with-parent"]
        for kind, path in host_entries():
            args += ["--symlink", os.readlink(path), path] if kind == "link" else ["--ro-bind", path, path]
        try:
            process = await asyncio.create_subprocess_exec(
                *args, "--", "/usr/bin/env", "true", stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=_HOST_PATH,
            )  # fmt: skip
            _, said = await asyncio.wait_for(process.communicate(), 10)
        except (OSError, TimeoutError) as exc:
            _probed[bwrap] = f"bubblewrap does not run ({exc!r})"
        else:
            lines = said.decode(errors="replace").strip().splitlines()
            reason = lines[-1] if lines else f"exit code {process.returncode}"
            _probed[bwrap] = (
                "" if process.returncode == 0 else f"bubblewrap cannot create namespaces here ({reason})"
            )
    return _probed[bwrap]


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
        return layer_args(self.runtime.rootfs, self.config, self.state.directory / "socket")

    async def _start(self) -> None:
        self._cgroup = _cgroup(self.config)
        options = [*sandbox_args(self.runtime.rootfs, self.config, self.state.directory / "socket")]
        read_end, write_end = os.pipe()
        options += ["--setenv", "PATH", _HOST_PATH["PATH"], "--info-fd", str(write_end)]
        try:
            self._process = await _launch(
                self.runtime.bwrap, options, _KEEPER, cgroup=self._cgroup, rlimits={},
                # The token proves to a later `prune` that these processes are this sandbox's.
                env={**_HOST_PATH, TOKEN_VAR: self.state.token}, stdin=asyncio.subprocess.DEVNULL,
                pass_fds=(write_end,),
            )  # fmt: skip
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
                command = [self.runtime.bwrap, *options, "--", *_KEEPER]
                raise SandboxError(
                    f"bubblewrap did not start: {error or 'no message'}; command: {quote(command)}"
                )
            self._init_pid = int(json.loads(os.read(read_end, 65536).decode())["child-pid"])
        finally:
            os.close(read_end)
            if write_end >= 0:
                os.close(write_end)
        self.state.hold(self._process.pid)
        self.state.hold(self._init_pid)
        self.state.save()

    def _enter_args(self, cwd: str, user: str | None) -> list[str]:
        _check_user(user)
        limits = [
            "prlimit",
            *(f"{_PRLIMIT_FLAGS[k]}={v}" for k, v in _rlimits(self.config, self._cgroup).items()),
        ]
        enter = ["nsenter", "-t", str(self._init_pid), "-U", "--preserve-credentials"]
        enter += ["-m", "-p", "-n", "-i", "-u", "-C", "-r"]
        drop = ["/usr/bin/setpriv", "--inh-caps=-all", "--bounding-set=-all", "--no-new-privs"]
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
        code = _exit_code(None if timed_out else process.returncode)
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
        links = self._links()
        found = self._link_changes(links)
        for path, info in self._layer_entries():
            if not stat.S_ISDIR(info.st_mode) and path not in links:
                found[path] = "added"
        return found

    def _link_changes(self, links: Mapping[str, str]) -> dict[str, str]:
        """The links bubblewrap made that now point elsewhere ("changed") or are gone ("deleted")."""
        root = f"/proc/{self._init_pid}/root"
        found: dict[str, str] = {}
        for path, target in links.items():
            if not os.path.lexists(root + path):
                found[path] = "deleted"
            elif not os.path.islink(root + path) or os.readlink(root + path) != target:
                found[path] = "changed"  # pointed elsewhere, or made a folder or a file
        return found

    def _layer_entries(self) -> list[tuple[str, os.stat_result]]:
        """Every file, folder and link on the writable layers outside /tmp and the working
        directory (parents before what they hold), read through the host; mount points (the
        read-only binds, /dev, /proc, the private layers) are left out."""
        root = f"/proc/{self._init_pid}/root"
        found = []
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
                        found.append((path, info))
                        if stat.S_ISDIR(info.st_mode):
                            stack.append(path)
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
        """A new sandbox of the same runtime and settings, with every writable path copied:
        `/tmp` and the workdir whole, and what the other writable layers hold (`_layer_entries`:
        a folder such as `/app/out` made by a setup step, the files in it, a changed link),
        one tar of them all (one command to pack, one to unpack); a link bubblewrap made that
        is gone here is removed there."""
        if self._packed is None:  # packed once, reused by every fork until a command runs here
            self._packed = await self._pack()
        copy = await self.runtime.open(self.config)
        try:
            gone = [path for path, change in self._link_changes(self._links()).items() if change == "deleted"]
            unpack = ["/bin/sh", "-c", 'rm -f -- "$@" && exec tar -x -C /', "sh", *gone]
            unpacked = await copy._checked_run(unpack, stdin=self._packed)
            if unpacked.exit_code != 0:
                raise SandboxError(f"fork: cannot unpack: {unpacked.stderr.decode(errors='replace')}")
        except BaseException:
            await copy.close()
            raise
        return copy

    async def _pack(self) -> bytes:
        """The tar a fork unpacks: `/tmp` and the workdir recursively, then each entry of the
        other writable layers alone (its folder's entries are listed after it)."""
        folders = ["tmp"] if self.workdir.startswith("/tmp") else ["tmp", self.workdir.lstrip("/")]
        links = self._links()
        changed = self._link_changes(links)
        entries = [p for p, _ in self._layer_entries() if p not in links or changed.get(p) == "changed"]
        names = b"".join(path.lstrip("/").encode() + b"\0" for path in entries)
        # Whole (no cap): a fork needs every byte, and the layers' size caps bound it.
        argv = ["tar", "-c", "-C", "/", "--null", *folders, "--no-recursion", "-T", "-"]
        done = await self._checked_run(argv, stdin=names, out=Capture(None))
        if done.exit_code != 0:
            raise SandboxError(
                f"fork: cannot pack {folders} and {len(entries)} other paths: "
                f"{done.stderr.decode(errors='replace')}"
            )
        return done.stdout

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
        self.bwrap = "bwrap"  # its path, once `check` found it
        self._checked = False

    @property
    def kind_name(self) -> str:
        return "bwrap"

    def _make(self, config: SandboxConfig, state: SandboxState) -> Sandbox:
        return BwrapSandbox(config, state, self)

    async def _run_once(
        self,
        config: SandboxConfig,
        argv: list[str],
        *,
        stdin: bytes | None,
        timeout: float | None,
        user: str | None,
        out: Capture,
        err: Capture,
    ) -> RawResult:
        """The command is the sandbox: one bwrap whose namespace's init runs it, with no keeper,
        nothing entered and no host folder; when it ends, times out or is cancelled, the
        namespace and everything in it go."""
        _check_user(user)
        start = time.monotonic()
        options = sandbox_args(self.rootfs, config, None)
        for key, value in command_env(config).items():
            options += ["--setenv", key, value]
        cgroup = _cgroup(config)
        rlimits = _rlimits(config, cgroup)
        if resource.RLIMIT_NPROC in rlimits:  # set inside its user namespace (see `_launch`)
            argv = ["prlimit", f"--nproc={rlimits.pop(resource.RLIMIT_NPROC)}", "--", *argv]
        try:
            process = await _launch(
                self.bwrap, options, argv, cgroup=cgroup, rlimits=rlimits, env=_HOST_PATH,
                stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            )  # fmt: skip
            try:
                timed_out = await communicate(process, stdin, timeout, out, err)
            finally:
                if process.returncode is None:  # a timeout or a cancel: bwrap, whose init dies with it
                    with contextlib.suppress(ProcessLookupError):
                        process.kill()
                await reap(process)
        finally:
            if cgroup is not None:
                cgroup.remove()  # and anything still in it
        return RawResult.of(_exit_code(None if timed_out else process.returncode), out, err, timed_out, start)

    async def check(self, config: SandboxConfig | None = None) -> None:
        if not self._checked:
            await self._check_tools()
            self._checked = True
        if config is not None and config.pids and os.geteuid() == 0 and not cgroups.parents():
            raise RuntimeUnavailableError(
                f"cannot cap a bwrap sandbox's processes (pids={config.pids}): this process runs as "
                "root, where the kernel does not apply RLIMIT_NPROC, and may not create a cgroup; run "
                "as a normal user, give this process a writable cgroup, or pass pids=None"
            )

    async def _check_tools(self) -> None:
        if not sys.platform.startswith("linux"):
            raise RuntimeUnavailableError(
                f"bwrap sandboxes need Linux namespaces, not available on {sys.platform}"
            )
        missing = [tool for tool in ("bwrap", "nsenter", "setpriv", "prlimit") if shutil.which(tool) is None]
        if missing:
            raise RuntimeUnavailableError(
                f"cannot make bwrap sandboxes: {', '.join(missing)} not found; {INSTALL_HINT}"
            )
        self.bwrap = shutil.which("bwrap") or "bwrap"
        problem = await _namespaces_problem(self.bwrap)
        if problem:
            raise RuntimeUnavailableError(f"cannot make bwrap sandboxes: {problem}; {INSTALL_HINT}")
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

    def describe(self) -> str:
        return f"bwrap ({self.rootfs or 'host system, read-only'})"
