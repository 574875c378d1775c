"""harness.runtimes state and prune: what another user writes never makes our prune delete or kill.

Sandbox state lives in this user's private root (`<tmp>/rubric-<uid>`, mode 0700). The attacker
is the user `nobody` (through `setpriv`), writing forged state.json files wherever it can: the
shared temp folder (where state used to live) and the root's own path before we make it. The
victims are real: a folder of ours and a live process whose argv[0] is `/usr/bin/bwrap`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from harness.runtimes import aprune, get_runtime, list_sandboxes, prune
from harness.runtimes._docker import client
from harness.runtimes._state import (
    LABEL,
    TOKEN_VAR,
    SandboxState,
    StateRootError,
    boot_id,
    process_start,
    state_root,
)
from tests.harness.runtimes.conftest import TEST_IMAGE
from tests.helpers.docs import docs_pages
from tests.helpers.processes import run

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

NOBODY = 65534
ESCAPES = "\x1b]0;pwned\x07\x1b[2J"


def as_nobody(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`script` run by /bin/sh as the user nobody (no groups), with `args` as $1..."""
    return subprocess.run(
        ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "/bin/sh", "-c", script, "sh", *args],
        capture_output=True, text=True, cwd="/", timeout=30,
    )  # fmt: skip


@pytest.fixture
def shared_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Path]:
    """A temp folder like /tmp (root's, mode 1777: anyone may create in it) as this test's TMPDIR
    (`tmp_path` first: pytest places it by TMPDIR, once per session)."""
    folder = Path(f"/tmp/rubric-shared-{uuid.uuid4().hex[:8]}")
    folder.mkdir()
    folder.chmod(0o1777)
    monkeypatch.setenv("TMPDIR", str(folder))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@dataclass
class Victims:
    """What a forged state file points prune at: a folder of ours and a live bwrap process."""

    folder: Path
    process: subprocess.Popen[bytes]
    start: str

    def intact(self) -> bool:
        return (self.folder / "keep.txt").read_text() == "mine" and (
            self.process.poll() is None and process_start(self.process.pid) == self.start
        )


@pytest.fixture
def victims(tmp_path: Path) -> Iterator[Victims]:
    folder = tmp_path / "rubric-sandbox-precious"  # named as ours: an older prune's only check
    folder.mkdir()
    (folder / "keep.txt").write_text("mine")
    process = subprocess.Popen(["/usr/bin/bwrap", "--ro-bind", "/", "/", "--", "sleep", "300"])
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(0.2)
    assert process.poll() is None
    try:
        yield Victims(folder, process, process_start(process.pid))
    finally:
        process.kill()
        process.wait()


def _dead_pid() -> int:
    """The pid of a process that has ended (an owner that is gone)."""
    ended = subprocess.run(["/bin/sh", "-c", "echo $$"], capture_output=True, text=True, check=True)
    return int(ended.stdout)


def forged_records(victims: Victims) -> list[dict[str, object]]:
    """A dead owner's state naming the victims, in the older format and in the current one (with
    the victim's real start time, readable by anyone, and a guessed token)."""
    owner = _dead_pid()
    older = {"directory": str(victims.folder), "kind": "bwrap", "run_id": ESCAPES, "owner": owner,
             "owner_start": "1", "pids": [victims.process.pid], "container": ""}  # fmt: skip
    current = {"kind": "bwrap", "run_id": ESCAPES, "owner": owner, "owner_start": "1", "container": "",
               "processes": [[victims.process.pid, victims.start]], "token": "0" * 32, "boot": boot_id(),
               "directory": str(victims.folder)}  # fmt: skip
    return [older, current]


_PLANT = 'mkdir -p "$1" && printf %s "$2" > "$1/state.json"'


def plant(folder: Path, records: list[dict[str, object]]) -> None:
    """As nobody: one forged sandbox folder per record in `folder`."""
    for i, record in enumerate(records):
        made = as_nobody(
            _PLANT, str(folder / f"rubric-sandbox-{record['owner']}-forged{i}"), json.dumps(record)
        )
        assert made.returncode == 0, made.stderr


def prepare_root(shape: str, shared: Path) -> Path:
    """The state root's path in `shared`, made as `shape` says (before we ever use it)."""
    root = shared / f"rubric-{os.geteuid()}"
    elsewhere = shared / "nobodys"
    if shape == "nobodys-folder":  # nobody made it first, open to all, with forgeries inside
        assert as_nobody('mkdir -m 777 "$1"', str(root)).returncode == 0
    elif shape == "link-to-nobodys":
        assert as_nobody('mkdir -m 700 "$1" && ln -s "$1" "$2"', str(elsewhere), str(root)).returncode == 0
    elif shape == "ours-but-0755":
        root.mkdir()
        root.chmod(0o755)
    return root


