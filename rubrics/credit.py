"""Credit assignment: one reward per assistant turn (`rollout.turn_rewards`) from a scored rollout.

How turn rewards relate to the episode reward depends on the rule:
  - `outcome()`: every turn gets the episode reward R (what GRPO-style trainers do implicitly).
  - `discounted(gamma)`: OpenEnv's `r_t = gamma^(T-1-t) * R`; gamma=1 is equal credit,
    gamma=0 credits only the final turn.
  - `returns_to_go(gamma)`: `G_t = s_t + gamma * G_(t+1)` over the root's per-turn scores
    (`turn_scores[""]`); with per-turn leaves summed (`reduce_turns="sum"`) and gamma=1,
    G_0 equals the episode's sum of turn scores.
  - any function `(rollout) -> list[float]` with one value per assistant turn.

  - `progress_delta(path)`: `r_t = s_t - s_(t-1)`, the change turn t makes to a node's
    per-turn score (`turn_scores[path]`, starting from `start`): the credits sum to the final
    score, so a turn that makes no progress earns nothing, however many turns there are.

Beware when the policy controls how many turns an episode has (verl RFC #7244): summed or
returns-to-go per-turn rewards grow with episode length, so a policy can earn more by taking
more turns (or, with negative turn scores, by ending early), and discounting with gamma < 1
shrinks early turns' credit in long episodes. A baseline built per turn index over the
members still running (MT-GRPO's normalisation) subtracts as many terms as the episode has
turns: it depends on the episode's own decision to stop, so the gradient is biased (it taxes
every "take another turn" by the mean turn reward). `fixed_horizon_advantages` is the fix:
every member is padded with zeros to the same fixed horizon, and each turn index's baseline
is the other members' mean there, so no member's baseline depends on its own actions.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from harness._core.errors import ConfigError
from harness._core.types import Rollout
from rubrics._tree.turns import num_turns

Credit = Callable[[Rollout], Sequence[float]]


def _check_gamma(gamma: Any) -> float:
    if isinstance(gamma, bool) or not isinstance(gamma, (int, float)) or not 0.0 <= gamma <= 1.0:
        raise ConfigError(f"gamma must be a number in [0, 1], got {gamma!r}")
    return float(gamma)


class _Frozen:
    """A credit rule is validated once and then fixed, so assignment is refused.

    Changing `gamma` afterwards would skip the check (a gamma of 3 makes credit exceed the reward).
    """

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


class ProgressDelta(_Frozen):
    """`r_t = s_t - s_(t-1)` over node `path`'s per-turn scores, from `s_(-1) = start`.

    A NaN turn score gives that turn NaN, and the next delta is taken from the last finite score.

    Args:
        path: The node whose per-turn scores are read ("" for the root).
        start: The score before the first turn.
    """

    __slots__ = ("path", "start")
    path: str
    start: float

    def __init__(self, path: str = "", start: float = 0.0) -> None:
        if not isinstance(path, str):
            raise ConfigError(f"path must be a node path (str, '' for the root), got {path!r}")
        if isinstance(start, bool) or not isinstance(start, (int, float)) or not math.isfinite(start):
            raise ConfigError(
                f"start must be a finite number (the score before the first turn), got {start!r}"
            )
        self._set("path", path)
        self._set("start", float(start))

    def __call__(self, rollout: Rollout) -> list[float]:
        """The rollout's reward per assistant turn: each turn's change in the node's score."""
        scores = rollout.turn_scores.get(self.path)
        if scores is None:
            raise ConfigError(
                f"progress_delta needs per-turn scores of node {self.path!r}; the rollout has them for "
                f"{sorted(rollout.turn_scores)}: score that node per turn (reward(fn, per_turn=True))"
            )
        out: list[float] = []
        last = self.start
        for score in scores:
            if math.isfinite(score):
                out.append(score - last)
                last = score
            else:
                out.append(math.nan)
        return out

    def __repr__(self) -> str:
        return f"progress_delta({self.path!r}, start={self.start:g})"


