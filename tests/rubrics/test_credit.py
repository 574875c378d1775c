"""rubrics.credit: progress-delta credit, and the fixed-horizon baseline's unbiased gradient on a
task where the policy chooses when to stop (against per-turn-index normalisation's closed-form bias)."""

from __future__ import annotations

import itertools
import math
import pickle

import numpy as np
import pytest

from harness import ConfigError, Rollout
from rubrics.credit import assign_credit, fixed_horizon_advantages, progress_delta

pytestmark = [pytest.mark.trl, pytest.mark.slow]

# ----------------------------------------------------------------------------- the stopping task
# Each turn earns C. After turn t < H-1 the policy takes another turn with probability
# q = sigmoid(THETA), else stops; an episode has at most H turns. J(theta) = C * E[L], with
# P(L > t) = q^t, so dJ/dtheta = C * (1 - q) * sum_{t=1}^{H-1} t q^t. The score of "continue"
# is (1 - q), of "stop" -q; the REINFORCE estimate is sum_k A_k * score_k over the turns taken.
THETA, H, C, N = 0.3, 4, 1.0, 4
Q = 1 / (1 + math.exp(-THETA))
TRUE_GRADIENT = C * (1 - Q) * sum(t * Q**t for t in range(1, H))


def length_probability(length: int) -> float:
    return Q ** (length - 1) * ((1 - Q) if length < H else 1.0)


def scores(length: int) -> list[float]:
    """d log pi / d theta of the decision after each turn taken (none after turn H-1)."""
    return [(1 - Q)] * (length - 1) + [(-Q if length < H else 0.0)]


def estimate(lengths: tuple[int, ...], advantages: list[list[float]]) -> float:
    """The group's mean REINFORCE estimate."""
    per_member = [sum(a * s for a, s in zip(adv, scores(n))) for n, adv in zip(lengths, advantages)]
    return sum(per_member) / len(per_member)


def turn_index_advantages(turn_rewards: list[list[float]]) -> list[list[float]]:
    """MT-GRPO's construction: at each turn index, subtract the mean over the members still running
    there, then sum to go over the member's own turns (as many terms as it has turns)."""
    out = []
    for rewards in turn_rewards:
        togo, advantages = 0.0, [0.0] * len(rewards)
        for t in reversed(range(len(rewards))):
            running = [r[t] for r in turn_rewards if len(r) > t]
            togo += rewards[t] - sum(running) / len(running)
            advantages[t] = togo
        out.append(advantages)
    return out


def exact_expectation(advantages_of: object) -> float:
    """E[estimate] over every joint outcome of a group of N (H^N cases, each with its probability)."""
    total = 0.0
    for lengths in itertools.product(range(1, H + 1), repeat=N):
        weight = math.prod(length_probability(n) for n in lengths)
        rewards = [[C] * n for n in lengths]
        total += weight * estimate(lengths, advantages_of(rewards))  # type: ignore[operator]
    return total


def vectorised_fixed_horizon(lengths: np.ndarray) -> np.ndarray:
    """`fixed_horizon_advantages` on many groups at once, (groups, N, H) (checked equal below)."""
    rewards = C * (np.arange(H) < lengths[..., None])
    baseline = (rewards.sum(axis=1, keepdims=True) - rewards) / (N - 1)
    return np.flip(np.cumsum(np.flip(rewards - baseline, -1), -1), -1)


def vectorised_scores(lengths: np.ndarray) -> np.ndarray:
    t = np.arange(H)
    out = np.where(t < lengths[..., None] - 1, 1 - Q, 0.0)
    return np.where((t == lengths[..., None] - 1) & (lengths[..., None] < H), -Q, out)


