"""Summaries and views of grouped runs: failed counts and zero-variance groups per node, members side by side."""

from __future__ import annotations

import math

from rich.console import Console

from harness import EvalResults, Rollout
from harness._core.run.summary import node_note, summarize
from harness._views.html import groups_html
from harness._views.report import report_html
from rubrics import WeightedSum, relative


def correct(response: str, answer: str) -> float:
    return float(response == answer)


def length(response: str) -> float:
    if response == "<b>boom</b>":
        raise ValueError("cannot measure <b>")
    return float(len(response))


TREE = WeightedSum({"rel": relative(length), "correct": correct})


def scored_run() -> EvalResults:
    rollouts = [
        Rollout.model_validate({"example_id": e, "rollout_index": i, "completion": text, "answer": "aa"})
        for e, texts in enumerate([["aa", "b", "ccc"], ["aa", "aa", "<b>boom</b>"], ["x", "y", "z"]])
        for i, text in enumerate(texts)
    ]
    TREE.score_batch(rollouts)
    metadata = {"env": {"name": "g", "rubric": TREE.tree()}, "model": {"model": "m"}}
    return EvalResults(rollouts, metadata=metadata)


def test_summary_counts_failures_and_flat_groups_per_node() -> None:
    results = scored_run()
    s = summarize(results.rollouts)
    assert s.node_failed == {"rel": 1, "rel.length": 1}  # "<b>boom</b>" could not be measured
    assert s.num_groups == {"": 3, "rel": 3, "rel.length": 3, "correct": 3}
    # Example 1: its two scored members ("aa", "aa") tie on every node but `correct` (the
    # unmeasured third scored 0 there); example 2 (x, y, z) is flat everywhere.
    assert s.zero_variance_groups == {"": 2, "rel": 2, "rel.length": 2, "correct": 1}
    assert node_note(s, "rel") == "1 failed · 2 of 3 groups flat"
    assert node_note(s, "correct") == "1 of 3 groups flat"
    assert node_note(s, "") == "2 of 3 groups flat"
    assert math.isnan(results.rollouts[5].scores["rel"])


def test_a_run_without_repeats_has_no_groups() -> None:
    rollouts = [
        Rollout.model_validate({"example_id": e, "completion": "aa", "answer": "aa"}) for e in range(3)
    ]
    TREE.score_batch(rollouts)
    s = summarize(rollouts)
    assert s.num_groups == {} and s.zero_variance_groups == {} and node_note(s, "rel") == ""


def test_terminal_table_shows_failed_and_flat_counts() -> None:
    console = Console(width=160, record=True)
    console.print(scored_run().table())
    text = console.export_text()
    assert "flat groups" in text and "2 of 3 groups flat (every rollout" in text
    assert "(1 failed · 2 of 3 groups flat)" in text


def test_groups_side_by_side_in_the_notebook_repr_and_the_report() -> None:
    results = scored_run()
    page = results._repr_html_()
    assert "groups: each example's rollouts side by side" in page
    assert "rel (group)" in page and "1 failed · 2 of 3 groups flat" in page
    assert "<th>response</th>" in page and "<th>answer</th>" not in page  # the model's, not the dataset's
    assert "<b>boom</b>" not in page and "&lt;b&gt;boom&lt;/b&gt;" in page  # model text is escaped
    assert 'title="ValueError: cannot measure &lt;b&gt;' in page
    report = report_html(results)
    assert report.count('<caption class="head">example') == 3
    assert "boom" not in report  # the report's model text lives only in its compressed panels


def test_groups_html_is_empty_without_groups_and_bounded() -> None:
    singles = [Rollout.model_validate({"example_id": e, "completion": "a"}) for e in range(3)]
    assert groups_html(singles, None) == ""
    many = [
        Rollout.model_validate({"example_id": e, "rollout_index": i, "completion": "a"})
        for e in range(8)
        for i in range(2)
    ]
    html = groups_html(many, None, limit=5)
    assert html.count("<caption") == 5 and "3 more groups" in html


def test_a_scored_batch_with_group_nodes_shows_its_groups() -> None:
    batch = TREE.score_batch(scored_run().rollouts)
    page = batch._repr_html_()
    assert "rollouts side by side" in page and "rel (group)" in page
    plain = WeightedSum({"correct": correct}).score_batch(scored_run().rollouts)
    assert "side by side" not in plain._repr_html_()
