"""env.verl(): verl's dataset rows and reward, its agent loop, and a GRPO step with verl's own parts on the CPU.

verl's trainer (RayPPOTrainer) cannot run here: its only rollout backends are vLLM, SGLang and
TensorRT-LLM servers (`verl.workers.rollout.base._ROLLOUT_REGISTRY`), none installable without
CUDA. The step below chains verl's own pieces instead: `HFRollout` generates with the tiny model,
the `batch` reward manager scores with the environment's rubric, `rubrics._verl.grpo_advantages`
runs verl's GRPO on the scored rows, and verl's `compute_policy_loss_vanilla` is back-propagated.
"""

from __future__ import annotations

import asyncio
import math
import pickle
import threading
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from envs import Environment, MultiTurnEnv, SingleTurnEnv, ToolEnv, from_harbor
from envs.agents import file_contains
from harness import Client, ConfigError, ScriptedEndpoint
from rubrics import LLMJudge, WeightedSum, relative
from rubrics._verl import grpo_advantages
from tests.helpers.training import ModelServer, play, tiny_chat_model

pytestmark = [pytest.mark.verl, pytest.mark.slow]

HARBOR_TASKS = Path(__file__).resolve().parents[2] / "datasets" / "harbor"

ROWS = [{"question": "What is 2 + 2?", "answer": "4"}, {"question": "What is 3 + 3?", "answer": "6"}]
N = 2  # responses per prompt


def correct(response: str, answer: str) -> float:
    return float(answer in response)


def judged_env(base_url: str) -> SingleTurnEnv:
    client = Client("judge", base_url=base_url, max_retries=0)
    grade = LLMJudge("Grade the answer to {{ question }}: {{ response }}", client=client, cache=False)
    return SingleTurnEnv(
        ROWS, WeightedSum({"correct": correct, "judge": grade}, weights=[0.5, 0.5]), name="judged"
    )


def judge_fails_on_3_plus_3(messages: list[dict[str, Any]], tools: Any) -> str:
    return "I cannot grade this." if "3 + 3" in messages[-1]["content"] else "Score: 0.8"


def spreading_judge() -> Any:
    """Fails on 3 + 3; grades the 2 + 2 answers 0.8, then 0.2, ... (the group spreads)."""
    lock, seen = threading.Lock(), [0]

    def answer(messages: list[dict[str, Any]], tools: Any) -> str:
        if "3 + 3" in messages[-1]["content"]:
            return "I cannot grade this."
        with lock:
            seen[0] += 1
            return "Score: 0.8" if seen[0] % 2 else "Score: 0.2"

    return answer


def test_verl_spec_rows_and_reward_need_no_verl() -> None:
    spec = judged_env("http://127.0.0.1:9/v1").verl()
    row = spec.train_dataset[1]
    assert row["data_source"] == "judged"
    assert row["prompt"][-1] == {"role": "user", "content": "What is 3 + 3?"}
    assert row["reward_model"] == {"style": "rule", "ground_truth": "6"}
    assert row["extra_info"]["index"] == 1 and row["extra_info"]["question"] == "What is 3 + 3?"
    assert pickle.loads(pickle.dumps(spec.reward_fn)).rubric.label == spec.reward_fn.rubric.label
    assert "reward.custom_reward_function.name=compute_score" in spec.overrides


def test_per_response_form_scores_and_refuses_a_group_tree() -> None:
    with ScriptedEndpoint(judge_fails_on_3_plus_3) as ep:
        spec = judged_env(ep.base_url).verl()

        async def both() -> tuple[dict[str, float], dict[str, float]]:
            try:
                good = await spec.reward_fn.compute_score(
                    "judged", "The answer is 4", "4", {"question": "What is 2 + 2?"}
                )
                bad = await spec.reward_fn.compute_score(
                    "judged", "The answer is 4", "6", {"question": "What is 3 + 3?"}
                )
                return good, bad
            finally:
                await spec.reward_fn.rubric.judge.client.aclose()

        good, bad = asyncio.run(both())
    assert good["score"] == pytest.approx(0.9) and good["rubric/judge"] == pytest.approx(0.8)
    assert math.isnan(bad["score"]) and bad["rubric/scored"] == 0.0  # NaN, never 0
    grouped = SingleTurnEnv(ROWS, relative(correct), name="grouped").verl()
    with pytest.raises(ConfigError, match="batch. reward manager"):
        asyncio.run(grouped.reward_fn.compute_score("grouped", "4", "4", {}))


