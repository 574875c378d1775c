"""WeightedSum, Sequential, Gate, RubricList, RubricDict, and how they compose."""

from __future__ import annotations

import asyncio
import math
import time

import pytest

from harness import ConfigError, ConfigTypeError, NotScoreableError, Rollout, RubricError
from rubrics import Gate, Rubric, RubricDict, RubricList, Sequential, WeightedSum, reward


def const(value: float, name: str):
    def fn() -> float:
        return value

    fn.__name__ = name
    return fn


def counting(value: float, name: str, calls: list[str], *, is_async: bool = False):
    if is_async:

        async def afn() -> float:
            await asyncio.sleep(0)
            calls.append(name)
            return value

        afn.__name__ = name
        return afn

    def fn() -> float:
        calls.append(name)
        return value

    fn.__name__ = name
    return fn


def failing(name: str = "broken"):
    def fn() -> float:
        raise RuntimeError("no verdict")

    fn.__name__ = name
    return fn


def blank() -> Rollout:
    return Rollout.model_validate({"completion": "hi", "answer": "hi"})


# ---------------------------------------------------------------- WeightedSum
def test_weighted_sum_default_weights_are_uniform() -> None:
    ws = WeightedSum([const(1.0, "a"), const(0.0, "b"), const(0.5, "c"), const(0.5, "d")])
    assert dict(ws.weights) == {"a": 0.25, "b": 0.25, "c": 0.25, "d": 0.25}
    assert ws(blank()) == pytest.approx(0.5)


def test_weighted_sum_list_weights_and_scores_by_path() -> None:
    ws = WeightedSum([const(1.0, "a"), const(0.5, "b")], weights=[2.0, -1.0])
    r = blank()
    assert ws(r) == pytest.approx(1.5)
    assert r.scores == {"a": 1.0, "b": 0.5} and r.reward == pytest.approx(1.5)


def test_weighted_sum_dict_rubrics_with_dict_weights_matched_by_key() -> None:
    ws = WeightedSum({"x": const(1.0, "f"), "y": const(0.0, "g")}, weights={"y": 0.9, "x": 0.1})
    assert dict(ws.weights) == {"x": 0.1, "y": 0.9}
    assert ws(blank()) == pytest.approx(0.1)


@pytest.mark.parametrize(
    "weights, message",
    [
        ([1.0], "1 weights for 2"),
        ([1.0, math.nan], "finite"),
        ([1.0, math.inf], "finite"),
        ([1.0, "heavy"], "finite"),
        ({"a": 1.0}, "missing"),
        ({"a": 1.0, "b": 1.0, "zzz": 1.0}, "unknown"),
    ],
)
def test_weighted_sum_rejects_bad_weights_at_construction(weights, message) -> None:
    with pytest.raises(ValueError, match=message):
        WeightedSum([const(1.0, "a"), const(1.0, "b")], weights=weights)


def test_weights_view_is_read_only_and_assignment_validates() -> None:
    ws = WeightedSum([const(1.0, "a"), const(0.0, "b")])
    with pytest.raises(TypeError):
        ws.weights["a"] = 3.0  # type: ignore[index]
    ws.weights = [0.3, 0.7]
    assert dict(ws.weights) == {"a": 0.3, "b": 0.7}
    with pytest.raises(ValueError):
        ws.weights = [1.0, math.nan]
    assert dict(ws.weights) == {"a": 0.3, "b": 0.7}


def test_weighted_sum_rejects_non_rubrics() -> None:
    with pytest.raises(TypeError, match="WeightedSum"):
        WeightedSum([const(1.0, "a"), 3])  # type: ignore[list-item]
    with pytest.raises(TypeError, match="list or dict"):
        WeightedSum("abc")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="at least one"):
        WeightedSum([])


async def test_weighted_sum_runs_async_children_concurrently() -> None:
    async def slow(response: str) -> float:
        await asyncio.sleep(0.05)
        return 1.0

    ws = WeightedSum([slow, slow, slow])
    start = time.perf_counter()
    assert await ws.ascore(blank()) == pytest.approx(1.0)
    elapsed = time.perf_counter() - start
    assert elapsed < 0.1, f"three 50 ms children took {elapsed:.3f}s: not concurrent"


def test_weighted_sum_concurrency_through_sync_call_too() -> None:
    async def slow() -> float:
        await asyncio.sleep(0.05)
        return 0.5

    ws = WeightedSum([slow, slow, slow])
    start = time.perf_counter()
    assert ws(blank()) == pytest.approx(0.5)
    assert time.perf_counter() - start < 0.1


def test_weighted_sum_nan_propagates_and_on_error_replaces_it() -> None:
    ws = WeightedSum([const(1.0, "a"), failing()])
    r = blank()
    assert math.isnan(ws(r))
    assert r.scores["a"] == 1.0 and math.isnan(r.scores["broken"])
    assert r.score_errors == {"broken": "RuntimeError: no verdict"}
    assert ws.last_error is None and isinstance(ws.broken.last_error, RuntimeError)

    ws.on_error = 0.0
    r = blank()
    assert ws(r) == 0.0 and r.reward == 0.0 and "broken" in r.score_errors

    leaf_level = WeightedSum([const(1.0, "a"), reward(failing(), on_error=0.0)])
    assert leaf_level(blank()) == pytest.approx(0.5)