def test_fixed_horizon_baseline_is_unbiased_where_per_turn_index_normalisation_is_not() -> None:
    # Exact expectations over every outcome of a group.
    fixed_bias = exact_expectation(lambda r: fixed_horizon_advantages(r, H)) - TRUE_GRADIENT
    index_bias = exact_expectation(turn_index_advantages) - TRUE_GRADIENT
    closed_form = -C * (1 - Q) * sum(t * Q**t for t in range(1, H))  # -(turn reward) * dE[L]/dtheta
    # Monte Carlo over seeds with the same estimator, vectorised (and checked against the function).
    estimates = []
    for seed in range(10):
        rng = np.random.default_rng(seed)
        more = rng.random((250_000, N, H - 1)) < Q
        lengths = 1 + np.cumprod(more, axis=-1).sum(-1)
        advantages = vectorised_fixed_horizon(lengths)
        if seed == 0:
            for g in range(3):
                group = [[C] * int(n) for n in lengths[g]]
                expected = fixed_horizon_advantages(group, H)
                for n, row, adv in zip(lengths[g], advantages[g], expected):
                    assert row[: int(n)].tolist() == pytest.approx(adv, abs=1e-12)
        alive = np.arange(H) < lengths[..., None]
        estimates.append((advantages * vectorised_scores(lengths) * alive).sum(-1).mean(-1))
    per_group = np.concatenate(estimates)
    mc_bias = float(per_group.mean()) - TRUE_GRADIENT
    stderr = float(per_group.std() / math.sqrt(len(per_group)))
    print(
        f"\ntrue gradient {TRUE_GRADIENT:.6f}; fixed-horizon bias: exact {fixed_bias:.2e}, "
        f"Monte Carlo {mc_bias:.2e} +- {stderr:.1e} ({len(per_group) * N:,} episodes, 10 seeds); "
        f"per-turn-index bias: exact {index_bias:.6f}, closed form {closed_form:.6f}"
    )
    assert abs(fixed_bias) < 1e-12
    assert abs(mc_bias) + 2 * stderr < 1e-3  # below 1e-3 with two standard errors to spare
    assert index_bias == pytest.approx(closed_form, abs=1e-12)
    assert abs(index_bias) > 0.1  # the policy is taught to stop early


def test_fixed_horizon_leaves_unscored_members_out() -> None:
    out = fixed_horizon_advantages([[1.0, 1.0], [1.0], [math.nan]], horizon=3)
    assert out[0] == [1.0, 1.0] and out[1] == [-1.0]  # baselines from the one other scored member
    assert math.isnan(out[2][0])
    assert all(math.isnan(v) for v in fixed_horizon_advantages([[1.0], [math.nan]], horizon=2)[0])
    with pytest.raises(ConfigError, match="more than the horizon 1"):
        fixed_horizon_advantages([[1.0, 1.0]], horizon=1)
    with pytest.raises(ConfigError, match="horizon must be an int"):
        fixed_horizon_advantages([[1.0]], horizon=0)


# ----------------------------------------------------------------------------- progress delta
def rollout_with(turn_scores: dict[str, list[float]]) -> Rollout:
    completion = [{"role": "assistant", "content": f"turn {i}"} for i in range(4)]
    return Rollout(prompt=[{"role": "user", "content": "go"}], completion=completion, turn_scores=turn_scores)


def test_progress_delta_credits_the_change_each_turn_makes() -> None:
    rollout = rollout_with({"tests": [0.2, 0.5, 0.5, 0.9]})
    credit = progress_delta("tests")
    assert assign_credit(rollout, credit) == pytest.approx([0.2, 0.3, 0.0, 0.4])
    assert sum(rollout.turn_rewards) == pytest.approx(0.9)  # the final score, whatever the length
    holes = progress_delta("tests", start=0.1)(rollout_with({"tests": [0.2, math.nan, 0.6, 0.6]}))
    assert holes[0] == pytest.approx(0.1) and math.isnan(holes[1]) and holes[2:] == pytest.approx([0.4, 0.0])
    assert repr(pickle.loads(pickle.dumps(credit))) == "progress_delta('tests', start=0)"
    with pytest.raises(ConfigError, match=r"per-turn scores of node 'judge'.*\['tests'\]"):
        progress_delta("judge")(rollout)