def generated_batch(spec: Any, model: Any, tokenizer: Any, response_length: int = 8) -> Any:
    """The batch verl's rollout hands its trainer: N responses per prompt, left-padded prompts,
    right-padded responses, `uid` per prompt (verl 0.9's own `HFRollout` is abstract, and its
    server rollouts need vLLM or SGLang: the tiny model generates with transformers instead)."""
    from verl import DataProto

    rows = [row for row in spec.train_dataset for _ in range(N)]
    texts = [
        tokenizer.apply_chat_template(r["prompt"], add_generation_prompt=True, tokenize=False) for r in rows
    ]
    enc = tokenizer(texts, return_tensors="pt", padding=True)
    out = model.generate(
        **enc, max_new_tokens=response_length, do_sample=False, pad_token_id=tokenizer.pad_token_id
    )
    responses = torch.full((len(rows), response_length), tokenizer.pad_token_id)
    new = out[:, enc["input_ids"].shape[-1] :]
    responses[:, : new.shape[-1]] = new
    response_mask = torch.zeros_like(responses)
    for i, ids in enumerate(responses.tolist()):  # up to and including the first end-of-turn
        end = ids.index(tokenizer.eos_token_id) + 1 if tokenizer.eos_token_id in ids else len(ids)
        response_mask[i, :end] = 1
        responses[i, end:] = tokenizer.pad_token_id
    return DataProto.from_dict(
        tensors={
            "prompts": enc["input_ids"],
            "responses": responses,
            "input_ids": torch.cat([enc["input_ids"], responses], dim=-1),
            "attention_mask": torch.cat([enc["attention_mask"], response_mask], dim=-1),
            "response_mask": response_mask,
        },
        non_tensors={
            "data_source": np.array([r["data_source"] for r in rows], dtype=object),
            "reward_model": np.array([r["reward_model"] for r in rows], dtype=object),
            "extra_info": np.array([r["extra_info"] for r in rows], dtype=object),
            "uid": np.array([f"p{r['extra_info']['index']}" for r in rows], dtype=object),
        },
    )


def response_log_probs(model: Any, data: Any) -> torch.Tensor:
    """The policy's log-probability of each response token (what verl's actor computes)."""
    response_len = data.batch["responses"].shape[-1]
    logits = model(input_ids=data.batch["input_ids"], attention_mask=data.batch["attention_mask"]).logits
    logp = torch.log_softmax(logits[:, -response_len - 1 : -1].float(), dim=-1)
    return logp.gather(-1, data.batch["responses"].unsqueeze(-1)).squeeze(-1)


@pytest.mark.trl
@pytest.mark.timeout(300)
def test_a_grpo_step_with_verls_parts_masks_the_unscored_prompt() -> None:
    from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla
    from verl.workers.config import ActorConfig
    from verl.workers.reward_manager.batch import BatchRewardManager

    torch.manual_seed(0)
    model, tokenizer = tiny_chat_model(" The answer is 4")
    with ScriptedEndpoint(spreading_judge()) as ep:
        spec = judged_env(ep.base_url).verl()
        data = generated_batch(spec, model, tokenizer)
        scored = BatchRewardManager(tokenizer, 0, compute_score=spec.reward_fn)(data, return_dict=True)
    data.batch["token_level_rewards"] = scored["reward_tensor"]
    extra = scored["reward_extra_info"]
    assert tokenizer.decode(data.batch["responses"][0], skip_special_tokens=True) == " The answer is 4"
    assert extra["rubric/scored"] == [1.0, 1.0, 0.0, 0.0]  # the judge failed on every 3 + 3 response
    assert extra["rubric/correct"] == [1.0, 1.0, 0.0, 0.0]
    assert sorted(extra["rubric/judge"][:2]) == [pytest.approx(0.2), pytest.approx(0.8)]
    assert extra["rubric/judge/flat_group_frac"][0] == 0.0  # the judge spreads the 2 + 2 group
    assert extra["rubric/correct/flat_group_frac"][0] == 1.0  # `correct` does not: it teaches nothing
    metrics = grpo_advantages(data)
    assert metrics == {"rubric/unscored_frac": 0.5, "rubric/skipped_groups": 1.0}
    assert not data.batch["response_mask"][2:].any()
    before = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model.train()
    log_prob = response_log_probs(model, data)
    log_prob.retain_grad()
    config = ActorConfig(strategy="fsdp", ppo_micro_batch_size_per_gpu=1, rollout_n=N)
    loss, _ = compute_policy_loss_vanilla(
        log_prob.detach(),
        log_prob,
        data.batch["advantages"],
        data.batch["response_mask"],
        "token-mean",
        config,
    )
    loss.backward()
    optimizer.step()
    assert math.isfinite(loss.item())
    assert data.batch["advantages"][:2].abs().sum() > 0 and not data.batch["advantages"][2:].any()
    assert log_prob.grad is not None
    assert log_prob.grad[:2].abs().sum() > 0 and not log_prob.grad[2:].any()  # masked: no gradient
    # The two 2 + 2 responses are the same tokens with opposite advantages: their pushes cancel.
    assert all(torch.allclose(a, b.detach(), atol=1e-6) for a, b in zip(before, model.parameters()))


