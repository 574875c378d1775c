"""harness.runtimes._docker: build contexts, bad input (no daemon, failing build, missing image), labels."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.runtimes import RuntimeUnavailableError, SandboxError, get_runtime
from harness.runtimes._docker import client, context_hash
from harness.runtimes._state import boot_id
from tests.harness.runtimes.conftest import DOCKER, TEST_IMAGE

pytestmark = [pytest.mark.docker, pytest.mark.bwrap, pytest.mark.slow]


async def test_a_build_context_is_built_once_per_content(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(f"FROM {TEST_IMAGE}\nCOPY hello.txt /opt/hello.txt\n")
    (tmp_path / "hello.txt").write_text(f"built {tmp_path.name}\n")
    runtime = get_runtime(f"docker:{tmp_path}")
    async with runtime.sandbox() as sb:
        assert (await sb.exec("cat /opt/hello.txt")).stdout == f"built {tmp_path.name}\n"
    tag = await runtime.image()
    assert tag == f"rubric-build:{context_hash(tmp_path)[:16]}"
    docker = client()
    try:
        created = (await docker.images.inspect(tag))["Created"]
        again = get_runtime(f"docker:{tmp_path}")  # a new runtime: found by its hash, not rebuilt
        async with again.sandbox() as sb:
            assert (await sb.exec("cat /opt/hello.txt")).ok
        assert (await docker.images.inspect(tag))["Created"] == created
        (tmp_path / "hello.txt").write_text("changed\n")
        assert context_hash(tmp_path)[:16] != tag.split(":")[1]
    finally:
        await docker.images.delete(tag, force=True)
        await docker.close()


async def test_a_failing_build_says_why_with_its_last_log_lines(tmp_path: Path) -> None:
    (tmp_path / "Dockerfile").write_text(f"FROM {TEST_IMAGE}\nRUN echo step-output && exit 7\n")
    with pytest.raises(
        SandboxError, match=r"(?s)docker build of .* failed: .*returned a non-zero code: 7.*step-output"
    ):
        async with get_runtime(f"docker:{tmp_path}").sandbox():
            pass


async def test_a_missing_image_is_one_clear_error() -> None:
    with pytest.raises(SandboxError, match="is not on this machine's daemon: build it"):
        async with get_runtime("docker:rubric-no-such-image:v0").sandbox():
            pass


async def test_no_daemon_says_how_to_start_one(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/no-daemon.sock")
    with pytest.raises(RuntimeUnavailableError, match="no Docker daemon answers .* start one"):
        async with get_runtime(DOCKER).sandbox():
            pass


async def test_labels_limits_and_no_network_on_the_container() -> None:
    async with get_runtime(DOCKER, run_id="labels-run").sandbox(cpus=1.5, memory_mb=128, pids=50) as sb:
        docker = client()
        try:
            shown = await docker.containers.get(sb.state.container)
        finally:
            await docker.close()
        labels, host = shown["Config"]["Labels"], shown["HostConfig"]
        assert labels["rubric.run"] == "labels-run" and labels["rubric.owner"] == str(os.getpid())
        assert labels["rubric.boot"] == boot_id()
        assert (host["NanoCpus"], host["Memory"], host["MemorySwap"], host["PidsLimit"]) == (
            1_500_000_000, 128 << 20, 128 << 20, 50,
        )  # fmt: skip
        assert host["NetworkMode"] == "none" and shown["NetworkSettings"]["Networks"].keys() <= {"none"}
