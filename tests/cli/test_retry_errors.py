"""Resuming, completed (issue 19.11): Ctrl-C prints the exact resume command, and
`--resume DIR --retry-errors` runs the errored rollouts again."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.cli.conftest import Invoke
from tests.helpers.processes import RUBRIC

ENV_FILE = """
import os, time
from envs import SingleTurnEnv
from harness.scripted._endpoint import ScriptedHTTPError


def flaky(messages, tools):
    question = messages[-1]["content"]
    if question == "q2" and not os.path.exists({marker!r}):
        raise ScriptedHTTPError(500, "the model server fell over")
    if os.environ.get("SLOW_POLICY"):
        time.sleep(0.5)
    return "a"


def load_environment(n: int = 5):
    env = SingleTurnEnv([{{"question": f"q{{i}}", "answer": "a"}} for i in range(n)],
                        lambda response, answer: float(response == answer), name="flaky")
    env.scripted_policies = {{"flaky": flaky}}
    return env
"""


def _rows(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]


def test_retry_errors_runs_only_the_errored_rollouts_again(rubric: Invoke, tmp_path: Path) -> None:
    marker = tmp_path / "healed"
    (tmp_path / "flaky.py").write_text(ENV_FILE.format(marker=str(marker)))
    first = rubric(
        "eval",
        "flaky.py",
        "-m",
        "scripted:flaky",
        "--max-retries",
        "0",
        "-o",
        "r",
        "--no-progress",
        cwd=tmp_path,
    )
    assert first.returncode == 0 and "1 rollout(s) ended with an error" in first.stdout
    assert [r["example_id"] for r in _rows(tmp_path / "r") if r["error"]] == [2]
    marker.write_text("")
    again = rubric(
        "eval", "--resume", "r", "--retry-errors", "--max-retries", "0", "--no-progress", cwd=tmp_path
    )
    assert again.returncode == 0, again.stderr
    rows = _rows(tmp_path / "r")
    assert len(rows) == 5 and not any(r["error"] for r in rows) and all(r["reward"] == 1.0 for r in rows)
    refused = rubric(
        "eval", "flaky.py", "-m", "scripted:flaky", "--retry-errors", "-o", "x", "--no-progress", cwd=tmp_path
    )
    assert refused.returncode == 2 and "use it with --resume DIR" in refused.stderr


@pytest.mark.slow
def test_ctrl_c_prints_the_exact_resume_command(rubric: Invoke, tmp_path: Path) -> None:
    (tmp_path / "healed").write_text("")
    (tmp_path / "flaky.py").write_text(ENV_FILE.format(marker=str(tmp_path / "healed")))
    with subprocess.Popen(
        [
            str(RUBRIC),
            "eval",
            "flaky.py",
            "-m",
            "scripted:flaky",
            "-a",
            '{"n": 40}',
            "-c",
            "1",
            "--no-progress",
        ],
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SLOW_POLICY": "1"},
    ) as proc:
        deadline = time.monotonic() + 60
        while (
            not list(tmp_path.glob("runs/*/results.jsonl"))
            or not (next(tmp_path.glob("runs/*/results.jsonl"))).read_text()
        ):
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.1)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    (folder,) = tmp_path.glob("runs/*")
    hint = f"""continue with: rubric eval flaky.py --resume runs/{folder.name} -a '{{"n": 40}}'"""
    assert hint in err, err  # the run's arguments too: a folder's are not used unasked
    again = rubric(*shlex.split(hint.removeprefix("continue with: rubric ")), "--no-progress", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
