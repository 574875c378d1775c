"""Reward nodes read the agent's sandbox before it closes; the oracle runs a task's reference solution."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest

from envs import Environment, load_environment
from envs.agents import AgentError, AgentRun, command_passes, file_contains
from harness import ConfigError
from harness.runtimes import Sandbox
from harness.scripted import ShellScript
from rubrics import WeightedSum, relative
from rubrics.credit import returns_to_go
from tests.envs.agents.conftest import left_behind

pytestmark = [pytest.mark.agents, pytest.mark.slow]

TASK = "Write hi into hello.txt."
SEEN: list[Any] = []


async def wrote_hi(sandbox: Sandbox) -> float:
    """A plain reward function with a `sandbox` parameter: it reads the file itself."""
    SEEN.append(sandbox)
    return 1.0 if (await sandbox.read("hello.txt")).decode() == "hi" else 0.0


def test_plain_functions_and_nodes_read_the_sandbox_before_it_closes() -> None:
    rubric = {
        "fn": wrote_hi,
        "test": command_passes("grep -qx hi hello.txt"),
        "file": file_contains("hello.txt", "hi"),
    }
    env = Environment([{"prompt": TASK}], rubric, max_turns=4, credit=returns_to_go())
    env.scripted_policies = {"solve": ShellScript(["printf hi > hello.txt"], "done")}
    (r,) = env.evaluate("scripted:solve", agent="bash", progress=False).rollouts
    assert r.error is None and r.reward == 1.0, (r.error, r.score_errors)
    assert (
        r.score_details["test"]["exit_code"] == 0
        and r.score_details["test"]["command"] == "grep -qx hi hello.txt"
    )
    assert SEEN[-1].closed  # the function got the live sandbox, closed after scoring
    assert len(r.turn_rewards) == r.turns == 2  # credit works on agent turns as on ours


@pytest.mark.parametrize("workers", [1, 2])
def test_sandbox_nodes_score_before_release_under_a_group_node(workers: int, tmp_path: Path) -> None:
    """A tree with a group node scores each example's rollouts together, once, after every
    member's episode ended and before their sandboxes close: the per-rollout nodes, sandbox
    readers among them, read each member's sandbox and the group node ranks the members."""
    env = load_environment("tests.envs.agents.test_agent_rubrics:grouped_env")
    results = env.evaluate(
        "scripted:solve",
        agent="bash",
        rollouts_per_example=2,
        workers=workers,
        output_dir=tmp_path,
        progress=False,
    )
    assert [r.rollout_index for r in results] == [0, 1]
    for r in results:
        assert r.error is None and not r.score_errors, (r.error, r.score_errors)
        assert r.scores == {"file": 1.0, "rank": 0.5, "rank.command_passes": 1.0}  # ties share the mid-rank
        assert r.reward == 0.75 and r.score_details["file"]["content"] == "hi"
        assert r.score_details["rank.command_passes"]["exit_code"] == 0 and "scored_alone" not in r.state
    assert left_behind() == []  # the group's sandboxes, released once it was scored
    if workers > 1:  # the group was played and scored in one worker, where its sandboxes were
        report = results.metadata["sessions"][-1]["workers"]["workers"]
        assert sorted(w["rollouts"] for w in report) == [0, 2]


def grouped_env() -> Environment:
    """WeightedSum(file_contains(...), relative(command_passes(...))): a group node over a sandbox reader."""
    rubric = WeightedSum(
        {"file": file_contains("hello.txt", "hi"), "rank": relative(command_passes("grep -qx hi hello.txt"))}
    )
    env = Environment([{"prompt": TASK}], rubric, name="grouped-file-task", max_turns=4)
    env.scripted_policies = {"solve": ShellScript(["printf hi > hello.txt"], "done")}
    return env


def test_a_sandbox_node_without_an_agent_names_the_fix() -> None:
    env = Environment([{"prompt": TASK}], {"fn": wrote_hi, "file": file_contains("hello.txt")})
    env.scripted_policies = {"answer": lambda messages, tools: "hi"}
    (r,) = env.evaluate("scripted:answer", progress=False).rollouts
    assert math.isnan(r.reward)
    assert "run the environment with an agent" in r.score_errors["fn"]
    assert "run the environment with an agent" in r.score_errors["file"]


def test_oracle_runs_the_reference_solution(tmp_path: Path) -> None:
    rows = [{"prompt": TASK, "solution": "printf hi > hello.txt"}, {"prompt": TASK}]
    env = Environment(rows, file_contains("hello.txt", "hi"))
    (solved, missing) = _oracle(env)
    assert solved.error is None and solved.reward == 1.0 and solved.stop_reason == "completed"
    assert solved.model_calls == []
    assert missing.stop_reason == "error" and "needs the task's reference solution" in (missing.error or "")
    # The hook for task folders: a solution.sh in --agent-files.
    (tmp_path / "solution.sh").write_text("printf hi > hello.txt\n")
    env2 = Environment([{"prompt": TASK}], file_contains("hello.txt", "hi"))
    env2.scripted_policies = {"none": lambda messages, tools: "unused"}
    (r,) = env2.evaluate("scripted:none", agent="oracle", agent_files=str(tmp_path), progress=False).rollouts
    assert r.reward == 1.0


def _oracle(env: Environment) -> Any:
    env.scripted_policies = {"none": lambda messages, tools: "unused"}
    return env.evaluate("scripted:none", agent="oracle", progress=False).rollouts


def test_bad_agent_settings_fail_before_any_rollout(tmp_path: Path) -> None:
    env = Environment([{"prompt": TASK}], file_contains("hello.txt"))
    env.scripted_policies = {"none": lambda messages, tools: "unused"}
    with pytest.raises(AgentError, match="no agent 'nope'; the agents are: command:CMD, bash, claude-code"):
        AgentRun("nope")
    with pytest.raises(
        ConfigError, match="--runtime 'dock': unknown runtime 'dock'; the runtimes are: docker:IMAGE"
    ):
        env.evaluate("scripted:none", agent="bash", runtime="dock", progress=False)
    with pytest.raises(ConfigError, match="is not a folder"):
        AgentRun("bash", files=str(tmp_path / "missing"))
    with pytest.raises(AgentError, match="needs a command line"):
        AgentRun("command:")
    with pytest.raises(ConfigError, match="timeout must be a positive number of seconds"):
        AgentRun("bash", timeout=0)
    with pytest.raises(ConfigError, match=r"limits \['gpus'\] are unknown; the limits are cpus, memory_mb"):
        AgentRun("bash", sandbox={"gpus": 1})
    assert not hasattr(env, "agent")
    with pytest.raises(ConfigError, match="file_contains max_bytes must be a positive number of bytes"):
        file_contains("hello.txt", max_bytes=0)