@pytest.mark.trl
@pytest.mark.timeout(300)
def test_verls_reward_loop_manager_scores_per_response_with_nan_for_unscored() -> None:
    from omegaconf import OmegaConf
    from verl.experimental.reward_loop.reward_manager.naive import NaiveRewardManager

    model, tokenizer = tiny_chat_model(" The answer is 4")
    with ScriptedEndpoint(judge_fails_on_3_plus_3) as ep:
        spec = judged_env(ep.base_url).verl()
        data = generated_batch(spec, model, tokenizer)

        async def score_all() -> list[dict[str, Any]]:
            manager = NaiveRewardManager(OmegaConf.create({}), tokenizer, spec.reward_fn.compute_score)
            try:
                return [await manager.run_single(data[i : i + 1]) for i in range(len(data))]
            finally:
                await spec.reward_fn.rubric.judge.client.aclose()

        results = asyncio.run(score_all())
    rewards = [r["reward_score"] for r in results]
    assert rewards[:2] == [pytest.approx(0.9), pytest.approx(0.9)]
    assert all(math.isnan(r) for r in rewards[2:])  # unscored reaches verl as NaN, never 0
    assert [r["reward_extra_info"]["rubric/scored"] for r in results] == [1.0, 1.0, 0.0, 0.0]
    assert results[0]["reward_extra_info"]["rubric/judge"] == pytest.approx(0.8)


# ----------------------------------------------------------------------------- verl's agent loop
TOOL_CALL = '<tool_call>\n{"name": "lookup", "arguments": {"word": "cat"}}\n</tool_call>'


def lookup(word: str, state: dict[str, Any]) -> str:
    """Look a word up in the dictionary.

    Args:
        word: The word to look up.
    """
    state.setdefault("looked_up", []).append(word)
    return {"cat": "a small feline"}.get(word, "not found")


def looked_up(state: dict[str, Any], answer: str) -> float:
    return float(answer in state.get("looked_up", []))


def judge_fails_on_dog(messages: list[dict[str, Any]], tools: Any) -> str:
    return "I cannot grade this." if "dog" in messages[-1]["content"] else "Score: 0.8"


def tool_env(base_url: str) -> ToolEnv:
    client = Client("judge", base_url=base_url, max_retries=0)
    grade = LLMJudge("Grade the answer to {{ question }}: {{ response }}", client=client, cache=False)
    rows = [{"question": "What is a cat?", "answer": "cat"}, {"question": "What is a dog?", "answer": "dog"}]
    rubric = WeightedSum({"looked_up": looked_up, "judge": grade}, weights=[0.5, 0.5])
    return ToolEnv(rows, rubric, tools=[lookup], system_prompt="Use the tools.", max_turns=2, name="tooled")


def test_only_an_environment_with_turns_gets_the_agent_loop() -> None:
    single = judged_env("http://127.0.0.1:9/v1").verl()
    assert single.agent_loop_config is None and "agent_name" not in single.train_dataset.column_names
    spec = tool_env("http://127.0.0.1:9/v1").verl()
    assert spec.agent_loop_config == {
        "name": "rubric_env",
        "_target_": "envs._verl_agent_loop.EnvironmentAgentLoop",
        "environment": "tooled",
    }
    assert spec.train_dataset["agent_name"] == ["rubric_env", "rubric_env"]


