"""The published agents (mini-swe-agent from PyPI, Codex and Claude Code from npm, pinned) finish the file task offline
in bwrap and Docker sandboxes, driven through the proxy in their own dialects and tool formats.
Their packages are installed on the host by .ci/agents-up (or on first use) and mounted read-only."""

from __future__ import annotations

import pytest

from tests.envs.agents.conftest import RUNTIMES, task_env


@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize(
    ("agent", "dialect", "tool"),
    [("codex", "responses", "exec_command"), ("claude-code", "messages", "Bash")],
)
def test_published_agent_finishes_file_task(runtime: str, agent: str, dialect: str, tool: str) -> None:
    env = task_env()
    (rollout,) = env.evaluate("scripted:solve", agent=agent, runtime=runtime, progress=False).rollouts
    assert rollout.error is None, rollout.error
    assert rollout.stop_reason == "completed" and rollout.reward == 1.0
    calls = [c for c in rollout.model_calls if c.tools]
    assert len(calls) == 2 and all(c.dialect == dialect and c.status == 200 for c in calls)
    assert all(c.status == 200 for c in rollout.model_calls)  # side calls answered too
    used = [call for m in rollout.completion for call in m.tool_calls or []]
    assert [call.name for call in used] == [tool] and "printf hi > hello.txt" in used[0].arguments
    assert rollout.score_details[""]["tool"] == tool


@pytest.mark.parametrize("runtime", RUNTIMES)
def test_mini_swe_agent_finishes_file_task(runtime: str) -> None:
    env = task_env()
    (rollout,) = env.evaluate(
        "scripted:solve-mini", agent="mini-swe-agent", runtime=runtime, progress=False
    ).rollouts
    assert rollout.error is None, rollout.error
    assert rollout.stop_reason == "completed" and rollout.reward == 1.0
    calls = rollout.model_calls
    assert [(c.dialect, c.status) for c in calls] == [("chat", 200), ("chat", 200)]
    used = [call for m in rollout.completion for call in m.tool_calls or []]
    assert [call.name for call in used] == ["bash", "bash"] and "printf hi > hello.txt" in used[0].arguments