def test_removing_a_child_drops_its_weight() -> None:
    ws = WeightedSum([const(1.0, "a"), const(0.5, "b")], weights=[1.0, 1.0])
    del ws.b
    assert dict(ws.weights) == {"a": 1.0}
    assert ws(blank()) == 1.0


def test_child_added_later_without_weight_is_an_error_not_a_silent_zero() -> None:
    ws = WeightedSum([const(1.0, "a")])
    ws.extra = reward(const(1.0, "extra"))
    r = blank()
    assert math.isnan(ws(r))
    assert "'extra' has no weight" in r.score_errors[""]


# ---------------------------------------------------------------- Sequential
def test_sequential_stops_at_first_zero_without_calling_the_rest() -> None:
    calls: list[str] = []
    seq = Sequential(counting(1.0, "a", calls), counting(0.0, "b", calls), counting(1.0, "c", calls))
    r = blank()
    assert seq(r) == 0.0
    assert calls == ["a", "b"]
    assert set(r.scores) == {"a", "b"}  # skipped nodes are absent


def test_sequential_returns_last_score_and_empty_is_one() -> None:
    assert Sequential(const(0.3, "a"), const(0.7, "b"))(blank()) == pytest.approx(0.7)
    assert Sequential()(blank()) == 1.0


def test_sequential_mixed_sync_async_each_called_exactly_once_in_order() -> None:
    calls: list[str] = []
    seq = Sequential(
        counting(1.0, "a", calls),
        counting(0.5, "b", calls, is_async=True),
        counting(1.0, "c", calls),
        counting(0.25, "d", calls, is_async=True),
    )
    assert seq(blank()) == 0.25
    assert calls == ["a", "b", "c", "d"]


def test_sequential_nan_stops_and_propagates() -> None:
    calls: list[str] = []
    seq = Sequential(failing(), counting(1.0, "after", calls))
    r = blank()
    assert math.isnan(seq(r))
    assert calls == [] and "broken" in r.score_errors and "after" not in r.scores


def test_sequential_accepts_a_dict_of_named_steps() -> None:
    seq = Sequential({"format": const(1.0, "f"), "grade": const(0.5, "g")})
    r = blank()
    assert seq(r) == 0.5 and r.scores == {"format": 1.0, "grade": 0.5}


# ---------------------------------------------------------------- Gate
@pytest.mark.parametrize(
    "score, threshold, expected",
    [(0.49, 0.5, 0.0), (0.5, 0.5, 0.5), (0.9, 0.5, 0.9), (0.99, 1.0, 0.0), (1.0, 1.0, 1.0)],
)
def test_gate_threshold_inclusive(score, threshold, expected) -> None:
    gate = Gate(const(score, "check"), threshold=threshold)
    r = blank()
    assert gate(r) == expected
    assert r.scores == {"check": score}


def test_gate_nan_stays_nan_and_rejects_bad_threshold() -> None:
    assert math.isnan(Gate(failing())(blank()))
    with pytest.raises(ValueError, match="threshold"):
        Gate(const(1.0, "a"), threshold=math.nan)
    with pytest.raises(TypeError):
        Gate(RubricList([const(1.0, "a")]))


# ---------------------------------------------------------------- composition
def test_sequential_of_gates() -> None:
    calls: list[str] = []
    seq = Sequential(
        Gate(counting(0.8, "fmt", calls), 0.5),
        Gate(counting(0.6, "correct", calls), 0.9),
        counting(1.0, "never", calls),
    )
    r = blank()
    assert seq(r) == 0.0
    assert calls == ["fmt", "correct"]
    assert r.scores == {"gate.fmt": 0.8, "gate": 0.8, "gate_1.correct": 0.6, "gate_1": 0.0}


def test_weighted_sum_of_gates() -> None:
    ws = WeightedSum([Gate(const(0.4, "a"), 0.5), Gate(const(0.7, "b"), 0.5)], weights=[0.5, 0.5])
    r = blank()
    assert ws(r) == pytest.approx(0.35)
    assert r.scores == {"gate.a": 0.4, "gate": 0.0, "gate_1.b": 0.7, "gate_1": 0.7}


async def test_nested_dict_paths_with_async_leaves() -> None:
    async def judged() -> float:
        await asyncio.sleep(0.01)
        return 0.5

    tree = WeightedSum(
        {
            "quality": WeightedSum({"style": const(1.0, "s"), "judge": judged}),
            "safety": Sequential({"filter": Gate(const(1.0, "clean")), "judge": judged}),
        },
        weights={"quality": 0.5, "safety": 0.5},
    )
    r = blank()
    assert await tree.ascore(r) == pytest.approx(0.625)
    assert r.scores == pytest.approx(
        {
            "quality.style": 1.0,
            "quality.judge": 0.5,
            "quality": 0.75,
            "safety.filter.clean": 1.0,
            "safety.filter": 1.0,
            "safety.judge": 0.5,
            "safety": 0.5,
        }
    )
    assert tree.get_rubric("safety.filter.clean").last_score == 1.0


