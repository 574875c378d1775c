"""Can I trust this difference? Paired bootstrap intervals and sample sizes for two runs.

Two runs of one environment usually share their examples, so the difference between them is
best read example by example: each example's rollouts are averaged first (one number per
example and run), the example's difference is B − A, and the uncertainty of the mean
difference comes from resampling *examples* with replacement (a paired bootstrap; rollouts of
one example are not independent draws, examples are). The interval is the percentile
interval of the resampled means, seeded, so the same runs always give the same interval.

How many examples would a difference this size need? For a paired comparison with standard
deviation `sd` of the per-example differences, a two-sided test at level `alpha` detects a true
mean difference `d` with probability `power` once

    n >= ((z(1 - alpha/2) + z(power)) * sd / d) ** 2

(the normal approximation to the paired t-test; z is the standard normal quantile). Both
numbers are computed here and drawn by every view of a comparison.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from statistics import NormalDist

from harness.results.summary import mean_and_stderr

DEFAULT_CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 4000
DEFAULT_SEED = 0
DEFAULT_ALPHA = 0.05
DEFAULT_POWER = 0.8
# Resampled indices are drawn in blocks of about this many, so memory stays flat for big runs.
_BLOCK = 2_000_000


@dataclass(frozen=True)
class PairedDifference:
    """B − A for one node (`path` "" is the reward) over the examples scored in both runs.

    `mean` is the mean of the per-example differences, `sd` their sample standard deviation,
    `low`..`high` the paired bootstrap interval at `confidence`, and `examples_needed` the
    number of examples a paired test needs to detect a difference of `mean` with `power` at
    `alpha` (None where undefined: no difference, or fewer than two pairs).
    """

    path: str
    num_pairs: int
    mean: float | None
    sd: float | None
    low: float | None
    high: float | None
    confidence: float
    examples_needed: int | None
    resamples: int = DEFAULT_RESAMPLES
    alpha: float = DEFAULT_ALPHA
    power: float = DEFAULT_POWER

    @property
    def excludes_zero(self) -> bool:
        """The interval lies wholly above or below 0: the runs differ beyond resampling noise."""
        if self.low is None or self.high is None or self.num_pairs < 2:
            return False
        return self.low > 0 or self.high < 0


def paired_values(a: Mapping[str, float], b: Mapping[str, float]) -> list[float]:
    """B − A for each example id in both mappings whose two values are scored (not NaN),
    in the order of `a`."""
    return [b[k] - v for k, v in a.items() if k in b and not math.isnan(v) and not math.isnan(b[k])]


def bootstrap_interval(
    values: Sequence[float],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> tuple[float, float] | None:
    """The percentile bootstrap interval of the mean of `values` (None for no values).

    Args:
        values: One number per example (here: per-example differences B − A).
        confidence: Share of the resampled means inside the interval, e.g. 0.95.
        resamples: How many resamples of len(values) values, drawn with replacement.
        seed: Seed of the generator (numpy's PCG64): the same inputs give the same interval.

    Returns:
        (low, high): the (1 − confidence)/2 and (1 + confidence)/2 quantiles of the means.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1 (e.g. 0.95), got {confidence}")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1 (e.g. {DEFAULT_RESAMPLES}), got {resamples}")
    import numpy as np  # imported where used: `import harness` (which loads the views) stays fast

    data = np.asarray(values, dtype=np.float64)
    n = len(data)
    if n == 0:
        return None
    rng = np.random.default_rng(seed)
    means = np.empty(resamples)
    step = max(1, _BLOCK // n)
    for start in range(0, resamples, step):
        count = min(step, resamples - start)
        drawn = data[rng.integers(0, n, size=(count, n), dtype=np.int32)]
        with np.errstate(over="ignore"):  # huge scores: a resampled mean beyond the float range is inf
            means[start : start + count] = drawn.mean(axis=1)
    tail = (1 - confidence) / 2
    low, high = np.quantile(means, [tail, 1 - tail])
    return float(low), float(high)


def examples_needed(
    difference: float, sd: float, *, alpha: float = DEFAULT_ALPHA, power: float = DEFAULT_POWER
) -> int | None:
    """Examples a paired two-sided test needs to detect `difference` (see the module docstring).

    Args:
        difference: The mean per-example difference to detect (its sign does not matter).
        sd: Standard deviation of the per-example differences.
        alpha: The test's level (false-positive rate).
        power: Chance of detecting a true difference of this size.

    Returns:
        The smallest such n (at least 2), or None when `difference` is 0 (no n suffices).
    """
    if not 0 < alpha < 1 or not 0 < power < 1:
        raise ValueError(f"alpha and power must be between 0 and 1, got alpha={alpha}, power={power}")
    if difference == 0 or math.isnan(difference) or math.isnan(sd):
        return None
    z = NormalDist().inv_cdf
    n = ((z(1 - alpha / 2) + z(power)) * sd / difference) ** 2
    return max(2, math.ceil(n - 1e-9))  # the epsilon keeps an exact integer from rounding up


def paired_difference(
    path: str,
    a: Mapping[str, float],
    b: Mapping[str, float],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> PairedDifference:
    """`PairedDifference` of per-example means `a` and `b` (example id -> mean score)."""
    values = paired_values(a, b)
    n = len(values)
    mean, stderr = mean_and_stderr(values)  # huge scores too: no fsum overflow
    sd = stderr * math.sqrt(n) if stderr is not None else None
    interval = bootstrap_interval(values, confidence=confidence, resamples=resamples, seed=seed)
    low, high = interval if interval is not None else (None, None)
    needed = examples_needed(mean, sd) if mean is not None and sd is not None else None
    return PairedDifference(path, n, mean, sd, low, high, confidence, needed, resamples)


__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_CONFIDENCE",
    "DEFAULT_POWER",
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "PairedDifference",
    "bootstrap_interval",
    "examples_needed",
    "paired_difference",
    "paired_values",
]
