"""Judge means corrected by human labels (PPI++), checked against ppi-python, and judge panels."""

from __future__ import annotations

import math

import numpy as np
import pytest
from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

from harness._core.run.stats import effective_judges, prediction_powered_mean


def _judged(
    rng: np.random.Generator, size: int, *, bias: float, noise: float
) -> tuple[np.ndarray, np.ndarray]:
    """True pass/fail outcomes (mean 0.6) and a biased, noisy judge's scores of them in [0, 1]."""
    truth = rng.binomial(1, 0.6, size).astype(float)
    judge = np.clip(0.6 * truth + bias + rng.normal(0, noise, size), 0, 1)
    return truth, judge


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize(("bias", "noise"), [(0.3, 0.1), (0.1, 0.4), (0.5, 2.0)])
def test_matches_ppi_python(seed: int, bias: float, noise: float) -> None:
    rng = np.random.default_rng(seed)
    labels, predictions = _judged(rng, 80, bias=bias, noise=noise)
    _, unlabelled = _judged(rng, 1500, bias=bias, noise=noise)
    ours = prediction_powered_mean(labels, predictions, unlabelled, confidence=0.9)
    theirs = float(np.asarray(ppi_mean_pointestimate(labels, predictions, unlabelled)).squeeze())
    low, high = (
        float(np.asarray(v).squeeze()) for v in ppi_mean_ci(labels, predictions, unlabelled, alpha=0.1)
    )
    assert ours.estimate == pytest.approx(theirs, abs=1e-12)
    assert (ours.low, ours.high) == (pytest.approx(low, abs=1e-12), pytest.approx(high, abs=1e-12))
    assert 0 <= ours.power_tuning <= 1


def test_a_judge_unrelated_to_the_labels_is_ignored() -> None:
    # Judge scores independent of the labels: λ = 0, the estimate is the labels' own mean.
    rng = np.random.default_rng(3)
    labels = np.array([1.0, 0.0] * 20)
    predictions = np.tile([0.2, 0.2, 0.9, 0.9], 10)
    result = prediction_powered_mean(labels, predictions, rng.random(500))
    assert result.power_tuning == 0.0 and result.estimate == pytest.approx(0.5)
    assert result.effective_labels == pytest.approx(40.0)


def test_a_good_judge_is_worth_more_labels_than_were_given() -> None:
    rng = np.random.default_rng(4)
    labels, predictions = _judged(rng, 60, bias=0.2, noise=0.05)
    _, unlabelled = _judged(rng, 3000, bias=0.2, noise=0.05)
    result = prediction_powered_mean(labels, predictions, unlabelled)
    assert result.effective_labels > 5 * 60
    assert result.high - result.low < result.label_high - result.label_low


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 2 labelled and 1 unlabelled"):
        prediction_powered_mean([1.0], [1.0], [0.5])
    with pytest.raises(ValueError, match="3 labels but 2 judge scores"):
        prediction_powered_mean([1.0, 0.0, 1.0], [1.0, 0.0], [0.5])
    with pytest.raises(ValueError, match="finite"):
        prediction_powered_mean([1.0, 0.0], [1.0, math.nan], [0.5])


@pytest.mark.parametrize("num_labels", [50, 200])
def test_the_corrected_interval_covers_the_true_mean(num_labels: int) -> None:
    """A biased, noisy judge: its naive interval almost never covers the true mean (0.6); the
    corrected interval does at least 93% of the time."""
    rng = np.random.default_rng(num_labels)
    trials, corrected, naive = 400, 0, 0
    for _ in range(trials):
        labels, predictions = _judged(rng, num_labels, bias=0.3, noise=0.2)
        _, unlabelled = _judged(rng, 2000, bias=0.3, noise=0.2)
        result = prediction_powered_mean(labels, predictions, unlabelled)
        corrected += result.low <= 0.6 <= result.high
        naive += result.raw_low <= 0.6 <= result.raw_high
    assert corrected / trials >= 0.93
    assert naive / trials < 0.5


def test_judges_that_err_together_count_once() -> None:
    rng = np.random.default_rng(5)
    shared = rng.normal(0, 1, 200)
    together = effective_judges({"a": shared, "b": shared + rng.normal(0, 0.01, 200), "c": shared})
    assert together.error_correlation == pytest.approx(1.0, abs=1e-3)
    assert together.effective_judges == pytest.approx(1.0, abs=1e-2)
    apart = effective_judges({name: rng.normal(0, 1, 4000) for name in "abc"})
    assert apart.effective_judges == pytest.approx(3.0, abs=0.15)
    # Half-shared errors: ρ = 0.5, so three judges are worth 3 / (1 + 2·0.5) = 1.5.
    half = [shared + rng.normal(0, 1, 200) for _ in range(3)]
    panel = effective_judges(dict(zip("abc", half)))
    assert panel.effective_judges == pytest.approx(1.5, abs=0.25)


def test_a_panel_of_one_or_constant_errors_has_no_size() -> None:
    assert effective_judges({"a": [0.1, 0.2, 0.3]}).effective_judges is None
    assert effective_judges({"a": [0.1, 0.2, 0.3], "b": [0.0, 0.0, 0.0]}).effective_judges is None
    panel = effective_judges({"a": [0.1, math.nan, 0.3, 0.5], "b": [0.2, 0.1, 0.1, 0.4]})
    assert panel.num_rollouts == 3 and panel.error_correlation is not None
