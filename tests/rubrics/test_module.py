"""The Rubric base: registration, traversal, hooks, state, display, and scoring entry points."""

from __future__ import annotations

import asyncio
import copy
import math
import random

import pytest

from harness import Rollout
from rubrics import Gate, IncompatibleKeys, Rubric, ScoringError, Sequential, WeightedSum, reward


def blank(**extra: object) -> Rollout:
    return Rollout.model_validate({"completion": "hello world", "answer": "hello world", **extra})


class LengthCheck(Rubric):
    """A custom node with config and a child, scored by a sync forward."""

    config_fields = ("max_words",)

    def __init__(self, max_words: int = 5) -> None:
        super().__init__()
        self.max_words = max_words
        self.exact = reward(lambda response, answer: response == answer, name="exact")

    def forward(self, rollout: Rollout) -> float:
        short = len(rollout.response.split()) <= self.max_words
        return self.exact(rollout) if short else 0.0


class AsyncParent(Rubric):
    def __init__(self) -> None:
        super().__init__()
        self.inner = WeightedSum({"a": lambda: 1.0, "b": self._slow})

    @staticmethod
    async def _slow() -> float:
        await asyncio.sleep(0.001)
        return 0.0

    async def forward(self, rollout: Rollout) -> float:
        return 1.0 - await self.inner.ascore(rollout)


# ---------------------------------------------------------------- registration / traversal
def test_children_register_on_assignment_and_none_or_del_removes() -> None:
    node = LengthCheck()
    assert [n for n, _ in node.named_children()] == ["exact"]
    node.extra = reward(lambda: 1.0)
    assert list(node.children()) == [node.exact, node.extra]
    node.extra = None
    assert [n for n, _ in node.named_children()] == ["exact"]
    assert not hasattr(node, "extra")
    del node.exact
    assert list(node.children()) == []
    with pytest.raises(AttributeError, match="exact"):
        node.exact


def test_assigning_a_non_rubric_to_a_child_name_is_an_error() -> None:
    node = LengthCheck()
    with pytest.raises(TypeError, match="'exact'"):
        node.exact = 3


def test_named_rubrics_is_depth_first_parent_first_and_get_rubric() -> None:
    tree = WeightedSum(
        {"fmt": Gate(lambda: 1.0, 0.5), "seq": Sequential({"x": lambda: 1.0, "y": LengthCheck()})}
    )
    paths = [p for p, _ in tree.named_rubrics()]
    assert paths == ["fmt", "fmt.lambda", "seq", "seq.x", "seq.y", "seq.y.exact"]
    assert list(tree.rubrics()) == [node for _, node in tree.named_rubrics()]
    assert tree.get_rubric("seq.y.exact") is tree.seq.y.exact
    assert tree.get_rubric("") is tree
    with pytest.raises(KeyError, match=r"'seq.y.nope'.*'seq.y' has no child 'nope'.*exact"):
        tree.get_rubric("seq.y.nope")
    with pytest.raises(KeyError, match="the root has no child 'zzz'"):
        tree.get_rubric("zzz")


def test_cycles_and_self_assignment_are_rejected() -> None:
    outer = WeightedSum({"a": lambda: 1.0})
    inner = Gate(outer)
    with pytest.raises(ValueError, match="cycle"):
        outer.loop = inner
    with pytest.raises(ValueError, match="cycle"):
        outer.me = outer


def test_subclass_must_call_super_init_and_define_forward() -> None:
    class NoInit(Rubric):
        def __init__(self) -> None:
            self.child = reward(lambda: 1.0)

        def forward(self, rollout: Rollout) -> float:
            return 1.0

    class NoForward(Rubric):
        pass

    with pytest.raises(RuntimeError, match="super"):
        NoInit()
    with pytest.raises(TypeError, match="must define forward"):
        NoForward()


def test_required_columns_cover_the_whole_tree() -> None:
    tree = WeightedSum(
        [
            lambda response, label: 1.0,
            Gate(lambda difficulty, hint="": 1.0),
            Sequential(lambda answer, info, source: 1.0),
        ]
    )
    assert tree.required_columns() == {"label", "difficulty", "source"}


# ---------------------------------------------------------------- scoring
def test_custom_subclass_scores_children_under_their_paths() -> None:
    node = LengthCheck()
    r = blank()
    assert node(r) == 1.0
    assert r.scores == {"exact": 1.0} and r.reward == 1.0
    assert node.last_score == 1.0 and node.exact.last_score == 1.0


async def test_async_subclass_calls_children_with_ascore() -> None:
    parent = WeightedSum({"p": AsyncParent()})
    r = blank()
    assert await parent.ascore(r) == pytest.approx(0.5)
    assert r.scores == pytest.approx({"p.inner.a": 1.0, "p.inner.b": 0.0, "p.inner": 0.5, "p": 0.5})