@pytest.mark.trl
@pytest.mark.timeout(300)
def test_verls_agent_loop_plays_the_tool_environment_and_masks_the_unscored_episode() -> None:
    model, tokenizer = tiny_chat_model(TOOL_CALL)  # the model always calls lookup(word="cat")
    server = ModelServer(model, tokenizer)
    with ScriptedEndpoint(judge_fails_on_dog) as ep:
        env = tool_env(ep.base_url)
        spec = env.verl()

        async def run() -> list[Any]:
            try:
                return await play(spec, server, tokenizer)
            finally:
                await env.rubric.judge.client.aclose()  # given to the judge, so the test's to close

        cat, dog = asyncio.run(run())
    prompt = tokenizer.apply_chat_template(
        spec.train_dataset[0]["prompt"], tools=env.tool_schemas, add_generation_prompt=True, tokenize=False
    )
    assert cat.prompt_ids == tokenizer(prompt)["input_ids"]
    call = [*tokenizer.encode(TOOL_CALL), tokenizer.eos_token_id]
    # Two model turns (max_turns=2); between them the tool's result, which the model saw but did not write.
    first, env_tokens = cat.response_ids[: len(call)], cat.response_ids[len(call) : -len(call)]
    assert first == call and cat.response_ids[-len(call) :] == call
    assert "a small feline" in tokenizer.decode(env_tokens)
    assert cat.response_mask == [1] * len(call) + [0] * len(env_tokens) + [1] * len(call)
    assert server.prompts[1] == cat.prompt_ids + cat.response_ids[: -len(call)]
    assert cat.reward_score == pytest.approx(0.9)  # looked up "cat" (1.0) and judged 0.8
    assert cat.extra_fields["reward_extra_info"] == {
        "rubric/scored": 1.0,
        "rubric/looked_up": 1.0,
        "rubric/judge": pytest.approx(0.8),
    }
    assert cat.extra_fields["stop_reason"] == "max_turns"
    # The judge failed on "dog": unscored, so NaN (never 0) and every token masked out of the loss.
    assert dog.reward_score is not None and math.isnan(dog.reward_score)
    assert len(dog.response_ids) == len(cat.response_ids) and not any(dog.response_mask)
    info = dog.extra_fields["reward_extra_info"]
    assert (
        info["rubric/scored"] == 0.0 and info["rubric/looked_up"] == 0.0 and math.isnan(info["rubric/judge"])
    )


class AskTwice(MultiTurnEnv):
    """Replies "Are you sure?" to the first answer, then ends the episode."""

    def env_response(self, rollout: Any) -> str | None:
        return "Are you sure?" if rollout.turns == 1 else None


@pytest.mark.trl
@pytest.mark.timeout(300)
def test_verls_agent_loop_masks_the_environments_reply_between_turns() -> None:
    model, tokenizer = tiny_chat_model(" The answer is 4")
    env = AskTwice(ROWS[:1], correct, name="ask_twice")
    spec = env.verl()
    (out,) = asyncio.run(play(spec, ModelServer(model, tokenizer), tokenizer))
    answer = [*tokenizer.encode(" The answer is 4"), tokenizer.eos_token_id]
    reply = out.response_ids[len(answer) : -len(answer)]
    assert out.response_ids[: len(answer)] == answer and out.response_ids[-len(answer) :] == answer
    assert "Are you sure?" in tokenizer.decode(reply)
    assert out.response_mask == [1] * len(answer) + [0] * len(reply) + [1] * len(answer)
    assert out.reward_score == 1.0 and out.extra_fields["stop_reason"] == "completed"
    assert out.extra_fields["reward_extra_info"] == {"rubric/scored": 1.0}


def _reads_the_sandbox(sandbox: Any) -> float:
    return 1.0


@pytest.mark.parametrize(
    ("build", "why"),
    [
        (lambda: from_harbor(HARBOR_TASKS), "name their own sandboxes"),
        (lambda: Environment([{"prompt": "write hi"}], file_contains("hello.txt", "hi")), "reads the agent's sandbox"),
        (lambda: Environment([{"prompt": "write hi"}], WeightedSum({"s": _reads_the_sandbox})), "reads the agent's sandbox"),
    ],
    ids=["harbor", "file_contains", "sandbox-parameter"],
)  # fmt: skip
def test_env_verl_refuses_an_environment_only_an_agent_plays(build: Any, why: str) -> None:
    # verl's loop plays the chat loop: an agent's environment would fail later, unscored.
    env = build()
    with pytest.raises(ConfigError, match=why) as refused:
        env.verl()
    assert "env.trl(agent='bash')" in str(refused.value) and "format='tokens'" in str(refused.value)
