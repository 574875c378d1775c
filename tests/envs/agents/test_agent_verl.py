"""verl's agent loop plays CLI agents (`env.verl(agent=...)`): built through verl's registry and
Hydra as its worker builds it, the agent in a bwrap sandbox, its calls served by verl's server
manager with token ids in and out, and a GRPO advantage and loss step on the outputs with verl's
`core_algos`."""

from __future__ import annotations

import asyncio
import math
from pathlib import Path
from typing import Any

import pytest
import torch

from envs import Environment
from envs.agents import AgentRun
from tests.envs.agents.conftest import SOLVE, TASK, left_behind
from tests.helpers.training import ModelServer, play, tiny_chat_model

pytestmark = [pytest.mark.verl, pytest.mark.trl, pytest.mark.bwrap, pytest.mark.agents, pytest.mark.slow]

#: The tiny model's one reply: a call of the agents' shell tool that writes the file.
CALL = '<tool_call>\n{"name": "bash", "arguments": {"command": "' + SOLVE + '"}}\n</tool_call>'
AGENTS = {"bash": "bash", "command": "command:python3 /agent/chat.py {instruction_file}"}


async def wrote(sandbox: Any, answer: str) -> float:
    """1.0 when hello.txt holds the row's answer."""
    data = await sandbox.read("hello.txt", max_bytes=100)
    return float(data.decode().strip() == answer)


def file_task() -> Environment:
    """The file task twice: answered "hi" (the model's command solves it) and "bye" (it does not)."""
    rows = [{"prompt": TASK, "answer": "hi"}, {"prompt": TASK, "answer": "bye"}]
    return Environment(rows, wrote, name="file-task-verl")


@pytest.mark.timeout(600)
@pytest.mark.parametrize("agent", list(AGENTS), ids=list(AGENTS))
def test_verls_agent_loop_trains_a_cli_agent_episode(agent: str, agent_files: Path) -> None:
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage, compute_policy_loss_vanilla
    from verl.workers.config import ActorConfig

    model, tokenizer = tiny_chat_model(CALL)
    server = ModelServer(model, tokenizer)
    files = str(agent_files) if agent == "command" else None
    run = AgentRun(AGENTS[agent], runtime="bwrap", files=files, max_calls=2)
    spec = file_task().verl(agent=run)
    assert spec.agent_loop_config is not None and spec.agent_loop_config["name"] == "rubric_agent"
    assert spec.train_dataset["agent_name"] == ["rubric_agent", "rubric_agent"]
    hi, bye = asyncio.run(play(spec, server, tokenizer, prompt_length=16384))
    assert left_behind("bwrap") == []

    # Token ids in and out: each episode's second call continues its first call's prompt and
    # the ids verl sampled, then the tool's output; the sample is exactly what verl saw.
    call = [*tokenizer.encode(CALL), tokenizer.eos_token_id]
    first, second = server.prompts[:2]
    assert second[: len(first) + len(call)] == first + call
    assert hi.prompt_ids == first and hi.response_ids == second[len(first) :] + call
    tool = len(second) - len(first) - len(call)
    assert tool > 0 and hi.response_mask == [1] * len(call) + [0] * tool + [1] * len(call)
    assert hi.extra_fields["num_calls"] == 2 and hi.extra_fields["num_samples"] == 1
    assert hi.extra_fields["skew_tokens"] == 0
    assert (hi.reward_score, bye.reward_score) == (1.0, 0.0)
    assert hi.extra_fields["reward_extra_info"]["rubric/scored"] == 1.0

    # GRPO over the two episodes as one group, then verl's policy loss on the tiny model.
    length = max(len(hi.response_ids), len(bye.response_ids))
    responses = torch.tensor([o.response_ids + [0] * (length - len(o.response_ids)) for o in (hi, bye)])
    mask = torch.tensor([o.response_mask + [0] * (length - len(o.response_mask)) for o in (hi, bye)])
    rewards = torch.zeros(2, length)
    for i, o in enumerate((hi, bye)):
        rewards[i, len(o.response_ids) - 1] = o.reward_score
    advantages, _ = compute_grpo_outcome_advantage(rewards, mask, index=["group", "group"])
    assert advantages[0][mask[0].bool()].gt(0).all() and advantages[1][mask[1].bool()].lt(0).all()
    assert not advantages[mask == 0].any()  # the tool's output has no advantage
    log_prob = _response_log_probs(model, [o.prompt_ids for o in (hi, bye)], responses)
    log_prob.retain_grad()
    config = ActorConfig(strategy="fsdp", ppo_micro_batch_size_per_gpu=1, rollout_n=2)
    loss, _ = compute_policy_loss_vanilla(log_prob.detach(), log_prob, advantages, mask, "token-mean", config)
    loss.backward()
    assert math.isfinite(loss.item()) and log_prob.grad is not None
    assert log_prob.grad[mask.bool()].abs().sum() > 0 and not log_prob.grad[mask == 0].any()


def _response_log_probs(model: Any, prompts: list[list[int]], responses: torch.Tensor) -> torch.Tensor:
    """Each response token's log-probability under the model, one episode at a time."""
    rows = []
    for prompt, response in zip(prompts, responses):
        ids = torch.tensor([[*prompt, *response.tolist()]])
        logits = model(input_ids=ids).logits[0, len(prompt) - 1 : -1].float()
        rows.append(torch.log_softmax(logits, dim=-1).gather(-1, response.unsqueeze(-1)).squeeze(-1))
    return torch.stack(rows)


def test_an_unscored_agent_episode_is_nan_with_every_token_masked(agent_files: Path) -> None:
    model, tokenizer = tiny_chat_model(CALL)
    run = AgentRun("bash", runtime="bwrap", max_calls=1)
    env = Environment([{"prompt": TASK, "answer": "hi"}], _fails, name="file-task-unscored")
    (out,) = asyncio.run(
        play(env.verl(agent=run), ModelServer(model, tokenizer), tokenizer, prompt_length=16384)
    )
    assert out.reward_score is not None and math.isnan(out.reward_score)
    assert out.response_ids and not any(out.response_mask)
    assert out.extra_fields["reward_extra_info"]["rubric/scored"] == 0.0


def _fails(sandbox: Any) -> float:
    raise RuntimeError("the check could not run")
