"""Who owns a sandbox: its run id, owner and host folder, kept where only this user can write.

Every sandbox has a host folder `<tmp>/rubric-<uid>/rubric-sandbox-<owner pid>-<random>/`
holding `state.json` (kind, run id, owner pid and start time, the processes or container it
holds) and the Unix socket folder bound into the sandbox. The root `<tmp>/rubric-<uid>` is this
user's private folder (mode 0700, owned by the running user); a root that is anything else (a
link, another user's folder, readable or writable by others) is refused with the reason, since
whoever could write in it could name what `prune` deletes or kills. `prune` never reads a
folder's path from a file, never deletes outside the root, and kills a recorded process only
after proving it is the one we started: the same start time (pids are reused) and this
sandbox's random token in its environment (`RUBRIC_SANDBOX_TOKEN`; never its name). Docker
containers carry the owner as labels. An owner counts as dead when its pid is gone or now
belongs to a process that started at another time.
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import stat
import tempfile
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from harness._core.errors import ConfigError

PREFIX = "rubric-sandbox-"
LABEL = "rubric.sandbox"  # Docker label present on every container (and fork image) we make
#: The environment variable holding a sandbox's token in the host processes it holds (bwrap's).
TOKEN_VAR = "RUBRIC_SANDBOX_TOKEN"
KINDS = ("docker", "bwrap", "local")
_MAX_STATE_BYTES = 1 << 16  # a state.json is a few hundred bytes

_RUN_ID = os.environ.get("RUBRIC_RUN_ID") or uuid.uuid4().hex[:12]


class StateRootError(ConfigError):
    """The sandbox state folder is not this user's private folder, so no sandbox starts."""


def default_run_id() -> str:
    """This process's run id ($RUBRIC_RUN_ID, or one made at import)."""
    return _RUN_ID


def process_start(pid: int) -> str:
    """A process's start time in clock ticks since boot ("" when it is gone): with the pid, an
    identity that survives pid reuse."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return text.rsplit(")", 1)[1].split()[19]


def boot_id() -> str:
    """This machine's boot id: pids only mean something on the boot that made them."""
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return "unknown"


def owner_alive(pid: int, start: str) -> bool:
    """True while the owner process (`pid`, started at `start`) runs."""
    return bool(start) and process_start(pid) == start


def state_root() -> Path:
    """This user's folder for sandbox host folders: `<system temp folder>/rubric-<uid>`."""
    return Path(tempfile.gettempdir()) / f"rubric-{os.geteuid()}"


def _unsafe(info: os.stat_result) -> str:
    """Why a folder is not this user's private folder ("" when it is)."""
    if stat.S_ISLNK(info.st_mode):
        return "a symbolic link"
    if not stat.S_ISDIR(info.st_mode):
        return "not a folder"
    if info.st_uid != os.geteuid():
        return f"owned by uid {info.st_uid}, not by you ({os.geteuid()})"
    if info.st_mode & 0o077:
        return f"mode {stat.S_IMODE(info.st_mode):04o}, open to other users (it must be 0700)"
    return ""


def root_problem(root: Path) -> str:
    """Why `root` cannot hold sandbox state ("" when it can, or when it does not exist yet).

    It must be a folder (not a link) owned by this user with mode 0700, in a parent that no other
    user can rename it out of (owned by this user or root, and sticky when others may write it).
    """
    try:
        info = os.lstat(root)
    except FileNotFoundError:
        info = None
    except OSError as exc:
        return f"unreadable ({exc.strerror})"
    parent = os.stat(root.parent)
    if parent.st_uid not in (0, os.geteuid()) or (
        parent.st_mode & 0o022 and not parent.st_mode & stat.S_ISVTX
    ):
        return f"in {root.parent}, which another user can change (owned by uid {parent.st_uid}, mode {stat.S_IMODE(parent.st_mode):04o})"
    return _unsafe(info) if info is not None else ""


def refusal(root: Path, problem: str) -> str:
    """The one line that says why a state root is refused, and the fix."""
    return (
        f"sandbox state folder {root} is {problem}: rubric keeps sandbox state only in a folder "
        "of yours with mode 0700; it did not make this one, so remove it if you know what it is, "
        "or set TMPDIR to a folder of your own"
    )


def private_root() -> Path:
    """The state root, made (mode 0700) when missing.

    Raises:
        StateRootError: It exists and is not this user's private folder.
    """
    root = state_root()
    with contextlib.suppress(FileExistsError):
        os.mkdir(root, 0o700)
    problem = root_problem(root)
    if problem:
        raise StateRootError(refusal(root, problem))
    return root


