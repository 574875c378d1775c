"""`rubric replay DIR`: each rollout again in a fresh sandbox, its model served from the recording.

Real runs first (`rubric eval` with the scripted endpoint, the agents in bubblewrap), then
their replays: identical ones pass `--verify`; a nondeterministic tool result, an edited task
and an edited recording are each reported where and how they differ.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.envs.agents.conftest import left_behind
from tests.helpers.processes import run

pytestmark = [pytest.mark.slow]

ENV_FILE = """
from envs import Environment
from envs.agents import file_contains
from harness.scripted import ShellScript

def load_environment(word="hi"):
    rows = [{"prompt": f"Write hi into hello.txt (task {i})."} for i in range(2)]
    env = Environment(rows, {"file": file_contains("hello.txt", word)}, name="file-task", max_turns=8)
    env.scripted_policies = {
        "solve": ShellScript(["printf hi > hello.txt"], "the file is written"),
        # A tool result that is never the same twice: the clock.
        "stamp": ShellScript(["date +%s%N; printf hi > hello.txt"], "the file is written"),
    }
    return env
"""

CHAT_ENV = """
from envs import SingleTurnEnv

def load_environment():
    rows = [{"question": "2+2?", "answer": "4"}, {"question": "3+3?", "answer": "6"}]
    env = SingleTurnEnv(rows, lambda response, answer: float(response.strip() == answer), name="sums")
    env.scripted_policies = {"sums": lambda messages, tools: str(eval(messages[-1]["content"][:-1]))}
    return env
"""

AGENT = "command:python3 /agent/chat.py {instruction_file}"


def rubric(*args: str) -> subprocess.CompletedProcess[str]:
    return run(*args, cwd=Path.cwd(), timeout=300)


def agent_run(tmp_path: Path, agent_files: Path, policy: str) -> tuple[Path, Path, list[str]]:
    """A recorded run of the users' chat agent; its env file, folder and agent flags."""
    env_file = tmp_path / "file_task.py"
    env_file.write_text(ENV_FILE)
    out = tmp_path / "run"
    flags = ["--agent", AGENT, "--agent-files", str(agent_files), "--runtime", "bwrap"]
    done = rubric("eval", str(env_file), "-m", f"scripted:{policy}", *flags, "-o", str(out), "--no-progress")
    assert done.returncode == 0, done.stderr
    return env_file, out, flags


def outcomes(folder: Path) -> list[dict[str, object]]:
    return list(json.loads((folder / "metadata.json").read_text())["replay"]["outcomes"])


