"""harness.runtimes lifecycle: a SIGKILLed owner's sandboxes are pruned, and nothing else is (chaos test)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.runtimes import aprune, get_runtime, list_sandboxes
from harness.runtimes._cgroups import PREFIX as CGROUP_PREFIX
from harness.runtimes._cgroups import parents
from harness.runtimes._docker import client
from harness.runtimes._state import LABEL, state_folders
from tests.harness.runtimes.conftest import DOCKER

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

# A driver: opens 8 sandboxes at once (half of them forking) and keeps them busy until it is
# killed. A sandbox says "open" once every container it makes has started, its fork's included.
_DRIVER = r"""
import asyncio, sys
from harness.runtimes import get_runtime

async def one(runtime, i):
    async with runtime.sandbox(memory_mb=256, pids=64) as sb:
        await sb.write("f.txt", "x" * 1000)
        busy = [sb.exec("sleep 60 & sleep 60")]
        if i % 2 == 0:
            busy.append((await sb.fork()).exec("sleep 60"))
        print("open", i, flush=True)
        await asyncio.gather(*busy)

async def main():
    runtime = get_runtime(sys.argv[1], run_id=sys.argv[2])
    await asyncio.gather(*(one(runtime, i) for i in range(8)))

asyncio.run(main())
"""


def _start(script: str, spec: str, run_id: str) -> subprocess.Popen[bytes]:
    """A driver process running `script` on runtime `spec` as run `run_id`, its output piped."""
    return subprocess.Popen(
        [sys.executable, "-c", script, spec, run_id],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )


def _bwrap_processes(marker: str) -> list[int]:
    """Host pids of bwrap/nsenter processes whose command line mentions `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if argv and argv[0].endswith((b"bwrap", b"nsenter")) and any(marker.encode() in a for a in argv):
                found.append(int(entry.name))
    return found


async def _containers(run_id: str) -> list[str]:
    docker = client()
    try:
        listed = await docker.containers.list(all=True, filters={"label": [f"rubric.run={run_id}"]})
        return [c.id for c in listed]
    finally:
        await docker.close()


def _leftovers(pids: list[int]) -> list[str]:
    folders = [
        str(f) for f in state_folders() if any(f.name.startswith(f"rubric-sandbox-{p}-") for p in pids)
    ]
    groups = [
        str(g) for parent in parents().values() for p in pids for g in parent.glob(f"{CGROUP_PREFIX}{p}-*")
    ]
    return folders + groups


#: The chaos runs' runtimes, in turn (each run: one driver, 8 sandboxes).
CHAOS_SPECS = ["bwrap", DOCKER, "bwrap", DOCKER, "local"]
CHAOS_RUNS = 20


async def _chaos_run(spec: str, run_id: str, rng: random.Random) -> int:
    """Start a driver, SIGKILL it at a random point of its life; its pid.

    The point: after `k` of its 8 sandboxes said they are open (k = 0: while it imports or
    starts the first ones), plus a random fraction of a second (while the others start, write,
    fork or sleep)."""
    driver = await asyncio.create_subprocess_exec(
        sys.executable,
        "-c",
        _DRIVER,
        spec,
        run_id,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": os.getcwd()},
    )
    assert driver.stdout is not None
    opened = rng.randint(0, 8)
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(20):
            for _ in range(opened):
                if not await driver.stdout.readline():
                    break  # the driver died on its own: the test fails on what it left, if anything
    await asyncio.sleep(rng.uniform(0.0, 0.3))
    with contextlib.suppress(ProcessLookupError):
        driver.send_signal(signal.SIGKILL)
    await driver.wait()
    return driver.pid


@pytest.mark.docker
async def test_chaos_sigkilled_drivers_leave_nothing_after_prune() -> None:
    """20 runs of 8 concurrent sandboxes (half of them forking) on bwrap, Docker and local in
    turn, each driver SIGKILLed at a random point (while sandboxes start, work or fork); then
    prune: no container, no bwrap process, no host folder, no cgroup is left. Only this test's
    own drivers and runs are counted (pids and run ids), so other tests may run meanwhile.
    The kill points are random; set RUBRIC_CHAOS_SEED to replay a failure's seed."""
    seed = int(os.environ.get("RUBRIC_CHAOS_SEED") or random.randrange(2**32))
    rng = random.Random(seed)
    run_ids, pids = [], []
    for i in range(CHAOS_RUNS):
        run_id = f"chaos-{uuid.uuid4().hex[:8]}"
        pids.append(await _chaos_run(CHAOS_SPECS[i % len(CHAOS_SPECS)], run_id, rng))
        run_ids.append(run_id)
    deadline = time.monotonic() + 10
    while any(_bwrap_processes(f"rubric-sandbox-{p}-") for p in pids) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)  # --die-with-parent: the kernel ends them; give it a moment
    await aprune()
    failed = f"(RUBRIC_CHAOS_SEED={seed})"
    assert _leftovers(pids) == [], failed
    assert [p for pid in pids for p in _bwrap_processes(f"rubric-sandbox-{pid}-")] == [], failed
    assert [c for run_id in run_ids for c in await _containers(run_id)] == [], failed
    assert not [r for r in list_sandboxes() if r["run"] in run_ids], failed


@pytest.mark.docker
async def test_prune_never_touches_containers_that_are_not_ours_or_alive() -> None:
    """A container without our labels, one labelled by another boot, and a live sandbox of ours
    all survive prune."""
    docker = client()
    strangers = []
    try:
        for labels in (
            {"app": "someone-else"},
            {LABEL: "1", "rubric.owner": "1", "rubric.boot": "another-boot"},
        ):
            container = await docker.containers.create(
                {
                    "Image": DOCKER.split(":", 1)[1],
                    "Cmd": ["sleep", "60"],
                    "Labels": labels,
                    "HostConfig": {"NetworkMode": "none"},
                }
            )
            strangers.append(container)
        async with get_runtime(DOCKER, run_id="alive-owner").sandbox() as sb:
            await aprune()
            assert (await sb.exec("echo still here")).stdout == "still here\n"
            for container in strangers:
                await container.show()  # raises when it was removed
    finally:
        for container in strangers:
            await container.delete(force=True)
        await docker.close()


@pytest.fixture
def private_state_root(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temp folder of this test's own as the sandboxes' state root (TMPDIR, here and in the
    processes it starts): a prune that runs meanwhile elsewhere (another test worker's, or any
    `rubric eval` start-up) cannot remove the sandboxes this test means its own prune to report.
    Short, in /tmp: it holds the sandboxes' Unix sockets."""
    root = Path(tempfile.mkdtemp(prefix="rubric-state-"))
    monkeypatch.setenv("TMPDIR", str(root))
    monkeypatch.setattr(tempfile, "tempdir", None)  # gettempdir() reads TMPDIR again
    try:
        yield root
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_cli_sandboxes_list_and_prune_after_a_sigkill(private_state_root: Path) -> None:
    run_id = f"cli-{uuid.uuid4().hex[:8]}"
    driver = _start(_DRIVER, "bwrap", run_id)
    assert driver.stdout is not None
    for _ in range(8):
        driver.stdout.readline()
    listed = subprocess.run(["rubric", "sandboxes", "list"], capture_output=True, text=True, check=True)
    assert listed.stdout.count(run_id) >= 8 and "running" in listed.stdout
    driver.kill()
    driver.wait()
    driver.stdout.close()
    pruned = subprocess.run(["rubric", "sandboxes", "prune"], capture_output=True, text=True, check=True)
    assert pruned.stdout.count(run_id) >= 8 and "owner gone, removed" in pruned.stdout
    assert run_id not in subprocess.run(["rubric", "sandboxes"], capture_output=True, text=True).stdout
    assert _leftovers([driver.pid]) == []


@pytest.mark.docker
async def test_a_sigkilled_owner_takes_its_containers_with_it_before_any_prune() -> None:
    """Containers live by the owner's attach to their stdin: killed, the owner's connection
    closes and the daemon removes them, with no prune (every container had started: see the
    next test for one killed between create and start)."""
    run_id = f"orphan-{uuid.uuid4().hex[:8]}"
    driver = _start(_DRIVER, DOCKER, run_id)
    assert driver.stdout is not None
    for _ in range(8):
        driver.stdout.readline()
    assert len(await _containers(run_id)) >= 8
    driver.kill()
    driver.wait()
    driver.stdout.close()
    deadline = time.monotonic() + 20
    while await _containers(run_id) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    assert await _containers(run_id) == []
    await aprune()  # the host folders (no process can remove its own after a SIGKILL)
    assert _leftovers([driver.pid]) == []


# A driver killed between creating its container and starting it (start never returns).
_CREATED_ONLY = r"""
import asyncio, sys
import aiodocker.containers
from harness.runtimes import get_runtime

async def never_started(self, **kwargs):
    print(self.id, flush=True)
    await asyncio.Event().wait()

aiodocker.containers.DockerContainer.start = never_started

async def main():
    async with get_runtime(sys.argv[1], run_id=sys.argv[2]).sandbox():
        pass

asyncio.run(main())
"""


@pytest.mark.docker
async def test_a_container_created_but_not_started_when_its_owner_dies_is_pruned() -> None:
    """Docker's API creates, attaches and starts in three calls (as `docker run --rm -i` does):
    an owner SIGKILLed between create and start leaves a container that never ran a process
    and that `AutoRemove` never removes (it removes on exit). It is labelled with its owner
    like every other one, so the next prune (`rubric sandboxes prune`, or any run's start-up
    prune) removes it."""
    run_id = f"created-{uuid.uuid4().hex[:8]}"
    driver = _start(_CREATED_ONLY, DOCKER, run_id)
    assert driver.stdout is not None
    container = driver.stdout.readline().strip().decode()
    docker = client()
    try:  # checked while the owner lives, so no other worker's prune can have removed it
        assert (await docker.containers.get(container))["State"]["Status"] == "created"
    finally:
        await docker.close()
    assert await _containers(run_id) == [container]
    driver.kill()
    driver.wait()
    driver.stdout.close()
    found = [r for r in await aprune() if r["run"] == run_id]
    assert all(r["removed"] == "True" for r in found)  # none found: another worker's prune was first
    assert await _containers(run_id) == []
    assert _leftovers([driver.pid]) == []


def test_prune_and_docker_specs_without_the_docker_extra(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Without aiodocker (the [docker] extra) prune finds no containers and says why in one
    warning instead of failing, and a docker: spec says which extra to install."""
    from harness.runtimes import RuntimeUnavailableError, prune
    from harness.runtimes._docker import build_context

    for name in [m for m in sys.modules if m == "aiodocker" or m.startswith("aiodocker.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "aiodocker", None)  # `import aiodocker` raises ImportError
    with pytest.warns(UserWarning, match=r"pip install 'rubric-rl\[docker\]'; Docker containers not pruned"):
        assert all(record["kind"] != "docker" for record in prune())
    (tmp_path / "Dockerfile").write_text("FROM scratch\n")
    with pytest.raises(RuntimeUnavailableError, match=r"pip install 'rubric-rl\[docker\]'"):
        asyncio.run(build_context(tmp_path))
