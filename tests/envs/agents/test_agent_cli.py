"""`rubric eval ENV --agent ... --agent-files DIR --runtime SPEC`, with workers, resume and the views."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness import Rollout
from harness._views.html import rollout_body_html
from tests.envs.agents.conftest import DOCKER
from tests.helpers.processes import run

pytestmark = [pytest.mark.agents, pytest.mark.bwrap, pytest.mark.slow]

ENV_FILE = """
from envs import Environment
from envs.agents import command_passes, file_contains
from harness.scripted import ShellScript

def load_environment():
    rows = [{"prompt": f"Write hi into hello.txt (task {i})."} for i in range(3)]
    rubric = {"file": file_contains("hello.txt", "hi"), "test": command_passes("test -s hello.txt")}
    env = Environment(rows, rubric, name="file-task", max_turns=8)
    env.scripted_policies = {"solve": ShellScript(["printf hi > hello.txt"], "the file is written")}
    return env
"""


def rubric(*args: str) -> subprocess.CompletedProcess[str]:
    return run(*args, cwd=Path.cwd(), timeout=300)


@pytest.mark.parametrize(
    "runtime",
    [pytest.param("bwrap", id="bwrap"), pytest.param(DOCKER, id="docker", marks=pytest.mark.docker)],
)
def test_rubric_eval_runs_a_users_agent(tmp_path: Path, agent_files: Path, runtime: str) -> None:
    env_file = tmp_path / "file_task.py"
    env_file.write_text(ENV_FILE)
    out = tmp_path / "run"
    args = [
        str(env_file),
        "-m",
        "scripted:solve",
        "--agent",
        "command:python3 /agent/chat.py {instruction_file}",
    ]
    args += [
        "--agent-files",
        str(agent_files),
        "--runtime",
        runtime,
        "-n",
        "2",
        "--workers",
        "2",
        "-o",
        str(out),
    ]
    done = rubric("eval", *args, "--no-progress")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and all(r["reward"] == 1.0 and r["stop_reason"] == "completed" for r in rows)
    assert all(len(r["model_calls"]) == 2 for r in rows)
    metadata = json.loads((out / "metadata.json").read_text())
    assert metadata["episodes"]["runtime"] == runtime and "agent" not in metadata["env"]  # a run setting
    assert metadata["episodes"]["agent"] == args[4]
    # Resume runs only the missing rollout, with the agent the run recorded: a results folder's
    # agent is a command, so it is used only when passed again (the refusal prints the flags).
    (out / "results.jsonl").write_text(json.dumps(rows[0]) + "\n")
    refused = rubric("eval", "--resume", str(out), "--no-progress")
    assert (
        refused.returncode == 2 and "a results folder's agent is used only if you pass it" in refused.stderr
    )
    assert f"--agent-files {agent_files}" in refused.stderr and f"--runtime {runtime}" in refused.stderr
    other = rubric("eval", "--resume", str(out), "--agent", "bash", "--runtime", runtime, "--no-progress")
    assert other.returncode == 2 and "episodes.agent" in other.stderr  # another agent: refused
    recorded = ["--agent", args[4], "--agent-files", str(agent_files), "--runtime", runtime]
    done = rubric("eval", "--resume", str(out), *recorded, "--no-progress")
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 2 and rows[-1]["state"]["agent"]["name"] == "command" and rows[-1]["reward"] == 1.0
    # The views show the agent's tool calls and the node details.
    shown = rubric("view", str(out), "--rollout", "0")
    assert shown.returncode == 0 and "printf hi > hello.txt" in shown.stdout, shown.stdout + shown.stderr
    report = rubric("view", str(out), "--html")
    assert report.returncode == 0, report.stderr
    # What the report draws per rollout: the agent's tool call and the detail naming it.
    body = rollout_body_html(Rollout.model_validate(rows[0]))
    assert "printf hi &gt; hello.txt" in body and "call_" in body
