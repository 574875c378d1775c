"""Per-turn scores (reward(per_turn=True), forward_turn, containers) and credit assignment, with OpenEnv parity."""

from __future__ import annotations

import asyncio
import itertools
import math
import pickle
from typing import Any

import pytest

from harness import ConfigError, Message, Rollout
from rubrics import Gate, Rubric, Sequential, WeightedSum, reward
from rubrics._tree.turns import Turn
from rubrics.credit import assign_credit, discounted, outcome, returns_to_go


def episode(*replies: str, answer: str = "win", outcome_label: str | None = None) -> Rollout:
    """A rollout with one assistant turn per reply, a user message between turns."""
    completion: list[dict[str, Any]] = []
    for i, text in enumerate(replies):
        if i:
            completion.append({"role": "user", "content": f"feedback {i}"})
        completion.append({"role": "assistant", "content": text})
    info = {"outcome": outcome_label} if outcome_label else {}
    return Rollout.model_validate(
        {"prompt": "play", "completion": completion, "answer": answer, "info": info}
    )


def polite(turn: Message) -> float:
    return 1.0 if "please" in turn.text else 0.0


def progress(turn_index: int, messages: list[Message]) -> float:
    return (turn_index + 1) / 10 + 0.0 * len(messages)


# ----------------------------------------------------------------------------- per-turn leaves
def test_per_turn_leaf_records_one_score_per_assistant_turn() -> None:
    leaf = reward(polite, per_turn=True)
    r = episode("please move", "move", "please stop")
    assert leaf(r) == pytest.approx(2 / 3)
    assert r.turn_scores == {"": [1.0, 0.0, 1.0]}


def test_turn_index_and_messages_are_injected() -> None:
    seen: list[tuple[int, int, str]] = []

    def spy(turn_index: int, messages: list[Message], answer: str) -> float:
        seen.append((turn_index, len(messages), answer))
        return 1.0

    reward(spy, per_turn=True)(episode("a", "b"))
    assert seen == [(0, 2, "win"), (1, 4, "win")]  # prompt + turn 0; then feedback + turn 1


@pytest.mark.parametrize(
    ("how", "expected"), [("mean", 0.5), ("sum", 1.0), ("last", 0.0), ("min", 0.0), ("max", 1.0)]
)
def test_reduce_turns_gives_the_episode_score(how: str, expected: float) -> None:
    assert reward(polite, per_turn=True, reduce_turns=how)(episode("please", "no")) == expected


def test_a_failing_turn_is_nan_and_the_node_is_unscored_with_the_turn_named() -> None:
    def fragile(turn: Message) -> float:
        if turn.text == "boom":
            raise ValueError("cannot read")
        return 1.0

    tree = WeightedSum({"fragile": reward(fragile, per_turn=True), "polite": reward(polite, per_turn=True)})
    r = episode("ok", "boom")
    assert math.isnan(tree(r))
    assert r.turn_scores["fragile"][0] == 1.0 and math.isnan(r.turn_scores["fragile"][1])
    assert r.score_errors["fragile"] == "turn 1: ValueError: cannot read"
    assert math.isnan(r.turn_scores[""][1]) and r.turn_scores[""][0] == pytest.approx(0.5)


def test_a_rollout_without_assistant_turns_is_unscored() -> None:
    r = Rollout.model_validate({"prompt": "x", "completion": []})
    assert math.isnan(reward(polite, per_turn=True)(r))
    assert "has none" in r.score_errors[""]


def test_async_per_turn_leaf_scores_turns_concurrently() -> None:
    async def slow(turn: Message) -> float:
        await asyncio.sleep(0.05)
        return float(len(turn.text))

    leaf = reward(slow, per_turn=True, reduce_turns="sum")
    r = episode("ab", "abc", "a")
    assert asyncio.run(leaf.ascore(r)) == 6.0
    assert r.turn_scores[""] == [2.0, 3.0, 1.0]


def test_forward_turn_subclass_and_pickling() -> None:
    class Length(Rubric):
        def forward_turn(self, rollout: Rollout, turn: Turn) -> float:
            return len(turn.message.text) / 10

    node = Length()
    r = episode("12345", "1")
    assert node(r) == pytest.approx(0.3)
    assert r.turn_scores[""] == [0.5, 0.1]
    leaf = pickle.loads(pickle.dumps(reward(polite, per_turn=True, reduce_turns="sum")))
    assert leaf(episode("please", "please")) == 2.0
    assert "per_turn" in repr(leaf)


def test_bad_reduce_turns_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="reduce_turns='median'; use one of mean, sum"):
        reward(polite, per_turn=True, reduce_turns="median")


# ----------------------------------------------------------------------------- containers
def test_weighted_sum_combines_turn_by_turn_with_episode_children_as_outcomes() -> None:
    def won(info: dict[str, Any]) -> float:
        return float(info.get("outcome") == "win")

    tree = WeightedSum({"polite": reward(polite, per_turn=True), "won": won}, weights=[0.5, 1.0])
    r = episode("please", "go", "please", outcome_label="win")
    assert tree(r) == pytest.approx(0.5 * 2 / 3 + 1.0)
    assert r.turn_scores["polite"] == [1.0, 0.0, 1.0]
    assert r.turn_scores[""] == [0.5, 0.0, 1.5]  # `won` counts on the final turn only
    assert "won" not in r.turn_scores