def test_calling_an_unregistered_rubric_inside_forward_fails_that_node_clearly() -> None:
    stranger = reward(lambda: 1.0, name="stranger")

    class Sneaky(Rubric):
        def forward(self, rollout: Rollout) -> float:
            return stranger(rollout)

    r = blank()
    assert math.isnan(Sneaky()(r))
    assert "not a child" in r.score_errors[""] and "self.x" in r.score_errors[""]


def test_last_score_is_none_before_first_call_and_reset_clears() -> None:
    tree = WeightedSum([lambda: 1.0, Gate(lambda: 0.2, 0.5)])
    assert tree.last_score is None and all(n.last_score is None for n in tree.rubrics())
    tree(blank())
    assert tree.last_score == pytest.approx(0.5) and tree.get_rubric("gate").last_score == 0.0
    tree.reset()
    assert tree.last_score is None and all(n.last_score is None for n in tree.rubrics())


def test_rescoring_a_rollout_replaces_old_scores() -> None:
    r = blank()
    WeightedSum({"old": lambda: 1.0})(r)
    WeightedSum({"new": lambda: 0.0})(r)
    assert r.scores == {"new": 0.0} and r.reward == 0.0


async def test_sync_call_works_inside_a_running_event_loop() -> None:
    async def slow() -> float:
        await asyncio.sleep(0.001)
        return 0.5

    assert asyncio.get_running_loop().is_running()
    assert WeightedSum([lambda: 1.0, slow])(blank()) == pytest.approx(0.75)
    assert WeightedSum([lambda: 1.0])(blank()) == 1.0  # all-sync fast path, no loop at all
    assert WeightedSum([slow]).score_batch([blank(), blank()]) == [0.5, 0.5]


def test_all_sync_tree_scores_in_the_calling_thread_without_a_loop() -> None:
    seen: list[bool] = []

    def probe() -> float:
        try:
            asyncio.get_running_loop()
            seen.append(True)
        except RuntimeError:
            seen.append(False)
        return 1.0

    import threading

    main = threading.current_thread()
    threads: list[threading.Thread] = []
    tree = WeightedSum([probe, Gate(lambda: (threads.append(threading.current_thread()), 1.0)[1])])
    assert tree(blank()) == 1.0
    assert seen == [False] and threads == [main]


async def test_concurrent_scoring_keeps_paths_and_scores_per_rollout() -> None:
    async def echo(value) -> float:
        await asyncio.sleep(random.random() / 200)
        return value

    tree = WeightedSum({"a": Gate(echo, 0.5), "b": Sequential({"x": echo, "y": lambda value: value})})
    rollouts = [blank(value=i / 100) for i in range(100)]
    scores = await tree.ascore_batch(rollouts, concurrency=32)
    for i, (r, score) in enumerate(zip(rollouts, scores)):
        v = i / 100
        gated = 0.0 if v < 0.5 else v
        expected_b = 0.0 if v == 0.0 else v
        assert score == pytest.approx(0.5 * gated + 0.5 * expected_b)
        assert r.scores["a.echo"] == pytest.approx(v) and r.scores["a"] == pytest.approx(gated)
        assert set(r.scores) == (
            {"a.echo", "a", "b.x", "b"} if v == 0.0 else {"a.echo", "a", "b.x", "b.y", "b"}
        )


def test_score_batch_never_stops_for_a_failing_item() -> None:
    def picky(flag) -> float:
        if flag == "bad":
            raise ValueError("cannot score this one")
        return 1.0

    tree = WeightedSum([picky])
    rollouts = [blank(flag="ok"), blank(flag="bad"), blank(flag="ok")]
    scores = tree.score_batch(rollouts)
    assert scores[0] == 1.0 and math.isnan(scores[1]) and scores[2] == 1.0
    assert rollouts[1].score_errors == {"picky": "ValueError: cannot score this one"}


def test_score_batch_accepts_dicts_and_validates_inputs_and_concurrency() -> None:
    tree = WeightedSum([lambda response: response == "x"])
    assert tree.score_batch([{"completion": "x"}, {"completion": "y"}]) == [1.0, 0.0]
    with pytest.raises(TypeError, match="item 1"):
        tree.score_batch([{"completion": "x"}, 5])
    with pytest.raises(ValueError, match="concurrency"):
        tree.score_batch([], concurrency=0)


