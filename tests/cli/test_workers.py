"""The real `rubric` executable with `--workers` and `--ray`: a run in worker processes, and bad input."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness import ScriptedEndpoint
from harness._engine.executors.plan import workers_hint
from tests.cli.conftest import Invoke
from tests.helpers.docs import code_block

RUBRIC = shutil.which("rubric")
pytestmark = pytest.mark.skipif(RUBRIC is None, reason="the rubric console script is not installed")
LOCAL = "http://127.0.0.1:1/v1"  # where the scripted endpoint listens: loopback


def run(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "COLUMNS": "200", **(env or {})}
    return subprocess.run([RUBRIC, *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=180)


@pytest.mark.slow
def test_eval_with_two_workers(tmp_path: Path) -> None:
    proc = run(
        "eval", "gsm8k", "-m", "scripted:oracle", "-n", "30", "-r", "2", "--max-turns", "3",
        "--workers", "2", "-o", "out", "--no-progress", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "1 ± 0  (over" in proc.stdout and "60 (30 examples)" in proc.stdout
    assert "local workers: #0 " in proc.stdout and " MB; driver peak " in proc.stdout
    lines = (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    keys = {(r["example_id"], r["rollout_index"]) for r in map(json.loads, lines)}
    assert len(lines) == 60 and len(keys) == 60
    metadata = json.loads((tmp_path / "out" / "metadata.json").read_text())
    assert metadata["arguments"]["workers"] == 2 and metadata["env"]["max_turns"] == 3
    workers = metadata["sessions"][-1]["workers"]["workers"]
    assert sum(w["rollouts"] for w in workers) == 60
    assert not any(w["imported_datasets"] for w in workers)


@pytest.mark.slow
def test_more_workers_than_cpus_warns_in_one_line_and_runs(tmp_path: Path) -> None:
    workers = str((os.cpu_count() or 1) + 1)
    proc = run(
        "eval", "gsm8k", "-m", "scripted:oracle", "-n", "4", "--workers", workers, "-c", workers,
        "-o", "out", "--no-progress", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"rubric: warning: workers={workers} is more than the {os.cpu_count()} CPUs here; "
        f"they will share CPUs (allowed, but {os.cpu_count()} is usually as fast)",
        f"rubric: warning: {workers_hint(workers=int(workers), rollouts=4, concurrency=int(workers), base_url=LOCAL)}",
    ]


@pytest.mark.slow
def test_a_small_run_with_workers_says_in_one_line_that_they_cannot_help(tmp_path: Path) -> None:
    proc = run(
        "eval", "gsm8k", "-m", "scripted:oracle", "-n", "30", "--workers", "2", "-o", "out", "--no-progress",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    [line] = proc.stderr.strip().splitlines()
    assert line.startswith(
        "rubric: warning: workers=2 will not speed up 30 rollouts: each worker takes seconds"
    )
    assert line.endswith("so run this one without them") and "30 (30 examples)" in proc.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--workers", "0"], "--workers must be at least 1, got 0"),
        (["--workers", "4", "-c", "2"], "workers=4 is more than concurrency=2"),
        (
            ["--ray"],
            "Ray is not installed, and --ray / executor='ray' needs it: pip install 'rubric-rl[ray]'",
        ),
    ],
)
def test_worker_errors_are_one_line(
    rubric: Invoke, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str
) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails: Ray is not installed
    proc = rubric("eval", "gsm8k", "-m", "scripted:oracle", "-n", "2", "-o", "out", *args, cwd=tmp_path)
    assert proc.returncode != 0
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def _needs_ray() -> None:
    if os.environ.get("CI") != "true":  # CI installs the [ray] extra and always runs these
        pytest.importorskip("ray", reason="Ray tests need pip install 'rubric-rl[ray]'")


@pytest.mark.slow
def test_eval_on_a_local_ray(tmp_path: Path) -> None:
    _needs_ray()
    proc = run(
        "eval", "gsm8k", "-m", "scripted:oracle", "-n", "20", "--workers", "2", "--ray", "-o", "out",
        "--no-progress", cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "20 (20 examples)" in proc.stdout and "1 ± 0  (over" in proc.stdout
    metadata = json.loads((tmp_path / "out" / "metadata.json").read_text())
    report = metadata["sessions"][-1]["workers"]
    assert report["executor"] == "ray" and sum(w["rollouts"] for w in report["workers"]) == 20


@pytest.mark.slow
def test_unreachable_ray_address_is_one_line(tmp_path: Path) -> None:
    _needs_ray()
    proc = run(
        "eval", "gsm8k", "-m", "scripted:oracle", "-n", "2", "--ray", "127.0.0.1:1", "-o", "out", cwd=tmp_path
    )
    assert proc.returncode != 0
    assert "cannot connect to the Ray cluster at 127.0.0.1:1: nothing answers there" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "out").exists()


@pytest.mark.slow
def test_readme_workers_example_runs_as_written(tmp_path: Path) -> None:

    block = code_block("bash", "--workers 2")
    command = block.strip().split()
    proc = run(*command[1:], cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "800 (200 examples)" in proc.stdout and "pass@4" in proc.stdout
    workers = json.loads((tmp_path / "runs" / "workers" / "metadata.json").read_text())["sessions"][-1][
        "workers"
    ]
    assert [w["concurrency"] for w in workers["workers"]] == [64, 64]


JUDGED_ENV = """
import os

from envs import SingleTurnEnv
from rubrics import LLMJudge


def load_environment() -> SingleTurnEnv:
    judge = LLMJudge("Is {{ response }} right?", model="judge", base_url=os.environ["JUDGE_URL"], api_key="k")
    env = SingleTurnEnv([{"question": f"Say {i}.", "answer": str(i)} for i in range(6)], judge, name="judged")
    env.scripted_policies = {"echo": lambda messages, tools: messages[-1]["content"][4:-1]}
    return env
"""


@pytest.mark.slow
def test_workers_close_their_judges_pools(tmp_path: Path) -> None:
    # A pool left open when a worker's loop ends is reported as it exits, on its stderr; so is
    # any other transport left open, with ResourceWarnings shown.
    (tmp_path / "judged.py").write_text(JUDGED_ENV)
    with ScriptedEndpoint(lambda messages, tools: "1") as judge:
        proc = run(
            "eval", "judged.py", "-m", "scripted:echo", "--workers", "2", "-o", "out", "--no-progress",
            cwd=tmp_path, env={"JUDGE_URL": judge.base_url, "PYTHONWARNINGS": "always::ResourceWarning"},
        )  # fmt: skip
        assert judge.stats.requests == 6
    assert proc.returncode == 0, proc.stderr
    assert "6 (6 examples)" in proc.stdout and "1 ± 0  (over" in proc.stdout
    assert "nclosed" not in proc.stderr and "ResourceWarning" not in proc.stderr, proc.stderr
