"""rubrics._verl: verl's batch reward manager scoring with a rubric tree, and the failure contract
proven with verl's own GRPO advantage and policy-loss code on a real DataProto."""

from __future__ import annotations

import math
import pickle
import re
from typing import Any

import numpy as np
import pytest
import torch

from harness import Client, ScriptedEndpoint
from rubrics import LLMJudge, WeightedSum
from rubrics._verl import SCORED_KEY, as_verl_reward, grpo_advantages
from tests.helpers.training import tiny_chat_model

pytestmark = [pytest.mark.verl, pytest.mark.slow]

GROUPS, SIZE = 10, 5
#: 20% of the judge calls fail: every member of group 0, and one member of groups 1 to 5.
FAILED = frozenset({0, 1, 2, 3, 4} | {g * SIZE + g % SIZE for g in range(1, 6)})


def grade_of(member: int) -> float:
    return ((member * 37) % 97) / 100


def judge(outage: bool) -> Any:
    def answer(messages: list[dict[str, Any]], tools: Any) -> str:
        found = re.search(r"member (\d+) grade ([0-9.]+)", messages[-1]["content"])
        assert found is not None
        member = int(found.group(1))
        if outage and member in FAILED:
            return "I cannot grade this."
        return f"Score: {found.group(2)}"

    return answer


def make_tree(base_url: str) -> WeightedSum:
    client = Client("judge", base_url=base_url, max_retries=0)
    grade = LLMJudge("member {{ member }} grade {{ grade }}: {{ response }}", client=client, cache=False)
    return WeightedSum({"judge": grade, "short": short}, weights=[1.0, 0.0])


def short(response: str) -> float:
    return float(len(response) < 40)


