"""The sandbox interface every runtime implements: exec, files, folders, fork, close.

A runtime implements three things (`_start`, `_run`, `_stop`); files and folders go through
`_run` too (`cat` and `tar` inside the sandbox), so a path is always resolved by the sandbox's
own kernel view and a symlink the code planted cannot point the harness at a host file.
Async first: `async with runtime.sandbox() as sb` gives this `Sandbox`; `with runtime.sandbox()
as sb` gives a `SyncSandbox` with the same methods, blocking (the house's sync face).
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import os
import shlex
import shutil
import sys
import tarfile
import tempfile
import time
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath
from types import TracebackType
from typing import IO, Any, Literal, TypeVar

from harness._core.aio import run_sync
from harness._core.errors import ConfigError, RubricError
from harness.runtimes._state import SandboxState

T = TypeVar("T")

#: Where the per-sandbox Unix socket folder is bound inside every sandbox.
SOCKET_DIR = "/run/rubric"
#: The socket's name in that folder (the capture proxy listens on its host side).
SOCKET_NAME = "proxy.sock"
DEFAULT_WORKDIR = "/work"
DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
#: Bytes of each output stream (stdout, stderr) `exec` keeps by default; the middle of a longer
#: one is cut and counted, so a command that prints without end costs the harness this, not its output.
DEFAULT_MAX_OUTPUT = 8 << 20
#: The largest file `read` returns by default (a larger one is refused; pass `max_bytes`).
DEFAULT_MAX_READ = 64 << 20

Network = Literal["none", "host", "bridge"]

# Runs inside a sandbox (python3): accept on 127.0.0.1:PORT and pipe each connection to the Unix
# socket, so programs that only take a TCP URL reach the harness through the one way out.
_RELAY = r"""
import socket, sys, threading
port, path = int(sys.argv[1]), sys.argv[2]
server = socket.create_server(("127.0.0.1", port))
print("ready", flush=True)
def pump(src, dst):
    try:
        while data := src.recv(65536):
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
def serve(conn):
    up = socket.socket(socket.AF_UNIX)
    try:
        up.connect(path)
    except OSError:
        conn.close(); up.close(); return
    threading.Thread(target=pump, args=(conn, up), daemon=True).start()
    pump(up, conn)
while True:
    conn, _ = server.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
