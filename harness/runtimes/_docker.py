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
import signal
import stat
import tarfile
import time
from collections.abc import Mapping
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

from harness.runtimes._base import (
    SOCKET_DIR,
    RawResult,
    Runtime,
    RuntimeUnavailableError,
    Sandbox,
    SandboxConfig,
    SandboxError,
    elapsed,
)
from harness.runtimes._state import LABEL, SandboxState, boot_id, owner_alive

if TYPE_CHECKING:
    import aiodocker

START_HINT = (
    "start one (Debian: apt-get install docker.io && dockerd &, or systemctl start docker), "
    "or point DOCKER_HOST at one; tests and CI use .ci/docker-up"
)
_KILL_GRACE = 2.0
_IO_DIR = "/run/rubric-io"  # where a command's stdin file is (host: <state folder>/io, read-only inside)
_CHANGE_KINDS = {0: "changed", 1: "added", 2: "deleted"}  # the Engine's `changes` kinds
#: Files the Engine keeps in every container's layer (its own, left out of `changed_files`).
_ENGINE_FILES = ("/etc/hostname", "/etc/hosts", "/etc/resolv.conf", "/.dockerenv")
_RESTART_GRACE = 5.0  # seconds a restarted container has to show its init and keeper alone


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
    except ValueError as exc:  # no socket found, no DOCKER_HOST
        raise RuntimeUnavailableError(f"no Docker daemon found ({exc}); {START_HINT}") from exc


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
        self._docker = client()
        try:
            self._container = await self._docker.containers.create(self._container_config(image))
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

    async def _stop(self) -> None:
        from aiodocker.exceptions import DockerError  # optional extra [docker], imported where used

        if self._docker is None:
            return
        try:
            if self._container is not None:
                with contextlib.suppress(DockerError):
                    await self._container.delete(force=True, v=True)
            if self._attach is not None:
                await self._attach.close()
            for image in (self._commit, self.fork_image):
                if image is not None:  # in use by another fork: that fork removes it
                    with contextlib.suppress(DockerError):
                        await self._docker.images.delete(image)
        finally:
            await self._docker.close()

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
        out, err = bytearray(), bytearray()

        async def collect() -> None:
            async with execution.start(detach=False) as stream:
                while message := await stream.read_out():
                    (out if message.stream == 1 else err).extend(message.data)

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
            if code in (126, 127) and b"chdir to cwd" in bytes(out + err):
                raise SandboxError(
                    f"working directory {cwd!r} does not exist in the sandbox; create it first"
                )
            if code in (126, 127) and b"executable file not found" in bytes(out + err):
                code, err, out = 127, out + err, bytearray()  # the Engine's message, on stderr
        return RawResult(code, bytes(out), bytes(err), timed_out, elapsed(start))

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
        """Restart the container in place when anything runs beside its init and keeper.

        A restart ends the container's init, and with it its whole PID namespace (the kernel
        kills every process left in it), and starts a new one on the same writable layer,
        with no rights needed over the processes themselves. The daemon keeps the
        container through the restart (`AutoRemove` waits for a stop); the keeper is attached
        again, then the old attach is let go. Checked afterwards: init and keeper alone."""
        from aiodocker.exceptions import DockerError  # optional extra [docker], imported where used

        if len(await self._processes()) <= 2:  # init and keeper: nothing to end (no restart)
            return 0
        previous = self._attach
        try:
            await self._container.restart(t=0)
            self._attach = self._container.attach(stdin=True)
            await self._attach.__aenter__()
        except DockerError as exc:
            raise SandboxError(f"cannot end the processes in the container: {exc.message}") from exc
        finally:
            if previous is not None and previous is not self._attach:
                await previous.close()
        deadline = time.monotonic() + _RESTART_GRACE
        while True:  # init starts its keeper a moment after the restart returns
            try:
                left = await self._processes()
            except SandboxError:  # stopped: the keeper (the image's `sh -c 'exec cat'`) exited
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

    async def read(self, path: str) -> bytes:
        """The bytes of a file inside the container (Engine archive API)."""
        from aiodocker.exceptions import DockerError  # optional extra [docker], imported where used

        self._check_open()
        try:
            archive = await self._container.get_archive(self.resolve(path))
        except DockerError as exc:
            raise SandboxError(f"cannot read {path!r} in the sandbox: {exc.message}") from exc
        with archive:
            member = archive.next()
            extracted = archive.extractfile(member) if member is not None and member.isfile() else None
            if extracted is None:
                raise SandboxError(f"cannot read {path!r} in the sandbox: not a regular file")
            data: bytes = extracted.read()
            return data

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
        copy = DockerSandbox(self.config, state, self.runtime, image=self._commit)
        try:
            await copy._start()
        except BaseException:
            await copy.close()
            raise
        return copy

    def describe(self) -> str:
        return f"docker container ({self.image or self.runtime.spec}), network {self.config.network}"


