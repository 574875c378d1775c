"""Sync, async, batch and group scoring of random rubric trees record the same scores (hypothesis)."""

from __future__ import annotations

import asyncio
import copy
import math
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness import Rollout, ScoringError
from rubrics import Gate, Rubric, Sequential, WeightedSum, relative, reward

NUM_ROLLOUTS = 3
#: What a leaf does on one rollout (or one turn): a number of each type, a non-finite value, a raise.
OUTCOMES: list[Any] = [0.0, 0.25, 1.0, True, False, 2, math.nan, math.inf, "raise", "scoring_error"]


def outcome_value(outcome: Any) -> Any:
    if outcome == "raise":
        raise ValueError("leaf exploded")
    if outcome == "scoring_error":
        raise ScoringError("leaf cannot judge this")
    return outcome


class Checked(Rubric):
    """A subclass leaf (scored inside a scope) that marks failures with record_error."""

    def __init__(self, outcomes: list[Any], is_async: bool, name: str) -> None:
        super().__init__(name=name)
        self.outcomes = outcomes
        self.is_async = is_async

    def _value(self, rollout: Rollout) -> Any:
        outcome = self.outcomes[rollout.rollout_index]
        if outcome == "scoring_error":
            self.record_error(rollout, "checked: unscored")
            return 0.0
        return outcome_value(outcome)

    def forward(self, rollout: Rollout) -> Any:
        if not self.is_async:
            return self._value(rollout)

        async def later() -> Any:
            await asyncio.sleep(0)
            return self._value(rollout)

        return later()

    def _own_is_async(self) -> bool:
        return self.is_async


Build = Callable[[bool], Rubric]  # a drawn tree, built as drawn (False) or with every part async (True)


def make_leaf(draw: st.DrawFn, name: str) -> Build:
    kind = draw(st.sampled_from(["function", "per_turn", "subclass"]))
    drawn_async = draw(st.booleans())
    on_error = draw(st.sampled_from([math.nan, 0.0, -1.0]))
    outcomes = draw(st.lists(st.sampled_from(OUTCOMES), min_size=NUM_ROLLOUTS + 1, max_size=NUM_ROLLOUTS + 1))
    how = draw(st.sampled_from(["mean", "sum", "last", "min", "max"]))

    def per_turn(rollout: Rollout, turn_index: int) -> Any:
        return outcome_value(outcomes[(rollout.rollout_index + turn_index) % len(outcomes)])

    async def aper_turn(rollout: Rollout, turn_index: int) -> Any:
        await asyncio.sleep(0)
        return per_turn(rollout, turn_index)

    def episode(rollout: Rollout) -> Any:
        return outcome_value(outcomes[rollout.rollout_index])

    async def aepisode(rollout: Rollout) -> Any:
        await asyncio.sleep(0)
        return episode(rollout)

    def build(all_async: bool) -> Rubric:
        is_async = drawn_async or all_async
        if kind == "subclass":
            node: Rubric = Checked(outcomes, is_async, name)
            node.on_error = on_error
            return node
        if kind == "per_turn":
            turn_fn: Callable[..., Any] = aper_turn if is_async else per_turn
            return reward(turn_fn, name=name, on_error=on_error, per_turn=True, reduce_turns=how)
        return reward(aepisode if is_async else episode, name=name, on_error=on_error)

    return build


def hook_of(kind: str, is_async: bool) -> Callable[..., Any]:
    def hook(n: Rubric, r: Rollout, score: float) -> Any:
        if kind == "double":
            return score * 2
        if kind == "raise" and r.rollout_index % 2:
            raise RuntimeError("hook refused")
        return {"seen": score}  # a logging hook's result, not a number: ignored

    async def ahook(n: Rubric, r: Rollout, score: float) -> Any:
        await asyncio.sleep(0)
        return hook(n, r, score)

    return ahook if is_async else hook


