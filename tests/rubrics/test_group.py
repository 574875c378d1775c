"""Group nodes (GroupRubric, relative) in a rubric tree: scores per member, failures, ties, groups of one."""

from __future__ import annotations

import math

import pytest

from harness import ConfigError, ConfigTypeError, Rollout
from rubrics import GroupRubric, Rubric, Sequential, WeightedSum, relative, reward
from rubrics._group import relative_scores


def length(response: str) -> float:
    return float(len(response))


def correct(response: str, answer: str) -> float:
    return float(response == answer)


def group(*responses: str, answer: str = "aa", example_id: int = 7) -> list[Rollout]:
    return [
        Rollout.model_validate(
            {"example_id": example_id, "rollout_index": i, "completion": text, "answer": answer}
        )
        for i, text in enumerate(responses)
    ]


class Longest(GroupRubric):
    """1.0 for the longest response(s) of the group, else 0.0; refuses empty responses."""

    def forward(self, group: list[Rollout]) -> list[float]:  # type: ignore[override]
        for r in group:
            if not r.response:
                self.record_error(r, "empty response")
        best = max(len(r.response) for r in group)
        return [float(len(r.response) == best) for r in group]


def test_relative_rank_is_the_fraction_beaten_with_ties_at_half() -> None:
    assert relative_scores([1.0, 2.0, 3.0]) == [0.0, 0.5, 1.0]
    assert relative_scores([1.0, 1.0, 3.0]) == [0.25, 0.25, 1.0]
    assert relative_scores([2.0, 2.0]) == [0.5, 0.5]
    assert relative_scores([5.0]) == [0.5]  # a group of one is neutral


def test_relative_zscore_and_its_neutral_cases() -> None:
    z = relative_scores([1.0, 3.0], "zscore")
    assert z == [-1.0, 1.0]
    assert relative_scores([4.0, 4.0, 4.0], "zscore") == [0.0, 0.0, 0.0]
    assert relative_scores([4.0], "zscore") == [0.0]
    with pytest.raises(ConfigError, match="rank"):
        relative_scores([1.0], "percentile")


def test_unscored_values_are_left_out_of_the_others_ranks() -> None:
    out = relative_scores([1.0, math.nan, 3.0])
    assert out[0] == 0.0 and out[2] == 1.0 and math.isnan(out[1])
    out = relative_scores([math.nan, 2.0], "zscore")
    assert math.isnan(out[0]) and out[1] == 0.0


def test_a_tree_mixes_group_and_per_rollout_children() -> None:
    tree = WeightedSum({"correct": correct, "rel": relative(length)})
    rollouts = group("aa", "b", "cccc")
    rewards = tree.score_group(rollouts)
    assert rewards == [0.75, 0.0, 0.5]
    assert [r.scores["rel"] for r in rollouts] == [0.5, 0.0, 1.0]
    assert [r.scores["rel.length"] for r in rollouts] == [2.0, 1.0, 4.0]
    assert rollouts[0].score_details["rel"] == {"group_size": 3, "scored_members": 3}


def test_score_batch_groups_rollouts_by_example_id() -> None:
    tree = relative(length)
    batch = tree.score_batch([*group("a", "bb", example_id=1), *group("ccc", "c", "cc", example_id=2)])
    assert list(batch) == [0.0, 1.0, 1.0, 0.0, 0.5]


def test_a_rollout_scored_alone_is_a_group_of_one() -> None:
    tree = WeightedSum({"correct": correct, "rel": relative(length)})
    assert tree({"completion": "aa", "answer": "aa"}) == 0.75


def test_a_member_the_child_cannot_score_is_nan_and_left_out() -> None:
    def picky(response: str) -> float:
        if response == "bad":
            raise ValueError("cannot read it")
        return float(len(response))

    tree = WeightedSum({"rel": relative(picky)})
    rollouts = group("a", "bad", "ccc")
    rewards = tree.score_group(rollouts)
    assert rewards[0] == 0.0 and rewards[2] == 1.0 and math.isnan(rewards[1])
    assert "cannot read it" in rollouts[1].score_errors["rel.picky"]
    assert rollouts[0].score_details["rel"]["scored_members"] == 2


def test_an_errored_member_is_excluded_and_recorded() -> None:
    tree = WeightedSum({"rel": relative(length), "correct": correct})
    rollouts = group("a", "bb", "ccc")
    rollouts[2].error = "EndpointError: 503"
    rewards = tree.score_group(rollouts)
    assert rewards[:2] == [0.0, 0.5] and math.isnan(rewards[2])
    assert "rollout errored (EndpointError: 503)" in rollouts[2].score_errors["rel"]
    assert math.isnan(rollouts[2].scores["rel"])
    assert rollouts[0].score_details["rel"]["group_size"] == 2


