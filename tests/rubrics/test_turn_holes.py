"""Per-turn rewards: three holes OpenEnv's trajectory tests found (issue 19.12)."""

from __future__ import annotations

import math
import pickle

import pytest

from harness import Rollout
from rubrics import Gate, reward
from rubrics.credit import assign_credit, discounted, returns_to_go


def _episode(*texts: str) -> Rollout:
    return Rollout.model_validate({"completion": [{"role": "assistant", "content": t} for t in texts]})


def fragile(turn):  # type: ignore[no-untyped-def]
    if turn.text == "boom":
        raise ValueError("x")
    return 1.0


def test_on_error_applies_per_turn_as_per_episode() -> None:
    r = _episode("ok", "boom")
    assert reward(fragile, per_turn=True, on_error=0.0)(r) == 0.0
    assert r.turn_scores[""] == [1.0, 0.0]  # never NaN when a value for failures was given
    assert assign_credit(r, returns_to_go()) == [1.0, 0.0]
    assert "turn 1: ValueError: x" in r.score_errors[""]
    plain = _episode("ok", "boom")
    reward(fragile, per_turn=True)(plain)  # without on_error a failed turn stays NaN, with its reason
    assert math.isnan(plain.turn_scores[""][1])


def test_a_gates_turns_follow_its_own_threshold_rule() -> None:
    r = _episode("good", "bad")
    gate = Gate(reward(lambda turn: 1.0 if turn.text == "good" else -1.0, per_turn=True), threshold=0.0)
    assert gate(r) == 0.0  # the child's mean is 0.0 >= 0.0: open, so the child's 0.0 passes
    assert r.turn_scores[""] == [1.0, -1.0]
    closed = _episode("bad", "bad")
    assert gate(closed) == 0.0 and closed.turn_scores[""] == [0.0, 0.0]


def test_credit_rules_are_fixed_once_validated() -> None:
    rule = discounted(0.5)
    with pytest.raises(AttributeError, match="fixed once made"):
        rule.gamma = 3.0
    assert rule.gamma == 0.5 and pickle.loads(pickle.dumps(rule)).gamma == 0.5
    with pytest.raises(AttributeError):
        returns_to_go(0.9).gamma = 2.0