def make_batch(tokenizer: Any) -> Any:
    """A verl DataProto of GROUPS prompts with SIZE responses each (left-padded prompts)."""
    from verl import DataProto

    prompt_len, response_len = 6, 8
    prompts = torch.full((GROUPS * SIZE, prompt_len), tokenizer.pad_token_id)
    responses = torch.full((GROUPS * SIZE, response_len), tokenizer.pad_token_id)
    attention = torch.zeros((GROUPS * SIZE, prompt_len + response_len), dtype=torch.long)
    for m in range(GROUPS * SIZE):
        p = tokenizer.encode(f"What is {m // SIZE}?")[:prompt_len]
        r = tokenizer.encode("The answer is " + "4" * (1 + m % 3))[:response_len]
        prompts[m, prompt_len - len(p) :] = torch.tensor(p)
        responses[m, : len(r)] = torch.tensor(r)
        attention[m, prompt_len - len(p) : prompt_len + len(r)] = 1
    members = range(GROUPS * SIZE)
    return DataProto.from_dict(
        tensors={
            "prompts": prompts,
            "responses": responses,
            "attention_mask": attention,
            "response_mask": attention[:, prompt_len:].clone(),
        },
        non_tensors={
            "data_source": np.array(["toy"] * len(members), dtype=object),
            "reward_model": np.array([{"ground_truth": "4"} for _ in members], dtype=object),
            "extra_info": np.array(
                [{"index": m // SIZE, "member": m, "grade": grade_of(m)} for m in members], dtype=object
            ),
            "uid": np.array([f"g{m // SIZE}" for m in members], dtype=object),
        },
    )


def score(outage: bool) -> tuple[Any, dict[str, list[Any]]]:
    """The batch scored through verl's own `batch` reward manager with our reward function."""
    from verl.workers.reward_manager.batch import BatchRewardManager

    _, tokenizer = tiny_chat_model(" The answer is 4")
    data = make_batch(tokenizer)
    with ScriptedEndpoint(judge(outage)) as ep:
        manager = BatchRewardManager(tokenizer, 0, compute_score=as_verl_reward(make_tree(ep.base_url)))
        out = manager(data, return_dict=True)
    data.batch["token_level_rewards"] = out["reward_tensor"]
    return data, out["reward_extra_info"]


def policy_loss(data: Any, log_prob: torch.Tensor) -> torch.Tensor:
    """verl's vanilla PPO loss, aggregated by verl's `agg_loss` over the response mask."""
    from verl.trainer.ppo.core_algos import compute_policy_loss_vanilla
    from verl.workers.config import ActorConfig

    config = ActorConfig(strategy="fsdp", ppo_micro_batch_size_per_gpu=1, rollout_n=SIZE)
    old = torch.zeros_like(log_prob)
    loss, _ = compute_policy_loss_vanilla(
        old, log_prob, data.batch["advantages"], data.batch["response_mask"], "token-mean", config
    )
    return loss


@pytest.fixture(scope="module")
def batches() -> tuple[Any, dict[str, list[Any]], Any]:
    outage, extra = score(outage=True)
    clean, _ = score(outage=False)
    return outage, extra, clean


# ----------------------------------------------------------------------------- the reward function
@pytest.mark.trl
def test_reward_manager_logs_every_node_and_leaves_unscored_as_nan(
    batches: tuple[Any, dict[str, list[Any]], Any],
) -> None:
    data, extra, _ = batches
    rewards = data.batch["token_level_rewards"].sum(-1)
    unscored = {i for i, r in enumerate(rewards.tolist()) if math.isnan(r)}
    assert unscored == FAILED  # NaN, never 0
    assert len(FAILED) / (GROUPS * SIZE) == 0.2
    assert extra[SCORED_KEY] == [0.0 if i in FAILED else 1.0 for i in range(GROUPS * SIZE)]
    assert extra["rubric/judge"][7] == pytest.approx(grade_of(7))
    assert math.isnan(extra["rubric/judge"][0])
    assert extra["rubric/short"] == [1.0] * (GROUPS * SIZE)
    # Per-node flat-group share: `short` never spreads, the judge always does.
    assert extra["rubric/short/flat_group_frac"][0] == 1.0
    assert extra["rubric/judge/flat_group_frac"][0] == 0.0
    reward = data.batch["token_level_rewards"]
    last = data.batch["response_mask"].sum(-1) - 1
    assert reward[7, last[7]].item() == pytest.approx(grade_of(7))  # verl's reward at the last token


def test_reward_function_pickles() -> None:
    fn = as_verl_reward(make_tree("http://127.0.0.1:9/v1"))
    assert pickle.loads(pickle.dumps(fn)).rubric.label == fn.rubric.label


# ----------------------------------------------------------------------------- the failure contract
@pytest.mark.trl
def test_valid_members_get_the_advantages_of_the_outage_free_batch_restricted_to_them(
    batches: tuple[Any, dict[str, list[Any]], Any],
) -> None:
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    data, _, clean = batches
    metrics = grpo_advantages(data)
    valid = np.array([i for i in range(GROUPS * SIZE) if i not in FAILED])
    restricted = clean.select_idxs(valid)
    expected, _ = compute_grpo_outcome_advantage(
        restricted.batch["token_level_rewards"],
        restricted.batch["response_mask"],
        restricted.non_tensor_batch["uid"],
    )
    assert torch.equal(data.batch["advantages"][valid], expected)  # exactly
    assert metrics == {"rubric/unscored_frac": 0.2, "rubric/skipped_groups": 1.0}
    # The group whose members all failed: no advantage, no tokens in the loss.
    assert not data.batch["advantages"][:SIZE].any()
    assert not data.batch["response_mask"][:SIZE].any()
    # Fed straight to verl's GRPO, a NaN poisons its whole group: why the scored rows go alone.
    raw, _ = compute_grpo_outcome_advantage(
        data.batch["token_level_rewards"], clean.batch["response_mask"], data.non_tensor_batch["uid"]
    )
    assert torch.isnan(raw[SIZE + 2]).all()  # a valid member of group 1, which lost one member


@pytest.mark.trl
def test_no_masked_member_contributes_to_verl_policy_loss(
    batches: tuple[Any, dict[str, list[Any]], Any],
) -> None:
    data, _, _ = batches
    grpo_advantages(data)
    failed = sorted(FAILED)
    torch.manual_seed(0)
    log_prob = (torch.randn(data.batch["advantages"].shape) * 0.1).requires_grad_()
    loss = policy_loss(data, log_prob)
    loss.backward()
    assert log_prob.grad is not None
    assert not log_prob.grad[failed].any()  # no gradient through a masked member
    assert log_prob.grad[sorted(set(range(GROUPS * SIZE)) - FAILED)].any()
    moved = log_prob.detach().clone()
    moved[failed] += 5.0  # whatever the policy does on a masked member, the loss does not change
    assert policy_loss(data, moved).item() == loss.item()


@pytest.mark.trl
def test_registered_estimator_is_what_verls_trainer_calls(
    batches: tuple[Any, dict[str, list[Any]], Any],
) -> None:
    from verl.trainer.config import AlgoConfig
    from verl.trainer.ppo.core_algos import get_adv_estimator_fn

    from rubrics._verl import masked_grpo_advantage, register_advantage_estimator

    data, _, clean = batches
    name = register_advantage_estimator()
    assert register_advantage_estimator() == name == "rubric_grpo"  # twice is harmless
    estimator = get_adv_estimator_fn(name)
    assert estimator is masked_grpo_advantage
    # The keyword arguments verl's compute_advantage passes to a registered estimator.
    advantages, returns = estimator(
        token_level_rewards=data.batch["token_level_rewards"],
        response_mask=clean.batch["response_mask"],
        config=AlgoConfig(adv_estimator=name),
        index=data.non_tensor_batch["uid"],
    )
    valid = sorted(set(range(GROUPS * SIZE)) - FAILED)
    grpo_advantages(data)
    assert torch.equal(advantages[valid], data.batch["advantages"][valid])
    assert not advantages[sorted(FAILED)].any() and torch.equal(advantages, returns)
