"""Coverage of the comparison interval, measured by a seeded simulation (the docs show the table).

Examples have Beta(2, 2)-distributed difficulty p; run A passes a rollout with chance p, run B
with chance min(1, 1.2 p); each example's rollouts are averaged, and the interval of the mean
per-example difference should cover the population difference E[min(1, 1.2 p) − p] as often as
it says. The population difference is computed in closed form below, not estimated.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness._core.run.stats import paired_difference

NOMINAL = 0.95
DATA_SETS = 800  # per row: a coverage of 0.95 is measured to about ± 0.008 (one standard error)


def _population_difference() -> float:
    # E[min(1, 1.2p) − p] for p ~ Beta(2, 2) (density 6p(1 − p)): 0.2·E[p] on p ≤ 1/1.2, and
    # E[1 − p] beyond; both integrals by hand: ∫0^c 0.2·6p²(1 − p) dp and ∫c^1 6p(1 − p)² dp.
    c = 1 / 1.2
    below = 0.2 * 6 * (c**3 / 3 - c**4 / 4)
    above = 6 * ((1 / 2 - 2 / 3 + 1 / 4) - (c**2 / 2 - 2 * c**3 / 3 + c**4 / 4))
    return below + above


def _coverage(examples: int, rollouts: int, interval: str, seed: int) -> float:
    rng = np.random.default_rng(seed)
    truth = _population_difference()
    covered = 0
    for _ in range(DATA_SETS):
        p = rng.beta(2, 2, size=examples)
        a = rng.binomial(rollouts, p) / rollouts
        b = rng.binomial(rollouts, np.minimum(1.0, 1.2 * p)) / rollouts
        ids = [str(i) for i in range(examples)]
        diff = paired_difference(
            "",
            dict(zip(ids, a.tolist())),
            dict(zip(ids, b.tolist())),
            interval=interval,  # type: ignore[arg-type]
            resamples=400,
            seed=seed,
        )
        assert diff.low is not None and diff.high is not None
        covered += diff.low <= truth <= diff.high
    return covered / DATA_SETS


def test_population_difference_by_simulation() -> None:
    p = np.random.default_rng(0).beta(2, 2, size=2_000_000)
    assert float(np.mean(np.minimum(1.0, 1.2 * p) - p)) == pytest.approx(_population_difference(), abs=2e-4)


@pytest.mark.parametrize(("examples", "rollouts"), [(10, 1), (10, 4), (20, 1), (20, 4), (50, 1)])
def test_the_t_interval_keeps_its_coverage_from_ten_examples(examples: int, rollouts: int) -> None:
    assert _coverage(examples, rollouts, "t", seed=examples * 10 + rollouts) >= 0.93


def test_the_percentile_bootstrap_undercovers_at_ten_examples() -> None:
    # Why the default changed: the same data sets, the percentile bootstrap's "95%" at n = 10.
    assert _coverage(10, 1, "bootstrap", seed=101) < 0.91