SHAPES = ["absent", "nobodys-folder", "link-to-nobodys", "ours-but-0755"]


@pytest.mark.parametrize("shape", SHAPES)
def test_forged_state_from_another_user_never_deletes_or_kills(
    shape: str, shared_tmp: Path, victims: Victims, tmp_path: Path
) -> None:
    """nobody plants a dead owner's state naming our folder and a live bwrap process in the shared
    temp folder (where state used to live) and, where it can, in the state root's place. Neither
    `prune()`, `rubric sandboxes prune` nor the prune `rubric eval` runs at start deletes the
    folder or kills the process; a root that is not ours and private is refused with a warning."""
    root = prepare_root(shape, shared_tmp)
    records = forged_records(victims)
    plant(shared_tmp, records)
    if shape in ("nobodys-folder", "link-to-nobodys"):
        plant(root, records)
    refused = shape != "absent"
    with (
        pytest.warns(UserWarning, match="sandbox state folder .* is ")
        if refused
        else contextlib.nullcontext()
    ):
        prune(docker=False)
    assert victims.intact()
    pruned = run("sandboxes", "prune", cwd=tmp_path)
    assert pruned.returncode == 0, pruned.stderr
    assert ("rubric: warning: sandbox state folder" in pruned.stderr) == refused, pruned.stderr
    assert "\x1b" not in pruned.stdout + pruned.stderr
    ran = run("eval", "gsm8k", "-m", "scripted:oracle", "-n", "1", "-o", "run", "--no-progress", cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert victims.intact()
    if shape == "absent":  # made by our first sandbox: private, and nobody cannot write in it
        with get_runtime("bwrap").sandbox() as sb:
            assert sb.aio.state.directory.parent == root and oct(root.stat().st_mode & 0o777) == "0o700"
            denied = as_nobody('mkdir "$1/rubric-sandbox-1-x"', str(root))
            assert denied.returncode != 0 and "Permission denied" in denied.stderr


@pytest.mark.parametrize(
    ("shape", "why"),
    [
        ("nobodys-folder", "owned by uid 65534"),
        ("link-to-nobodys", "a symbolic link"),
        ("ours-but-0755", "mode 0755"),
    ],
)
def test_a_state_root_that_is_not_ours_and_private_is_refused(
    shape: str, why: str, shared_tmp: Path, tmp_path: Path
) -> None:
    """No sandbox starts over a root another user made or could change; listing warns and goes on."""
    root = prepare_root(shape, shared_tmp)
    with pytest.raises(StateRootError, match=f"sandbox state folder {root} is {why}.*set TMPDIR"):
        with get_runtime("bwrap").sandbox():
            pass
    with pytest.warns(UserWarning, match=f"sandbox state folder {root} is {why}"):
        assert list_sandboxes(docker=False) == []
    listed = run("sandboxes", "list", cwd=tmp_path)
    assert (
        listed.returncode == 0 and f"rubric: warning: sandbox state folder {root} is {why}" in listed.stderr
    )


def test_a_state_root_in_a_folder_others_can_change_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A TMPDIR others may write without the sticky bit lets them rename our root away: refused."""
    open_folder = Path(f"/tmp/rubric-open-{uuid.uuid4().hex[:8]}")
    open_folder.mkdir()
    open_folder.chmod(0o777)
    monkeypatch.setenv("TMPDIR", str(open_folder))
    monkeypatch.setattr(tempfile, "tempdir", None)
    try:
        with pytest.raises(StateRootError, match="which another user can change"):
            with get_runtime("bwrap").sandbox():
                pass
    finally:
        shutil.rmtree(open_folder)


def test_a_recorded_process_is_killed_only_when_proven_ours(shared_tmp: Path, tmp_path: Path) -> None:
    """A dead owner's recorded bwrap process dies with prune only when it is the very process
    (same start time) and carries the sandbox's token; a live bwrap with the right pid and start
    time but no token survives."""
    stranger = subprocess.Popen(["/usr/bin/bwrap", "--ro-bind", "/", "/", "--", "sleep", "300"])
    state = SandboxState.create("bwrap", "proof")
    held = subprocess.Popen(
        ["/usr/bin/bwrap", "--ro-bind", "/", "/", "--", "sleep", "300"], env={"PATH": "/usr/bin:/bin", TOKEN_VAR: state.token}
    )  # fmt: skip
    try:
        with contextlib.suppress(subprocess.TimeoutExpired):
            held.wait(0.2)
        state.owner, state.owner_start = _dead_pid(), "1"  # its owner is gone
        state.hold(stranger.pid)
        state.hold(held.pid)
        state.save()
        found = [r for r in prune(docker=False) if r["run"] == "proof"]
        assert [(r["alive"], r["removed"]) for r in found] == [("False", "True")]
        assert held.wait(5) == -signal.SIGKILL
        assert stranger.poll() is None
        assert not state.directory.exists()
    finally:
        for process in (stranger, held):
            process.kill()
            process.wait()


def test_rubric_sandboxes_list_escapes_what_it_prints(shared_tmp: Path, tmp_path: Path) -> None:
    """A run id and a folder name holding terminal escapes (set the title, clear the screen) are
    printed escaped, on one line each."""
    root = state_root()
    root.mkdir(mode=0o700, exist_ok=True)
    folder = root / f"rubric-sandbox-{os.getpid()}-{ESCAPES}\nfake line"
    folder.mkdir(mode=0o700)
    record = {"kind": "bwrap", "run_id": f"run{ESCAPES}", "owner": os.getpid(), "owner_start": process_start(os.getpid()),
              "processes": [], "container": "", "token": "t", "boot": boot_id()}  # fmt: skip
    (folder / "state.json").write_text(json.dumps(record))
    listed = run("sandboxes", "list", cwd=tmp_path)
    assert listed.returncode == 0, listed.stderr
    assert "\x1b" not in listed.stdout and "\x07" not in listed.stdout
    assert "run\\x1b]0;pwned\\x07\\x1b[2J" in listed.stdout
    line = next(line for line in listed.stdout.splitlines() if "pwned" in line)
    assert "\\nfake line" in line and "running" in line


async def _labelled_container(labels: dict[str, str]) -> str:
    docker = client()
    try:
        container = await docker.containers.create(
            {
                "Image": TEST_IMAGE,
                "Cmd": ["sleep", "120"],
                "Labels": labels,
                "HostConfig": {"NetworkMode": "none"},
            }
        )
        return str(container.id)
    finally:
        await docker.close()


async def _exists(container_id: str) -> bool:
    docker = client()
    try:
        return any(c.id == container_id for c in await docker.containers.list(all=True))
    finally:
        await docker.close()


async def _remove(container_id: str) -> None:
    docker = client()
    try:
        with contextlib.suppress(Exception):
            await (await docker.containers.get(container_id)).delete(force=True)
    finally:
        await docker.close()


@pytest.mark.docker
async def test_a_label_never_makes_prune_delete_a_host_folder(victims: Victims) -> None:
    """A container labelled as a dead owner's sandbox (labels are anyone's to write who reaches
    the daemon) naming our folder as its state: prune removes the container, never the folder."""
    labels = {LABEL: "1", "rubric.run": "label-forgery", "rubric.owner": str(_dead_pid()), "rubric.owner_start": "1",
              "rubric.boot": boot_id(), "rubric.state": str(victims.folder)}  # fmt: skip
    forged = await _labelled_container(labels)
    try:
        await aprune()
        assert not await _exists(forged)
        assert victims.intact()
    finally:
        await _remove(forged)


@pytest.mark.docker
async def test_rubric_sandboxes_list_escapes_docker_labels(tmp_path: Path) -> None:
    """A live owner's container whose run label holds terminal escapes is listed escaped."""
    labels = {LABEL: "1", "rubric.run": f"label{ESCAPES}", "rubric.owner": str(os.getpid()),
              "rubric.owner_start": process_start(os.getpid()), "rubric.boot": boot_id()}  # fmt: skip
    forged = await _labelled_container(labels)
    try:
        listed = await asyncio.to_thread(run, "sandboxes", "list", cwd=tmp_path)
        assert listed.returncode == 0, listed.stderr
        assert "\x1b" not in listed.stdout and "label\\x1b]0;pwned\\x07\\x1b[2J" in listed.stdout
    finally:
        await _remove(forged)


def test_the_security_guide_states_where_state_lives_and_what_prune_trusts() -> None:
    table = docs_pages()["guides/security.md"]
    row = next(line for line in table.splitlines() if "**another user of this machine**" in line)
    assert "`<tmp>/rubric-<uid>` (mode 0700, owned by you" in row and "never by its name" in row
    assert state_root().name == f"rubric-{os.geteuid()}"
