"""The published agents (mini-swe-agent from PyPI, Codex and Claude Code from npm, pinned) finish the file task offline
in bwrap and Docker sandboxes, driven through the proxy in their own dialects and tool formats.
Their packages are installed on the host by .ci/agents-up (or on first use) and mounted read-only."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from harness import Client, ScriptedEndpoint, training_samples
from harness.scripted import ShellScript
from tests.envs.agents.conftest import RUNTIMES, SOLVE, task_env
from tests.helpers.processes import run

pytestmark = [pytest.mark.agents, pytest.mark.slow]


@pytest.mark.bwrap
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


@pytest.mark.bwrap
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


def _thinking_script() -> Any:
    """Three shell steps, each reply with reasoning and text whose whitespace agents may redo."""
    script = ShellScript([SOLVE, "ls -la  .", "cat hello.txt"], "all  done \n\n  here ")

    def policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Any:
        out = script(messages, tools)
        if isinstance(out, dict):
            return {
                **out,
                "content": out["content"] + "  \n  then\tmore ",
                "reasoning_content": "I think\n\n  so  ",
            }
        return {"content": out, "reasoning_content": "final thought "}

    return policy


@pytest.mark.parametrize("agent", ["codex", "claude-code", "mini-swe-agent"])
def test_published_agents_send_back_only_replies_the_proxy_gave(agent: str) -> None:
    """The history each agent re-sends, as it normalises it, is matched to the proxy's replies:
    the default `forged_history="mark"` marks nothing in a real agent's episode."""
    env = task_env()
    env.scripted_policies = {"thinking": _thinking_script()}
    (rollout,) = env.evaluate("scripted:thinking", agent=agent, runtime="bwrap", progress=False).rollouts
    assert rollout.error is None and rollout.reward == 1.0, rollout.error
    main = [c for c in rollout.model_calls if c.tools]
    assert len(main) >= 4 and sum(m.role == "assistant" for m in main[-1].messages) == 3
    assert [c.forged for c in rollout.model_calls] == [[]] * len(rollout.model_calls)
    assert not any(m.get("forged") for m in rollout.completion)


#: Each agent's calls in the thinking episode, grouped into training samples by the rule.
SAMPLES = {
    "codex": [[0, 1, 2, 3]],
    "claude-code": [[0, 1, 2, 3]],
    "bash": [[0, 1, 2, 3]],
    # mini-swe-agent drops a reply with no tool call from its history and sends a format error
    # in its place: a rewritten history, so each such call starts a new sample.
    "mini-swe-agent": [[0, 1, 2, 3], [4], [5]],
}


@pytest.mark.bwrap
@pytest.mark.parametrize("agent", list(SAMPLES))
def test_published_agents_episodes_become_training_samples_by_the_rule(agent: str) -> None:
    """49.2: a real agent's episode, recorded with token ids, merges into samples whose ids are
    exactly its calls' (no skew), each carrying the reward; the merge ratio is printed."""
    env = task_env()
    with ScriptedEndpoint(_thinking_script()) as endpoint:
        client = Client("served", base_url=endpoint.base_url, return_token_ids=True)
        (rollout,) = env.evaluate(client, agent=agent, runtime="bwrap", progress=False).rollouts
    assert rollout.error is None and rollout.reward == 1.0, rollout.error
    samples = training_samples(rollout)
    assert [s.calls for s in samples] == SAMPLES[agent]
    for sample in samples:
        last = rollout.model_calls[sample.calls[-1]].tokens
        assert last is not None and sample.skew_tokens == 0 and sample.reward == 1.0
        assert sample.prompt_ids + sample.completion_ids == last.prompt_token_ids + last.completion_token_ids
    answered = sum(c.ok for c in rollout.model_calls)
    print(f"{agent}: {len(samples)} samples from {answered} calls ({len(samples) / answered:.2f} per call)")


REPLAY_ENV = """
from envs import Environment
from envs.agents import file_contains
from harness import Client, ScriptedEndpoint, training_samples
from harness.scripted import ShellScript

def load_environment():
    env = Environment([{"prompt": "Write hi into hello.txt."}], file_contains("hello.txt", "hi"), name="file-task", max_turns=8)
    env.scripted_policies = {"solve": ShellScript(["printf hi > hello.txt"], "the file is written")}
    return env
"""


@pytest.mark.bwrap
def test_published_agents_replayed_claude_code_identical_codex_diverges_at_its_chunk_id(
    tmp_path: Path,
) -> None:
    """Issue 51: a Claude Code episode replays identically; a Codex episode diverges at call 1,
    whose tool result carries Codex's own random `Chunk ID` (and a wall time), as documented."""
    (tmp_path / "ft.py").write_text(REPLAY_ENV)
    outcomes = {}
    for agent in ("claude-code", "codex"):
        flags = ["--agent", agent, "--runtime", "bwrap"]
        done = run("eval", "ft.py", "-m", "scripted:solve", *flags, "-o", agent, "--no-progress", cwd=tmp_path, timeout=300)  # fmt: skip
        assert done.returncode == 0, done.stderr
        again = run(
            "replay", agent, "ft.py", *flags, "--verify", "-o", f"{agent}-again", cwd=tmp_path, timeout=300
        )
        outcomes[agent] = (again.returncode, again.stdout)
    assert outcomes["claude-code"][0] == 0 and "0:0      identical" in outcomes["claude-code"][1]
    code, table = outcomes["codex"]
    assert code == 1 and "diverged at call 1 (request differs): message 5 (tool result" in table
    assert "Chunk ID:" in table
