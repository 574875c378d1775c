"""Paired intervals (Student's t, percentile bootstrap) and sample sizes of two runs' difference, and where they are shown."""

from __future__ import annotations

import math
import random
import re
from typing import Any

import pytest
from rich.console import Console

from harness import EvalResults
from harness._core.run.stats import (
    bootstrap_interval,
    examples_needed,
    paired_difference,
    paired_values,
    t_interval,
)
from harness._results.compare import compare
from harness._views.report import comparison_html
from harness._views.terminal import render_comparison


def _results(rows: list[tuple[str, float, float]]) -> EvalResults:
    """Rollouts (example id, reward, score of node "correct"), numbered per example."""
    counts: dict[str, int] = {}
    rollouts: list[dict[str, Any]] = []
    for example, reward, correct in rows:
        index = counts[example] = counts.get(example, -1) + 1
        rollouts.append(
            {
                "example_id": example,
                "rollout_index": index,
                "prompt": "q",
                "completion": "a",
                "reward": reward,
            }
            | {"scores": {"correct": correct}}
        )
    return EvalResults(rollouts, metadata={"env": {"name": "toy"}, "model": {"model": "m"}})


# ----------------------------------------------------------------------------- the numbers
def test_interval_of_constant_differences_is_that_constant() -> None:
    assert bootstrap_interval([0.25] * 7) == (0.25, 0.25)
    assert bootstrap_interval([]) is None


def test_interval_of_two_values_by_hand() -> None:
    # Resampling [0, 1] twice gives means 0, 0.5, 1 with chances 1/4, 1/2, 1/4: the 2.5% and
    # 97.5% quantiles are 0 and 1; the 30% and 70% quantiles (a 40% interval) are both 0.5.
    assert bootstrap_interval([0.0, 1.0], resamples=10_000) == (0.0, 1.0)
    assert bootstrap_interval([0.0, 1.0], confidence=0.4, resamples=10_000) == (0.5, 0.5)


def test_interval_centre_and_width_match_the_normal_approximation() -> None:
    # 400 per-example differences: the bootstrap distribution of the mean is close to normal,
    # centred on the sample mean with standard deviation sd_pop / sqrt(n) (computed here by hand).
    draw = random.Random(7)
    values = [draw.choice([-1.0, 0.0, 0.0, 0.5, 1.0, 1.0]) for _ in range(400)]
    n = len(values)
    mean = sum(values) / n
    sd_pop = math.sqrt(sum((v - mean) ** 2 for v in values) / n)
    low, high = bootstrap_interval(values, resamples=10_000, seed=3) or (math.nan, math.nan)
    assert (low + high) / 2 == pytest.approx(mean, abs=0.1 * sd_pop / math.sqrt(n))
    assert high - low == pytest.approx(2 * 1.959964 * sd_pop / math.sqrt(n), rel=0.05)


def test_interval_is_seeded() -> None:
    draw = random.Random(1)
    values = [draw.random() for _ in range(50)]
    assert bootstrap_interval(values, seed=5) == bootstrap_interval(values, seed=5)
    assert bootstrap_interval(values, seed=5) != bootstrap_interval(values, seed=6)


def test_t_interval_by_hand() -> None:
    # [0, 1, 2, 3]: mean 1.5, sd sqrt(5/3), t(0.975, 3) = 3.182446305 (tables).
    low, high = t_interval([0.0, 1.0, 2.0, 3.0]) or (math.nan, math.nan)
    half = 3.182446305 * math.sqrt(5 / 3) / 2
    assert low == pytest.approx(1.5 - half, rel=1e-8) and high == pytest.approx(1.5 + half, rel=1e-8)
    assert t_interval([1.0]) is None and t_interval([]) is None


def test_t_interval_with_no_spread_is_that_value_and_flagged() -> None:
    assert t_interval([0.25] * 7) == (0.25, 0.25)
    diff = paired_difference("", {str(i): 0.0 for i in range(12)}, {str(i): 0.5 for i in range(12)})
    assert (diff.low, diff.high, diff.no_spread) == (0.5, 0.5, True)
    assert not diff.excludes_zero  # a zero-width interval says nothing about noise


def test_small_comparisons_are_flagged_and_the_method_is_named() -> None:
    a = {str(i): float(i % 2) for i in range(9)}
    b = {str(i): float((i + 1) % 3 == 0) for i in range(9)}
    assert paired_difference("", a, b).small_sample
    assert not paired_difference("", a | {"9": 0.0}, b | {"9": 1.0}).small_sample
    assert paired_difference("", a, b).method == "Student's t interval (8 degrees of freedom)"
    boot = paired_difference("", a, b, interval="bootstrap", resamples=500)
    assert boot.method.startswith("percentile bootstrap (500 resamples")
    with pytest.raises(ValueError, match="interval must be one of 't', 'bootstrap'"):
        paired_difference("", a, b, interval="bca")  # type: ignore[arg-type]


def test_bad_settings_are_refused() -> None:
    with pytest.raises(ValueError, match="confidence must be between 0 and 1"):
        bootstrap_interval([1.0], confidence=95)
    with pytest.raises(ValueError, match="resamples must be at least 1"):
        bootstrap_interval([1.0], resamples=0)
    with pytest.raises(ValueError, match="alpha and power"):
        examples_needed(0.1, 1.0, power=80)