# ---------------------------------------------------------------- hooks
async def test_hooks_run_in_order_async_ones_awaited_and_remove_detaches() -> None:
    events: list[str] = []
    leaf = reward(lambda: 0.5, name="leaf")

    def pre1(node, rollout):
        events.append(f"pre1:{node.name}")

    async def pre2(node, rollout):
        await asyncio.sleep(0)
        events.append("pre2")

    def post1(node, rollout, score):
        events.append(f"post1:{score}")

    async def post2(node, rollout, score):
        events.append(f"post2:{score}")

    handles = [
        leaf.register_forward_pre_hook(pre1),
        leaf.register_forward_pre_hook(pre2),
        leaf.register_forward_hook(post1),
        leaf.register_forward_hook(post2),
    ]
    tree = WeightedSum([leaf])
    assert await tree.ascore(blank()) == 0.5
    assert events == ["pre1:leaf", "pre2", "post1:0.5", "post2:0.5"]
    events.clear()
    handles[1].remove()
    handles[3].remove()
    handles[3].remove()  # idempotent
    assert tree(blank()) == 0.5
    assert events == ["pre1:leaf", "post1:0.5"]
    for handle in handles:
        handle.remove()
    events.clear()
    tree(blank())
    assert events == []


def test_forward_hook_may_replace_the_score_and_a_raising_hook_fails_the_node() -> None:
    leaf = reward(lambda: 0.5, name="leaf")
    handle = leaf.register_forward_hook(lambda node, rollout, score: score * 2)
    assert leaf(blank()) == 1.0
    handle.remove()

    def broken(node, rollout):
        raise RuntimeError("hook exploded")

    leaf.register_forward_pre_hook(broken)
    r = blank()
    assert math.isnan(leaf(r)) and "hook exploded" in r.score_errors[""]
    with pytest.raises(TypeError, match="callable"):
        leaf.register_forward_hook("nope")  # type: ignore[arg-type]


@pytest.mark.parametrize("mode", ["sync", "async"])
def test_a_hook_returning_a_non_number_is_ignored_and_a_number_replaces(mode: str) -> None:
    leaf = reward(lambda: 0.5, name="leaf")
    seen: list[dict[str, object]] = []

    def log(node: Rubric, rollout: Rollout, score: float) -> dict[str, object]:
        entry = {"node": node.name, "score": score}
        seen.append(entry)
        return entry  # a logging hook's return value: not a score

    async def alog(node: Rubric, rollout: Rollout, score: float) -> str:
        return "logged"

    leaf.register_forward_hook(log if mode == "sync" else alog)
    r = blank()
    assert leaf(r) == 0.5 and r.reward == 0.5 and not r.score_errors
    leaf.register_forward_hook(lambda node, rollout, score: 1)  # an int is a number: replaces
    assert leaf(blank()) == 1.0
    if mode == "sync":
        assert seen == [{"node": "leaf", "score": 0.5}] * 2


# ---------------------------------------------------------------- failure reporting for subclasses
class Reporter(Rubric):
    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode

    def forward(self, rollout: Rollout) -> float:
        self.record_detail(rollout, {"reply": "GRADE: C", "mode": self.mode})
        if self.mode == "record":
            self.record_error(rollout, "judge reply had no verdict")
            return 1.0  # ignored: the node is unscored
        if self.mode == "raise":
            raise ScoringError("judge reply had no verdict")
        return 0.75


@pytest.mark.parametrize("mode", ["record", "raise"])
def test_record_error_and_scoring_error_mark_the_node_unscored(mode: str) -> None:
    tree = WeightedSum({"judge": Reporter(mode)})
    r = blank()
    assert math.isnan(tree(r))
    assert r.score_errors == {"judge": "judge reply had no verdict"}
    assert r.score_details == {"judge": {"reply": "GRADE: C", "mode": mode}}
    assert isinstance(tree.judge.last_error, ScoringError)


def test_record_detail_on_success_and_outside_forward_is_an_error() -> None:
    node = Reporter("ok")
    r = blank()
    assert node(r) == 0.75 and r.score_details == {"": {"reply": "GRADE: C", "mode": "ok"}}
    with pytest.raises(RuntimeError, match="inside its own forward"):
        node.record_detail(r, {"x": 1})


# ---------------------------------------------------------------- state
def test_state_dict_round_trips_weights_thresholds_and_config() -> None:
    def make() -> WeightedSum:
        return WeightedSum({"len": LengthCheck(), "gate": Gate(lambda: 1.0, 0.5)}, weights=[0.3, 0.7])

    source, target = make(), make()
    source.weights = {"len": 0.9, "gate": 0.1}
    source.gate.threshold = 0.25
    source.len.max_words = 2
    source.len.exact.on_error = 0.0
    state = source.state_dict()
    assert state["weights"] == {"len": 0.9, "gate": 0.1}
    assert (
        state["gate.threshold"] == 0.25 and state["len.max_words"] == 2 and state["len.exact.on_error"] == 0.0
    )
    target.load_state_dict(state)
    assert target.state_dict() == state
    state["weights"]["len"] = 123.0  # the loaded tree does not share mutable state
    assert target.weights["len"] == 0.9


