"""verl's agent loop on Harbor tasks (`from_harbor(...).verl(agent="bash")`): each episode in its
task's Docker sandbox, the bash agent's calls served by verl's server manager, scored by the
task's own verifier; built through verl's registry and Hydra as its worker builds it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from envs import from_harbor
from envs.agents import AgentRun
from tests.envs.agents.conftest import left_behind
from tests.helpers.training import ModelServer, play, tiny_chat_model

pytestmark = [pytest.mark.agents, pytest.mark.docker, pytest.mark.verl, pytest.mark.trl, pytest.mark.slow]
TASKS = Path(__file__).resolve().parents[3] / "datasets" / "harbor"  # the shipped Harbor tasks


#: The tiny model's one reply: the bash agent's tool, writing what write-greeting asks for.
CALL = (
    '<tool_call>\n{"name": "bash", "arguments": {"command": '
    "\"printf 'hello, harbor\\\\n' > /app/greeting.txt\"}}\n</tool_call>"
)


@pytest.mark.timeout(600)
def test_verls_agent_loop_plays_harbor_tasks_scored_by_their_verifiers() -> None:
    model, tokenizer = tiny_chat_model(CALL)
    server = ModelServer(model, tokenizer)
    env = from_harbor(TASKS)
    spec = env.verl(agent=AgentRun("bash", max_calls=2))
    names = [row["extra_info"]["example_id"] for row in spec.train_dataset]
    outputs = asyncio.run(play(spec, server, tokenizer, prompt_length=16384))
    assert left_behind("docker:harbor") == []
    assert names == ["count-words", "fix-median", "write-greeting"]
    greeting = outputs[2]
    # The task the model's one command solves scores 1 by its verifier; the others 0 (scored, not NaN).
    assert greeting.reward_score == 1.0, greeting.extra_fields
    assert sorted(out.reward_score for out in outputs) == [0.0, 0.0, 1.0]
    call = [*tokenizer.encode(CALL), tokenizer.eos_token_id]
    assert greeting.response_ids[: len(call)] == call
    assert greeting.response_mask[: len(call)] == [1] * len(call)
    assert 0 in greeting.response_mask and greeting.extra_fields["num_samples"] == 1