@pytest.mark.agents
@pytest.mark.bwrap
def test_a_command_agents_replay_is_identical_and_comparable(tmp_path: Path, agent_files: Path) -> None:
    _, out, flags = agent_run(tmp_path, agent_files, "solve")
    refused = rubric("replay", str(out), "--verify")  # the folder's agent runs only when passed
    assert (
        refused.returncode == 2 and "a results folder's agent is used only if you pass it" in refused.stderr
    )
    assert "rubric replay" in refused.stderr
    done = rubric("replay", str(out), *flags, "--verify", "-o", str(tmp_path / "again"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.count("identical") == 2, done.stdout
    found = outcomes(tmp_path / "again")
    assert [o["status"] for o in found] == ["identical", "identical"]
    assert all(o["old_reward"] == o["new_reward"] == 1.0 for o in found)
    rows = [json.loads(line) for line in (tmp_path / "again" / "results.jsonl").read_text().splitlines()]
    assert all(len(r["model_calls"]) == 2 and r["reward"] == 1.0 for r in rows)
    compared = rubric("view", str(out), str(tmp_path / "again"))
    assert compared.returncode == 0, compared.stderr
    assert left_behind() == []


@pytest.mark.agents
@pytest.mark.bwrap
def test_a_bash_agents_replay_is_identical(tmp_path: Path) -> None:
    env_file = tmp_path / "file_task.py"
    env_file.write_text(ENV_FILE)
    out = tmp_path / "run"
    flags = ["--agent", "bash", "--runtime", "bwrap"]
    done = rubric(
        "eval", str(env_file), "-m", "scripted:solve", *flags, "-n", "1", "-o", str(out), "--no-progress"
    )
    assert done.returncode == 0, done.stderr
    done = rubric("replay", str(out), *flags, "--verify", "-o", str(tmp_path / "again"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert [o["status"] for o in outcomes(tmp_path / "again")] == ["identical"]


@pytest.mark.agents
def test_a_chat_loop_replay_is_identical(tmp_path: Path) -> None:
    env_file = tmp_path / "sums.py"
    env_file.write_text(CHAT_ENV)
    out = tmp_path / "run"
    done = rubric("eval", str(env_file), "-m", "scripted:sums", "-o", str(out), "--no-progress")
    assert done.returncode == 0, done.stderr
    done = rubric("replay", str(out), "--verify", "-o", str(tmp_path / "again"))
    assert done.returncode == 0, done.stdout + done.stderr
    found = outcomes(tmp_path / "again")
    assert [o["status"] for o in found] == ["identical", "identical"] and found[0]["new_reward"] == 1.0
    nothing = rubric("replay", str(out), "--failed-only")  # every rollout scored 1
    assert nothing.returncode == 2 and "nothing to replay" in nothing.stderr


@pytest.mark.agents
def test_an_example_gone_from_the_dataset_could_not_replay(tmp_path: Path) -> None:
    env_file = tmp_path / "sums.py"
    env_file.write_text(CHAT_ENV)
    out = tmp_path / "run"
    done = rubric("eval", str(env_file), "-m", "scripted:sums", "-o", str(out), "--no-progress")
    assert done.returncode == 0, done.stderr
    env_file.write_text(CHAT_ENV.replace(', {"question": "3+3?", "answer": "6"}', ""))
    done = rubric("replay", str(out), str(env_file), "--verify", "-o", str(tmp_path / "again"))
    assert done.returncode == 1, done.stdout + done.stderr
    first, second = outcomes(tmp_path / "again")
    assert first["status"] == "identical" and second["status"] == "could not replay"
    assert "could not replay (example 1 is not in the environment's eval split now)" in done.stdout


@pytest.mark.agents
@pytest.mark.bwrap
def test_a_nondeterministic_tool_result_diverges_at_its_call(tmp_path: Path, agent_files: Path) -> None:
    _, out, flags = agent_run(tmp_path, agent_files, "stamp")
    done = rubric("replay", str(out), *flags, "--rollouts", "1", "--verify", "-o", str(tmp_path / "again"))
    assert done.returncode == 1, done.stdout + done.stderr
    [found] = outcomes(tmp_path / "again")
    assert found["example_id"] == 1 and found["status"] == "diverged" and found["call"] == 1
    # The agent's first call is the same; its second carries the shell's output: the clock.
    [line] = found["diff"]
    assert line.startswith("message 2 (tool result ") and " content: recorded " in line, line
    assert "diverged at call 1 (request differs): message 2 (tool result" in done.stdout
    assert left_behind() == []


@pytest.mark.agents
@pytest.mark.bwrap
def test_edited_tests_report_the_reward_changed(tmp_path: Path, agent_files: Path) -> None:
    env_file, out, flags = agent_run(tmp_path, agent_files, "solve")
    env_file.write_text(ENV_FILE.replace('word="hi"', 'word="bye"'))  # the task's check, edited
    # The folder's environment is a file that changed since: named again, as with --resume.
    done = rubric("replay", str(out), str(env_file), *flags, "--verify", "-o", str(tmp_path / "again"))
    assert done.returncode == 1, done.stdout + done.stderr
    found = outcomes(tmp_path / "again")
    assert [o["status"] for o in found] == ["reward changed"] * 2
    assert found[0]["old_reward"] == 1.0 and found[0]["new_reward"] == 0.0
    assert found[0]["changed_scores"] == {"file": [1.0, 0.0]}
    assert "reward changed (1 → 0); file 1 → 0" in done.stdout


@pytest.mark.agents
@pytest.mark.bwrap
def test_a_hand_edited_reply_is_detected(tmp_path: Path, agent_files: Path) -> None:
    _, out, flags = agent_run(tmp_path, agent_files, "solve")
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    [edited] = [r for r in rows if r["example_id"] == 0]
    call = edited["model_calls"][0]["reply"]["tool_calls"][0]["function"]
    call["arguments"] = json.dumps({"command": "printf hi > other.txt"})  # one reply, edited
    (out / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    done = rubric("replay", str(out), *flags, "--verify", "-o", str(tmp_path / "again"))
    assert done.returncode == 1, done.stdout + done.stderr
    first, second = outcomes(tmp_path / "again")
    assert second["status"] == "identical"
    # The edited reply is served, so the next request carries it (and its tool's output).
    assert first["status"] == "diverged" and first["call"] == 1
    assert any(line.startswith("message 1 (assistant message) tool_calls:") for line in first["diff"])
    assert "printf hi > other.txt" in first["diff"][0] and first["example_id"] == 0


@pytest.mark.agents
@pytest.mark.bwrap
def test_a_live_model_continues_from_the_divergence(tmp_path: Path, agent_files: Path) -> None:
    _, out, flags = agent_run(tmp_path, agent_files, "stamp")
    live = ["-m", "scripted:stamp"]  # the offline endpoint stands in for a live model
    done = rubric("replay", str(out), *flags, *live, "--rollouts", "0:0", "-o", str(tmp_path / "again"))
    assert done.returncode == 0, done.stdout + done.stderr  # without --verify, a divergence is reported only
    [found] = outcomes(tmp_path / "again")
    assert found["status"] == "diverged" and found["call"] == 1
    assert found["new_reward"] == 1.0  # the rest of the episode was played live, and solved
    rows = [json.loads(line) for line in (tmp_path / "again" / "results.jsonl").read_text().splitlines()]
    assert [r["example_id"] for r in rows] == [0] and len(rows[0]["model_calls"]) == 2


@pytest.mark.agents
@pytest.mark.bwrap
def test_a_random_sampling_field_diverges_at_the_first_call(tmp_path: Path, agent_files: Path) -> None:
    chat = (agent_files / "chat.py").read_text()
    random_temperature = '"tools": tools, "temperature": __import__("random").random()}'
    (agent_files / "chat.py").write_text(chat.replace('"tools": tools}', random_temperature, 1))
    _, out, flags = agent_run(tmp_path, agent_files, "solve")
    done = rubric("replay", str(out), *flags, "--rollouts", "0", "--verify", "-o", str(tmp_path / "again"))
    assert done.returncode == 1, done.stdout + done.stderr
    [found] = outcomes(tmp_path / "again")
    assert found["status"] == "diverged" and found["call"] == 0
    [line] = found["diff"]
    assert line.startswith("sampling temperature: recorded 0.") and " / now 0." in line, line
    assert left_behind() == []
