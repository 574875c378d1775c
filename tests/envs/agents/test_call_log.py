"""The run's call log (`calls.jsonl`): a SIGKILLed `rubric eval` keeps every finished model call of
its in-flight episode; `rubric view` and `load_results` show it incomplete; `--resume` plays it again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from harness import load_results
from harness._core.run.calls import INCOMPLETE, CallLog, read_calls
from harness._core.types import ModelCall
from tests.helpers.processes import RUBRIC, run

pytestmark = [pytest.mark.agents, pytest.mark.bwrap, pytest.mark.slow]

ENV_FILE = """
from envs import Environment
from envs.agents import file_contains
from harness.scripted import ShellScript

def load_environment():
    env = Environment([{"prompt": "Write hi into hello.txt."}], {"file": file_contains("hello.txt", "hi")}, name="file-task")
    env.scripted_policies = {"solve": ShellScript(["printf hi > hello.txt"], "the file is written")}
    return env
"""


def _killed_after_two_calls(tmp_path: Path, agent_files: Path, *extra: str) -> tuple[Path, str, list[str]]:
    """A `rubric eval --agent` run SIGKILLed (with all it started) once its episode has made
    both calls and hangs: the run folder, the agent and the flags to resume it with."""
    (tmp_path / "file_task.py").write_text(ENV_FILE)
    out = tmp_path / "run"
    flags = ["--agent-files", str(agent_files), "--runtime", "bwrap"]
    # Both calls made, then stuck while the agent's folder holds `hang` (gone before the resume).
    agent = "command:python3 /agent/chat.py {instruction_file}; if test -e /agent/hang; then sleep 600; fi"
    (agent_files / "hang").write_text("")
    command = [RUBRIC or "rubric", "eval", "file_task.py", "-m", "scripted:solve", "--agent", agent]
    command += [*flags, *extra, "-o", str(out), "--no-progress"]
    errors = (tmp_path / "stderr").open("wb")
    driver = subprocess.Popen(
        command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=errors, start_new_session=True
    )
    try:
        deadline = time.monotonic() + 180
        while sum(len(c) for c in read_calls(out).values()) < 2:
            assert driver.poll() is None, (tmp_path / "stderr").read_text()
            assert time.monotonic() < deadline, "the episode made no two calls in 180 s"
            time.sleep(0.2)
    finally:
        os.killpg(driver.pid, signal.SIGKILL)  # the driver and all it started, no clean-up
        driver.wait(timeout=30)
        errors.close()
    assert not (out / "results.jsonl").read_text().strip()  # the episode never finished
    return out, agent, flags


def test_a_killed_run_keeps_the_calls_of_its_episode_in_flight_and_resume_plays_it_again(
    tmp_path: Path, agent_files: Path
) -> None:
    out, agent, flags = _killed_after_two_calls(tmp_path, agent_files)
    results = load_results(out)
    assert len(results.rollouts) == 0 and len(results.incomplete) == 1
    incomplete = results.incomplete[0]
    assert (incomplete.example_id, incomplete.rollout_index) == (0, 0)
    assert [c.index for c in incomplete.model_calls] == [0, 1] and all(c.ok for c in incomplete.model_calls)
    assert incomplete.error is not None and incomplete.error.startswith(INCOMPLETE)
    assert incomplete.model_calls[0].reply is not None and incomplete.model_calls[0].reply.tool_calls
    shown = run("view", str(out), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "1 episodes were in flight when the run stopped: their 2 finished model calls" in shown.stdout

    (agent_files / "hang").unlink()
    resumed = run(
        "eval", "--resume", str(out), "--agent", agent, *flags, "--no-progress", cwd=tmp_path, timeout=300
    )
    assert resumed.returncode == 0, resumed.stderr
    again = load_results(out)
    assert [r.reward for r in again.rollouts] == [1.0] and again.incomplete == []
    attempts = {attempt for (_, _, attempt) in read_calls(out)}
    assert len(attempts) == 2  # the killed attempt's calls stay, beside the resumed one's


@pytest.mark.parametrize(
    "extra",
    [
        pytest.param(["--workers", "2", "-c", "2"], id="worker-processes"),
        pytest.param(["--ray", "--workers", "2", "-c", "2"], id="ray-actors", marks=pytest.mark.ray),
    ],
)
def test_worker_processes_and_ray_actors_append_to_the_run_s_call_log(
    tmp_path: Path, agent_files: Path, extra: list[str]
) -> None:
    # Before, only a run played in the driver's own process logged its calls: a killed run
    # with workers kept none of its in-flight episode's calls.
    out, _, _ = _killed_after_two_calls(tmp_path, agent_files, *extra)
    logged = read_calls(out)
    assert len(logged) == 1  # one attempt: the workers append under the driver's
    incomplete = load_results(out).incomplete
    assert len(incomplete) == 1 and [c.index for c in incomplete[0].model_calls] == [0, 1]


def test_a_worker_joins_the_run_s_log_without_cutting_it(tmp_path: Path) -> None:
    log = CallLog(tmp_path / "calls.jsonl")
    log.write("a", 0, ModelCall(index=0, dialect="chat"))
    joined = CallLog.join(log.target)
    assert joined is not None and joined.attempt == log.attempt
    joined.write("a", 0, ModelCall(index=1, dialect="chat"))
    log.write("a", 0, ModelCall(index=2, dialect="chat"))
    joined.close()
    log.close()
    (((_, _, attempt), calls),) = read_calls(tmp_path).items()
    assert attempt == log.attempt and [c.index for c in calls] == [0, 1, 2]
    assert CallLog.join((str(tmp_path / "elsewhere" / "calls.jsonl"), "x")) is None  # another node


def test_the_log_reads_back_past_a_torn_line_and_appends_clean_after_it(tmp_path: Path) -> None:
    log = CallLog(tmp_path / "calls.jsonl")
    log.write("a", 0, ModelCall(index=0, dialect="chat"))
    log.close()
    with (tmp_path / "calls.jsonl").open("ab") as torn:
        torn.write(b'{"example_id": "a", "rollout_index": 0, "att')  # killed mid-line
    assert [len(c) for c in read_calls(tmp_path).values()] == [1]
    again = CallLog(tmp_path / "calls.jsonl")
    again.write("a", 0, ModelCall(index=1, dialect="chat"))
    again.close()
    calls = read_calls(tmp_path)
    assert sorted(len(c) for c in calls.values()) == [1, 1] and len(calls) == 2  # two attempts
    lines = (tmp_path / "calls.jsonl").read_bytes().splitlines()
    assert all(json.loads(line)["call"]["dialect"] == "chat" for line in lines)