def test_load_state_dict_is_strict_and_all_or_nothing() -> None:
    tree = WeightedSum({"g": Gate(lambda: 1.0, 0.5)})
    good = tree.state_dict()
    with pytest.raises(KeyError, match="unexpected keys \\['bogus'\\]"):
        tree.load_state_dict({**good, "bogus": 1})
    with pytest.raises(KeyError, match="missing keys"):
        tree.load_state_dict({"weights": {"g": 1.0}})
    bad = {**good, "weights": {"g": 2.0}, "g.threshold": math.nan}
    with pytest.raises(ValueError, match="threshold"):
        tree.load_state_dict(bad)
    assert tree.state_dict() == good
    assert tree.load_state_dict(good) == IncompatibleKeys([], [])
    result = tree.load_state_dict({"g.threshold": 0.1, "bogus": 1, "g.nope": 2}, strict=False)
    assert tree.g.threshold == 0.1
    # As torch: a NamedTuple of the keys this tree lacks in `state` and the keys it has no use for.
    assert result == (["g.lambda.on_error", "g.on_error", "on_error", "weights"], ["bogus", "g.nope"])
    assert result.missing_keys == ["g.lambda.on_error", "g.on_error", "on_error", "weights"]
    assert result.unexpected_keys == ["bogus", "g.nope"]


# ---------------------------------------------------------------- display
def test_repr_prints_the_tree_with_names_weights_and_thresholds() -> None:
    def correct(response, answer):
        return response == answer

    tree = WeightedSum(
        {"correct": correct, "fmt": Gate(reward(lambda: 1.0, on_error=0.0), 0.5)}, weights=[0.7, 0.3]
    )
    assert repr(tree) == (
        "WeightedSum(\n"
        "  (correct) weight=0.7: reward(correct)\n"
        "  (fmt) weight=0.3: Gate(\n"
        "    threshold=0.5\n"
        "    (lambda): reward(lambda, on_error=0)\n"
        "  )\n"
        ")"
    )
    assert repr(LengthCheck()) == "LengthCheck(\n  (exact): reward(exact)\n)"


def test_repr_html_escapes_names_and_errors() -> None:
    def bad() -> float:
        raise ValueError("<script>alert(1)</script>")

    tree = WeightedSum({"x": reward(bad, name="<b>"), "y": lambda: 1.0})
    tree(blank())
    page = tree._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;" in page and "&lt;b&gt;" in page
    assert "weight=0.5" in page and ">NaN<" in page and "unscored: &lt;script" in page


def test_a_hook_may_remove_itself_while_running() -> None:
    leaf = reward(lambda: 1.0)
    calls: list[int] = []

    def once(node, rollout, score):
        calls.append(1)
        handle.remove()

    handle = leaf.register_forward_hook(once)
    leaf(blank())
    leaf(blank())
    assert calls == [1]


def test_scoring_from_many_threads_at_once_keeps_each_rollout_separate() -> None:
    from concurrent.futures import ThreadPoolExecutor

    tree = WeightedSum({"g": Gate(lambda value: value, 0.5), "v": lambda value: value})
    rollouts = [blank(value=i / 50) for i in range(50)]
    with ThreadPoolExecutor(4) as pool:
        scores = list(pool.map(tree, rollouts))
    for i, (r, score) in enumerate(zip(rollouts, scores)):
        v = i / 50
        assert score == pytest.approx(0.5 * (v if v >= 0.5 else 0.0) + 0.5 * v)
        assert r.scores["g.lambda"] == pytest.approx(v)


async def test_a_change_deep_in_a_tree_or_its_copy_reaches_the_cached_answers_above() -> None:
    # Whether a subtree runs without awaiting is cached on each node; adding an async leaf
    # two levels down (in the tree, or in a deep copy of it) must reach the root's answer, or
    # the sync path would call the async leaf inside this running loop and fail it.
    async def slow() -> float:
        await asyncio.sleep(0)
        return 1.0

    tree = Sequential({"inner": Sequential({"fast": lambda: 1.0})})
    clone = copy.deepcopy(tree)
    assert tree(blank()) == clone(blank()) == 1.0  # both cache "all sync"
    tree.inner.add_rubric("slow", reward(slow))
    clone.inner.add_rubric("slow", reward(slow))
    for scored in (tree, clone):
        r = blank()
        assert scored(r) == 1.0 and r.score_errors == {} and r.scores["inner.slow"] == 1.0
    handle = tree.inner.fast.register_forward_hook(lambda node, rollout, score: 0.0)
    assert tree(blank()) == 0.0
    handle.remove()
    assert tree(blank()) == 1.0
    del clone.inner.slow
    assert clone._is_sync_tree() and not tree._is_sync_tree()
