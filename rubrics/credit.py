"""Credit assignment: one reward per assistant turn (`rollout.turn_rewards`) from a scored rollout.

How turn rewards relate to the episode reward depends on the rule:
  - `outcome()`: every turn gets the episode reward R (what GRPO-style trainers do implicitly).
  - `discounted(gamma)`: OpenEnv's `r_t = gamma^(T-1-t) * R`; gamma=1 is equal credit,
    gamma=0 credits only the final turn.
  - `returns_to_go(gamma)`: `G_t = s_t + gamma * G_(t+1)` over the root's per-turn scores
    (`turn_scores[""]`); with per-turn leaves summed (`reduce_turns="sum"`) and gamma=1,
    G_0 equals the episode's sum of turn scores.
  - any function `(rollout) -> list[float]` with one value per assistant turn.

Beware when the policy controls how many turns an episode has (verl RFC #7244): summed or
returns-to-go per-turn rewards grow with episode length, so a policy can earn more by taking
more turns (or, with negative turn scores, by ending early), and discounting with gamma < 1
shrinks early turns' credit in long episodes. Prefer mean-reduced scores or outcome credit
when length is not part of the task, and compare runs at equal episode lengths.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from harness.errors import ConfigError
from harness.types import Rollout
from rubrics.turns import num_turns

Credit = Callable[[Rollout], Sequence[float]]


def _check_gamma(gamma: Any) -> float:
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not 0.0 <= gamma <= 1.0:
        raise ConfigError(f"gamma must be a number in [0, 1], got {gamma!r}")
    return float(gamma)


class _Frozen:
    """A credit rule is validated once and then fixed: changing `gamma` afterwards would skip
    the check (a gamma of 3 makes credit exceed the reward), so assignment is refused."""

    __slots__ = ()

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(
            f"credit rule {self!r} is fixed once made: build a new one with the {name} you want"
        )

    def _set(self, name: str, value: Any) -> None:
        object.__setattr__(self, name, value)

    def __reduce__(self) -> tuple[Any, ...]:  # rebuilt through __init__ (and its check) on unpickling
        slots: tuple[str, ...] = type(self).__slots__
        return (type(self), tuple(getattr(self, name) for name in slots))


class Discounted(_Frozen):
    """`r_t = gamma^(T-1-t) * R`: the episode reward, discounted back from the final turn."""

    __slots__ = ("gamma",)
    gamma: float

    def __init__(self, gamma: float) -> None:
        self._set("gamma", _check_gamma(gamma))

    def __call__(self, rollout: Rollout) -> list[float]:
        length = num_turns(rollout)
        return [self.gamma ** (length - 1 - t) * rollout.reward for t in range(length)]

    def __repr__(self) -> str:
        return f"discounted({self.gamma:g})"


class ReturnsToGo(_Frozen):
    """`G_t = s_t + gamma * G_(t+1)` over the root's per-turn scores (outcome scores without them)."""

    __slots__ = ("gamma",)
    gamma: float

    def __init__(self, gamma: float = 1.0) -> None:
        self._set("gamma", _check_gamma(gamma))

    def __call__(self, rollout: Rollout) -> list[float]:
        length = num_turns(rollout)
        scores = rollout.turn_scores.get("")
        if scores is None:
            scores = [0.0] * (length - 1) + [rollout.reward] if length else []
        out: list[float] = []
        running = 0.0
        for score in reversed(scores):
            running = score + self.gamma * running
            out.append(running)
        return out[::-1]

    def __repr__(self) -> str:
        return f"returns_to_go({self.gamma:g})"


class Outcome(_Frozen):
    """Every turn gets the episode reward."""

    __slots__ = ()

    def __call__(self, rollout: Rollout) -> list[float]:
        return [rollout.reward] * num_turns(rollout)

    def __repr__(self) -> str:
        return "outcome()"


def discounted(gamma: float) -> Discounted:
    """Credit the episode reward to each turn, discounted by `gamma` per turn before the last."""
    return Discounted(gamma)


def returns_to_go(gamma: float = 1.0) -> ReturnsToGo:
    """Credit each turn with the (discounted) sum of its own and later turns' scores."""
    return ReturnsToGo(gamma)


def outcome() -> Outcome:
    """Credit every turn with the episode reward."""
    return Outcome()


def assign_credit(rollout: Rollout, credit: Credit) -> list[float]:
    """Run `credit` on a scored rollout and store the result in `rollout.turn_rewards`.

    Raises:
        ConfigError: `credit` did not return one finite-or-NaN number per assistant turn.
    """
    length = num_turns(rollout)
    values = [float(v) for v in credit(rollout)]
    if len(values) != length:
        raise ConfigError(
            f"credit {credit!r} returned {len(values)} values for {length} assistant turns; return one per turn"
        )
    if any(math.isinf(v) for v in values):
        raise ConfigError(f"credit {credit!r} returned an infinite turn reward: {values}")
    rollout.turn_rewards = values
    return values


__all__ = ["Credit", "assign_credit", "discounted", "outcome", "returns_to_go"]