@st.composite
def trees(draw: st.DrawFn, depth: int = 0, allow_group: bool = True, prefix: str = "n") -> Build:
    """A random tree of containers over leaves; a `relative` group node where none is above."""
    kind = "leaf" if depth >= 3 else draw(st.sampled_from(["leaf", "sum", "seq", "gate", "group"]))
    if kind == "group" and not allow_group:
        kind = "sum"
    if kind == "leaf":
        make = make_leaf(draw, prefix)
    elif kind == "group":
        child = draw(trees(depth + 1, False, f"{prefix}0"))
        method = draw(st.sampled_from(["rank", "zscore"]))

        def make(all_async: bool) -> Rubric:
            return relative(child(all_async), method, name=prefix)

    elif kind == "gate":
        gated = draw(trees(depth + 1, allow_group, f"{prefix}0"))
        threshold = draw(st.sampled_from([0.0, 0.5, 1.0]))

        def make(all_async: bool) -> Rubric:
            return Gate(gated(all_async), threshold, name=prefix)

    else:
        size = draw(st.integers(1, 3))
        children = {f"{prefix}{i}": draw(trees(depth + 1, allow_group, f"{prefix}{i}")) for i in range(size)}
        weights = draw(st.lists(st.sampled_from([0.5, 1.0, 2.0]), min_size=size, max_size=size))
        on_error = draw(st.sampled_from([None, 0.0]))

        def make(all_async: bool) -> Rubric:
            built = {name: child(all_async) for name, child in children.items()}
            if kind == "seq":
                return Sequential(built, name=prefix, on_error=on_error)
            return WeightedSum(built, weights=weights, name=prefix, on_error=on_error)

    hook = draw(st.sampled_from(["none", "none", "double", "log", "raise"]))
    hook_async = draw(st.booleans())

    def build(all_async: bool) -> Rubric:
        node = make(all_async)
        if hook != "none":
            node.register_forward_hook(hook_of(hook, hook_async or all_async))
        return node

    return build


def rollouts() -> list[Rollout]:
    """One example's group: rollouts with one to three assistant turns."""
    out = []
    for i in range(NUM_ROLLOUTS):
        completion: list[dict[str, str]] = []
        for turn in range(1 + i % 3):
            completion += [{"role": "user", "content": "go on"}] if turn else []
            completion.append({"role": "assistant", "content": f"reply {turn}"})
        out.append(
            Rollout.model_validate(
                {"example_id": 0, "rollout_index": i, "prompt": "play", "completion": completion}
            )
        )
    return out


def recorded(rollouts: list[Rollout]) -> list[tuple[Any, ...]]:
    """What scoring wrote on each rollout, NaN made comparable (NaN != NaN)."""

    def plain(value: float) -> Any:
        return "nan" if value != value else value

    return [
        (
            plain(r.reward),
            {path: plain(v) for path, v in r.scores.items()},
            dict(r.score_errors),
            {path: [plain(v) for v in values] for path, values in r.turn_scores.items()},
        )
        for r in rollouts
    ]


def has_group(tree: Rubric) -> bool:
    return any(node._group_node for node in (tree, *tree.rubrics()))


def score_every_way(tree: Rubric, base: list[Rollout]) -> dict[str, list[tuple[Any, ...]]]:
    """What each scoring entry point records on copies of the same rollouts."""
    results: dict[str, list[tuple[Any, ...]]] = {}

    def run(mode: str, score: Callable[[list[Rollout]], Any]) -> None:
        items = copy.deepcopy(base)
        score(items)
        results[mode] = recorded(items)

    async def each(items: list[Rollout]) -> None:
        for r in items:
            await tree.ascore(r)

    if not has_group(tree):  # scored alone, a rollout is a group of one: only whole groups compare
        run("rubric(r)", lambda items: [tree(r) for r in items])
        run("ascore(r)", lambda items: asyncio.run(each(items)))
    run("score_batch", tree.score_batch)
    run("ascore_batch", lambda items: asyncio.run(tree.ascore_batch(items, concurrency=2)))
    run("score_group", tree.score_group)
    run("ascore_group", lambda items: asyncio.run(tree.ascore_group(items)))
    return results


@settings(
    max_examples=80,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(trees())
def test_sync_async_batch_and_group_scoring_record_the_same(build: Build) -> None:
    # The tree as drawn (sync parts scored by the sync driver) and its twin with every leaf
    # and hook async (every node scored by the async driver) must record the same.
    base = rollouts()
    tree, twin = build(False), build(True)
    results = {f"{mode}": got for mode, got in score_every_way(tree, base).items()}
    results.update({f"all-async {mode}": got for mode, got in score_every_way(twin, base).items()})
    (first, expected), *others = results.items()
    for mode, got in others:
        assert got == expected, f"{mode} differs from {first} for\n{tree!r}"