def test_record_error_fails_one_member_and_a_raise_fails_the_group() -> None:
    node = Longest()
    rollouts = group("aaa", "", "bbb")
    scores = node.score_group(rollouts)
    assert scores[0] == 1.0 and scores[2] == 1.0 and math.isnan(scores[1])
    assert rollouts[1].score_errors[""] == "empty response"

    class Broken(GroupRubric):
        def forward(self, group: list[Rollout]) -> list[float]:  # type: ignore[override]
            raise RuntimeError("judge down")

    tree = WeightedSum({"ok": correct, "broken": Broken()})
    rollouts = group("aa", "b")
    assert all(math.isnan(s) for s in tree.score_group(rollouts))
    assert all(r.score_errors["broken"] == "RuntimeError: judge down" for r in rollouts)
    assert [r.scores["ok"] for r in rollouts] == [1.0, 0.0]


def test_a_wrong_number_of_scores_is_the_groups_failure() -> None:
    class Short(GroupRubric):
        def forward(self, group: list[Rollout]) -> list[float]:  # type: ignore[override]
            return [1.0]

    rollouts = group("a", "b")
    assert all(math.isnan(s) for s in Short().score_group(rollouts))
    assert rollouts[0].score_errors[""] == "Short returned 1 scores for a group of 2"


def test_group_node_contract_is_checked() -> None:
    class NoForward(GroupRubric):
        pass

    with pytest.raises(ConfigTypeError, match="forward"):
        NoForward()
    with pytest.raises(ConfigError, match="holds another group node"):
        relative(relative(length)).score_group(group("a"))


def test_group_node_hooks_and_on_error_apply_per_member() -> None:
    node = Longest(on_error=0.0)
    seen: list[float] = []
    node.register_forward_hook(lambda n, r, s: seen.append(s))
    rollouts = group("aaa", "")
    assert node.score_group(rollouts) == [1.0, 0.0]
    assert seen == [1.0, 0.0] and rollouts[1].score_errors[""] == "empty response"


def test_sequential_stops_before_a_group_node() -> None:
    # The group node compares the whole group (phase 1); Sequential then stops at the 0 for "b".
    tree = Sequential(correct, relative(length))
    rollouts = group("aa", "b", "aa")
    assert tree.score_group(rollouts) == [0.75, 0.0, 0.75]
    assert "relative" not in rollouts[1].scores


def test_custom_forward_can_call_a_group_node_child() -> None:
    class Parent(Rubric):
        def __init__(self) -> None:
            super().__init__()
            self.rel = relative(length)

        def forward(self, rollout: Rollout) -> float:
            return self.rel(rollout) * 2

    rollouts = group("a", "bb")
    assert Parent().score_group(rollouts) == [0.0, 2.0]


def test_a_sync_group_node_scores_its_children_per_member() -> None:
    class Best(GroupRubric):
        def __init__(self) -> None:
            super().__init__()
            self.size = reward(length)

        def forward(self, group: list[Rollout]) -> list[float]:  # type: ignore[override]
            values = [self.score_child(self.size, r) for r in group]
            return [float(v == max(values)) for v in values]

    tree = WeightedSum({"correct": correct, "best": Best()})
    rollouts = group("aa", "b")
    assert tree.score_group(rollouts) == [1.0, 0.0]
    assert rollouts[0].scores == {"correct": 1.0, "best": 1.0, "best.size": 2.0}


def test_calling_a_child_on_a_member_scores_it_under_the_group_node() -> None:
    class Longer(GroupRubric):
        def __init__(self) -> None:
            super().__init__()
            self.size = reward(length)

        async def forward(self, group: list[Rollout]) -> list[float]:  # type: ignore[override]
            values = [self.size(group[0]), await self.size.ascore(group[1])]
            return [float(values[0] > values[1]), float(values[1] > values[0])]

    tree = WeightedSum({"correct": correct, "longer": Longer()})
    rollouts = group("aa", "b")
    assert tree.score_group(rollouts) == [1.0, 0.0]
    assert rollouts[0].scores == {"correct": 1.0, "longer": 1.0, "longer.size": 2.0}
    assert rollouts[1].scores == {"correct": 0.0, "longer": 0.0, "longer.size": 1.0}
