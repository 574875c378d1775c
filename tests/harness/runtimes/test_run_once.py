"""harness.runtimes `runtime.run`: one command in a sandbox made for it and ended with it."""

from __future__ import annotations

import asyncio
import os
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from harness import ConfigError
from harness.runtimes import SandboxConfig, get_runtime, list_sandboxes
from tests.harness.runtimes.conftest import ALL, ISOLATING, run_without_cgroups

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]


def _with_marker(marker: str) -> list[str]:
    """Host pids of live processes whose command line holds `marker`."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if (
                marker.encode() in (entry / "cmdline").read_bytes()
                and "State:\tZ" not in (entry / "status").read_text()
            ):
                found.append(entry.name)
        except OSError:
            continue
    return found


def _cmdline(pid: str) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # gone meanwhile
        return b""


async def _gone(marker: str) -> bool:
    deadline = time.monotonic() + 5
    while _with_marker(marker):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


@pytest.mark.parametrize("spec", ALL)
async def test_a_fresh_sandbox_per_command_and_nothing_left(spec: str) -> None:
    runtime = get_runtime(spec, run_id=f"once-{uuid.uuid4().hex[:8]}")
    config = SandboxConfig(env={"GREETING": "hello"}, workdir="/tmp/job")
    done = await runtime.run(
        ["sh", "-c", 'echo "$GREETING $(cat)"; pwd; echo oops >&2; echo kept > file; exit 3'],
        config=config,
        stdin="fed",
    )
    assert (done.exit_code, done.stderr, done.timed_out) == (3, "oops\n", False)
    greeting, workdir = done.stdout.splitlines()
    assert greeting == "hello fed" and (workdir == "/tmp/job" or spec == "local")
    again = await runtime.run("ls -A; echo $HOME", config=config)
    assert again.ok and again.stdout.split()[:-1] == []  # a new sandbox: the file is not there
    assert (await runtime.run("kill -9 $$")).exit_code == -9
    assert (await runtime.run("no-such-command-here")).exit_code == 127
    assert [r for r in await asyncio.to_thread(list_sandboxes) if r["run"] == runtime.run_id] == []
    with pytest.raises(ConfigError, match="timeout must be > 0"):
        await runtime.run("true", timeout=0)


@pytest.mark.parametrize("spec", ISOLATING)
async def test_what_the_command_started_ends_with_it(spec: str) -> None:
    runtime = get_runtime(spec)
    marker = f"rubric-once-{uuid.uuid4().hex}"
    left = f"setsid sh -c 'sleep 60; echo {marker}' > /dev/null 2>&1 & echo started"
    assert (await runtime.run(left)).stdout == "started\n"
    assert await _gone(marker), "a setsid child outlived its one-command sandbox"
    began = time.monotonic()
    done = await runtime.run(f"sh -c 'sleep 60; echo {marker}' & echo started; sleep 60", timeout=1)
    assert done.timed_out and done.exit_code is None and done.stdout == "started\n"
    assert time.monotonic() - began < 10 and await _gone(marker)


@pytest.mark.parametrize("spec", ISOLATING)
async def test_limits_memory_pids_and_file_size(spec: str) -> None:
    runtime = get_runtime(spec)
    config = SandboxConfig(memory_mb=64, pids=16, disk_mb=8)
    bomb = await runtime.run("for i in $(seq 60); do sleep 2 & done; wait", config=config, timeout=20)
    assert "fork" in bomb.stderr.lower() or "resource" in bomb.stderr.lower(), bomb
    big = await runtime.run("head -c 20000000 /dev/zero > big; echo $?; wc -c < big", config=config)
    code, size = big.stdout.split()
    assert code != "0" and int(size) <= 8 << 20
    hog = await runtime.run(["python3", "-c", "b = bytearray(512 << 20); print('held')"], config=config)
    assert hog.exit_code != 0 and "held" not in hog.stdout


def _cgroups(text: str) -> dict[str, str]:
    """controller ("" for v2) -> path, from a /proc/PID/cgroup text."""
    found = {}
    for line in text.splitlines():
        _, controllers, path = line.split(":", 2)
        for controller in controllers.split(",") if controllers else [""]:
            found[controller] = path
    return found


async def test_bwrap_command_is_born_in_its_own_cgroup() -> None:
    """bwrap joins the sandbox's cgroup before it makes a namespace: seen from the host the
    command is in the sandbox's group, seen from inside its cgroup namespace is rooted there
    ("/", nothing of the host's tree); the group goes with the command."""
    marker = f"rubric-once-{uuid.uuid4().hex}"
    command = f"cat /proc/self/cgroup; exec sh -c 'sleep 30' {marker}"
    running = asyncio.ensure_future(
        get_runtime("bwrap").run(
            ["sh", "-c", command], config=SandboxConfig(pids=16, memory_mb=64), timeout=30
        )
    )
    inner = f"sh\0-c\0sleep 30\0{marker}\0".encode()  # the command's shell, not bwrap's arguments
    while not (pids := [p for p in _with_marker(marker) if _cmdline(p) == inner]):
        assert not running.done(), running.result()
        await asyncio.sleep(0.02)
    (pid,) = pids
    host = _cgroups(Path(f"/proc/{pid}/cgroup").read_text())
    controllers = ["pids", "memory"] if "pids" in host else [""]
    assert all("/rubric-rt-" in host[c] for c in controllers), host
    os.kill(int(pid), 9)
    inside = _cgroups((await running).stdout)
    assert [inside[c] for c in controllers] == ["/"] * len(controllers), inside
    folders = [Path("/sys/fs/cgroup", c, host[c].lstrip("/")) for c in controllers]
    assert not any(folder.exists() for folder in folders), "the sandbox's cgroup outlived it"


async def test_bwrap_covers_packages_inside_a_mounted_folder() -> None:
    """A mount of the interpreter's standard library shows its modules, not its site-packages."""
    stdlib = os.path.realpath(os.path.dirname(os.__file__))
    packages = Path(stdlib) / "site-packages"
    assert packages.is_dir() and any(packages.iterdir()), packages
    config = SandboxConfig(mounts={stdlib: stdlib} if not stdlib.startswith("/usr/") else {})
    done = await get_runtime("bwrap").run(["ls", "-A", stdlib, str(packages)], config=config)
    assert done.ok and "os.py" in done.stdout
    assert done.stdout.rstrip().endswith(f"{packages}:"), done.stdout  # there, and empty


def test_bwrap_refuses_a_process_cap_it_cannot_apply() -> None:
    """As root without a cgroup the kernel does not apply RLIMIT_NPROC, so a pids cap is refused
    (here: root of a user namespace whose /sys/fs/cgroup is an empty tmpfs); without one it runs."""
    probe = textwrap.dedent(
        """
        import asyncio
        from harness.runtimes import RuntimeUnavailableError, SandboxConfig, get_runtime
        runtime = get_runtime("bwrap")
        try:
            asyncio.run(runtime.run("true", config=SandboxConfig(pids=8)))
        except RuntimeUnavailableError as exc:
            print("refused:", exc)
        print("uncapped:", asyncio.run(runtime.run("echo ran")).stdout.strip())
        """
    )
    done = run_without_cgroups(probe)
    refused, uncapped = done.stdout.splitlines()
    assert "cannot cap a bwrap sandbox's processes (pids=8)" in refused and "root" in refused, done.stderr
    assert uncapped == "uncapped: ran"
