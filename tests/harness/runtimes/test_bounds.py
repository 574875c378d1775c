"""What a sandbox can make the harness hold or the host store: exec output, reads, downloads, disk.

The memory tests run the harness side in a child process that measures its own resident set
(/proc/self/status after resetting the peak with /proc/self/clear_refs) and ends itself if it
grows past a ceiling, so a regression fails fast instead of filling the machine.
"""

from __future__ import annotations

import json
import math
import subprocess
import sys
import time
from pathlib import Path

import pytest

from harness import ConfigError
from harness.runtimes import SandboxError, get_runtime
from harness.runtimes import _docker as docker_runtime
from tests.harness.runtimes.conftest import ALL, DOCKER

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]
MB = 1 << 20
#: The runtimes whose harness memory is measured (local isolates nothing worth measuring).
MEASURED = [pytest.param("bwrap", id="bwrap"), pytest.param(DOCKER, id="docker", marks=pytest.mark.docker)]

# The child's side: resident-set figures, the reset of the peak, and the ceiling that ends it.
_MEMORY = r"""
import json, os, sys, threading, time

def resident(field="VmRSS"):
    with open("/proc/self/status") as status:
        line = next(l for l in status if l.startswith(field + ":"))
    return int(line.split()[1]) * 1024

def reset_peak():
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")  # resets VmHWM, the peak resident set, to the current one

def guard(ceiling):
    def watch():
        while True:
            if resident() > ceiling:
                print(json.dumps({"over_ceiling": resident()}), flush=True)
                os._exit(3)
            time.sleep(0.01)
    threading.Thread(target=watch, daemon=True).start()
"""