def test_gate_and_sequential_decide_per_episode() -> None:
    per_turn = reward(polite, per_turn=True)
    r = episode("please", "no")
    assert Gate(per_turn, threshold=0.5)(r) == 0.5
    assert r.turn_scores[""] == [1.0, 0.0]
    r = episode("no", "no", "please")
    assert Gate(reward(polite, per_turn=True), threshold=0.5)(r) == 0.0
    assert r.turn_scores[""] == [0.0, 0.0, 0.0]

    def formatted(response: str) -> float:
        return float(response.endswith("."))

    chain = Sequential(formatted, reward(polite, per_turn=True))
    r = episode("please", "please.")
    assert chain(r) == 1.0 and r.turn_scores[""] == [1.0, 1.0]
    r = episode("please", "please")
    assert chain(r) == 0.0 and r.turn_scores[""] == [0.0, 0.0]


def test_turn_scores_survive_a_json_round_trip_with_nan() -> None:
    r = episode("a", "b")
    r.turn_scores = {"x": [1.0, math.nan]}
    r.turn_rewards = [math.nan, 0.5]
    back = Rollout.model_validate_json(r.model_dump_json())
    assert back.turn_scores["x"][0] == 1.0 and math.isnan(back.turn_scores["x"][1])
    assert math.isnan(back.turn_rewards[0]) and back.turn_rewards[1] == 0.5


def test_rescoring_clears_old_turn_scores() -> None:
    r = episode("please")
    reward(polite, per_turn=True, name="a")(r)
    WeightedSum([polite])(r)
    assert r.turn_scores == {}


# ----------------------------------------------------------------------------- credit assignment
def test_returns_to_go_over_per_turn_scores() -> None:
    r = episode("please", "no", "please")
    reward(polite, per_turn=True, reduce_turns="sum")(r)
    assert assign_credit(r, returns_to_go()) == [2.0, 1.0, 1.0]
    assert r.turn_rewards == [2.0, 1.0, 1.0]
    assert assign_credit(r, returns_to_go(0.5)) == [pytest.approx(1.25), 0.5, 1.0]


def test_outcome_broadcast_and_custom_credit() -> None:
    r = episode("a", "b", "c")
    WeightedSum([lambda response: 0.75])(r)
    assert assign_credit(r, outcome()) == [0.75, 0.75, 0.75]
    assert assign_credit(r, lambda ro: [0.0, 0.0, ro.reward]) == [0.0, 0.0, 0.75]
    with pytest.raises(ConfigError, match="returned 1 values for 3 assistant turns"):
        assign_credit(r, lambda ro: [1.0])


# ----------------------------------------------------------------------------- OpenEnv parity
# Ported as behaviour from OpenEnv's tests/core/test_rubrics/test_trajectory_rubric.py: its
# stateful TrajectoryRubric accumulates steps; ours scores the recorded transcript, so a
# "trajectory" is a rollout with T assistant turns and the final outcome in its info.
def win_loss(info: dict[str, Any]) -> float:
    return {"win": 1.0, "loss": 0.0}.get(info.get("outcome"), 0.5)


def scored(turns: int, label: str, credit: Any) -> list[float]:
    r = episode(*(["move"] * turns), outcome_label=label)
    reward(win_loss)(r)
    return assign_credit(r, credit)


def test_openenv_gamma_must_be_in_unit_interval() -> None:
    for bad in (-0.1, 1.5):
        with pytest.raises(ConfigError, match=r"gamma must be a number in \[0, 1\]"):
            discounted(bad)


def test_openenv_gamma_one_equal_credit_and_gamma_zero_final_only() -> None:
    assert scored(3, "win", discounted(1.0)) == [1.0, 1.0, 1.0]
    assert scored(3, "win", discounted(0.0)) == [0.0, 0.0, 1.0]


def test_openenv_discounting_pattern() -> None:
    assert scored(3, "win", discounted(0.5)) == [pytest.approx(0.25), pytest.approx(0.5), 1.0]
    rewards = scored(5, "win", discounted(0.99))
    assert all(a < b for a, b in itertools.pairwise(rewards)) and rewards[-1] == pytest.approx(1.0)


def test_openenv_loss_draw_single_step_and_long_episode() -> None:
    assert scored(2, "loss", discounted(0.99)) == [0.0, 0.0]
    assert scored(2, "draw", discounted(1.0)) == [0.5, 0.5]
    assert scored(1, "win", discounted(0.99)) == [1.0]
    long = scored(100, "win", discounted(0.99))
    assert len(long) == 100 and long[0] == pytest.approx(0.99**99) and long[-1] == 1.0


def test_openenv_empty_trajectory_has_no_turn_rewards() -> None:
    r = Rollout.model_validate({"prompt": "x", "completion": [], "info": {"outcome": "win"}})
    reward(win_loss)(r)
    assert assign_credit(r, discounted(0.99)) == []


def test_openenv_intermediate_steps_then_final_score() -> None:
    # Per-step intermediate rewards (0.0 before the end) and the final score at the last step:
    # an episode-level node under a per-turn tree contributes exactly that vector.
    tree = WeightedSum(
        {"steps": reward(lambda turn: 0.0, per_turn=True), "final": win_loss}, weights=[1.0, 1.0]
    )
    r = episode("move", "move", "move", outcome_label="win")
    assert tree(r) == 1.0
    assert r.turn_scores[""] == [0.0, 0.0, 1.0]


def test_openenv_multiple_episodes_are_independent() -> None:
    assert scored(2, "win", discounted(1.0)) == [1.0, 1.0]
    assert scored(1, "loss", discounted(1.0)) == [0.0]  # no state carried from the previous episode