@dataclass
class SandboxState:
    """The host-side record of one sandbox.

    Attributes:
        directory: Its host folder (state.json, the socket folder, a writable layer).
        kind: "docker", "bwrap" or "local".
        run_id: The run it belongs to.
        owner: The pid of the process that made it.
        owner_start: That process's start time (see `process_start`).
        processes: Host processes it holds (bwrap's) as (pid, start time), killed by `prune`
            when the owner is dead and each still is that process and carries `token`.
        container: The Docker container id, when it is one.
        token: A random value of this sandbox's, in the environment of the processes it holds.
        boot: The boot id of the machine it was made on.
    """

    directory: Path
    kind: str
    run_id: str
    owner: int
    owner_start: str
    processes: list[tuple[int, str]] = field(default_factory=list)
    container: str = ""
    token: str = field(default_factory=lambda: secrets.token_hex(16))
    boot: str = field(default_factory=boot_id)

    @classmethod
    def create(cls, kind: str, run_id: str) -> SandboxState:
        """A new host folder for a sandbox of `kind`, recorded at once (before anything starts).

        Raises:
            StateRootError: The state root is not this user's private folder.
        """
        pid = os.getpid()
        directory = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{pid}-", dir=private_root()))
        (directory / "socket").mkdir()
        os.chmod(directory / "socket", 0o777)  # a sandbox user other than ours may connect
        state = cls(directory, kind, run_id, pid, process_start(pid))
        state.save()
        return state

    @property
    def labels(self) -> dict[str, str]:
        """Docker labels naming the owner (prune reads them)."""
        return {
            LABEL: "1",
            "rubric.run": self.run_id,
            "rubric.owner": str(self.owner),
            "rubric.owner_start": self.owner_start,
            "rubric.boot": self.boot,
        }

    def hold(self, pid: int) -> None:
        """Record a host process this sandbox holds (started with `TOKEN_VAR` set to `token`)."""
        self.processes.append((pid, process_start(pid)))

    def save(self) -> None:
        """Write state.json (atomically)."""
        record = {k: v for k, v in asdict(self).items() if k != "directory"}
        temporary = self.directory / "state.json.tmp"
        temporary.write_text(json.dumps(record))
        os.replace(temporary, self.directory / "state.json")

    def remove(self) -> None:
        """Delete the host folder (only ever a sandbox folder inside the state root)."""
        if self.directory.parent == state_root() and self.directory.name.startswith(PREFIX):
            shutil.rmtree(self.directory, ignore_errors=True)

    def kill_processes(self) -> None:
        """SIGKILL the host processes it holds, each only once proven to be ours (see `ours`)."""
        if self.boot != boot_id():
            return  # made before this boot: its processes are gone, and its pids mean nothing
        for pid, start in self.processes:
            kill_if_ours(pid, start, self.token)

    @classmethod
    def load(cls, directory: Path) -> SandboxState | None:
        """The state in `directory`, or None when it has none (yet) or it is unreadable or
        malformed. The folder is `directory` itself, whatever the file says."""
        with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
            descriptor = os.open(directory / "state.json", os.O_RDONLY | os.O_NOFOLLOW)
            with os.fdopen(descriptor, "rb") as file:
                record = json.loads(file.read(_MAX_STATE_BYTES))
            return cls._from_record(directory, record)
        return None

    @classmethod
    def _from_record(cls, directory: Path, record: dict[str, Any]) -> SandboxState:
        processes = [(int(pid), str(start)) for pid, start in record.get("processes", [])]
        state = cls(
            directory,
            str(record["kind"]),
            str(record["run_id"]),
            int(record["owner"]),
            str(record["owner_start"]),
            processes,
            str(record.get("container", "")),
            str(record["token"]),
            str(record["boot"]),
        )
        if state.kind not in KINDS:
            raise ValueError(f"unknown kind {state.kind!r}")
        return state


def ours(pid: int, start: str, token: str) -> bool:
    """True when process `pid` is the one recorded: it started at `start` and holds `token` in
    its environment (so neither a reused pid nor a process named like ours qualifies)."""
    if not start or not token or process_start(pid) != start:
        return False
    try:
        environment = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return f"{TOKEN_VAR}={token}".encode() in environment


def kill_if_ours(pid: int, start: str, token: str) -> bool:
    """SIGKILL process `pid` if it is ours (`ours`); True when the signal was sent.

    A pidfd is opened before the proof and the signal goes through it, so a process that ends
    and whose pid is reused meanwhile is never the one signalled.
    """
    try:
        handle = os.pidfd_open(pid)
    except OSError:
        return False  # gone (or a kernel without pidfds: then nothing is killed)
    try:
        if not ours(pid, start, token):
            return False
        signal.pidfd_send_signal(handle, signal.SIGKILL)
        return True
    except OSError:
        return False
    finally:
        os.close(handle)


def state_folders() -> list[Path]:
    """This user's sandbox host folders ([] when the state root is absent or refused)."""
    root = state_root()
    if root_problem(root) or not root.is_dir():
        return []
    found = []
    for path in root.glob(f"{PREFIX}*"):
        with contextlib.suppress(OSError):
            if not _unsafe(os.lstat(path)):
                found.append(path)
    return sorted(found)


def folder_owner(directory: Path) -> int | None:
    """The owner pid in a folder's name (`rubric-sandbox-<pid>-...`)."""
    head = directory.name[len(PREFIX) :].split("-", 1)[0]
    return int(head) if head.isdigit() else None