class DockerRuntime(Runtime):
    """Makes Docker sandboxes from an image name or a build context folder."""

    def __init__(
        self, spec: str, run_id: str, *, image: str | None = None, context: Path | None = None
    ) -> None:
        super().__init__(spec, run_id)
        self.image_name = image
        self.context = context
        self._built: str | None = None
        self._lock = asyncio.Lock()
        self._checked = False

    @property
    def kind_name(self) -> str:
        return "docker"

    def _make(self, config: SandboxConfig, state: SandboxState) -> Sandbox:
        return DockerSandbox(config, state, self)

    async def check(self) -> None:
        """Raise `RuntimeUnavailableError` (one line, with how to start one) when no daemon answers."""
        if self._checked:
            return
        docker = client()
        try:
            await docker.version()
        except Exception as exc:
            raise RuntimeUnavailableError(
                f"no Docker daemon answers at {docker.docker_host} ({exc}); {START_HINT}"
            ) from exc
        finally:
            await docker.close()
        self._checked = True

    async def image(self) -> str:
        """The image sandboxes start from (a build context is built once per content hash)."""
        if self.image_name is not None:
            return self.image_name
        assert self.context is not None
        async with self._lock:
            if self._built is None:
                self._built = await build_context(self.context)
        return self._built

    def describe(self) -> str:
        return f"docker ({self.image_name or self.context})"


async def build_context(folder: Path) -> str:
    """Build `folder` (a Dockerfile inside) as `rubric-build:<content hash>`, unless already built."""
    tag = f"rubric-build:{context_hash(folder)[:16]}"
    docker = client()  # first: without the [docker] extra it raises RuntimeUnavailableError
    from aiodocker.exceptions import DockerError  # optional extra [docker], imported where used

    logs: list[str] = []
    failure = ""
    try:
        with contextlib.suppress(DockerError):
            await docker.images.inspect(tag)
            return tag
        archive = io.BytesIO(_tar_folder(folder))
        async for chunk in docker.images.build(
            fileobj=archive, encoding="application/x-tar", tag=tag, rm=True, forcerm=True, stream=True
        ):
            logs.extend(line for line in str(chunk.get("stream", "")).splitlines() if line.strip())
            failure = failure or str(chunk.get("error", ""))
    except DockerError as exc:
        failure = str(exc.message)
    finally:
        await docker.close()
    if failure:
        tail = "\n".join(logs[-8:])
        raise SandboxError(f"docker build of {folder} failed: {failure.strip()}\nits last log lines:\n{tail}")
    return tag


async def prune_containers(*, dry_run: bool = False) -> list[dict[str, str]]:
    """Remove our containers and fork images whose owner is gone; never anything else.

    Ours: labelled `rubric.sandbox` and made on this boot of this machine. Returns one record per
    container found (id, run, owner, alive, removed).
    """
    docker = client()  # first: without the [docker] extra it raises RuntimeUnavailableError
    from aiodocker.exceptions import DockerError  # optional extra [docker], imported where used

    found: list[dict[str, str]] = []
    try:
        listed = await docker.containers.list(all=True, filters={"label": [LABEL]})
        for container in listed:
            labels = container._container.get("Labels") or {}
            if labels.get(LABEL) != "1" or labels.get("rubric.boot") != boot_id():
                continue
            owner = labels.get("rubric.owner", "")
            alive = owner.isdigit() and owner_alive(int(owner), labels.get("rubric.owner_start", ""))
            record = {"kind": "docker", "id": container.id[:12], "run": labels.get("rubric.run", ""),
                      "owner": owner, "alive": str(alive), "removed": "False"}  # fmt: skip
            if not alive and not dry_run:
                with contextlib.suppress(DockerError):
                    await container.delete(force=True, v=True)
                    record["removed"] = "True"
                state = labels.get("rubric.state", "")
                if state.startswith("/") and Path(state).name.startswith("rubric-sandbox-"):
                    SandboxState(Path(state), "docker", "", 0, "").remove()
            found.append(record)
        if not dry_run:
            for image in await docker.images.list(filters={"label": ["rubric.fork=1"]}):
                labels = (image.get("Labels") or {}) if isinstance(image, dict) else {}
                owner = labels.get("rubric.owner", "")
                if labels.get("rubric.boot") == boot_id() and not (
                    owner.isdigit() and owner_alive(int(owner), labels.get("rubric.owner_start", ""))
                ):
                    with contextlib.suppress(DockerError):
                        await docker.images.delete(image["Id"], force=True)
    finally:
        await docker.close()
    return found
