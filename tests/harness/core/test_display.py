"""harness._core.display: the one formatter of a score and of "unscored", and every view writing them alike."""

from __future__ import annotations

import math

from rich.console import Console

from harness import EvalResults, Rollout
from harness._core.display import fmt, unscored, unscored_count
from harness._views.html import rollout_html, summary_html
from harness._views.terminal import render_rollout


def test_a_score_has_four_significant_digits_and_no_float_noise() -> None:
    assert [fmt(v) for v in (0.1 + 0.2, 1.0, 2 / 3, 0, 12_345_678.0, -0.5)] == [
        "0.3",
        "1",
        "0.6667",
        "0",
        "1.235e+07",
        "-0.5",
    ]
    assert fmt(2 / 3, 3) == "0.667" and fmt(0.75, stderr=0.04321) == "0.75 ± 0.043"


def test_nan_none_and_what_is_not_a_number() -> None:
    assert fmt(math.nan) == "NaN" and fmt(math.nan, stderr=0.1) == "NaN"  # an unscored value
    assert fmt(None) == "n/a" and fmt(None, stderr=0.1) == "n/a"  # no value: a mean over nothing
    assert fmt(True) == "True" and fmt("<b>") == "<b>"  # a hand-edited file: its text, escaped by the caller


def test_unscored_says_why_or_that_no_reason_was_kept() -> None:
    assert unscored("judge reply had no score") == "unscored: judge reply had no score"
    assert unscored(None) == unscored("") == "unscored (NaN)"
    assert unscored_count(0) == unscored_count(0, [("x", 0)]) == "0"
    assert (
        unscored_count(1234, [("timeout", 1200), ("no score", 34)]) == "1,234: timeout (1,200); no score (34)"
    )


def _rollout() -> Rollout:
    return Rollout.model_validate(
        {
            "example_id": "e",
            "completion": "four",
            "reward": None,
            "scores": {"judge": None, "judge.inner": None, "length": 2 / 3},
            "score_errors": {"judge.inner": "judge reply had no score", "": "judge reply had no score"},
        }
    )


def test_the_terminal_and_the_page_write_a_rollouts_scores_alike() -> None:
    console = Console(record=True, width=200)
    console.print(render_rollout(_rollout()))
    text, page = console.export_text(), rollout_html(_rollout())
    for shown in ("unscored: judge reply had no score", "unscored (NaN)", "0.6667"):
        assert shown in text and shown in page, shown
    assert "NaN (unscored)" not in text  # the score column holds the score, the reason its own column


def test_the_terminal_the_page_and_the_repr_write_a_summary_alike() -> None:
    rollouts = [Rollout(example_id=i, reward=float(i > 0), scores={"a": 1 / 3}) for i in range(3)]
    rollouts.append(Rollout(example_id=9, score_errors={"": "timeout"}))
    results = EvalResults(rollouts)
    console = Console(record=True, width=200)
    console.print(results)
    text, page, short = console.export_text(), summary_html(results.summary), repr(results.summary)
    mean = fmt(2 / 3, stderr=results.summary.reward_stderr)
    assert mean == "0.6667 ± 0.33"
    for shown in (mean, "1: timeout (1)", "0.3333"):
        assert shown in text and shown in page, shown
    assert f"mean_reward={mean}" in short and "a=0.3333" in short
