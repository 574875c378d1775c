"""Agents play a file task in real sandboxes (bwrap and Docker), every model call a recorded turn."""

from __future__ import annotations

import math
import time
from pathlib import Path

import pytest

from harness import Client, training_samples
from harness._views.html import rollout_body_html
from harness.scripted import ScriptedEndpoint
from tests.envs.agents.conftest import RUNTIMES, left_behind, task_env

pytestmark = [pytest.mark.agents, pytest.mark.slow]


@pytest.mark.bwrap
@pytest.mark.parametrize("runtime", RUNTIMES)
@pytest.mark.parametrize(
    "agent",
    [
        pytest.param("command:python3 /agent/chat.py {instruction_file}", id="own-chat"),
        pytest.param("command:python3 /agent/messages.py {instruction_file}", id="own-messages"),
        pytest.param("bash", id="bash"),
    ],
)
def test_agent_finishes_file_task(runtime: str, agent: str, agent_files: Path) -> None:
    env = task_env()
    started = time.monotonic()
    results = env.evaluate(
        "scripted:solve", agent=agent, agent_files=str(agent_files), runtime=runtime, progress=False
    )
    seconds = time.monotonic() - started
    (rollout,) = results.rollouts
    assert rollout.error is None, rollout.error
    assert rollout.stop_reason == "completed"
    assert rollout.reward == 1.0
    calls = rollout.model_calls
    assert len(calls) == 2 and all(c.status == 200 for c in calls)  # the command, then the final answer
    assert calls[0].dialect == ("messages" if "messages" in agent else "chat")
    assert rollout.turns == 2
    (call,) = rollout.completion[0].tool_calls or []
    assert "printf hi" in call.arguments
    assert rollout.completion[-1].text == "the file is written"
    # The score names the tool call that wrote the file.
    detail = rollout.score_details[""]  # the root node
    assert detail["content"] == "hi" and detail["turn"] == 0 and detail["tool_call"] == call.id
    assert left_behind(runtime) == [] and math.isfinite(rollout.timing["total"])  # closed after scoring
    print(f"{agent} on {runtime}: {seconds:.2f} s")


def test_the_bash_agents_calls_carry_the_engines_token_ids_and_make_one_sample() -> None:
    env = task_env()
    with ScriptedEndpoint(env.scripted_policies["solve"]) as endpoint:
        client = Client("served", base_url=endpoint.base_url, return_token_ids=True)
        results = env.evaluate(client, agent="bash", progress=False)
    (rollout,) = results.rollouts
    first, second = (c.tokens for c in rollout.model_calls)
    assert first is not None and second is not None
    # The second call's prompt continues the first call's prompt and sampled ids (no re-tokenisation).
    sampled = first.prompt_token_ids + first.completion_token_ids
    assert second.prompt_token_ids[: len(sampled)] == sampled
    # The bash agent's episode is one training sample: 0.5 samples per call.
    (sample,) = training_samples(rollout)
    assert sample.calls == [0, 1] and sample.reward == rollout.reward == 1.0 and sample.skew_tokens == 0
    assert sample.prompt_ids + sample.completion_ids == second.prompt_token_ids + second.completion_token_ids
    print(f"bash agent: {len(training_samples(rollout)) / len(rollout.model_calls)} samples per call")
    # The token export carries each model call's own ids beside the joined sample.
    (row,) = results.to_dataset(format="tokens")
    assert [c["index"] for c in row["model_calls"]] == [c.index for c in rollout.model_calls] == [0, 1]
    assert row["model_calls"][1]["completion_ids"] == second.completion_token_ids
    # The HTML view lists the calls.
    shown = rollout_body_html(rollout)
    assert "model calls" in shown and shown.count('<td class="">200</td>') == 2
