"""Who owns a sandbox: its run id, owner pid and host folder, so a dead owner's leftovers are found.

Every sandbox has a host folder `<tmp>/rubric-sandbox-<owner pid>-<random>/` holding
`state.json` (kind, run id, owner pid and start time, the processes or container it holds) and
the Unix socket folder bound into the sandbox. Docker containers carry the same facts as labels.
An owner counts as dead when its pid is gone or now belongs to a process that started at another
time (pids are reused).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tempfile
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path

PREFIX = "rubric-sandbox-"
LABEL = "rubric.sandbox"  # Docker label present on every container (and fork image) we make

_RUN_ID = os.environ.get("RUBRIC_RUN_ID") or uuid.uuid4().hex[:12]


def default_run_id() -> str:
    """This process's run id ($RUBRIC_RUN_ID, or one made at import)."""
    return _RUN_ID


def process_start(pid: int) -> str:
    """A process's start time in clock ticks since boot ("" when it is gone): with the pid, an
    identity that survives pid reuse."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return ""
    return stat.rsplit(")", 1)[1].split()[19]


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
    """Where sandbox host folders live (the system temp folder)."""
    return Path(tempfile.gettempdir())


@dataclass
class SandboxState:
    """The host-side record of one sandbox.

    Attributes:
        directory: Its host folder (state.json, the socket folder, a writable layer).
        kind: "docker", "bwrap" or "local".
        run_id: The run it belongs to.
        owner: The pid of the process that made it.
        owner_start: That process's start time (see `process_start`).
        pids: Host processes it holds (bwrap's), killed by `prune` when the owner is dead.
        container: The Docker container id, when it is one.
    """

    directory: Path
    kind: str
    run_id: str
    owner: int
    owner_start: str
    pids: list[int] = field(default_factory=list)
    container: str = ""

    @classmethod
    def create(cls, kind: str, run_id: str) -> SandboxState:
        """A new host folder for a sandbox of `kind`, recorded at once (before anything starts)."""
        pid = os.getpid()
        directory = Path(tempfile.mkdtemp(prefix=f"{PREFIX}{pid}-", dir=state_root()))
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
            "rubric.boot": boot_id(),
            "rubric.state": str(self.directory),
        }

    def save(self) -> None:
        """Write state.json (atomically)."""
        record = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}
        temporary = self.directory / "state.json.tmp"
        temporary.write_text(json.dumps(record))
        os.replace(temporary, self.directory / "state.json")

    def remove(self) -> None:
        """Delete the host folder."""
        shutil.rmtree(self.directory, ignore_errors=True)

    @classmethod
    def load(cls, directory: Path) -> SandboxState | None:
        """The state in `directory`, or None when it has none (yet) or it is unreadable."""
        with contextlib.suppress(OSError, ValueError, TypeError, KeyError):
            record = json.loads((directory / "state.json").read_text())
            record["directory"] = Path(record["directory"])
            return cls(**record)
        return None


def state_folders() -> list[Path]:
    """Every sandbox host folder on this machine (any owner)."""
    return sorted(p for p in state_root().glob(f"{PREFIX}*") if p.is_dir())


def folder_owner(directory: Path) -> int | None:
    """The owner pid in a folder's name (`rubric-sandbox-<pid>-...`)."""
    head = directory.name[len(PREFIX) :].split("-", 1)[0]
    return int(head) if head.isdigit() else None
