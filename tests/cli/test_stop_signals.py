"""`rubric eval` stopped by SIGTERM or SIGHUP ends as Ctrl-C does: interrupted, summarised, nothing left."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from harness import ScriptedEndpoint
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
