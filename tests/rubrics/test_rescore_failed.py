"""Rubric.arescore_failed: only failed nodes run again, scored ones keep their scores, groups stay whole."""

from __future__ import annotations

import asyncio
import math

from harness import Rollout
from rubrics import WeightedSum, relative


class Flaky:
    """A reward function that fails on the responses in `broken`, counting its calls."""

    def __init__(self, name: str, broken: set[str]) -> None:
        self.__name__ = name
        self.broken = broken
        self.calls = 0

    def __call__(self, response: str) -> float:
        self.calls += 1
        if response in self.broken:
            raise RuntimeError(f"{self.__name__} is down")
        return float(len(response))


def group(*responses: str, example_id: int = 0) -> list[Rollout]:
    return [
        Rollout.model_validate({"example_id": example_id, "rollout_index": i, "completion": text})
        for i, text in enumerate(responses)
    ]


def test_only_failed_nodes_run_again() -> None:
    steady, flaky = Flaky("steady", set()), Flaky("flaky", {"bb"})
    tree = WeightedSum({"steady": steady, "flaky": flaky})
    rollouts = [*group("a", example_id=0), *group("bb", example_id=1)]
    tree.score_batch(rollouts)
    assert math.isnan(rollouts[1].reward) and steady.calls == 2 and flaky.calls == 2
    flaky.broken.clear()
    before = rollouts[0].model_copy(deep=True)
    asyncio.run(tree.arescore_failed(rollouts))
    assert steady.calls == 2 and flaky.calls == 3  # only the failed node, only where it failed
    assert rollouts[1].reward == 2.0 and rollouts[1].scores == {"steady": 2.0, "flaky": 2.0}
    assert rollouts[1].score_errors == {}
    assert rollouts[0] == before


def test_a_group_node_that_failed_on_a_member_reruns_for_the_whole_group() -> None:
    steady, flaky = Flaky("steady", set()), Flaky("flaky", {"ccc"})
    tree = WeightedSum({"steady": steady, "rel": relative(flaky)})
    first, second = group("a", "bb", "ccc", example_id=0), group("a", "bb", example_id=1)
    tree.score_batch([*first, *second])
    assert [r.scores["rel"] for r in first[:2]] == [0.0, 1.0] and math.isnan(first[2].reward)
    flaky.broken.clear()
    kept = [r.model_copy(deep=True) for r in second]
    asyncio.run(tree.arescore_failed([*first, *second]))
    assert [r.scores["rel"] for r in first] == [0.0, 0.5, 1.0]  # the new comparison, for every member
    assert [r.reward for r in first] == [0.5, 1.25, 2.0]
    assert first[0].score_details["rel"] == {"group_size": 3, "scored_members": 3}
    # The comparison ran again for the group, but the child that scored is reused: one new call.
    assert steady.calls == 5 and flaky.calls == 6
    assert second == kept


def test_errored_rollouts_are_left_alone() -> None:
    steady = Flaky("steady", set())
    tree = WeightedSum({"steady": steady})
    rollout = Rollout.model_validate({"completion": "a", "error": "EndpointError: 503"})
    asyncio.run(tree.arescore_failed([rollout]))
    assert steady.calls == 0 and math.isnan(rollout.reward)
