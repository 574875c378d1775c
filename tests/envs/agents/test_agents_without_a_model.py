"""`rubric eval ENV --agent command:CMD` with no `-m` (issue 47.15): a program that needs no model runs
and is scored; one that calls a model fails its rollout saying to pass -m; a missing ENV is named."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.helpers.processes import run

pytestmark = [pytest.mark.agents, pytest.mark.bwrap, pytest.mark.slow]

ENV_FILE = """
from envs import Environment
from envs.agents import file_contains

def load_environment():
    return Environment([{"prompt": "Write hi into hello.txt."}], file_contains("hello.txt", "hi"), name="hello")
"""


def _rows(out: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]


def test_a_command_that_needs_no_model_runs_without_m(tmp_path: Path) -> None:
    (tmp_path / "hello.py").write_text(ENV_FILE)
    out = tmp_path / "run"
    done = run("eval", "hello.py", "--agent", "command:printf hi > hello.txt", "--runtime", "bwrap", "-o", str(out), "--no-progress", cwd=tmp_path, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr
    (row,) = _rows(out)
    assert row["reward"] == 1.0 and row["state"]["agent"]["no_model_call"]  # type: ignore[index]


def test_a_command_that_calls_a_model_without_m_is_told_to_pass_it(tmp_path: Path, agent_files: Path) -> None:
    (tmp_path / "hello.py").write_text(ENV_FILE)
    out = tmp_path / "run"
    agent = "command:python3 /agent/chat.py {instruction_file}"
    args = ["eval", "hello.py", "--agent", agent, "--agent-files", str(agent_files), "--runtime", "bwrap"]
    done = run(*args, "-o", str(out), "--no-progress", cwd=tmp_path, timeout=300)
    assert done.returncode == 1  # every rollout errored
    (row,) = _rows(out)
    assert str(row["error"]).endswith(
        "the run has no model (no -m): pass -m MODEL for an agent that calls one"
    )


def test_what_is_missing_is_named(tmp_path: Path) -> None:
    no_env = run("eval", "--agent", "command:true", "--no-progress", cwd=tmp_path)
    assert no_env.returncode == 2 and "required: ENV (or --resume DIR)" in no_env.stderr
    (tmp_path / "hello.py").write_text(ENV_FILE)
    no_model = run("eval", "hello.py", "--no-progress", cwd=tmp_path)
    assert no_model.returncode == 2 and "required: -m/--model (or --resume DIR)" in no_model.stderr
