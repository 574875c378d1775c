"""An OpenEnv environment's own rewards as rubric nodes, read from `rollout.state["openenv"]["steps"]`.

`envs._interop.openenv` records every step (its assistant turn, action, reward, done) there; the
nodes score from that record alone, so saved runs re-score offline like any others.
"""

from __future__ import annotations

from typing import Any, Literal

from harness._core.errors import ConfigError, ScoringError
from harness._core.types import Rollout
from rubrics import Rubric, WeightedSum
from rubrics._tree.turns import Turn

RewardMode = Literal["sum", "final"]


def _steps(rollout: Rollout) -> list[dict[str, Any]]:
    """The recorded steps; a reward the environment gave that is not a number makes the node NaN, with why."""
    steps = list(rollout.state.get("openenv", {}).get("steps", []))
    for step in steps:
        if step.get("reward_error"):
            raise ScoringError(f"the OpenEnv environment's {step['reward_error']}")
    return steps


class OpenEnvStepReward(Rubric):
    """The OpenEnv environment's per-step rewards: a turn scores the sum of its steps' rewards
    (0.0 for a turn that took no step); the episode scores their sum (the return).

    Args:
        name: The node's name in the tree.
        on_error: The score when the environment gave no reward (None: NaN, unscored).
    """

    reduce_turns = "sum"

    def forward_turn(self, rollout: Rollout, turn: Turn) -> float:
        steps = _steps(rollout)
        if not any(s.get("reward") is not None for s in steps):
            raise ScoringError(f"the OpenEnv environment gave no reward in {len(steps)} step(s)")
        return float(sum(s["reward"] for s in steps if s["turn"] == turn.index and s["reward"] is not None))


class OpenEnvFinalReward(Rubric):
    """The last reward the OpenEnv environment gave (its outcome, for environments that score at the end).

    Args:
        name: The node's name in the tree.
        on_error: The score when the environment gave no reward (None: NaN, unscored).
    """

    def forward(self, rollout: Rollout) -> float:
        rewards = [s["reward"] for s in _steps(rollout) if s.get("reward") is not None]
        if not rewards:
            raise ScoringError(f"the OpenEnv environment gave no reward in {len(_steps(rollout))} step(s)")
        return float(rewards[-1])


def default_rubric(reward: RewardMode = "sum") -> Rubric:
    """Both reward nodes; the root's reward is the return (`"sum"`) or the final reward (`"final"`)."""
    if reward not in ("sum", "final"):
        raise ConfigError(f"reward={reward!r}; use 'sum' (the return) or 'final' (the last reward)")
    weights = [1.0, 0.0] if reward == "sum" else [0.0, 1.0]
    return WeightedSum({"step_reward": OpenEnvStepReward(), "final_reward": OpenEnvFinalReward()}, weights)


__all__ = ["OpenEnvFinalReward", "OpenEnvStepReward", "RewardMode", "default_rubric"]
