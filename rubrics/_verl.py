"""A rubric tree as a verl reward function, and verl's GRPO run on the scored members only.

verl (0.9) scores a batch through a reward manager. Its `batch` manager
(`reward_model.reward_manager=batch` with `custom_reward_function.path/name`) calls
`compute_score(data_sources=, solution_strs=, ground_truths=, extra_infos=)` once per batch and
reads back one value per response; a dict's `score` is the reward and every other key is
gathered into `reward_extra_info` (logged and dumped with the generations). A batch function fits
a rubric tree better than verl's per-sample `naive` manager: group nodes compare the responses of
one prompt with each other, which needs the whole batch.

Unscored is not 0. verl's GRPO (`core_algos.compute_grpo_outcome_advantage`) has no notion of a
missing score: a NaN would poison its group's mean, and a 0 would teach the policy something
false. So an unscored response reaches verl as NaN in the reward tensor, and
`masked_grpo_advantage` (verl's estimator signature; `register_advantage_estimator()` makes it
`algorithm.adv_estimator=rubric_grpo`) runs verl's own GRPO on the scored rows only and gives
the others advantage 0. `grpo_advantages(batch)` also zeroes their `response_mask`: verl's loss
aggregation (`agg_loss`) counts only masked-in tokens, so they are in no loss term and no token
count. A group whose members all failed has no scored row: it is skipped, and counted in
`rubric/skipped_groups`.

torch and verl are imported where `grpo_advantages` runs; the reward function itself imports
neither, so it can be built and pickled without the `[verl]` extra.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from harness._core.defaults import DEFAULT_CONCURRENCY
from harness._core.errors import ConfigError
from harness._core.types import Rollout
from rubrics._tree.grouping import has_group_nodes
from rubrics._tree.module import Rubric
from rubrics._trl import METRIC_PREFIX, flat_group_frac

#: `reward_extra_info` key holding 1.0 for a scored response and 0.0 for an unscored one.
SCORED_KEY = "rubric/scored"


class VerlReward:
    """A rubric as verl's batch reward function (see the module docstring).

    Attributes:
        rubric: the tree that scores each response.
        group_key: the `extra_info` field naming a response's prompt (verl's datasets carry
            `index`); responses with the same value form one group for group nodes.
        last_rollouts: the rollouts of the most recent call, scored (for inspection).
        prepare: optional `prepare(rollout)` run before scoring each rollout (`env.verl()` sets
            the environment's answer parser here).
    """

    def __init__(
        self, rubric: Rubric, *, group_key: str = "index", concurrency: int = DEFAULT_CONCURRENCY
    ) -> None:
        rubric._check_scoreable()
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigError(f"concurrency must be an int >= 1, got {concurrency!r}")
        self.rubric = rubric
        self.group_key = group_key
        self.concurrency = concurrency
        self.last_rollouts: list[Rollout] = []
        self.prepare: Callable[[Rollout], Any] | None = None

    def __repr__(self) -> str:
        return f"VerlReward(rubric={self.rubric.label})"

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["last_rollouts"] = []  # per-call data, not configuration
        return state

    def __call__(
        self,
        data_sources: Sequence[Any],
        solution_strs: Sequence[str],
        ground_truths: Sequence[Any],
        extra_infos: Sequence[Mapping[str, Any] | None],
        **kwargs: Any,
    ) -> list[dict[str, float]]:
        """Score one verl batch: one dict per response, `score` NaN where the tree could not score.

        Every node's score is a key `rubric/<path>`, its share of flat groups (members whose
        scores do not spread) `rubric/<path>/flat_group_frac` (the same value on every row, so
        verl's mean of it is the share), and `rubric/scored` is 1.0 or 0.0.
        """
        rollouts = self._rollouts(data_sources, solution_strs, ground_truths, extra_infos)
        if self.prepare is not None:
            for rollout in rollouts:
                self.prepare(rollout)
        scores = list(self.rubric.score_batch(rollouts, concurrency=self.concurrency))
        self.last_rollouts = rollouts
        shares = node_flat_group_fracs(self.rubric, rollouts)
        rows = []
        for rollout, score in zip(rollouts, scores):
            row = {"score": score, **reward_extra_info(self.rubric, rollout, score)}
            row.update(shares)
            rows.append(row)
        return rows

    async def compute_score(
        self,
        data_source: Any,
        solution_str: str,
        ground_truth: Any,
        extra_info: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> dict[str, float]:
        """Score one response, verl's per-response form (the reward loop's `naive` manager).

        Raises:
            ConfigError: the tree holds a group node, which needs the whole batch.
        """
        if has_group_nodes(self.rubric):
            raise ConfigError(
                f"{self.rubric.label} holds a group node, which compares the responses of one "
                "prompt: score per batch with verl's `batch` reward manager and this object "
                "as its compute_score, not per response"
            )
        (rollout,) = self._rollouts([data_source], [solution_str], [ground_truth], [extra_info])
        if self.prepare is not None:
            self.prepare(rollout)
        score = await self.rubric.ascore(rollout)
        return {"score": score, **reward_extra_info(self.rubric, rollout, score)}

    def _rollouts(
        self,
        data_sources: Sequence[Any],
        solution_strs: Sequence[str],
        ground_truths: Sequence[Any],
        extra_infos: Sequence[Mapping[str, Any] | None],
    ) -> list[Rollout]:
        sizes = {len(data_sources), len(solution_strs), len(ground_truths), len(extra_infos)}
        if len(sizes) != 1:
            raise ConfigError(
                f"verl passed {len(solution_strs)} responses with {len(data_sources)} data sources, "
                f"{len(ground_truths)} ground truths and {len(extra_infos)} extra infos; "
                "the batch reward manager passes one of each per response"
            )
        rollouts = []
        for i, (source, text, truth, extra) in enumerate(
            zip(data_sources, solution_strs, ground_truths, extra_infos)
        ):
            info = dict(extra or {})
            info.setdefault("data_source", source)
            group = info.get(self.group_key, i)
            fields: dict[str, Any] = {
                "prompt": str(info.get("question", "")),
                "completion": text,
                "answer": truth,
                "info": info,
                "rollout_index": i,
                "example_id": group if isinstance(group, (int, str)) else str(group),
            }
            rollouts.append(Rollout.model_validate(fields))
        return rollouts


def reward_extra_info(rubric: Rubric, rollout: Rollout, score: float) -> dict[str, float]:
    """What verl logs for one scored response: `rubric/scored` (1.0 or 0.0) and every node's
    score as `rubric/<path>` (NaN where the node could not score)."""
    row = {SCORED_KEY: float(math.isfinite(score))}
    for path, _ in rubric.named_rubrics():
        row[f"{METRIC_PREFIX}{path}"] = rollout.scores.get(path, math.nan)
    return row


def node_flat_group_fracs(rubric: Rubric, rollouts: Sequence[Rollout]) -> dict[str, float]:
    """`rubric/<path>/flat_group_frac` for the root (`rubric/flat_group_frac`) and every node.

    A group is flat for a node when its scored members do not spread (all equal), whatever
    their mean: a group of 0.7s teaches GRPO as little as a group of 0s. Nodes without a group
    of two scored members are left out.
    """
    shares: dict[str, float] = {}
    for path in ["", *(p for p, _ in rubric.named_rubrics())]:
        flat = flat_group_frac(rollouts, path or None)
        if flat is not None:
            shares[
                f"{METRIC_PREFIX}{path}/flat_group_frac" if path else f"{METRIC_PREFIX}flat_group_frac"
            ] = flat
    return shares


def as_verl_reward(
    rubric: Rubric, *, group_key: str = "index", concurrency: int = DEFAULT_CONCURRENCY
) -> VerlReward:
    """`rubric` as verl's batch reward function (`reward_model.reward_manager=batch`).

    Args:
        rubric: the tree to score with.
        group_key: the `extra_info` field that names a response's prompt (verl's `index`).
        concurrency: most responses scored at once by an async tree.

    Returns:
        A picklable `VerlReward`: `f(data_sources, solution_strs, ground_truths, extra_infos)`
        returning one dict per response (`score`, NaN where unscored, plus per-node scores).
    """
    return VerlReward(rubric, group_key=group_key, concurrency=concurrency)


#: The name `register_advantage_estimator` gives `masked_grpo_advantage` in verl's registry.
ESTIMATOR_NAME = "rubric_grpo"


def masked_grpo_advantage(
    token_level_rewards: Any,
    response_mask: Any,
    index: Any,
    config: Any = None,
    epsilon: float = 1e-6,
    norm_adv_by_std_in_grpo: bool | None = None,
    **kwargs: Any,
) -> tuple[Any, Any]:
    """verl's GRPO (`compute_grpo_outcome_advantage`) on the scored rows only, 0 on the others.

    verl's advantage-estimator signature: after `register_advantage_estimator()`, verl's trainer
    calls it for `algorithm.adv_estimator=rubric_grpo`. A row is scored when its rewards are
    finite (`VerlReward` leaves an unscored row NaN); `norm_adv_by_std_in_grpo` defaults to the
    algorithm config's. Returns `(advantages, returns)`, both `(batch, response_length)`.
    """
    # torch, numpy and verl come with the [verl] extra; imported here so the module loads without it.
    import numpy as np
    import torch
    from verl.trainer.ppo.core_algos import compute_grpo_outcome_advantage

    if norm_adv_by_std_in_grpo is None:
        norm_adv_by_std_in_grpo = (
            bool(config.get("norm_adv_by_std_in_grpo", True)) if config is not None else True
        )
    scored = torch.isfinite(token_level_rewards).all(dim=-1)
    keep = torch.nonzero(scored).flatten()
    advantages = torch.zeros_like(token_level_rewards)
    if len(keep):
        part, _ = compute_grpo_outcome_advantage(
            token_level_rewards[keep],
            response_mask[keep],
            np.asarray(index, dtype=object)[keep.numpy()],
            epsilon=epsilon,
            norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo,
        )
        advantages[keep] = part
    return advantages, advantages.clone()


def register_advantage_estimator() -> str:
    """Register `masked_grpo_advantage` in verl's registry; returns its name (`rubric_grpo`).

    Call it where verl's driver imports your code (the module holding your reward), then set
    `algorithm.adv_estimator=rubric_grpo`. Registering twice is harmless.
    """
    # verl comes with the [verl] extra; imported here so the module loads without it.
    from verl.trainer.ppo.core_algos import register_adv_est

    register_adv_est(ESTIMATOR_NAME)(masked_grpo_advantage)
    return ESTIMATOR_NAME


def grpo_advantages(
    data: Any, *, epsilon: float = 1e-6, norm_adv_by_std_in_grpo: bool = True
) -> dict[str, float]:
    """verl's GRPO advantages on the scored rows of `data` (a `verl.DataProto`), in place.

    Reads `token_level_rewards` (NaN on an unscored row, as `VerlReward` leaves it),
    `response_mask` and the `uid` groups; writes `advantages` and `returns` with
    `masked_grpo_advantage`, and zeroes the `response_mask` of unscored rows, so that no loss
    term and no token count of verl's loss aggregation includes them.

    Returns:
        Metrics: `rubric/unscored_frac` and `rubric/skipped_groups` (groups with no scored member,
        not trained on).
    """
    # torch and numpy come with the [verl] extra; imported here so the module loads without it.
    import numpy as np
    import torch

    rewards = data.batch["token_level_rewards"]
    uids = np.asarray(data.non_tensor_batch["uid"], dtype=object)
    advantages, returns = masked_grpo_advantage(
        rewards,
        data.batch["response_mask"],
        uids,
        epsilon=epsilon,
        norm_adv_by_std_in_grpo=norm_adv_by_std_in_grpo,
    )
    scored = torch.isfinite(rewards).all(dim=-1)
    mask = data.batch["response_mask"]
    data.batch["response_mask"] = mask * scored.unsqueeze(-1).to(mask.dtype)
    data.batch["advantages"] = advantages
    data.batch["returns"] = returns
    kept_groups = set(uids[scored.numpy()].tolist())
    return {
        f"{METRIC_PREFIX}unscored_frac": float((~scored).sum().item()) / max(len(uids), 1),
        f"{METRIC_PREFIX}skipped_groups": float(len(set(uids.tolist()) - kept_groups)),
    }


__all__ = [
    "ESTIMATOR_NAME",
    "SCORED_KEY",
    "VerlReward",
    "as_verl_reward",
    "grpo_advantages",
    "masked_grpo_advantage",
    "node_flat_group_fracs",
    "register_advantage_estimator",
    "reward_extra_info",
]