def progress_delta(path: str = "", *, start: float = 0.0) -> ProgressDelta:
    """Credit each turn with the change it makes to node `path`'s per-turn score.

    Args:
        path: The node whose per-turn scores are read ("" for the root).
        start: The score before the first turn.

    Returns:
        The rule, for `assign_credit` or an environment's `credit=`.
    """
    return ProgressDelta(path, start)


def fixed_horizon_advantages(turn_rewards: Sequence[Sequence[float]], horizon: int) -> list[list[float]]:
    """Per-turn advantages for one group with a baseline that no member's own actions move.

    Member i's advantage at turn k is `sum over t = k .. horizon-1 of (r_i,t - b_i,t)`: its
    rewards-to-go with every episode padded by zeros to `horizon` turns, minus the same sum of
    `b_i,t`, the mean of the *other* members' (padded) rewards at turn t. The number of terms is
    fixed and `b_i` is built without member i, so the baseline cannot depend on when member i
    stopped: the policy-gradient estimate stays unbiased when the policy controls episode
    length (verl RFC #7244), unlike a per-turn-index baseline over the members still running.

    Args:
        turn_rewards: one list of per-turn rewards per group member (any length up to horizon).
            A member holding a NaN is unscored: left out of the others' baselines, its
            advantages NaN.
        horizon: the most turns an episode can have (the environment's `max_turns`), fixed
            before the episodes ran; never the longest episode in the group.

    Returns:
        One list per member, as long as its episode; NaN for an unscored member, and
        for every member of a group with fewer than two scored ones.

    Raises:
        ConfigError: horizon is not a positive int, or an episode is longer than horizon.
    """
    if isinstance(horizon, bool) or not isinstance(horizon, int) or horizon < 1:
        raise ConfigError(f"horizon must be an int >= 1 (the episodes' most turns), got {horizon!r}")
    for i, rewards in enumerate(turn_rewards):
        if len(rewards) > horizon:
            raise ConfigError(
                f"member {i} has {len(rewards)} turns, more than the horizon {horizon}; "
                "pass the environment's max_turns as horizon"
            )
    padded = [[float(r) for r in rewards] + [0.0] * (horizon - len(rewards)) for rewards in turn_rewards]
    scored = [all(math.isfinite(r) for r in rewards) for rewards in padded]
    count = sum(scored)
    totals = [sum(rewards[t] for rewards, ok in zip(padded, scored) if ok) for t in range(horizon)]
    out: list[list[float]] = []
    for rewards, ok, original in zip(padded, scored, turn_rewards):
        if not ok or count < 2:
            out.append([math.nan] * len(original))
            continue
        togo = 0.0
        advantages = [0.0] * horizon
        for t in reversed(range(horizon)):
            baseline = (totals[t] - rewards[t]) / (count - 1)
            togo += rewards[t] - baseline
            advantages[t] = togo
        out.append(advantages[: len(original)])
    return out


def discounted(gamma: float) -> Discounted:
    """Credit the episode reward to each turn, discounted by `gamma` per turn before the last.

    Args:
        gamma: The discount per turn, in [0, 1].

    Returns:
        The rule, for `assign_credit` or an environment's `credit=`.
    """
    return Discounted(gamma)


def returns_to_go(gamma: float = 1.0) -> ReturnsToGo:
    """Credit each turn with the (discounted) sum of its own and later turns' scores.

    Args:
        gamma: The discount per turn, in [0, 1].

    Returns:
        The rule, for `assign_credit` or an environment's `credit=`.
    """
    return ReturnsToGo(gamma)


def outcome() -> Outcome:
    """Credit every turn with the episode reward."""
    return Outcome()


def assign_credit(rollout: Rollout, credit: Credit) -> list[float]:
    """Run `credit` on a scored rollout and store the result in `rollout.turn_rewards`.

    Args:
        rollout: A scored rollout.
        credit: The rule (`outcome()`, `discounted(...)`, `progress_delta(...)`, ...).

    Returns:
        One reward per assistant turn.

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


__all__ = [
    "Credit",
    "ProgressDelta",
    "assign_credit",
    "discounted",
    "fixed_horizon_advantages",
    "outcome",
    "progress_delta",
    "returns_to_go",
]