"""


class SandboxError(RubricError):
    """A sandbox could not be started, used or forked; the message says why and what to do."""


class RuntimeUnavailableError(SandboxError, ConfigError):
    """The runtime cannot work on this machine (no daemon, no bubblewrap); says how to fix it."""


@dataclass(frozen=True)
class ExecResult:
    """What one command did.

    Attributes:
        exit_code: The exit status; a command killed by signal N reads -N; None when it timed out.
        stdout: Its standard output (UTF-8, undecodable bytes replaced). Past `max_output`
            bytes, its first and last halves of `max_output`: the middle is cut.
        stderr: Its standard error (kept the same way).
        timed_out: True when the timeout killed it.
        duration: Wall-clock seconds from start to end.
        stdout_cut: Bytes of stdout cut from its middle (0: it is whole).
        stderr_cut: Bytes of stderr cut from its middle.
    """

    exit_code: int | None
    stdout: str
    stderr: str
    timed_out: bool
    duration: float
    stdout_cut: int = 0
    stderr_cut: int = 0

    @property
    def ok(self) -> bool:
        """True when the command ran to the end with exit code 0."""
        return self.exit_code == 0 and not self.timed_out


class Capture:
    """Where one output stream of a command goes: memory, bounded, or a file.

    In memory it keeps every byte up to `limit`; past it, the first and the last half of
    `limit`, counting the bytes cut between them. A file gets every byte (`download` spools
    its archive there, so a large folder never sits in the harness's memory).

    Args:
        limit: The most bytes kept in memory; None: all (only for output the harness trusts).
        file: Write every byte to this binary file instead.
    """

    def __init__(self, limit: int | None = DEFAULT_MAX_OUTPUT, *, file: IO[bytes] | None = None) -> None:
        check_cap("max_output", limit)
        self.limit = limit
        self.file = file
        self.total = 0
        # Everything while it fits (a BytesIO's value is handed out without a copy), then the head.
        self._kept = io.BytesIO()
        self._tail: bytearray | None = None  # past the limit: the newest bytes, trimmed as they come

    def add(self, chunk: bytes) -> None:
        """Take the next bytes of the stream."""
        self.total += len(chunk)
        if self.file is not None:
            self.file.write(chunk)
        elif self.limit is None or self.total <= self.limit:
            self._kept.write(chunk)
        else:
            keep = self.limit // 2
            if self._tail is None:  # the first overflow: the head is filled, the rest starts the tail
                head, held = self.limit - keep, self.total - len(chunk)
                if held < head:
                    self._kept.write(chunk[: head - held])
                    chunk, self._tail = chunk[head - held :], bytearray()
                else:
                    self._tail = bytearray(self._kept.getvalue()[head:])
                    self._kept.truncate(head)
            self._tail += chunk
            if len(self._tail) > 2 * keep + (1 << 16):  # trimmed now and then, not per chunk
                del self._tail[: len(self._tail) - keep]

    def value(self) -> bytes:
        """The bytes kept (empty for a file)."""
        if self._tail is None:
            return self._kept.getvalue()
        assert self.limit is not None
        keep = self.limit // 2
        return self._kept.getvalue() + bytes(self._tail[len(self._tail) - keep :] if keep else b"")

    @property
    def cut(self) -> int:
        """Bytes dropped from the middle (0 for a file: it got them all)."""
        if self.file is not None or self._tail is None:
            return 0
        assert self.limit is not None
        return self.total - self.limit


@dataclass(frozen=True)
class RawResult:
    """`ExecResult` before decoding: what a runtime's `_run` returns."""

    exit_code: int | None
    stdout: bytes
    stderr: bytes
    timed_out: bool
    duration: float
    stdout_cut: int = 0
    stderr_cut: int = 0

    @classmethod
    def of(
        cls, exit_code: int | None, out: Capture, err: Capture, timed_out: bool, start: float
    ) -> RawResult:
        """The result of a command whose output went to `out` and `err`, started at `start`."""
        return cls(exit_code, out.value(), err.value(), timed_out, elapsed(start), out.cut, err.cut)

    def decoded(self) -> ExecResult:
        return ExecResult(
            self.exit_code,
            self.stdout.decode("utf-8", errors="replace"),
            self.stderr.decode("utf-8", errors="replace"),
            self.timed_out,
            self.duration,
            self.stdout_cut,
            self.stderr_cut,
        )


@dataclass(frozen=True)
class SandboxConfig:
    """The settings one sandbox was made with (kept for `fork`).

    Attributes:
        cpus: CPUs the sandbox may use (a CFS quota); None: no cap.
        memory_mb: Memory for everything in it (on bwrap, its tmpfs files included); None: no cap.
        pids: Processes and threads at once; None: no cap.
        disk_mb: Largest file a process may write (and, where the runtime has a size-capped
            layer, that layer's size); None: no cap.
        network: "none" (default): no network at all, only the Unix socket back to the harness;
            "host": the machine's network (opt in; recorded in the sandbox's description);
            "bridge": a network of the sandbox's own (Docker's default bridge; bwrap has none
            and refuses it).
        env: Environment variables of every command.
        workdir: The working directory, created when missing; relative paths start there.
        mounts: Host folders seen read-only inside: {host path: sandbox path} (e.g. an
            agent's installed packages, shared by every sandbox instead of copied).
    """

    cpus: float | None = None
    memory_mb: int | None = None
    pids: int | None = None
    disk_mb: int | None = None
    network: Network = "none"
    env: Mapping[str, str] = field(default_factory=dict)
    workdir: str = DEFAULT_WORKDIR
    mounts: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.network not in ("none", "host", "bridge"):
            raise ConfigError(f"network must be 'none', 'host' or 'bridge', got {self.network!r}")
        for name in ("cpus", "memory_mb", "pids", "disk_mb"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ConfigError(f"sandbox {name} must be > 0 (or None for no cap), got {value!r}")
        if self.pids is not None and self.pids < 4:
            raise ConfigError(f"sandbox pids must be at least 4 (a shell and its children), got {self.pids}")
        if not self.workdir.startswith("/"):
            raise ConfigError(f"sandbox workdir must be an absolute path, got {self.workdir!r}")
        for host, inside in self.mounts.items():
            if not os.path.isabs(host) or not os.path.exists(host) or not inside.startswith("/"):
                raise ConfigError(
                    f"sandbox mount {host!r} -> {inside!r}: give an existing absolute host path and an absolute sandbox path"
                )


def check_cap(name: str, value: int | None) -> None:
    """Raise `ConfigError` unless `value` is a positive number of bytes or None."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ConfigError(f"{name} must be a positive number of bytes (or None for no cap), got {value!r}")


def check_timeout(timeout: float | None) -> None:
    """Raise `ConfigError` unless `timeout` is a positive number of seconds or None."""
    if timeout is not None and not timeout > 0:
        raise ConfigError(f"exec timeout must be > 0 seconds (or None), got {timeout!r}")


def command_env(config: SandboxConfig, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """A command's environment: the defaults (PATH, HOME at the working directory, LANG), then
    the sandbox's `env`, then the command's own."""
    return {"PATH": DEFAULT_PATH, "HOME": config.workdir, "LANG": "C.UTF-8", **config.env, **(env or {})}


def shell_argv(cmd: str | Sequence[str]) -> list[str]:
    """A command as an argument list: a string runs in `/bin/sh -c`."""
    if isinstance(cmd, str):
        return ["/bin/sh", "-c", cmd]
    argv = [str(a) for a in cmd]
    if not argv:
        raise ConfigError("exec needs a command: an argument list or a shell string, got an empty list")
    return argv


class Sandbox(ABC):
    """One isolated machine: run commands, move files, fork it; closed with its context.

    Attributes:
        config: The settings it was made with.
        state: Its owner, run id and host folder (for leak-proof cleanup).
    """

    kind: str = "?"

    def __init__(self, config: SandboxConfig, state: SandboxState) -> None:
        self.config = config
        self.state = state
        self.closed = False
        self._relays: dict[int, asyncio.subprocess.Process | object] = {}

    # ------------------------------------------------------------------ what runtimes implement

    @abstractmethod
    async def _start(self) -> None:
        """Create the sandbox (it is registered in `state` before this runs)."""

    @abstractmethod
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
        """Run `argv` inside, feed it `stdin`, kill it (and what it started) at `timeout`; its
        stdout goes to `out` and its stderr to `err` as they come (`RawResult.of` reads them)."""

    @abstractmethod
    async def _stop(self) -> None:
        """Remove the sandbox and everything in it; must not raise for an already-gone one."""

    @abstractmethod
    async def _fork(self) -> Sandbox:
        """A new, started sandbox with a copy of this one's writable state."""

    @abstractmethod
    async def _end_processes(self) -> int:
        """End every process inside but the runtime's own keeper; raise when one is left."""

    @abstractmethod
    async def _changed_files(self) -> dict[str, str]:
        """What `changed_files` returns, read without running anything inside."""

    def describe(self) -> str:
        """One line: what isolates this sandbox and its network."""
        return f"{self.kind} sandbox, network {self.config.network}"

    # ------------------------------------------------------------------ the interface

    @property
    def workdir(self) -> str:
        """The working directory inside the sandbox."""
        return self.config.workdir

    @property
    def socket_path(self) -> Path:
        """Host-side path of this sandbox's Unix socket (listen here; inside it is
        `/run/rubric/proxy.sock`, the sandbox's only way out when its network is none)."""
        return self.state.directory / "socket" / SOCKET_NAME

    @property
    def inside_socket_path(self) -> str:
        """The socket's path as commands inside the sandbox see it."""
        return f"{SOCKET_DIR}/{SOCKET_NAME}"

    def resolve(self, path: str | PurePosixPath) -> str:
        """A sandbox path: relative paths start at the working directory."""
        text = str(path)
        return text if text.startswith("/") else str(PurePosixPath(self.workdir) / text)

    async def exec(
        self,
        cmd: str | Sequence[str],
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        user: str | None = None,
        stdin: bytes | str | None = None,
        max_output: int | None = DEFAULT_MAX_OUTPUT,
    ) -> ExecResult:
        """Run a command inside.

        Args:
            cmd: An argument list, or a string run by `/bin/sh -c`.
            timeout: Seconds before the command and everything it started are killed.
            env: Variables added to the sandbox's for this command.
            cwd: Working directory (relative: from the sandbox's workdir).
            user: Run as this user ("UID", "UID:GID", or a name where the runtime resolves names).
            stdin: Bytes (or text) fed to its standard input.
            max_output: Bytes kept of each of stdout and stderr (8 MiB): past it, their first and
                last halves; the bytes cut between are counted (`stdout_cut`, `stderr_cut`). None
                keeps everything: only for a command whose output you trust.

        Returns:
            Exit code, output, whether it timed out, and how long it took. A command that is
            not found reads exit code 127 with the reason on stderr.
        """
        data = stdin.encode() if isinstance(stdin, str) else stdin
        raw = await self._checked_run(
            shell_argv(cmd), stdin=data, timeout=timeout, env=env, cwd=cwd, user=user,
            out=Capture(max_output), err=Capture(max_output),
        )  # fmt: skip
        return raw.decoded()

    async def read(self, path: str, *, max_bytes: int | None = DEFAULT_MAX_READ) -> bytes:
        """The bytes of a regular file inside the sandbox (a link is followed inside).

        Args:
            path: The file (relative: from the working directory).
            max_bytes: The largest file returned (64 MiB); a larger one raises `SandboxError`
                after reading at most `max_bytes + 1` bytes. None: no cap.

        Raises:
            SandboxError: The file is missing, not a regular file (a device, a pipe, a folder),
                or larger than `max_bytes`.
        """
        check_cap("max_bytes", max_bytes)
        count = "" if max_bytes is None else str(max_bytes + 1)
        raw = await self._checked_run(
            ["/bin/sh", "-c", _READ, "sh", self.resolve(path), count],
            out=Capture(None if max_bytes is None else max_bytes + 1),
        )
        if raw.exit_code != 0:
            raise SandboxError(f"cannot read {path!r} in the sandbox: {_last_line(raw.stderr)}")
        if max_bytes is not None and len(raw.stdout) > max_bytes:
            raise too_large(path, max_bytes)
        return raw.stdout

    async def write(self, path: str, data: bytes | str) -> None:
        """Write a file inside the sandbox (its folder is created)."""
        target = self.resolve(path)
        payload = data.encode() if isinstance(data, str) else data
        script = 'mkdir -p -- "$(dirname -- "$1")" && cat > "$1"'
        raw = await self._checked_run(["/bin/sh", "-c", script, "sh", target], stdin=payload)
        if raw.exit_code != 0:
            raise SandboxError(f"cannot write {path!r} in the sandbox: {_last_line(raw.stderr)}")

    async def upload(self, local: str | Path, remote: str) -> None:
        """Copy a host file or folder into the sandbox at `remote` (folders: their contents)."""
        source = Path(local)
        if not source.exists():
            raise ConfigError(f"upload: {str(local)!r} does not exist on this machine")
        buffer = io.BytesIO()
        with tarfile.open(fileobj=buffer, mode="w") as archive:
            if source.is_dir():
                for child in sorted(source.iterdir()):
                    archive.add(child, arcname=child.name)
            else:
                archive.add(source, arcname=PurePosixPath(remote).name)
        target = self.resolve(remote) if source.is_dir() else str(PurePosixPath(self.resolve(remote)).parent)
        script = 'mkdir -p -- "$1" && tar -x --no-same-owner -C "$1"'
        raw = await self._checked_run(["/bin/sh", "-c", script, "sh", target], stdin=buffer.getvalue())
        if raw.exit_code != 0:
            raise SandboxError(f"cannot upload to {remote!r} in the sandbox: {_last_line(raw.stderr)}")

    async def download(self, remote: str, local: str | Path) -> None:
        """Copy a file or folder from the sandbox to the host path `local` (folders: their contents).

        The archive streams to a temporary file beside `local`, never whole into memory."""
        target = Path(local)
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=target.parent, prefix=".rubric-download-") as spool:
            raw = await self._checked_run(
                ["/bin/sh", "-c", _PACK, "sh", self.resolve(remote)], out=Capture(file=spool)
            )
            if raw.exit_code != 0:
                raise SandboxError(f"cannot download {remote!r} from the sandbox: {_last_line(raw.stderr)}")
            spool.seek(0)
            unpack(spool, target)

    async def fork(self) -> Sandbox:
        """A new sandbox with a copy of this one's files (set up once, fork per rollout).

        The fork has the same settings and is closed on its own (`await fork.close()`, or
        `async with await sb.fork() as copy`).
        """
        self._check_open()
        return await self._fork()

    async def end_processes(self) -> int:
        """End every process in the sandbox and prove that none is left.

        What a command left running (a loop in the background, a daemon that called
        `setsid`, the relay) is gone afterwards; the files stay. The runtime's own keeper of
        the sandbox (a container's init, bubblewrap's) is not a process of the code inside.
        Docker restarts the container in place (a new PID namespace, the same files);
        bubblewrap kills every process in the sandbox's PID namespace; `local` ends the process
        groups of its commands (a process that left its group is not found: no isolation).

        Returns:
            How many processes were ended (on Docker: 1 when the container was restarted).

        Raises:
            SandboxError: A process is still there afterwards, or the sandbox has ended.
        """
        self._check_open()
        ended = await self._end_processes()
        self._relays.clear()  # ended with the rest: `relay()` starts them again
        return ended

    async def changed_files(self) -> dict[str, str]:
        """Files outside `/tmp` and the working directory that differ from the sandbox's image.

        Read from outside (Docker's record of the container's writable layer; the writable
        layers of a bubblewrap sandbox read through the host), so nothing the code inside
        left can answer for it. Folders are listed too where the runtime reports them (Docker).

        Returns:
            Sandbox path -> "added", "changed" or "deleted" (bubblewrap lists what lies on its
            writable layers as "added"); `local` sandboxes return {} (they cannot tell).
        """
        self._check_open()
        return await self._changed_files()

    def _private(self, path: str) -> bool:
        """Whether `path` lies in the sandbox's own writable area (/tmp, the working directory)."""
        return any(path == top or path.startswith(top.rstrip("/") + "/") for top in ("/tmp", self.workdir))

    async def relay(self, port: int) -> str:
        """Serve `http://127.0.0.1:PORT` inside the sandbox, piped to its Unix socket (needs
        python3 inside), for programs that only take a TCP URL. Returns that URL."""
        self._check_open()
        if port in self._relays:
            return f"http://127.0.0.1:{port}"
        await self._start_relay(port, ["python3", "-I", "-c", _RELAY, str(port), self.inside_socket_path])
        self._relays[port] = True
        return f"http://127.0.0.1:{port}"

    async def _start_relay(self, port: int, argv: list[str]) -> None:
        """Start `argv` in the background and wait for its "ready" line (runtimes may override)."""
        script = 'nohup "$@" > /tmp/.rubric-relay-$0.log 2>&1 & for _ in $(seq 100); do grep -q ready /tmp/.rubric-relay-$0.log 2>/dev/null && exit 0; sleep 0.05; done; cat /tmp/.rubric-relay-$0.log; exit 1'
        raw = await self._checked_run(["/bin/sh", "-c", script, str(port), *argv], timeout=15)
        if raw.exit_code != 0:
            reason = _last_line(raw.stdout + raw.stderr)
            raise SandboxError(f"the relay on 127.0.0.1:{port} did not start in the sandbox: {reason}")

    async def close(self) -> None:
        """Remove the sandbox, its processes and its host folder. Safe to call twice."""
        if self.closed:
            return
        self.closed = True
        try:
            await asyncio.shield(self._stop())
        finally:
            self.state.remove()

    async def __aenter__(self) -> Sandbox:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # ------------------------------------------------------------------ helpers

    def _check_open(self) -> None:
        if self.closed:
            raise SandboxError(f"this {self.kind} sandbox is closed; open a new one with runtime.sandbox()")

    async def _checked_run(
        self,
        argv: list[str],
        *,
        stdin: bytes | None = None,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        user: str | None = None,
        out: Capture | None = None,
        err: Capture | None = None,
    ) -> RawResult:
        self._check_open()
        check_timeout(timeout)
        merged = command_env(self.config, env)
        return await self._run(
            argv, stdin=stdin, timeout=timeout, env=merged, cwd=self.resolve(cwd or self.workdir), user=user,
            out=out or Capture(), err=err or Capture(),
        )  # fmt: skip


# `read`: a regular file only (a device or a pipe never ends), at most $2 bytes ("": all of it).
_READ = (
    'if [ ! -e "$1" ]; then echo "$1: no such file" >&2; exit 1; fi; '
    'if [ ! -f "$1" ]; then echo "$1: not a regular file" >&2; exit 1; fi; '
    'if [ -z "$2" ]; then exec cat -- "$1"; fi; exec head -c "$2" -- "$1"'
)
# `download`: a folder's contents, or one file, as a tar on stdout.
_PACK = (
    'if [ -d "$1" ]; then tar -c -C "$1" .; else tar -c -C "$(dirname -- "$1")" -- "$(basename -- "$1")"; fi'
)


def too_large(path: str, max_bytes: int) -> SandboxError:
    """The error of a `read` past `max_bytes`."""
    return SandboxError(
        f"cannot read {path!r} in the sandbox: it is larger than max_bytes = {max_bytes}; "
        "pass a larger max_bytes (None: no cap) or download() it to a file"
    )


def unpack(archive_file: IO[bytes], target: Path) -> None:
    """Extract a tar (an open file, at its start) to `target`: one regular file is written as
    `target`; anything else lands in the folder `target` (no absolute paths, links out or devices)."""
    with tarfile.open(fileobj=archive_file) as archive:
        members = archive.getmembers()
        if len(members) == 1 and members[0].isfile() and members[0].name != ".":
            extracted = archive.extractfile(members[0])
            assert extracted is not None
            with extracted, target.open("wb") as written:
                shutil.copyfileobj(extracted, written, 1 << 20)
        else:
            target.mkdir(parents=True, exist_ok=True)
            archive.extractall(target, filter="data")


# Run on the host before a command under a loop whose subprocesses leak descriptors: close
# every descriptor above 2 but those listed in the first argument, then become the command.
# bash (a few ms) where the host has it: its `{var}>&-` closes any number, which POSIX sh's
# single-digit redirections cannot (--posix: no BASH_ENV read on the host); else Python.
_CLOSE_FDS_BASH = (
    'keep=" $1 "; shift; for p in /proc/$$/fd/*; do n=${p##*/}; [ "$n" -gt 2 ] || continue; '
    'case "$keep" in *" $n "*) continue ;; esac; { exec {n}>&-; } 2>/dev/null; done; exec "$@"'
)
_CLOSE_FDS_PYTHON = (
    "import os, sys\n"
    "low = 3\n"
    "for fd in sorted(int(f) for f in sys.argv[1].split() if f):\n"
    "    os.closerange(low, fd); low = fd + 1\n"
    "os.closerange(low, os.sysconf('SC_OPEN_MAX'))\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


async def spawn(*argv: str, pass_fds: Sequence[int] = (), **kwargs: Any) -> asyncio.subprocess.Process:
    """`asyncio.create_subprocess_exec` whose child holds only its standard streams and `pass_fds`.

    The standard library's loop closes the rest (`close_fds`); uvloop (the loop of Ray's
    workers) does not: its children inherit every inheritable descriptor of the process,
    including the spare ends of their own stdout/stderr socket pairs. A command that leaves a
    process in the background (the relay a sandbox starts) then holds the pipes the harness
    reads until end of file, and the command never ends. Under any loop but the standard
    library's, the command is started through a small host closer (bash, else Python) first.
    That bash reads no start-up file (`--norc --noprofile`): under uvloop its stdin is a
    socket, which bash takes for a remote shell and would source `$HOME/.bashrc` for, HOME
    being the sandbox's working directory, a path anyone may have made on the host.
    """
    if not isinstance(asyncio.get_running_loop(), asyncio.BaseEventLoop):
        keep = " ".join(str(fd) for fd in pass_fds)
        bash = shutil.which("bash")
        if bash is not None:
            argv = (bash, "--norc", "--noprofile", "--posix", "-c", _CLOSE_FDS_BASH, "close-fds", keep, *argv)
        else:
            argv = (sys.executable, "-I", "-S", "-c", _CLOSE_FDS_PYTHON, keep, *argv)
    return await asyncio.create_subprocess_exec(*argv, pass_fds=pass_fds, **kwargs)


def _last_line(data: bytes) -> str:
    lines = data.decode("utf-8", errors="replace").strip().splitlines()
    return lines[-1] if lines else "(no message)"


async def communicate(
    process: asyncio.subprocess.Process,
    stdin: bytes | None,
    timeout: float | None,
    out: Capture,
    err: Capture,
) -> bool:
    """Feed and drain a child into `out` and `err`; True when it timed out. On a timeout the
    output so far is kept and the child is left running (the caller kills it and what it started)."""

    async def drain(stream: asyncio.StreamReader | None, into: Capture) -> None:
        while stream is not None and (chunk := await stream.read(65536)):
            into.add(chunk)

    async def feed() -> None:
        if stdin is not None and process.stdin is not None:
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                process.stdin.write(stdin)
                await process.stdin.drain()
            process.stdin.close()

    async def talk() -> None:
        await asyncio.gather(feed(), drain(process.stdout, out), drain(process.stderr, err))
        await process.wait()

    task = asyncio.ensure_future(talk())
    try:
        done, _ = await asyncio.wait({task}, timeout=timeout)
    finally:
        if not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if done:
        task.result()
    return not done


async def reap(process: asyncio.subprocess.Process) -> None:
    """Wait (boundedly) for a killed child, but not for its pipes: a process that escaped (to
    the namespace's init, or by setsid) may hold them open long after (asyncio's wait()
    waits for both)."""
    # Close our ends of its pipes: an escaped holder would keep them open (and warning) for as
    # long as it lives. asyncio's Process exposes no public close; its transport's close() is it.
    transport = getattr(process, "_transport", None)
    if transport is not None and process.returncode is None:
        # Killed mid-run: what it printed since is not wanted, and a pipe left full (it printed
        # faster than we read) would hold wait() for the whole bound below.
        for fd in (1, 2):
            pipe = transport.get_pipe_transport(fd)
            if pipe is not None:
                pipe.close()
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(process.wait(), 5)
    if transport is not None:
        transport.close()


def elapsed(start: float) -> float:
    """Seconds since `start` (a `time.monotonic()` reading)."""
    return time.monotonic() - start


class SyncSandbox:
    """The sync face of a `Sandbox`: the same methods, blocking (works inside a running loop).

    Args:
        sandbox: The sandbox it drives."""

    def __init__(self, sandbox: Sandbox) -> None:
        self.aio = sandbox

    @property
    def workdir(self) -> str:
        """The working directory inside the sandbox."""
        return self.aio.workdir

    @property
    def socket_path(self) -> Path:
        """Host-side path of the sandbox's Unix socket."""
        return self.aio.socket_path

    def exec(
        self,
        cmd: str | Sequence[str],
        *,
        timeout: float | None = None,
        env: Mapping[str, str] | None = None,
        cwd: str | None = None,
        user: str | None = None,
        stdin: bytes | str | None = None,
        max_output: int | None = DEFAULT_MAX_OUTPUT,
    ) -> ExecResult:
        """Run a command inside (see `Sandbox.exec`)."""
        return run_sync(
            self.aio.exec(
                cmd, timeout=timeout, env=env, cwd=cwd, user=user, stdin=stdin, max_output=max_output
            )
        )

    def read(self, path: str, *, max_bytes: int | None = DEFAULT_MAX_READ) -> bytes:
        """The bytes of a regular file inside the sandbox (see `Sandbox.read`)."""
        return run_sync(self.aio.read(path, max_bytes=max_bytes))

    def write(self, path: str, data: bytes | str) -> None:
        """Write a file inside the sandbox."""
        run_sync(self.aio.write(path, data))

    def upload(self, local: str | Path, remote: str) -> None:
        """Copy a host file or folder into the sandbox."""
        run_sync(self.aio.upload(local, remote))

    def download(self, remote: str, local: str | Path) -> None:
        """Copy a file or folder out of the sandbox."""
        run_sync(self.aio.download(remote, local))

    def fork(self) -> SyncSandbox:
        """A new sandbox with a copy of this one's files (close it with `.close()` or `with`)."""
        return SyncSandbox(run_sync(self.aio.fork()))

    def relay(self, port: int) -> str:
        """Serve the Unix socket as `http://127.0.0.1:PORT` inside; returns that URL."""
        return run_sync(self.aio.relay(port))

    def close(self) -> None:
        """Remove the sandbox and everything in it."""
        run_sync(self.aio.close())

    def __enter__(self) -> SyncSandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class SandboxContext:
    """What `runtime.sandbox(...)` returns: `async with` gives a `Sandbox`, `with` a `SyncSandbox`;
    `await` gives a started `Sandbox` the caller closes.

    Args:
        runtime: The runtime that starts the sandbox.
        config: The sandbox's image, limits and mounts."""

    def __init__(self, runtime: Runtime, config: SandboxConfig) -> None:
        self._runtime = runtime
        self._config = config
        self._sandbox: Sandbox | None = None

    def __await__(self):  # type: ignore[no-untyped-def]
        return self._runtime.open(self._config).__await__()

    async def __aenter__(self) -> Sandbox:
        self._sandbox = await self._runtime.open(self._config)
        return self._sandbox

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._sandbox is not None:
            await self._sandbox.close()

    def __enter__(self) -> SyncSandbox:
        self._sandbox = run_sync(self._runtime.open(self._config))
        return SyncSandbox(self._sandbox)

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self._sandbox is not None:
            run_sync(self._sandbox.close())


class Runtime(ABC):
    """Makes sandboxes of one kind (`get_runtime(spec)` builds one).

    Attributes:
        spec: The spec it was built from ("docker:IMAGE", "bwrap", "local", ...).
        run_id: The run its sandboxes are labelled with.
    """

    def __init__(self, spec: str, run_id: str) -> None:
        self.spec = spec
        self.run_id = run_id

    def sandbox(
        self,
        *,
        cpus: float | None = None,
        memory_mb: int | None = None,
        pids: int | None = None,
        disk_mb: int | None = None,
        network: Network = "none",
        env: Mapping[str, str] | None = None,
        workdir: str = DEFAULT_WORKDIR,
    ) -> SandboxContext:
        """A sandbox: `async with runtime.sandbox(...) as sb` (or `with`, for the sync face).

        Args:
            cpus: CPUs it may use; None: no cap.
            memory_mb: Memory for everything inside (on bwrap, its tmpfs files included);
                None: no cap.
            pids: Processes and threads at once; None: no cap.
            disk_mb: Largest file a process may write (and the writable layer where the
                runtime can cap it); None: no cap.
            network: "none" (only the Unix socket back to the harness) or "host" (opt in).
            env: Environment variables for every command.
            workdir: Working directory inside (created); relative paths start there.

        Returns:
            A context; the sandbox and everything in it is removed when it exits, on every path.
        """
        config = SandboxConfig(cpus, memory_mb, pids, disk_mb, network, dict(env or {}), workdir)
        return SandboxContext(self, config)

    async def open(self, config: SandboxConfig) -> Sandbox:
        """Start one sandbox with `config`; the caller closes it (prefer `sandbox()`)."""
        await self.check(config)
        sandbox = self._make(config, SandboxState.create(self.kind_name, self.run_id))
        try:
            await sandbox._start()
        except BaseException:
            await sandbox.close()
            raise
        return sandbox

    async def run(
        self,
        cmd: str | Sequence[str],
        *,
        config: SandboxConfig | None = None,
        stdin: bytes | str | None = None,
        timeout: float | None = None,
        user: str | None = None,
        max_output: int | None = DEFAULT_MAX_OUTPUT,
    ) -> ExecResult:
        """Run one command in a fresh sandbox made for it and ended with it (as `docker run --rm`).

        Nothing of the command survives it: its files, and every process it started, go when
        it ends, times out or is cancelled. Where the runtime can start a sandbox around a
        single command (bubblewrap: one process, nothing to enter) this costs less than
        `sandbox()` and `exec`; elsewhere it is exactly that.

        Args:
            cmd: An argument list, or a string run by `/bin/sh -c`.
            config: The sandbox's limits, network, environment, working directory and mounts
                (default: `SandboxConfig()`).
            stdin: Bytes (or text) fed to its standard input.
            timeout: Seconds before the command and everything it started are killed.
            user: Run as this user ("UID" or "UID:GID"; see `Sandbox.exec`).
            max_output: Bytes kept of each of stdout and stderr (see `Sandbox.exec`).

        Returns:
            Exit code, output, whether it timed out, and how long it took (the sandbox's start
            included).

        Raises:
            RuntimeUnavailableError: The runtime cannot work here, or cannot apply `config`.
        """
        config = config or SandboxConfig()
        check_timeout(timeout)
        await self.check(config)
        data = stdin.encode() if isinstance(stdin, str) else stdin
        raw = await self._run_once(
            config, shell_argv(cmd), stdin=data, timeout=timeout, user=user,
            out=Capture(max_output), err=Capture(max_output),
        )  # fmt: skip
        return raw.decoded()

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
        """`run`'s work: a sandbox opened, one command, the sandbox closed (a runtime that can
        start a sandbox around one command overrides this)."""
        sandbox = await self.open(config)
        try:
            return await sandbox._checked_run(argv, stdin=stdin, timeout=timeout, user=user, out=out, err=err)
        finally:
            await sandbox.close()

    def with_config(self, config: SandboxConfig, **changes: object) -> SandboxConfig:
        """`config` with `changes` (a helper for forks)."""
        return replace(config, **changes)  # type: ignore[arg-type]

    @property
    @abstractmethod
    def kind_name(self) -> str:
        """The runtime's kind: "docker", "bwrap" or "local"."""

    @property
    def own_network(self) -> bool:
        """Whether its sandboxes can have a network of their own (`network="bridge"`)."""
        return False

    @abstractmethod
    def _make(self, config: SandboxConfig, state: SandboxState) -> Sandbox:
        """A not-yet-started sandbox."""

    @abstractmethod
    async def check(self, config: SandboxConfig | None = None) -> None:
        """Raise `RuntimeUnavailableError` when this runtime cannot work here, or cannot apply
        `config`'s limits here (the message says how to fix it)."""

    def describe(self) -> str:
        """One line: what this runtime isolates."""
        return self.spec


def quote(argv: Sequence[str]) -> str:
    """An argument list as one shell line (for messages)."""
    return " ".join(shlex.quote(a) for a in argv)


def pid_alive(pid: int) -> bool:
    """True when a process with this pid exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
