"""env.verl(): verl's dataset rows and reward, and a GRPO step driven by verl's own parts on the CPU.

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
from typing import Any

import numpy as np
import pytest
import torch

from envs import SingleTurnEnv
from harness import Client, ConfigError, ScriptedEndpoint
from rubrics import LLMJudge, WeightedSum, relative
from rubrics._verl import grpo_advantages
from tests.helpers.training import tiny_chat_model

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
