"""`rubric eval` stopped by SIGTERM or SIGHUP ends as Ctrl-C does: interrupted, summarised, nothing left."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from harness import ScriptedEndpoint
from tests.envs.harbor.test_harbor_tasks import make_task
from tests.helpers.processes import RUBRIC, Reaped

pytestmark = [pytest.mark.slow]


def _check_stopped_mid_run(tmp_path: Path, sig: signal.Signals, *extra: str, latency: float = 0.05) -> None:
    """Start `rubric eval`, send `sig` once some rollouts are saved, and check how it ended."""
    out = tmp_path / "out"
    with ScriptedEndpoint(lambda messages, tools: "The answer is 4.", latency=latency) as endpoint:
        run = Reaped.start(
            [str(RUBRIC), "eval", "gsm8k", "-m", "scripted", "-b", endpoint.base_url, "-n", "100",
             "-r", "2", "-c", "2", "-o", str(out), "--no-progress", *extra],
            log=tmp_path / "log", cwd=tmp_path, env={"OPENAI_API_KEY": "test-key", "COLUMNS": "200"},
        )  # fmt: skip
        deadline = time.monotonic() + 120
        results = out / "results.jsonl"
        while not (results.exists() and results.read_bytes().count(b"\n") >= 4):
            assert run.running(), (tmp_path / "log").read_text()[-3000:]
            assert time.monotonic() < deadline, "no rollouts saved in 120 s"
            time.sleep(0.02)
        os.kill(run.pid, sig)
        code, left = run.finish()
    log = (tmp_path / "log").read_text()
    assert code == 128 + sig, log[-3000:]
    assert f"rubric eval: stopped by {sig.name}; finished rollouts are kept" in log
    assert f"rubric eval gsm8k --resume {out}" in log and "Traceback" not in log  # the whole command (47.11)
    metadata = json.loads((out / "metadata.json").read_text())
    saved = results.read_bytes().count(b"\n")
    assert metadata["status"] == "interrupted", metadata["status"]
    assert metadata["summary"]["num_rollouts"] == saved and 4 <= saved < 200
    assert left == {}, f"left running after {sig.name}: {left}"


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_stop_signal_ends_the_run_as_ctrl_c_does(tmp_path: Path, sig: signal.Signals, workers: str) -> None:
    _check_stopped_mid_run(tmp_path, sig, "--workers", workers)


def test_a_stop_signal_ends_a_ray_run_too(tmp_path: Path) -> None:
    _check_stopped_mid_run(tmp_path, signal.SIGTERM, "--workers", "2", "--ray", latency=0.1)


@pytest.mark.agents
@pytest.mark.bwrap
@pytest.mark.filterwarnings("ignore:--runtime .* replaces the image each task names:UserWarning")
def test_ctrl_c_ends_a_harbor_agent_run_blocked_in_a_long_sandbox_command(tmp_path: Path) -> None:
    """Ctrl-C while the agent runs a long command in its sandbox ends the run at once (exit
    130, the resume command printed, nothing left), however the suite itself was started: a
    script's background job starts with SIGINT ignored, which the child is not to inherit."""
    tasks, out = tmp_path / "tasks", tmp_path / "out"
    make_task(tasks, "slow", "echo 1 > /logs/verifier/reward.txt")
    pause = f"3600.{random.randrange(10**8):08d}"  # this run's own agent command, found in /proc
    run = Reaped.start(
        [str(RUBRIC), "eval", f"harbor:{tasks}", "--agent", f"command:sleep {pause}", "--runtime", "bwrap",
         "-o", str(out), "--no-progress"],
        log=tmp_path / "log", cwd=tmp_path,
    )  # fmt: skip
    deadline = time.monotonic() + 120
    while not _running(["sleep", pause]):
        assert run.running(), (tmp_path / "log").read_text()[-3000:]
        assert time.monotonic() < deadline, "the agent's command did not start in 120 s"
        time.sleep(0.05)
    began = time.monotonic()
    os.kill(run.pid, signal.SIGINT)
    try:
        code, left = run.finish(timeout=60)
    except subprocess.TimeoutExpired:
        os.kill(run.pid, signal.SIGKILL)  # not to outlive the test (its sandbox dies with it)
        run.finish()
        raise AssertionError("Ctrl-C did not end the run in 60 s (SIGINT ignored?)") from None
    log = (tmp_path / "log").read_text()
    assert code == 130 and time.monotonic() - began < 30, log[-3000:]
    assert "rubric eval: interrupted" in log and f"--resume {out}" in log, log[-3000:]
    assert left == {} and not _running(["sleep", pause])


def _running(argv: list[str]) -> bool:
    """Whether a process with exactly this command line runs on this machine."""
    wanted = "\0".join(argv).encode() + b"\0"
    for entry in filter(str.isdigit, os.listdir("/proc")):
        try:
            if Path(f"/proc/{entry}/cmdline").read_bytes() == wanted:
                return True
        except OSError:
            continue
    return False