def run_child(script: str, *args: str, timeout: float = 180) -> dict[str, object]:
    """Run `script` (after the memory helpers) in a fresh Python; its last stdout line, as JSON."""
    done = subprocess.run(
        [sys.executable, "-c", _MEMORY + script, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/local/bin:/usr/bin:/bin"},
    )
    lines = done.stdout.strip().splitlines()
    assert lines, f"the child printed nothing (exit {done.returncode}): {done.stderr[-2000:]}"
    found: dict[str, object] = json.loads(lines[-1])
    assert "over_ceiling" not in found, f"the harness grew past its ceiling: {found}"
    assert done.returncode == 0, done.stderr[-2000:]
    return found


# ---------------------------------------------------------------- exec output


@pytest.mark.parametrize("spec", ALL)
async def test_exec_keeps_the_head_and_tail_of_long_output_and_counts_the_cut(spec: str) -> None:
    async with get_runtime(spec).sandbox() as sb:
        long = "printf start; head -c 3000000 /dev/zero | tr '\\0' x; printf end; printf oops >&2"
        done = await sb.exec(long, max_output=1000)
        assert done.ok and len(done.stdout) == 1000
        assert done.stdout.startswith("start") and done.stdout.endswith("xend")
        assert (done.stdout_cut, done.stderr, done.stderr_cut) == (3_000_008 - 1000, "oops", 0)
        whole = await sb.exec("head -c 3000000 /dev/zero | tr '\\0' x", max_output=None)
        assert len(whole.stdout) == 3_000_000 and whole.stdout_cut == 0
        default = await sb.exec("head -c 9000000 /dev/zero")
        assert len(default.stdout) == 8 * MB and default.stdout_cut == 9_000_000 - 8 * MB
        with pytest.raises(ConfigError, match="max_output must be a positive number of bytes"):
            await sb.exec("true", max_output=0)


@pytest.mark.parametrize("spec", ALL)
async def test_a_command_printing_without_end_is_drained_to_its_timeout_and_no_longer(spec: str) -> None:
    """A killed command's unread output (a full pipe) does not hold the harness past its timeout."""
    async with get_runtime(spec).sandbox() as sb:
        started = time.monotonic()
        flood = await sb.exec("cat /dev/zero", timeout=1, max_output=1000)
        assert flood.timed_out and len(flood.stdout) == 1000 and flood.stdout_cut > 10 * MB
        assert time.monotonic() - started < 3.5
        assert (await sb.exec("echo still here")).stdout == "still here\n"


# ---------------------------------------------------------------- read


@pytest.mark.parametrize("spec", ALL)
async def test_read_returns_regular_files_only_and_at_most_max_bytes(spec: str) -> None:
    async with get_runtime(spec).sandbox() as sb:
        await sb.exec(
            "head -c 1000 /dev/zero > k.bin; ln -s k.bin link; ln -s /dev/zero zero; mkfifo pipe; mkdir dir"
        )
        assert await sb.read("k.bin", max_bytes=1000) == bytes(1000)
        assert await sb.read("link") == bytes(1000)  # a link is followed inside the sandbox
        with pytest.raises(SandboxError, match=r"'k.bin' in the sandbox: it is larger than max_bytes = 999"):
            await sb.read("k.bin", max_bytes=999)
        for path in ("zero", "/dev/zero", "pipe", "dir"):
            with pytest.raises(
                SandboxError, match=rf"cannot read '{path}' in the sandbox: .*not a regular file"
            ):
                await sb.read(path)
        with pytest.raises(SandboxError, match="cannot read 'nope' in the sandbox"):
            await sb.read("nope")
        with pytest.raises(ConfigError, match="max_bytes must be a positive number of bytes"):
            await sb.read("k.bin", max_bytes=-1)


# ---------------------------------------------------------------- the attacks, with the harness measured

_ATTACK = r"""
import asyncio
from harness import Rollout
from harness._core.protocol import SANDBOX, scoring_scope
from harness.runtimes import get_runtime
from envs.agents import command_passes, file_contains
from rubrics import WeightedSum

async def main(spec):
    async with get_runtime(spec).sandbox() as sb:
        # What the agent left: its answer file is /dev/zero, a 1 GB (sparse) file, and the
        # script the check runs prints zeros without end.
        await sb.exec("ln -s /dev/zero answer.txt; truncate -s 1G big.txt; printf 'cat /dev/zero' > check.sh")
        rollout = Rollout(prompt="x", completion="")
        tree = WeightedSum({"zero": file_contains("answer.txt", "x"), "big": file_contains("big.txt", "x"),
                            "endless": command_passes("sh check.sh", timeout=3)})
        reset_peak()
        before = resident()
        guard(before + 512 * 2**20)
        with scoring_scope([(rollout, {SANDBOX: sb})]):
            await tree.ascore(rollout)
        grown = resident("VmHWM") - before
    print(json.dumps({"grown": grown, "scores": rollout.scores, "errors": rollout.score_errors,
                      "endless": rollout.score_details["endless"] | {"output": ""}}))

asyncio.run(main(sys.argv[1]))
"""


@pytest.mark.parametrize("spec", MEASURED)
def test_a_devzero_answer_a_huge_file_and_an_endless_check_leave_the_harness_bounded(spec: str) -> None:
    """Before the bounds, the harness grew by gigabytes in seconds scoring these."""
    found = run_child(_ATTACK, spec)
    grown, errors, endless = found["grown"], found["errors"], found["endless"]
    assert isinstance(grown, int) and grown < 100 * MB, grown
    assert isinstance(errors, dict) and isinstance(endless, dict)
    assert "not a regular file" in errors["zero"] and "larger than max_bytes" in errors["big"], errors
    scores = found["scores"]
    assert isinstance(scores, dict) and math.isnan(scores["zero"]) and math.isnan(scores["big"]), scores
    assert scores["endless"] == 0.0
    assert endless["timed_out"] and endless["output_cut_bytes"] > 100 * MB, endless


# ---------------------------------------------------------------- a 300 MB file read and downloaded

_LARGE = r"""
import asyncio, os
from harness.runtimes import get_runtime

async def main(spec, folder):
    size = 300 * 2**20
    async with get_runtime(spec).sandbox() as sb:
        assert (await sb.exec(f"head -c {size} /dev/urandom > big.bin")).ok
        reset_peak()
        before = resident()
        guard(before + 3 * size)
        data = await sb.read("big.bin", max_bytes=None)
        read = resident("VmHWM") - before
        assert len(data) == size
        del data
        reset_peak()
        before = resident()
        await sb.download("big.bin", os.path.join(folder, "big.bin"))
        downloaded = resident("VmHWM") - before
    print(json.dumps({"read": read, "download": downloaded, "size": os.path.getsize(os.path.join(folder, "big.bin")),
                      "left": sorted(os.listdir(folder))}))

asyncio.run(main(sys.argv[1], sys.argv[2]))
"""


@pytest.mark.parametrize("spec", MEASURED)
def test_a_300_mb_file_is_held_once_by_read_and_never_by_download(spec: str, tmp_path: Path) -> None:
    """Before: read held it twice (+600 MB), download held the whole tar and the file (+650 MB)."""
    found = run_child(_LARGE, spec, str(tmp_path))
    read, download = found["read"], found["download"]
    assert isinstance(read, int) and isinstance(download, int)
    assert 300 * MB <= read < 360 * MB, read / MB
    assert download < 48 * MB, download / MB
    assert found["size"] == 300 * MB and found["left"] == ["big.bin"]  # the spool file is gone


# ---------------------------------------------------------------- disk


async def test_bwrap_disk_mb_caps_what_its_writable_folders_hold_in_total() -> None:
    async with get_runtime("bwrap").sandbox(disk_mb=10) as sb:
        done = await sb.exec("for i in $(seq 30); do head -c 1000000 /dev/zero > f$i.bin || exit 9; done")
        assert done.exit_code == 9 and "No space left on device" in done.stderr, done
        used = await sb.exec("du -sk . | cut -f1")
        assert int(used.stdout) <= 10 * 1024
        assert not (await sb.exec("head -c 20000000 /dev/zero > /tmp/one.bin")).ok


@pytest.mark.docker
async def test_docker_disk_mb_caps_each_file_and_says_where_the_total_is_not(
    capfd: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(docker_runtime, "_WARNED", set())
    runtime = get_runtime(DOCKER)
    async with runtime.sandbox(disk_mb=10) as sb:
        one = await sb.exec("head -c 20000000 /dev/zero > one.bin")
        assert not one.ok and (await sb.exec("stat -c %s one.bin")).stdout.strip() == str(10 * MB)
        many = await sb.exec("for i in $(seq 3); do head -c 8000000 /dev/zero > f$i.bin || exit 9; done")
        assert runtime.layer_capped is not None  # the daemon was asked; what it said is known
        if runtime.layer_capped:  # xfs with pquota: the writable layer holds 10 MB at most
            assert many.exit_code == 9
        else:  # overlay2 on ext4 (this machine): each file only, and said once on stderr
            assert many.ok and "caps each file (not the total)" in sb.describe()
            said = capfd.readouterr().err
            assert said.count("cannot cap a container's writable layer") == 1, said
            assert "xfs mounted with pquota" in said
    async with runtime.sandbox(disk_mb=10):
        pass
    assert "cannot cap" not in capfd.readouterr().err  # once per daemon and process