@pytest.mark.parametrize(
    ("difference", "sd", "alpha", "power", "expected"),
    [
        # n = ((z(1 - alpha/2) + z(power)) * sd / d)^2, rounded up; z(0.975) = 1.959964,
        # z(0.8) = 0.841621, z(0.9) = 1.281552, z(0.995) = 2.575829.
        (0.1, 0.5, 0.05, 0.8, 197),  # (2.801585 * 5)^2 = 196.22
        (-0.1, 0.5, 0.05, 0.8, 197),  # the sign does not matter
        (0.5, 1.0, 0.05, 0.8, 32),  # (2.801585 * 2)^2 = 31.40
        (0.2, 0.4, 0.05, 0.9, 43),  # (3.241516 * 2)^2 = 42.03
        (0.05, 0.3, 0.01, 0.8, 421),  # (3.41745 * 6)^2 = 420.44
        (1.0, 0.1, 0.05, 0.8, 2),  # tiny n: at least two pairs
    ],
)
def test_examples_needed_is_the_closed_form(
    difference: float, sd: float, alpha: float, power: float, expected: int
) -> None:
    assert examples_needed(difference, sd, alpha=alpha, power=power) == expected


def test_no_difference_needs_infinitely_many() -> None:
    assert examples_needed(0.0, 0.3) is None


def test_paired_by_example_with_each_examples_rollouts_averaged_first() -> None:
    # e1: A (0 + 1)/2 = 0.5, B 1 -> +0.5; e2: A 1, B (1 + 0)/2 = 0.5 -> -0.5; e3: A 0, B 1 -> +1
    # (B's NaN rollout is left out, not counted as 0); e4 only in A; e5 unscored in B.
    a = _results([("e1", 0, 0), ("e1", 1, 1), ("e2", 1, 1), ("e3", 0, 0), ("e4", 1, 1), ("e5", 1, 1)])
    b_rows = [("e1", 1, 1), ("e1", 1, 1), ("e2", 1, 1), ("e2", 0, 0), ("e3", 1, 1), ("e3", math.nan, 1)]
    b = _results([*b_rows, ("e5", math.nan, math.nan)])
    comparison = compare(a, b, interval="bootstrap", resamples=2000, seed=1)
    reward, correct = comparison.differences
    assert [d.path for d in comparison.differences] == ["", "correct"]
    assert reward.num_pairs == 3 and reward.mean == pytest.approx(1 / 3)
    # sample SD of (0.5, -0.5, 1): mean 1/3, squares 1/36 + 25/36 + 16/36 = 42/36, over 2
    assert reward.sd == pytest.approx(math.sqrt(21 / 36))
    assert reward.examples_needed == math.ceil((2.801585 * math.sqrt(21 / 36) * 3) ** 2)
    # "correct" is scored on B's NaN-reward rollout of e3 (1), so e3 pairs 0 with 1 there too.
    assert correct.num_pairs == 3 and correct.mean == pytest.approx((0.5 - 0.5 + 1) / 3)
    assert comparison.num_shared == 4
    assert paired_values({"x": 0.2, "y": math.nan}, {"x": 0.5, "y": 1.0, "z": 1.0}) == [pytest.approx(0.3)]
    # The same runs and seed give the same interval.
    assert compare(a, b, interval="bootstrap", resamples=2000, seed=1).differences == comparison.differences


def test_a_single_pair_has_no_spread_and_no_sample_size() -> None:
    diff = paired_difference("", {"e": 0.0}, {"e": 1.0})
    assert (diff.num_pairs, diff.mean, diff.sd, diff.examples_needed) == (1, 1.0, None, None)
    assert not diff.excludes_zero


# ----------------------------------------------------------------------------- the views
def _two_runs() -> tuple[EvalResults, EvalResults]:
    ids = [f"ex{i:02d}" for i in range(40)]
    a = _results([(e, float(i % 2), float(i % 2)) for i, e in enumerate(ids)])
    b = _results([(e, 1.0, float(i % 2)) for i, e in enumerate(ids)])
    return a, b


def test_terminal_shows_each_nodes_interval_and_sample_size() -> None:
    a, b = _two_runs()
    comparison = compare(a, b)
    reward = comparison.differences[0]
    console = Console(width=120, record=True)
    console.print(render_comparison(comparison))
    text = console.export_text()
    assert "paired B − A (40 examples in both runs)" in text
    row = next(line for line in text.splitlines() if "│ reward " in line and "[" in line)
    assert f"[{reward.low:+.3g}, {reward.high:+.3g}] ✓" in row and f"{reward.examples_needed:,}" in row
    correct_row = next(line for line in text.splitlines() if "│   correct " in line and "all" in line)
    assert "all +0" in correct_row and "∞" in correct_row and "✓" not in correct_row
    flat = " ".join(text.split())
    assert "95% Student's t interval (39 degrees of freedom)" in flat and "80% power at α = 0.05" in flat
    assert "no spread to estimate an interval from" in flat


def test_html_and_notebook_show_the_interval() -> None:
    a, b = _two_runs()
    comparison = compare(a, b)
    reward = comparison.differences[0]
    page = comparison_html(a, b)
    assert "95% CI (paired)" in page and "n for 80% power" in page
    assert f"[{reward.low:+.3g}, {reward.high:+.3g}] ✓" in page
    fragment = comparison._repr_html_()
    assert fragment is not None and 'class="compare-nodes"' in fragment
    assert re.search(r"paired over the 40 examples in both runs", fragment)


def test_runs_without_shared_examples_say_so() -> None:
    a = _results([("x1", 1, 1), ("x2", 0, 0)])
    b = _results([("y1", 1, 1)])
    comparison = compare(a, b)
    assert comparison.differences[0].num_pairs == 0 and comparison.differences[0].low is None
    console = Console(width=120, record=True)
    console.print(render_comparison(comparison))
    assert "0 shared example(s): no paired interval" in console.export_text()
    assert "0 shared example(s)" in comparison_html(a, b)
