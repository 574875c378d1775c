"""The failure contract proven with TRL's own GRPO code: 20% of judge calls fail, and TRL's
`_generate_and_score_completions` gives the valid members exactly the advantages of the
outage-free batch restricted to them, a masked member adds nothing to the loss, and a group
whose members all failed is skipped."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from harness import ScriptedEndpoint
from rubrics._trl import as_trl_reward
from tests.helpers.training import grpo_config, tiny_chat_model
from tests.rubrics.test_verl import FAILED, GROUPS, SIZE, grade_of, judge, make_tree

pytestmark = [pytest.mark.trl, pytest.mark.slow]


def rows(members: list[int]) -> list[dict[str, Any]]:
    """TRL's inputs: one row per completion, the SIZE completions of a prompt side by side."""
    return [
        {"prompt": [{"role": "user", "content": f"What is {m // SIZE}?"}], "member": m, "grade": grade_of(m)}
        for m in members
    ]


def with_tokens_moved(inputs: dict[str, Any], members: list[int], vocab: int) -> dict[str, Any]:
    moved = dict(inputs)
    ids = inputs["completion_ids"].clone()
    ids[members] = (ids[members] + 7) % vocab
    moved["completion_ids"] = ids
    return moved


def loss_gradient(trainer: Any, inputs: dict[str, Any]) -> torch.Tensor:
    """The gradient of TRL's GRPO loss on `inputs` with respect to every model parameter."""
    trainer.model.zero_grad()
    trainer.compute_loss(trainer.model, inputs).backward()
    return torch.cat([p.grad.flatten() for p in trainer.model.parameters() if p.grad is not None])


@pytest.mark.timeout(300)
def test_trl_advantages_loss_and_skipped_group_with_20_percent_failed_judge_calls(tmp_path: Path) -> None:
    from trl import GRPOTrainer

    from datasets import Dataset

    state = {"outage": True}

    def answer(messages: list[dict[str, Any]], tools: Any) -> str:
        return judge(state["outage"])(messages, tools)

    with ScriptedEndpoint(answer) as ep:
        model, tokenizer = tiny_chat_model(" The answer is 4")
        reward = as_trl_reward(make_tree(ep.base_url), name="judged")
        args = grpo_config(tmp_path, num_generations=SIZE, per_device_train_batch_size=SIZE * GROUPS)
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=reward,
            args=args,
            train_dataset=Dataset.from_list(rows(list(range(SIZE)))),
            processing_class=tokenizer,
        )
        trainer.model.train()
        trainer.current_gradient_accumulation_steps = 1  # what the training loop sets before compute_loss
        everyone = list(range(GROUPS * SIZE))
        out = trainer._generate_and_score_completions(rows(everyone))
        assert len(FAILED) / len(everyone) == 0.2
        # The reference: no outage, only the members that were scored, by TRL's same code.
        # TRL groups a batch by position in blocks of `num_generations`: the five groups that
        # lost one member are groups of 4, the four whole ones groups of 5.
        state["outage"] = False
        partial = [m for m in range(SIZE, 6 * SIZE) if m not in FAILED]
        whole = list(range(6 * SIZE, GROUPS * SIZE))
        trainer.num_generations = SIZE - 1
        expected_partial = trainer._generate_and_score_completions(rows(partial))["advantages"]
        trainer.num_generations = SIZE
        expected_whole = trainer._generate_and_score_completions(rows(whole))["advantages"]
        advantages = out["advantages"]
        assert torch.equal(advantages[whole], expected_whole)  # exactly
        # The groups that lost a member: TRL's nan-aware mean and std (`torch.nanmean`, `nanstd`)
        # sum in another order than a plain mean over 4, so they agree to float32 rounding only.
        gap = (advantages[partial] - expected_partial).abs().max().item()
        print(f"TRL: largest gap to the restricted outage-free advantages: {gap:.3g}")
        assert gap <= 4 * torch.finfo(torch.float32).eps * expected_partial.abs().max().item()
        assert expected_whole.abs().sum() > 0  # the grades spread: the check has teeth
        # A group whose members all failed, and every other failed member: advantage 0.
        assert not advantages[sorted(FAILED)].any()
        # But their tokens stay in the default ("dapo") loss's normaliser, counted before any
        # reward function runs: what rubrics._trl's docstring says no GRPOTrainer argument changes.
        assert trainer.loss_type == "dapo"
        failed_tokens = out["completion_mask"][sorted(FAILED)].sum()
        assert failed_tokens > 0 and out["num_items_in_batch"] == out["completion_mask"].sum()
        # No masked member contributes to a loss term: whatever it generated, the gradient of
        # TRL's loss is the same (bitwise); moving a valid member's tokens does change it.
        state["outage"] = True
        base = loss_gradient(trainer, out)
        assert torch.equal(
            loss_gradient(trainer, with_tokens_moved(out, sorted(FAILED), len(tokenizer))), base
        )
        assert not torch.equal(
            loss_gradient(trainer, with_tokens_moved(out, whole[:1], len(tokenizer))), base
        )
    logged = trainer._metrics["train"]
    assert logged["rubric/unscored_frac"][0] == pytest.approx(0.2)
    assert logged["rubric/skipped_groups"][0] == 1.0  # explicitly: group 0 is not trained on
    assert logged["rubric/judge/flat_group_frac"][0] == 0.0
    assert logged["rubric/short/flat_group_frac"][0] == 1.0
