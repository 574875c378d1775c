"""Docker sandboxes: one container per sandbox on a real Docker Engine, through `aiodocker`.

Why aiodocker: it speaks the Engine API asynchronously over aiohttp (already a core dependency),
so hundreds of concurrent exec streams need no thread each; `docker` 7.x is synchronous and would
need a thread per blocking call (one per running command).

A container runs `cat` on its stdin under Docker's init (`--init`, which reaps orphans), and we
hold that stdin open: when the owner dies, even by SIGKILL, the kernel closes the connection and
the container ends and is removed by the daemon (`AutoRemove`). It has
`--network none` (only the bind-mounted Unix socket folder at /run/rubric leads out), the
limits asked for (CPUs, memory without swap, pids, RLIMIT_FSIZE for the largest file; overlay2
on ext4 cannot cap a container's writable layer), and labels naming the run, the owner pid and
its start time, and this boot, so `prune` can tell ours from anyone else's and a dead owner's
from a live one's. Files move with the Engine's archive API (paths resolved inside the container).
A build context folder is built once per content hash (`rubric-build:<hash>`).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import os
import posixpath
import signal
import stat
import sys
import tarfile
import tempfile
import time
import warnings
from collections import deque
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path, PurePosixPath
from typing import IO, TYPE_CHECKING, Any

from harness.runtimes._base import (
    DEFAULT_MAX_READ,
    SOCKET_DIR,
    Capture,
    RawResult,
    Runtime,
    RuntimeUnavailableError,
    Sandbox,
    SandboxConfig,
    SandboxError,
    check_cap,
    too_large,
)
from harness.runtimes._state import LABEL, SandboxState, boot_id, owner_alive

if TYPE_CHECKING:
    import aiodocker

START_HINT = (
    "start one (Debian: apt-get install docker.io && dockerd &, or systemctl start docker), "
    "or point DOCKER_HOST at one; tests and CI use .ci/docker-up"
)
_KILL_GRACE = 2.0
_MAX_LINKS = 16  # links `read` follows (the kernel's own limit is 40)
_TAR_SLACK = 64 << 10  # a one-file tar's bytes beyond the file: headers, padding, the end blocks
#: Seconds the daemon has to answer a check, a listing or one removal before it counts as down.
DAEMON_DEADLINE = 5.0
_IO_DIR = "/run/rubric-io"  # where a command's stdin file is (host: <state folder>/io, read-only inside)
_CHANGE_KINDS = {0: "changed", 1: "added", 2: "deleted"}  # the Engine's `changes` kinds
#: Files the Engine keeps in every container's layer (its own, left out of `changed_files`).
_ENGINE_FILES = ("/etc/hostname", "/etc/hosts", "/etc/resolv.conf", "/.dockerenv")
#: Run as root inside the container by `_end_processes`, with shell builtins only: stop, then
#: kill, every process but init (pid 1), its keeper (init's first child) and this shell, pass
#: after pass until one finds none alive (zombies wait for init to reap them); 50 passes at most.
#: The keeper is init's oldest child (the lowest pid whose parent is 1): it started first.
_KILL_ALL = r"""
keeper=""
for d in /proc/[0-9]*; do
  read -r stat < "$d/stat" 2>/dev/null || continue
  set -- ${stat##*) }
  if [ "$2" = 1 ] && { [ -z "$keeper" ] || [ "${d#/proc/}" -lt "$keeper" ]; }; then keeper=${d#/proc/}; fi
done
keep=" 1 $keeper $$ "
pass=0
while [ $pass -lt 50 ]; do
  pass=$((pass + 1)); found=""
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case "$keep" in *" $p "*) continue ;; esac
    read -r stat < "$d/stat" 2>/dev/null || continue
    case "${stat##*) }" in Z*) continue ;; esac
    found="$found $p"
  done
  [ -z "$found" ] && exit 0
  kill -STOP $found 2>/dev/null; kill -KILL $found 2>/dev/null