# ---------------------------------------------------------------- RubricList / RubricDict
def test_rubric_list_behaves_like_module_list() -> None:
    a, b, c = reward(const(1.0, "a")), reward(const(0.0, "b")), reward(const(0.5, "c"))
    items = RubricList([a, b])
    items.append(c)
    assert len(items) == 3 and items[0] is a and items[-1] is c and list(items) == [a, b, c]
    assert a in items and reward(const(1.0, "z")) not in items
    items.extend([const(0.1, "d")])
    assert [n for n, _ in items.named_children()] == ["0", "1", "2", "3"]
    del items[1]
    assert list(items)[:2] == [a, c] and [n for n, _ in items.named_children()] == ["0", "1", "2"]
    items[0] = b
    assert items[0] is b
    items.insert(0, a)
    assert list(items)[:2] == [a, b]
    assert list(items[1:3]) == [b, c]
    with pytest.raises(IndexError, match="out of range"):
        items[10]
    ws = WeightedSum(items)
    assert [n for n, _ in ws.named_children()] == ["a", "b", "c", "d"]


def test_rubric_dict_behaves_like_module_dict() -> None:
    a, b = reward(const(1.0, "a")), reward(const(0.0, "b"))
    d = RubricDict({"first": a})
    d["second"] = b
    d.update({"third": const(0.5, "c")})
    assert len(d) == 3 and "first" in d and "nope" not in d
    assert d.keys() == ["first", "second", "third"] and d.values()[:2] == [a, b]
    assert d.items()[0] == ("first", a) and list(d) == ["first", "second", "third"]
    assert d.pop("second") is b and "second" not in d
    del d["third"]
    with pytest.raises(KeyError, match="first"):
        d["missing"]
    with pytest.raises(ValueError, match="attribute"):
        d["items"] = a
    ws = WeightedSum(RubricDict({"x": a, "y": b}))
    assert ws(blank()) == pytest.approx(0.5)


@pytest.mark.parametrize("container", [RubricList([lambda: 1.0]), RubricDict({"a": lambda: 1.0})])
def test_calling_a_rubric_list_or_dict_raises_clearly(container: Rubric) -> None:
    for call in (container, container.forward, lambda r: container.score_batch([r])):
        with pytest.raises(NotScoreableError, match="has no score") as caught:
            call(blank())
        # Both bases, as nn.ModuleList (TypeError) and OpenEnv (NotImplementedError) raise.
        assert isinstance(caught.value, TypeError) and isinstance(caught.value, NotImplementedError)
    with pytest.raises(NotImplementedError, match="has no score"):
        asyncio.run(container.ascore(blank()))


def test_rubric_list_inside_a_container_is_rejected_at_construction() -> None:
    with pytest.raises(TypeError, match="RubricList"):
        WeightedSum([RubricList([const(1.0, "a")])])


def test_dict_keys_with_dots_are_rejected() -> None:
    with pytest.raises(ValueError, match="without '.'"):
        WeightedSum({"a.b": const(1.0, "a")})


def test_bad_container_config_is_a_config_error() -> None:
    for build in (
        lambda: WeightedSum([const(1.0, "a")], weights=[1.0, 2.0]),
        lambda: WeightedSum([]),
        lambda: Gate(const(1.0, "a"), threshold=math.inf),
        lambda: WeightedSum({"a.b": const(1.0, "a")}),
    ):
        with pytest.raises(ConfigError) as caught:
            build()
        assert isinstance(caught.value, (RubricError, ValueError))
    # A value of the wrong type is still a TypeError, as Python would raise, and a ConfigError.
    with pytest.raises(ConfigTypeError) as caught:
        WeightedSum("not a list")  # type: ignore[arg-type]
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, ConfigError)


def test_sequential_has_length_and_indexing_like_nn_sequential() -> None:
    a, b, c = reward(const(1.0, "a")), reward(const(0.5, "b")), reward(const(0.2, "c"))
    seq = Sequential(a, b, c)
    assert len(seq) == 3 and seq[0] is a and seq[-1] is c and list(seq) == [a, b, c]
    with pytest.raises(IndexError, match="out of range"):
        seq[3]
    tail = seq[1:]
    assert isinstance(tail, Sequential) and list(tail) == [b, c]
    assert [name for name, _ in tail.named_children()] == ["b", "c"] and tail(blank()) == 0.2
    empty = Sequential()
    assert len(empty) == 0 and bool(empty) and empty(blank()) == 1.0  # still a rubric
    # Iterable, but not a list of summands: WeightedSum(seq) would silently sum its steps.
    with pytest.raises(ConfigTypeError, match=r"wrap it in a list"):
        WeightedSum(seq)  # type: ignore[arg-type]
    assert WeightedSum([seq])(blank()) == 0.2
