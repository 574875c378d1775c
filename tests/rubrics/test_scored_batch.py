"""`score_batch` / `ascore_batch` hand back the rewards and every node's score: `ScoredBatch`."""

from __future__ import annotations

import asyncio
import math
import pickle

import pytest

from rubrics import Gate, ScoredBatch, WeightedSum, reward


@reward
def length_ok(response: str) -> float:
    return float(len(response) <= 5)


@reward
def exact(response: str, answer: str) -> float:
    if answer == "boom":
        raise ValueError(f"cannot compare with {answer!r}")
    return float(response.strip() == answer)


def tree() -> WeightedSum:
    # Named so that tree order (zeta, alpha.*) differs from alphabetical order.
    return WeightedSum({"zeta": length_ok, "alpha": Gate(exact, threshold=1.0)}, weights=[0.25, 0.75])


ROWS = [
    {"completion": "4", "answer": "4"},
    {"completion": "five!", "answer": "4"},
    {"completion": "x", "answer": "boom"},
]


def test_plain_dicts_give_rewards_that_are_still_a_list_of_floats() -> None:
    out = tree().score_batch(ROWS)
    assert isinstance(out, list) and isinstance(out, ScoredBatch)
    assert out[:2] == [1.0, 0.25] and math.isnan(out[2])
    assert sum(out[:2]) == 1.25 and len(out) == 3


def test_per_node_scores_and_nan_reasons_per_item() -> None:
    out = tree().score_batch(ROWS)
    assert out.scores[0] == {"zeta": 1.0, "alpha": 1.0, "alpha.exact": 1.0}
    assert out.scores[1]["alpha.exact"] == 0.0 and out.scores[1]["alpha"] == 0.0
    assert math.isnan(out.scores[2]["alpha.exact"])
    assert out.errors[0] == {} and "cannot compare with 'boom'" in out.errors[2]["alpha.exact"]
    assert math.isnan(out.rollouts[2].reward) and out.rollouts[1].answer == "4"


def test_to_pandas_has_node_columns_in_tree_order_and_the_nan_reason() -> None:
    frame = tree().score_batch(ROWS).to_pandas()
    assert list(frame.columns[:4]) == ["reward", "zeta", "alpha", "alpha.exact"]
    assert frame.loc[1, "reward"] == 0.25 and frame.loc[1, "zeta"] == 1.0
    assert math.isnan(frame.loc[2, "alpha.exact"])
    assert "ValueError: cannot compare with 'boom'" in frame.loc[2, "nan_reasons"]["alpha.exact"]
    assert list(frame["answer"]) == ["4", "4", "boom"] and frame.loc[0, "response"] == "4"
    assert frame.loc[0, "completion"] == [{"role": "assistant", "content": "4"}]


def test_summary_and_html_show_node_means_in_tree_order_and_the_unscored_reason() -> None:
    out = tree().score_batch(ROWS)
    assert list(out.summary.node_means) == ["zeta", "alpha", "alpha.exact"]
    assert out.summary.num_unscored == 1
    page = out._repr_html_()
    assert "scored batch of 3" in page and "zeta" in page and "<svg" in page
    assert page.index("zeta") < page.index("alpha")
    assert "cannot compare with" in page
    items = page[page.index('<table class="items">') :]  # one row per item, nodes in tree order
    head = items[: items.index("</tr>")]
    assert (
        head.index(">zeta<") < head.index(">alpha<") < head.index(">alpha.exact<") < head.index("NaN reasons")
    )
    assert items.count("<tr>") == 4 and items.count('class="num nan"') == 3
    assert 'title="ValueError: cannot compare with &#x27;boom&#x27;">NaN' in items


def test_html_lists_the_first_items_and_says_how_many_more() -> None:
    page = tree().score_batch(ROWS * 10)._repr_html_()
    items = page[page.index('<table class="items">') :]
    assert items.count("<tr>") == 21 and "10 more (all in .to_pandas())" in items


def test_slicing_and_pickling_keep_the_rollouts() -> None:
    out = tree().score_batch(ROWS)
    head = out[:1]
    assert isinstance(head, ScoredBatch) and head.scores == out.scores[:1]
    again = pickle.loads(pickle.dumps(out))
    assert again.scores[:2] == out.scores[:2] and again[:2] == out[:2]


async def test_async_form_and_async_leaves_give_the_same_batch() -> None:
    @reward
    async def slow_exact(response: str, answer: str) -> float:
        await asyncio.sleep(0.01)
        return float(response.strip() == answer)

    async_tree = WeightedSum({"zeta": length_ok, "alpha": slow_exact})
    out = await async_tree.ascore_batch(ROWS[:2], concurrency=2)
    assert isinstance(out, ScoredBatch) and out == [1.0, 0.5]
    assert out.to_pandas().columns[:3].tolist() == ["reward", "zeta", "alpha"]


async def test_sync_form_works_inside_a_running_event_loop() -> None:
    @reward
    async def slow_len(response: str) -> float:
        await asyncio.sleep(0.01)
        return float(len(response))

    out = WeightedSum([slow_len]).score_batch([{"completion": "abc"}])  # as in a Jupyter cell
    assert out == [3.0] and out.scores == [{"slow_len": 3.0}]


def test_bad_items_are_still_refused_by_position() -> None:
    with pytest.raises(TypeError, match="item 1 of the batch"):
        tree().score_batch([ROWS[0], 42])  # type: ignore[list-item]
