"""`rubric eval --resume DIR` takes the environment, the model and what to run from
DIR/metadata.json (issue 19.2; its arguments only when passed, issue 33.1); a flag that differs
from the run is still refused."""

from __future__ import annotations

import json
from pathlib import Path

from tests.cli.conftest import Invoke

ENV_FILE = """
from envs import SingleTurnEnv


def load_environment(n: int = 4):
    rows = [{"question": f"q{i}", "answer": "a"} for i in range(n)]
    env = SingleTurnEnv(rows, lambda response, answer: float(response == answer), name="mine")
    env.scripted_policies = {"a": lambda messages, tools: "a"}
    return env
"""


def _cut(results: Path, keep: int) -> None:
    lines = results.read_text().splitlines()
    results.write_text("\n".join(lines[:keep]) + "\n")


def test_resume_of_an_installed_environment_needs_only_the_folder(rubric: Invoke, tmp_path: Path) -> None:
    first = rubric(
        "eval",
        "gsm8k",
        "-m",
        "scripted:noisy",
        "-n",
        "6",
        "-r",
        "2",
        "--no-progress",
        "-o",
        "r",
        cwd=tmp_path,
    )
    assert first.returncode == 0, first.stderr
    _cut(tmp_path / "r" / "results.jsonl", 5)  # a crash after 5 of 12
    resumed = rubric(
        "eval", "--resume", "r", "--no-progress", "-c", "3", cwd=tmp_path
    )  # concurrency may change
    assert resumed.returncode == 0, resumed.stderr
    rows = [json.loads(line) for line in (tmp_path / "r" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 12 and len({(r["example_id"], r["rollout_index"]) for r in rows}) == 12
    changed = rubric("eval", "--resume", "r", "-n", "3", "--no-progress", cwd=tmp_path)
    assert changed.returncode == 2 and "arguments.num_examples: was 6, now 3" in changed.stderr


def test_resume_of_a_file_environment_checks_its_source_is_unchanged(rubric: Invoke, tmp_path: Path) -> None:
    (tmp_path / "myenv.py").write_text(ENV_FILE)
    first = rubric(
        "eval", "myenv.py", "-m", "scripted:a", "-a", '{"n": 5}', "-o", "m", "--no-progress", cwd=tmp_path
    )
    assert first.returncode == 0, first.stderr
    _cut(tmp_path / "m" / "results.jsonl", 2)
    unasked = rubric("eval", "--resume", "m", "--no-progress", cwd=tmp_path)  # its arguments need saying so
    assert unasked.returncode == 2 and """rubric eval --resume m -a '{"n": 5}'""" in unasked.stderr
    resumed = rubric(
        "eval", "--resume", "m", "-a", '{"n": 5}', "--no-progress", cwd=tmp_path
    )  # the same file
    assert resumed.returncode == 0, resumed.stderr
    assert len((tmp_path / "m" / "results.jsonl").read_text().splitlines()) == 5
    (tmp_path / "myenv.py").write_text(ENV_FILE + "\n# edited since the run\n")
    _cut(tmp_path / "m" / "results.jsonl", 2)
    refused = rubric("eval", "--resume", "m", "--no-progress", cwd=tmp_path)
    assert refused.returncode == 2 and "never runs code it names" in refused.stderr
    assert f"rubric eval {tmp_path / 'myenv.py'} --resume m" in refused.stderr  # the command to type


def test_a_new_run_still_needs_env_and_model(rubric: Invoke, tmp_path: Path) -> None:
    proc = rubric("eval", "gsm8k", cwd=tmp_path)
    assert proc.returncode == 2 and "required: -m/--model (or --resume DIR)" in proc.stderr  # ENV was given
    neither = rubric("eval", cwd=tmp_path)
    assert neither.returncode == 2 and "required: ENV and -m/--model (or --resume DIR)" in neither.stderr


def test_resume_keeps_the_settings_the_run_started_with(rubric: Invoke, tmp_path: Path) -> None:
    started = ("-c", "4", "--timeout", "30", "--max-retries", "2", "--transport", "openai")
    first = rubric(
        "eval", "gsm8k", "-m", "scripted:noisy", "-n", "6", *started, "-o", "r", "--no-progress", cwd=tmp_path
    )
    assert first.returncode == 0, first.stderr
    _cut(tmp_path / "r" / "results.jsonl", 2)
    resumed = rubric("eval", "--resume", "r", "--no-progress", cwd=tmp_path)  # not the defaults (-c 64)
    assert resumed.returncode == 0, resumed.stderr
    metadata = json.loads((tmp_path / "r" / "metadata.json").read_text())
    model = metadata["model"]
    assert metadata["arguments"]["concurrency"] == model["max_concurrency"] == 4
    assert (model["timeout"], model["max_retries"], model["transport"]) == (30.0, 2, "openai")
    _cut(tmp_path / "r" / "results.jsonl", 2)
    changed = rubric("eval", "--resume", "r", "-c", "2", "--timeout", "9", "--no-progress", cwd=tmp_path)
    assert changed.returncode == 0, changed.stderr  # a flag given again overrides, and is recorded
    metadata = json.loads((tmp_path / "r" / "metadata.json").read_text())
    assert metadata["arguments"]["concurrency"] == metadata["model"]["max_concurrency"] == 2
    assert (metadata["model"]["timeout"], metadata["model"]["transport"]) == (9.0, "openai")