done
exit 1
"""
_RESTART_GRACE = 30.0  # seconds a restarted container has to show its init and keeper alone (a loaded daemon lists none for seconds)


def client() -> aiodocker.Docker:
    """A client for the daemon at $DOCKER_HOST or the default socket (one per sandbox: an aiohttp
    session is bound to the loop that made it)."""
    try:
        import aiodocker  # optional extra [docker], imported where used
    except ImportError as exc:
        raise RuntimeUnavailableError(
            "docker: runtimes need the aiodocker package; pip install 'rubric-rl[docker]'"
        ) from exc
    try:
        return aiodocker.Docker()
    except (ValueError, AssertionError) as exc:  # no socket found, no DOCKER_HOST (an assert in 0.27)
        why = str(exc) or "no DOCKER_HOST and no socket at /run/docker.sock or /var/run/docker.sock"
        raise RuntimeUnavailableError(f"no Docker daemon found ({why}); {START_HINT}") from exc


def _unanswered(docker: aiodocker.Docker | None, exc: BaseException) -> RuntimeUnavailableError:
    """What to raise when the daemon fails to answer sensibly, in one line."""
    where = os.environ.get("DOCKER_HOST") or str(
        getattr(getattr(docker, "connector", None), "path", "the default socket")
    )
    if isinstance(exc, TimeoutError):
        why = f"no answer within {DAEMON_DEADLINE:g} s"
    else:
        why = " ".join(f"{type(exc).__name__}: {exc}".split()).rstrip(":")[:300]  # one line, bounded
    return RuntimeUnavailableError(f"no Docker daemon answers at {where} ({why}); {START_HINT}")


def context_hash(folder: Path) -> str:
    """The content hash of a build context: every file's path, mode and bytes, in order."""
    digest = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file() or p.is_symlink()):
        relative = path.relative_to(folder).as_posix()
        digest.update(relative.encode() + b"\0" + oct(path.lstat().st_mode).encode() + b"\0")
        digest.update(os.readlink(path).encode() if path.is_symlink() else path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


def _layer_changes(upper: Path, lower: list[Path]) -> dict[str, str]:
    """What an overlay upper folder holds against its lower folders, as `docker diff` reads it:
    a whiteout (a 0/0 character device) is "deleted", an opaque folder "changed", any other
    entry "changed" when a lower folder has its path, else "added". Links are never followed."""
    found: dict[str, str] = {}
    stack = [""]
    while stack:
        folder = stack.pop()
        with os.scandir(upper / folder.lstrip("/")) as entries:
            for entry in entries:
                path = f"{folder}/{entry.name}"
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISCHR(info.st_mode) and info.st_rdev == 0:
                    found[path] = "deleted"
                    continue
                below = any(os.path.lexists(layer / path.lstrip("/")) for layer in lower)
                found[path] = "changed" if below else "added"
                if stat.S_ISDIR(info.st_mode):
                    if below and _opaque(entry.path):  # it hides what the lower folders held there
                        found[path] = "changed"
                        hidden = {n for layer in lower if (layer / path.lstrip("/")).is_dir() for n in os.listdir(layer / path.lstrip("/"))}  # fmt: skip
                        found.update(
                            {f"{path}/{name}": "deleted" for name in hidden - set(os.listdir(entry.path))}
                        )
                    stack.append(path)
    return found


def _opaque(folder: str) -> bool:
    """Whether an overlay upper folder is opaque (made anew over one of the lower folders)."""
    try:
        return os.getxattr(folder, "trusted.overlay.opaque", follow_symlinks=False) == b"y"
    except OSError:
        return False


def _tar_folder(folder: Path) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        for child in sorted(folder.iterdir()):
            archive.add(child, arcname=child.name)
    return buffer.getvalue()


def _tar_one(name: str, data: bytes, mode: int = 0o644) -> bytes:  # one file, for put_archive
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo(name)
        info.size, info.mode, info.mtime = len(data), mode, int(time.time())
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


class DockerSandbox(Sandbox):
    """One container (see the module docstring)."""

    kind = "docker"

    def __init__(
        self, config: SandboxConfig, state: SandboxState, runtime: DockerRuntime, image: str | None = None
    ) -> None:
        super().__init__(config, state)
        self.runtime = runtime
        self.image = image
        self.fork_image: str | None = None  # an image this sandbox was forked from (removed with it)
        self._commit: str | None = None  # this sandbox's last commit, reused by forks until it changes
        self._dirty = True
        self._docker: aiodocker.Docker | None = None
        self._container: Any = None
        self._attach: Any = None  # the stdin stream the container lives by
        #: Attaches of the runs before a restart, closed with the container, never before: with
        #: StdinOnce, a client letting go under load closed the restarted run's stdin too, and
        #: the keeper (`cat`) exited with it.
        self._old_attaches: list[Any] = []
        self._counter = 0

    # ------------------------------------------------------------------ lifecycle

    def _container_config(self, image: str) -> dict[str, Any]:
        config = self.config
        host: dict[str, Any] = {
            "NetworkMode": config.network,
            "Init": True,
            "AutoRemove": True,
            "Binds": [
                f"{self.state.directory / 'socket'}:{SOCKET_DIR}",
                f"{self.state.directory / 'io'}:{_IO_DIR}:ro",
                *(f"{host}:{inside}:ro" for host, inside in config.mounts.items()),
            ],
            "Ulimits": [{"Name": "core", "Soft": 0, "Hard": 0}],
        }
        if config.cpus:
            host["NanoCpus"] = int(config.cpus * 1e9)
        if config.memory_mb:
            host["Memory"] = host["MemorySwap"] = config.memory_mb << 20
        if config.pids:
            host["PidsLimit"] = config.pids
        if config.disk_mb:
            size = config.disk_mb << 20
            host["Ulimits"].append({"Name": "fsize", "Soft": size, "Hard": size})
            if self.runtime.layer_capped is not False:  # the writable layer too, where the driver can
                host["StorageOpt"] = {"size": f"{config.disk_mb}M"}
        return {
            "Image": image,
            # Lives while our attach to its stdin does: a SIGKILLed owner closes that
            # connection, `cat` sees EOF, init exits, and the daemon removes the container.
            "Cmd": ["sh", "-c", "exec cat > /dev/null"],
            "OpenStdin": True,
            "StdinOnce": True,
            "AttachStdin": True,
            "Entrypoint": [],
            "Labels": self.state.labels,
            "WorkingDir": self.workdir,
            "Env": [f"{k}={v}" for k, v in config.env.items()],
            "NetworkDisabled": config.network == "none",
            "HostConfig": host,
        }

    async def _start(self) -> None:
        from aiodocker.exceptions import DockerError  # optional extra [docker], imported where used

        image = self.image or await self.runtime.image()
        (self.state.directory / "io").mkdir(mode=0o755)
        self._docker = self._docker or client()  # a subclass may have opened it for its own containers
        try:
            self._container = await self._create(image)
        except DockerError as exc:
            if exc.status == 404:
                raise SandboxError(
                    f"docker image {image!r} is not on this machine's daemon: build it (docker build -t "
                    f"{image} DIR), load or pull it, or use docker:PATH/TO/DIR to build from a folder"
                ) from exc
            raise SandboxError(f"docker could not create a container from {image!r}: {exc.message}") from exc
        self.state.container = self._container.id
        self.state.save()
        try:
            self._attach = self._container.attach(stdin=True)
            await self._attach.__aenter__()
            await self._container.start()
        except DockerError as exc:
            raise SandboxError(f"docker could not start a container from {image!r}: {exc.message}") from exc

    async def _create(self, image: str) -> Any:
        """Create the container; where the daemon's storage driver cannot cap a writable layer
        (overlay2 on ext4 needs xfs with pquota), say so once and cap each file only."""
        from aiodocker.exceptions import DockerError  # optional extra [docker], imported where used

        assert self._docker is not None
        config = self._container_config(image)
        try:
            made = await self._docker.containers.create(config)
        except DockerError as exc:
            said = str(exc.message).lower()
            if "StorageOpt" not in config["HostConfig"] or not ("storage" in said or "quota" in said):
                raise
            self.runtime.layer_capped = False
            _say_layer_uncapped(self.runtime, str(exc.message))
            del config["HostConfig"]["StorageOpt"]
            made = await self._docker.containers.create(config)
        else:
            if "StorageOpt" in config["HostConfig"]:
                self.runtime.layer_capped = True
        return made

    async def _stop(self) -> None:
        from aiodocker.exceptions import DockerError  # optional extra [docker], imported where used

        if self._docker is None:
            return
        try:
            if self._container is not None:
                with contextlib.suppress(DockerError):
                    await self._container.delete(force=True, v=True)
            await self._after_container()
            for attach in [*self._old_attaches, self._attach]:
                if attach is not None:
                    with contextlib.suppress(Exception):  # the daemon ended it with the container
                        await attach.close()
            for image in (self._commit, self.fork_image):
                if image is not None:  # in use by another fork: that fork removes it
                    with contextlib.suppress(DockerError):
                        await self._docker.images.delete(image)
        finally:
            await self._docker.close()

    async def _after_container(self) -> None:
        """What a subclass removes once the container is gone, before the client closes."""

    # ------------------------------------------------------------------ commands

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
        self._dirty = True
        feed: Path | None = None
        if stdin is not None:  # fed from a file: the Engine's exec stdin cannot be half-closed
            self._counter += 1
            feed = self.state.directory / "io" / f"stdin-{self._counter}"
            feed.write_bytes(stdin)
            feed.chmod(0o644)
            inside = f"{_IO_DIR}/{feed.name}"
            argv = ["/bin/sh", "-c", 'f=$1; shift; exec "$@" < "$f"', "sh", inside, *argv]
        execution = await self._container.exec(
            argv, stdout=True, stderr=True, environment=dict(env), workdir=cwd, user=user or ""
        )

        async def collect() -> None:
            async with execution.start(detach=False) as stream:
                while message := await stream.read_out():
                    (out if message.stream == 1 else err).add(message.data)

        task = asyncio.ensure_future(collect())
        try:
            done, _ = await asyncio.wait({task}, timeout=timeout)
            timed_out = not done
            if timed_out:
                await self._kill_exec(execution)
                await asyncio.wait({task}, timeout=_KILL_GRACE)
            if task.done():
                task.result()
        finally:
            if not task.done():
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await task
            if feed is not None:
                feed.unlink(missing_ok=True)
        code: int | None = None
        if not timed_out:
            code = (await execution.inspect())["ExitCode"]
            if code is not None and code > 128 and code - 128 in signal.valid_signals():
                code = -(code - 128)
        result = RawResult.of(code, out, err, timed_out, start)
        said = result.stdout + result.stderr if code in (126, 127) else b""
        if b"chdir to cwd" in said:
            raise SandboxError(f"working directory {cwd!r} does not exist in the sandbox; create it first")
        if b"executable file not found" in said:  # the Engine's message, on stderr
            result = replace(result, exit_code=127, stdout=b"", stderr=said)
        return result

    async def _kill_exec(self, execution: Any) -> None:
        """Kill a command and every process it started (host pids from the Engine's `top`)."""
        pid = (await execution.inspect()).get("Pid", 0)
        if not pid:
            return
        table = await self._container.top(ps_args="-o pid,ppid")
        children: dict[int, list[int]] = {}
        for row in table.get("Processes") or []:
            children.setdefault(int(row[1]), []).append(int(row[0]))
        doomed, stack = [], [int(pid)]
        while stack:
            current = stack.pop()
            doomed.append(current)
            stack.extend(children.get(current, []))
        for victim in doomed:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(victim, signal.SIGKILL)

    # ------------------------------------------------------------------ trust (new processes, changes)

    async def _end_processes(self) -> int:
        """End everything that runs beside the container's init and keeper.

        First from inside: a root shell stops and kills every other process, pass after pass
        (`_KILL_ALL`, shell builtins only). Only when something is still left (an image whose
        shell was replaced, say) is the container restarted in place: a restart ends its
        init, and with it its whole PID namespace, and starts a new one on the same writable
        layer. The restart is the last resort because Docker 20.10 can remove an `AutoRemove`
        container it is restarting (its exit handler reads `AutoRemove` after the restart has
        put it back; seen under load as "marked for removal" or a container gone after the
        restart). Checked afterwards, either way: init and keeper alone."""
        if len(await self._processes()) <= 2:  # init and keeper: nothing to end
            return 0
        await self._checked_run(
            ["/bin/sh", "-c", _KILL_ALL], stdin=None, timeout=60, env={}, cwd="/", user="0",
            out=Capture(4096), err=Capture(4096),
        )  # fmt: skip
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:  # the killed wait for init to reap them
            if len(await self._processes()) <= 2:
                return 1
            await asyncio.sleep(0.05)
        return await self._restart()

    async def _restart(self) -> int:
        """Restart the container in place (see `_end_processes`): the daemon keeps it through
        the restart (`AutoRemove` waits for a stop); the keeper is attached again, then the
        old attach is let go."""
        from aiodocker.exceptions import DockerError  # optional extra [docker], imported where used

        previous = self._attach
        try:
            await self._container.restart(t=0)
            self._attach = self._container.attach(stdin=True)
            await self._attach.__aenter__()
        except DockerError as exc:
            raise SandboxError(f"cannot end the processes in the container: {exc.message}") from exc
        finally:
            if previous is not None and previous is not self._attach:
                self._old_attaches.append(previous)  # closed with the container (see __init__)
        deadline = time.monotonic() + _RESTART_GRACE
        while True:  # init starts its keeper a moment after the restart returns
            try:
                left = await self._processes()
            except SandboxError:  # not listed: still starting on a loaded daemon, or stopped
                if time.monotonic() < deadline and await self._starting_or_running():
                    await asyncio.sleep(0.05)
                    continue
                # stopped: the keeper (the image's `sh -c 'exec cat'`) exited
                raise SandboxError(
                    "the container stopped when it was restarted: its keeper (the image's sh and "
                    "cat, found on its PATH) did not stay; were they replaced?"
                ) from None
            if len(left) == 2 or time.monotonic() > deadline:
                break
            await asyncio.sleep(0.01)
        if len(left) != 2:
            raise SandboxError(f"the restarted container does not run its init and keeper alone: {left}")
        return 1

    async def _starting_or_running(self) -> bool:
        """Whether the daemon says the container runs or is (re)starting; False once it has
        stopped or is gone (removed on stop)."""
        from aiodocker.exceptions import DockerError  # optional extra [docker], imported where used

        try:
            state = (await self._container.show()).get("State") or {}
        except DockerError:
            return False
        return bool(state.get("Running") or state.get("Restarting")) and not state.get("Dead")

    async def _processes(self) -> list[list[str]]:
        """The container's processes (host pid, parent pid, command), from the Engine's `top`."""
        from aiodocker.exceptions import DockerError  # optional extra [docker], imported where used

        try:
            table = await self._container.top(ps_args="-o pid,ppid,comm")
        except DockerError as exc:
            raise SandboxError(f"the container has ended or cannot be listed: {exc.message}") from exc
        return list(table.get("Processes") or [])

    async def _changed_files(self) -> dict[str, str]:
        """The container's writable layer against its image (what `docker diff` lists), less
        what the harness and Docker put there (mount points, the init) and the sandbox's own
        writable area. Read from the overlay's upper folder on this host when this process
        may (a local daemon, run as root: about 1 ms), else asked of the Engine (0.2-0.3 s)."""
        layers = await self._layers()
        changes = _layer_changes(*layers) if layers else await self._engine_changes()
        own = {SOCKET_DIR, _IO_DIR, "/sbin/docker-init", "/usr/sbin/docker-init", *_ENGINE_FILES}
        own.update(self.config.mounts.values())
        # A folder is "changed" whenever something below it is: only its own change is news.
        parents = {str(parent) for path in changes for parent in PurePosixPath(path).parents}
        return {
            path: kind
            for path, kind in changes.items()
            if path not in own and not self._private(path) and not (kind == "changed" and path in parents)
        }

    async def _engine_changes(self) -> dict[str, str]:
        """`docker diff`, from the Engine: path -> kind."""
        from aiodocker.exceptions import DockerError  # optional extra [docker], imported where used

        assert self._docker is not None
        try:
            listed = await self._docker._query_json(f"containers/{self._container.id}/changes")
        except DockerError as exc:
            raise SandboxError(f"cannot list the container's changed files: {exc.message}") from exc
        return {entry["Path"]: _CHANGE_KINDS.get(entry.get("Kind"), "changed") for entry in listed or []}

    async def _layers(self) -> tuple[Path, list[Path]] | None:
        """The container's overlay upper folder and lower folders, when this process can read them."""
        from aiodocker.exceptions import DockerError  # optional extra [docker], imported where used

        try:
            driver = (await self._container.show()).get("GraphDriver") or {}
        except DockerError as exc:
            raise SandboxError(f"the container has ended or cannot be inspected: {exc.message}") from exc
        data = driver.get("Data") or {}
        if driver.get("Name") != "overlay2" or not data.get("UpperDir") or not data.get("LowerDir"):
            return None
        upper, lower = Path(data["UpperDir"]), [Path(p) for p in str(data["LowerDir"]).split(":")]
        if not all(os.access(p, os.R_OK | os.X_OK) for p in (upper, *lower)):
            return None
        return upper, lower

    # ------------------------------------------------------------------ files

    async def read(self, path: str, *, max_bytes: int | None = DEFAULT_MAX_READ) -> bytes:
        """The bytes of a regular file inside the container (a link is followed inside), by the
        Engine's archive API: the daemon resolves the path, no program of the container runs,
        and the archive streams to a spool file, so the harness holds the file once.
        `max_bytes` as in `Sandbox.read`."""
        check_cap("max_bytes", max_bytes)
        self._check_open()
        where = self.resolve(path)
        for _ in range(_MAX_LINKS):
            with tempfile.SpooledTemporaryFile(max_size=1 << 20) as spool:
                await self._fetch_archive(where, spool, path, max_bytes)
                spool.seek(0)
                with tarfile.open(fileobj=spool) as archive:
                    member = archive.next()
                if member is not None and member.issym():  # the archive holds the link itself
                    where = posixpath.normpath(posixpath.join(posixpath.dirname(where), member.linkname))
                    continue
                if member is None or not member.isfile():
                    raise SandboxError(f"cannot read {path!r} in the sandbox: not a regular file")
                if max_bytes is not None and member.size > max_bytes:
                    raise too_large(path, max_bytes)
                spool.seek(member.offset_data)
                data: bytes = spool.read(member.size)
                return data
        raise SandboxError(f"cannot read {path!r} in the sandbox: more than {_MAX_LINKS} links to follow")

    async def _fetch_archive(self, where: str, spool: IO[bytes], shown: str, max_bytes: int | None) -> None:
        """Stream the Engine's tar of `where` into `spool`; past `max_bytes` (and the tar's own
        headers) stop and raise."""
        from aiodocker.exceptions import DockerError  # optional extra [docker], imported where used

        assert self._docker is not None
        limit = None if max_bytes is None else max_bytes + _TAR_SLACK
        received = 0
        try:
            # aiodocker's get_archive() reads the whole tar into memory; its request helper streams.
            async with self._docker._query(
                f"containers/{self._container.id}/archive", params={"path": where}
            ) as response:
                try:
                    async for chunk in response.content.iter_chunked(1 << 16):
                        received += len(chunk)
                        if limit is not None and received > limit:
                            assert max_bytes is not None
                            raise too_large(shown, max_bytes)
                        spool.write(chunk)
                finally:
                    response.close()
        except DockerError as exc:
            raise SandboxError(f"cannot read {shown!r} in the sandbox: {exc.message}") from exc

    async def write(self, path: str, data: bytes | str) -> None:
        """Write a file inside the container (its folder is created)."""
        self._check_open()
        target = PurePosixPath(self.resolve(path))
        payload = data.encode() if isinstance(data, str) else data
        await self._ensure_folder(str(target.parent))
        await self._put(str(target.parent), _tar_one(target.name, payload), path)

    async def upload(self, local: str | Path, remote: str) -> None:
        """Copy a host file or folder into the container at `remote` (folders: their contents)."""
        source = Path(local)
        if not source.is_dir():
            await self.write(remote, source.read_bytes())
            return
        self._check_open()
        target = self.resolve(remote)
        await self._ensure_folder(target)
        await self._put(target, _tar_folder(source), remote)

    async def _put(self, folder: str, archive: bytes, shown: str) -> None:
        from aiodocker.exceptions import DockerError  # optional extra [docker], imported where used

        self._dirty = True
        try:
            await self._container.put_archive(folder, archive)
        except DockerError as exc:
            raise SandboxError(f"cannot write {shown!r} in the sandbox: {exc.message}") from exc

    async def _ensure_folder(self, folder: str) -> None:
        made = await self._checked_run(["mkdir", "-p", "--", folder])
        if made.exit_code != 0:
            raise SandboxError(
                f"cannot create {folder!r} in the sandbox: {made.stderr.decode(errors='replace')}"
            )

    # ------------------------------------------------------------------ fork

    async def _fork(self) -> Sandbox:
        """Commit this container (once until it changes) and start a new one from that image."""
        if self._commit is None or self._dirty:
            assert self._docker is not None
            old = self._commit
            committed = await self._container.commit(
                repository="rubric-fork", tag=self.state.directory.name[len("rubric-sandbox-") :],
                changes=["LABEL rubric.fork=1"], pause=True,
            )  # fmt: skip
            self._commit, self._dirty = committed["Id"], False
            if old is not None:  # forks still using it keep it (the delete is refused)
                with contextlib.suppress(Exception):
                    await self._docker.images.delete(old)
        state = SandboxState.create("docker", self.runtime.run_id)
        copy = type(self)(self.config, state, self.runtime, image=self._commit)  # a compose one: new sidecars
        try:
            await copy._start()
        except BaseException:
            await copy.close()
            raise
        return copy

    def describe(self) -> str:
        disk = ""
        if self.config.disk_mb:
            capped = (
                "the writable layer and each file"
                if self.runtime.layer_capped
                else "each file (not the total)"
            )
            disk = f", disk_mb {self.config.disk_mb} caps {capped}"
        return f"docker container ({self.image or self.runtime.spec}), network {self.config.network}{disk}"


_WARNED: set[str] = set()


def _say_layer_uncapped(runtime: DockerRuntime, reason: str) -> None:
    """Once per daemon and process, on stderr: disk_mb caps each file, not the total."""
    host = os.environ.get("DOCKER_HOST", "the default socket")
    if host in _WARNED:
        return
    _WARNED.add(host)
    print(
        f"rubric: docker ({host}) cannot cap a container's writable layer ({reason}); disk_mb "
        "(Harbor's storage_mb) caps each file a sandbox writes, not their total. To cap the total, run "
        "dockerd with --data-root on xfs mounted with pquota, or use the bwrap runtime (size-capped tmpfs).",
        file=sys.stderr,
        flush=True,
    )


class DockerRuntime(Runtime):
    """Makes Docker sandboxes from an image name or a build context folder."""

    def __init__(
        self,
        spec: str,
        run_id: str,
        *,
        image: str | None = None,
        context: Path | None = None,
        build_network: bool = True,
    ) -> None:
        super().__init__(spec, run_id)
        self.image_name = image
        self.context = context
        #: Whether a build from `context` may use the daemon's default network (False: none).
        self.build_network = build_network
        #: The Dockerfile's path inside `context` (None: `Dockerfile`).
        self.dockerfile: str | None = None
        #: Whether the daemon caps a container's writable layer at disk_mb (None: not yet known).
        self.layer_capped: bool | None = None
        self._built: str | None = None
        self._lock = asyncio.Lock()
        self._checked = False

    @property
    def kind_name(self) -> str:
        return "docker"

    @property
    def own_network(self) -> bool:
        return True

    def _make(self, config: SandboxConfig, state: SandboxState) -> Sandbox:
        return DockerSandbox(config, state, self)

    async def check(self, config: SandboxConfig | None = None) -> None:
        """Raise `RuntimeUnavailableError` (one line, with how to start one) when no daemon answers
        sensibly within `DAEMON_DEADLINE`; the first success in a process also prunes what dead
        owners left on the daemon (a failure there is a warning)."""
        if self._checked:
            return
        docker = client()
        try:
            async with asyncio.timeout(DAEMON_DEADLINE):
                await docker.version()
        # The daemon is outside us: aiodocker turns its faults into DockerError, aiohttp errors,
        # TypeError or KeyError (a body of the wrong shape), so any failure means "not usable".
        except Exception as exc:
            raise _unanswered(docker, exc) from exc
        finally:
            await docker.close()
        self._checked = True
        await prune_once()

    async def image(self) -> str:
        """The image sandboxes start from (a build context is built once per content hash)."""
        if self.image_name is not None:
            return self.image_name
        assert self.context is not None
        async with self._lock:
            if self._built is None:
                self._built = await build_context(
                    self.context, network=self.build_network, dockerfile=self.dockerfile
                )
        return self._built

    def describe(self) -> str:
        return f"docker ({self.image_name or self.context})"


async def build_context(
    folder: Path, *, network: bool = True, dockerfile: str | None = None, timeout: float | None = None
) -> str:
    """Build `folder` (a Dockerfile inside) as `rubric-build:<content hash>`, unless already built.

    Args:
        folder: The build context.
        network: Whether its RUN steps may use the daemon's default network; False: none at all.
        dockerfile: The Dockerfile's path inside `folder` (None: `Dockerfile`).
        timeout: Seconds the build may take (None: no limit); past them the request is closed,
            which stops the daemon's build, and a `SandboxError` says so.
    """
    try:
        return await asyncio.wait_for(_build(folder, network, dockerfile), timeout)
    except TimeoutError:
        raise SandboxError(f"docker build of {folder} ran past its {timeout:g} s build timeout") from None


async def _build(folder: Path, network: bool, dockerfile: str | None) -> str:
    """`build_context` without its time limit."""
    tag = f"rubric-build:{context_hash(folder)[:16]}{'' if dockerfile is None else '-' + hashlib.sha256(dockerfile.encode()).hexdigest()[:8]}"
    docker = client()  # first: without the [docker] extra it raises RuntimeUnavailableError
    from aiodocker.exceptions import DockerError  # optional extra [docker], imported where used
    from aiodocker.jsonstream import json_stream_stream  # optional extra [docker], imported where used

    logs: deque[str] = deque(maxlen=8)  # the last lines only: a build may print without end
    failure = ""
    params = {"t": tag, "rm": "1", "forcerm": "1", **({} if network else {"networkmode": "none"})}
    if dockerfile is not None:
        params["dockerfile"] = dockerfile
    try:
        with contextlib.suppress(DockerError):
            await docker.images.inspect(tag)
            return tag
        # aiodocker's images.build() takes no network mode; this is the request it sends, plus it.
        async with docker._query(
            "build", "POST", params=params, data=_tar_folder(folder),
            headers={"content-type": "application/x-tar"}, timeout=None,
        ) as response:  # fmt: skip
            try:
                async for chunk in json_stream_stream(response):
                    logs.extend(line for line in str(chunk.get("stream", "")).splitlines() if line.strip())
                    failure = failure or str(chunk.get("error", ""))
            finally:
                response.close()
    except DockerError as exc:
        failure = str(exc.message)
    finally:
        await docker.close()
    if failure:
        tail = "\n".join(logs)
        offline = "" if network else " (the build has no network: the task does not allow internet)"
        raise SandboxError(
            f"docker build of {folder} failed{offline}: {failure.strip()}\nits last log lines:\n{tail}"
        )
    return tag


_pruned = False


async def prune_once() -> None:
    """`prune_containers` the first time a process uses Docker (a failure is one warning)."""
    global _pruned
    if _pruned:
        return
    _pruned = True  # set first: sandboxes opening meanwhile do not prune again
    try:
        await prune_containers()
    except RuntimeUnavailableError as exc:
        warnings.warn(f"{exc}; Docker sandboxes of dead owners not pruned", UserWarning, stacklevel=2)


async def prune_containers(*, dry_run: bool = False) -> list[dict[str, str]]:
    """Remove our containers and fork images whose owner is gone; never anything else.

    Ours: labelled `rubric.sandbox` and made on this boot of this machine. Only containers and
    images are removed, never a host folder (a label is anyone's to write). Each call to the
    daemon has `DAEMON_DEADLINE` seconds.

    Returns:
        One record per container found (kind, id, run, owner, alive, removed).

    Raises:
        RuntimeUnavailableError: No aiodocker, no daemon, or one that fails, hangs or answers
            nonsense (one line saying which).
    """
    docker = client()  # first: without the [docker] extra it raises RuntimeUnavailableError
    try:
        found = await _prune_containers(docker, dry_run)
        if not dry_run:
            await _prune_fork_images(docker)
    # As in `check`: whatever the daemon does wrong surfaces as one of many exception types.
    except Exception as exc:
        raise _unanswered(docker, exc) from exc
    finally:
        await docker.close()
    return found


def _labelled_ours(labels: Any) -> dict[str, str] | None:
    """The labels of a container or image of ours made on this boot, else None."""
    if not isinstance(labels, dict) or labels.get(LABEL) != "1" or labels.get("rubric.boot") != boot_id():
        return None
    return {str(k): str(v) for k, v in labels.items()}


def _owner_alive(labels: dict[str, str]) -> bool:
    owner = labels.get("rubric.owner", "")
    return owner.isdigit() and owner_alive(int(owner), labels.get("rubric.owner_start", ""))


async def _prune_containers(docker: aiodocker.Docker, dry_run: bool) -> list[dict[str, str]]:
    from aiodocker.exceptions import DockerError  # optional extra [docker], imported where used

    found: list[dict[str, str]] = []
    async with asyncio.timeout(DAEMON_DEADLINE):
        listed = await docker.containers.list(all=True, filters={"label": [LABEL]})
    for container in listed:
        labels = _labelled_ours(container._container.get("Labels"))
        if labels is None:
            continue
        alive = _owner_alive(labels)
        record = {"kind": "docker", "id": str(container.id)[:12], "run": labels.get("rubric.run", ""),
                  "owner": labels.get("rubric.owner", ""), "alive": str(alive), "removed": "False"}  # fmt: skip
        if not alive and not dry_run:
            with contextlib.suppress(DockerError):
                async with asyncio.timeout(DAEMON_DEADLINE):
                    await container.delete(force=True, v=True)
                record["removed"] = "True"
        found.append(record)
    return found


async def _prune_fork_images(docker: aiodocker.Docker) -> None:
    from aiodocker.exceptions import DockerError  # optional extra [docker], imported where used

    async with asyncio.timeout(DAEMON_DEADLINE):
        images = await docker.images.list(filters={"label": ["rubric.fork=1"]})
    for image in images:
        labels = _labelled_ours(image.get("Labels") if isinstance(image, dict) else None)
        if labels is not None and labels.get("rubric.fork") == "1" and not _owner_alive(labels):
            with contextlib.suppress(DockerError):
                async with asyncio.timeout(DAEMON_DEADLINE):
                    await docker.images.delete(str(image["Id"]), force=True)
