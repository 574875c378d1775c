"""Can I trust this number? Paired intervals for two runs, and judge means corrected by labels.

Two runs of one environment usually share their examples, so the difference between them is
best read example by example: each example's rollouts are averaged first (one number per
example and run), the example's difference is B − A, and the uncertainty of the mean
difference comes from the spread of those per-example differences (rollouts of one example
are not independent draws, examples are).

The interval is Student's t interval of the mean of the per-example differences, chosen by
measured coverage: in a seeded simulation (examples of Beta(2, 2) difficulty, pass/fail
rollouts, B's pass rate 1.2x A's; `tests/harness/core/run/test_interval_coverage.py`) its nominal 95%
covered the true difference 0.94-0.96 of the time from 10 examples up, where the percentile
bootstrap of the same means covered 0.86-0.92 at 10-20 examples. The bootstrap stays available
(`interval="bootstrap"`, seeded). Below `MIN_EXAMPLES` examples no interval means much, and
the views say so; when every difference is equal there is no spread to estimate from, and the
interval is that one value, flagged (`PairedDifference.no_spread`).

A judge's mean is biased by the judge's errors. Given human labels for a random subset of a
run's rollouts, `prediction_powered_mean` corrects it (prediction-powered inference with power
tuning, PPI++: Angelopoulos et al., Science 2023, and arXiv:2311.01453): the estimate is
λ·mean(judge on the unlabelled) + mean(label − λ·judge on the labelled), with λ in [0, 1]
chosen from the data to make the interval narrowest (λ = 0 is the labels alone, 1 is plain
PPI), and a normal interval from the two parts' variances. It is checked against the
`ppi-python` package's own results in the tests. `effective_judges` says how many independent
judges a panel is worth from the correlation of their errors (the design effect).

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
from typing import TYPE_CHECKING, Literal

from harness._core.run.summary import mean_and_stderr

if TYPE_CHECKING:  # pragma: no cover
    import numpy as np
    from numpy.typing import NDArray

DEFAULT_CONFIDENCE = 0.95
DEFAULT_RESAMPLES = 4000
DEFAULT_SEED = 0
DEFAULT_ALPHA = 0.05
DEFAULT_POWER = 0.8
# Fewer examples than this in a comparison: the views warn that no interval means much.
MIN_EXAMPLES = 10
Interval = Literal["t", "bootstrap"]
INTERVALS: tuple[str, ...] = ("t", "bootstrap")
# Resampled indices are drawn in blocks of about this many, so memory stays flat for big runs.
_BLOCK = 2_000_000


@dataclass(frozen=True)
class PairedDifference:
    """B − A for one node (`path` "" is the reward) over the examples scored in both runs.

    `mean` is the mean of the per-example differences, `sd` their sample standard deviation,
    `low`..`high` the paired interval at `confidence` (`interval`: Student's "t", or the
    percentile "bootstrap" of `resamples` resamples), and `examples_needed` the number of
    examples a paired test needs to detect a difference of `mean` with `power` at `alpha`
    (None where undefined: no difference, or fewer than two pairs).
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
    interval: Interval = "t"

    @property
    def small_sample(self) -> bool:
        """Fewer than `MIN_EXAMPLES` pairs: no interval means much (the views say so)."""
        return self.num_pairs < MIN_EXAMPLES

    @property
    def no_spread(self) -> bool:
        """Every per-example difference is the same: the interval is that value, not a
        measure of uncertainty (there is no spread to estimate it from)."""
        return self.num_pairs >= 2 and self.sd == 0

    @property
    def method(self) -> str:
        """The interval's name, as the views print it."""
        if self.interval == "t":
            return f"Student's t interval ({self.num_pairs - 1} degrees of freedom)"
        return f"percentile bootstrap ({self.resamples:,} resamples of examples, seeded)"

    @property
    def excludes_zero(self) -> bool:
        """The interval lies wholly above or below 0: the runs differ beyond resampling noise."""
        if self.low is None or self.high is None or self.num_pairs < 2 or self.no_spread:
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


def t_interval(
    values: Sequence[float], *, confidence: float = DEFAULT_CONFIDENCE
) -> tuple[float, float] | None:
    """Student's t interval of the mean of `values` (None for fewer than two values).

    Args:
        values: One number per example (here: per-example differences B − A).
        confidence: The interval's nominal coverage, e.g. 0.95.

    Returns:
        (low, high) = mean ∓ t(n − 1) · sd / √n; when every value is equal (sd = 0) both ends
        are that value.

    Raises:
        ValueError: `confidence` is not between 0 and 1.
    """
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1 (e.g. 0.95), got {confidence}")
    n = len(values)
    if n < 2:
        return None
    mean, sd = _mean_sd(values)
    if sd == 0:  # the guard: no spread, and scipy's t would give NaN for a scale of 0
        return mean, mean
    from scipy.stats import t  # imported where used: `import harness` stays fast

    half = float(t.ppf((1 + confidence) / 2, n - 1)) * sd / math.sqrt(n)
    return mean - half, mean + half


def _mean_sd(values: Sequence[float]) -> tuple[float, float]:
    """The mean and sample standard deviation (n − 1) of at least two values (huge ones too:
    `mean_and_stderr` never overflows)."""
    mean, stderr = mean_and_stderr(values)
    if mean is None or stderr is None:
        return math.nan if mean is None else mean, math.nan
    return mean, stderr * math.sqrt(len(values))


@dataclass(frozen=True)
class CorrectedMean:
    """A judge's mean over a run, corrected by human labels of some of its rollouts.

    `raw_mean` (with the naive interval `raw_low`..`raw_high`, which treats the judge as the
    truth) is the judge's mean over every scored rollout; `label_mean` (`label_low`..
    `label_high`) is the labels' own mean, the classical estimate; `estimate` (`low`..`high`)
    is the prediction-powered estimate of the true mean with its interval at `confidence`.
    `power_tuning` is λ, and `effective_labels` the number of labels the classical estimate
    would need for an interval as narrow as the corrected one.
    """

    num_labels: int
    num_unlabelled: int
    confidence: float
    raw_mean: float
    raw_low: float
    raw_high: float
    label_mean: float
    label_low: float
    label_high: float
    estimate: float
    low: float
    high: float
    power_tuning: float
    effective_labels: float


def _normal_interval(centre: float, stderr: float, confidence: float) -> tuple[float, float]:
    half = NormalDist().inv_cdf((1 + confidence) / 2) * stderr
    return centre - half, centre + half


def prediction_powered_mean(
    labels: Sequence[float],
    predictions: Sequence[float],
    unlabelled: Sequence[float],
    *,
    confidence: float = DEFAULT_CONFIDENCE,
) -> CorrectedMean:
    """The judge's mean corrected by labels (PPI++ for a mean; see the module docstring).

    Args:
        labels: The human labels of the labelled rollouts, on the judge's scale (e.g. 0/1).
        predictions: The judge's scores of the same rollouts, in the same order.
        unlabelled: The judge's scores of the run's other rollouts.
        confidence: The intervals' nominal coverage.

    Returns:
        The raw, label-only and corrected estimates with their intervals.

    Raises:
        ValueError: fewer than two labels, labels and predictions of different lengths, no
            unlabelled scores, a value that is not finite, or `confidence` not in (0, 1).
    """
    import numpy as np  # imported where used: `import harness` stays fast

    y, f, u = _checked_scores(labels, predictions, unlabelled, confidence)
    n, big_n = len(y), len(u)
    every = np.concatenate([f, u])
    var_f = float(np.var(every, ddof=1)) if len(every) > 1 else 0.0
    # λ minimising the estimate's variance, clipped to [0, 1]: Cov(y, f) / ((1 + n/N) Var(f)),
    # Var(f) over every judge score (labelled and not).
    cov = float(np.mean((y - y.mean()) * (f - f.mean())))
    lam = 0.0 if var_f == 0 else min(1.0, max(0.0, cov / ((1 + n / big_n) * var_f)))
    estimate = float(lam * u.mean() + (y - lam * f).mean())
    stderr = math.sqrt(float(np.var(lam * u)) / big_n + float(np.var(y - lam * f)) / n)
    label_mean, label_stderr = float(y.mean()), math.sqrt(float(np.var(y)) / n)
    raw_mean, raw_stderr = float(every.mean()), math.sqrt(var_f / len(every))
    raw_low, raw_high = _normal_interval(raw_mean, raw_stderr, confidence)
    label_low, label_high = _normal_interval(label_mean, label_stderr, confidence)
    low, high = _normal_interval(estimate, stderr, confidence)
    return CorrectedMean(
        num_labels=n,
        num_unlabelled=big_n,
        confidence=confidence,
        raw_mean=raw_mean,
        raw_low=raw_low,
        raw_high=raw_high,
        label_mean=label_mean,
        label_low=label_low,
        label_high=label_high,
        estimate=estimate,
        low=low,
        high=high,
        power_tuning=lam,
        # Labels alone reach a standard error of sd(y)/sqrt(m); m with the corrected one's.
        effective_labels=float(np.var(y)) / stderr**2 if stderr > 0 else math.inf,
    )


def _checked_scores(
    labels: Sequence[float], predictions: Sequence[float], unlabelled: Sequence[float], confidence: float
) -> tuple[NDArray[np.float64], NDArray[np.float64], NDArray[np.float64]]:
    """The three score lists as float arrays, or a ValueError naming what is wrong with them."""
    import numpy as np  # imported where used: `import harness` stays fast

    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be between 0 and 1 (e.g. 0.95), got {confidence}")
    y, f, u = (np.asarray(v, dtype=np.float64) for v in (labels, predictions, unlabelled))
    n, big_n = len(y), len(u)
    if len(f) != n:
        raise ValueError(f"{n} labels but {len(f)} judge scores of them; give one score per label")
    if n < 2 or big_n < 1:
        raise ValueError(
            f"a corrected mean needs at least 2 labelled and 1 unlabelled rollout (got {n} and {big_n})"
        )
    if not (np.isfinite(y).all() and np.isfinite(f).all() and np.isfinite(u).all()):
        raise ValueError("labels and judge scores must be finite numbers; leave unscored rollouts out")
    return y, f, u


@dataclass(frozen=True)
class JudgePanel:
    """How many independent judges a panel of `num_judges` is worth.

    `error_correlation` is the mean correlation between two judges' errors (score − label)
    over the rollouts all of them scored, and `effective_judges` = k / (1 + (k − 1)·ρ̄) (the
    design effect): 1 when the judges err together, k when their errors are independent.
    """

    names: tuple[str, ...]
    num_rollouts: int
    error_correlation: float | None
    effective_judges: float | None

    @property
    def num_judges(self) -> int:
        return len(self.names)


def effective_judges(errors: Mapping[str, Sequence[float]]) -> JudgePanel:
    """The effective number of independent judges from each judge's errors on the same rollouts.

    Args:
        errors: Judge name -> its error (score − label) per rollout, the rollouts in one order;
            a NaN leaves that rollout out for every judge.

    Returns:
        The panel's mean error correlation and effective size (None for fewer than two judges
        or three rollouts, or a judge whose errors do not vary).
    """
    import numpy as np  # imported where used: `import harness` stays fast

    names = tuple(errors)
    table = np.asarray([errors[name] for name in names], dtype=np.float64)
    if table.ndim != 2 or len(names) < 2:
        return JudgePanel(names, table.shape[-1] if table.ndim == 2 else 0, None, None)
    table = table[:, np.isfinite(table).all(axis=0)]
    k, m = table.shape
    if m < 3 or (table.std(axis=1) == 0).any():
        return JudgePanel(names, m, None, None)
    corr = np.corrcoef(table)
    rho = float((corr.sum() - k) / (k * (k - 1)))
    return JudgePanel(names, m, rho, float(min(k, max(1.0, k / (1 + (k - 1) * rho)))))


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
    interval: Interval = "t",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> PairedDifference:
    """`PairedDifference` of per-example means `a` and `b` (example id -> mean score).

    Args:
        path: The node's dotted path ("" for the reward).
        a: Run A's mean score per example id.
        b: Run B's mean score per example id.
        confidence: The interval's nominal coverage.
        interval: "t" (Student's t, the default: it keeps its coverage from 10 examples up)
            or "bootstrap" (percentile, seeded).
        resamples: Bootstrap resamples (`interval="bootstrap"` only).
        seed: Bootstrap seed (`interval="bootstrap"` only).

    Returns:
        The difference B − A over the examples scored in both, with its interval.

    Raises:
        ValueError: an unknown `interval`, or `confidence` not between 0 and 1.
    """
    if interval not in INTERVALS:
        raise ValueError(f"interval must be one of {', '.join(map(repr, INTERVALS))}, got {interval!r}")
    values = paired_values(a, b)
    n = len(values)
    mean, stderr = mean_and_stderr(values)  # huge scores too: no fsum overflow
    sd = stderr * math.sqrt(n) if stderr is not None else None
    if interval == "t":
        bounds = t_interval(values, confidence=confidence)
        if n == 1:  # one pair: a point, as the bootstrap gives, and flagged small by the views
            bounds = (values[0], values[0])
    else:
        bounds = bootstrap_interval(values, confidence=confidence, resamples=resamples, seed=seed)
    low, high = bounds if bounds is not None else (None, None)
    needed = examples_needed(mean, sd) if mean is not None and sd is not None else None
    return PairedDifference(path, n, mean, sd, low, high, confidence, needed, resamples, interval=interval)


__all__ = [
    "DEFAULT_ALPHA",
    "DEFAULT_CONFIDENCE",
    "DEFAULT_POWER",
    "DEFAULT_RESAMPLES",
    "DEFAULT_SEED",
    "INTERVALS",
    "MIN_EXAMPLES",
    "CorrectedMean",
    "Interval",
    "JudgePanel",
    "PairedDifference",
    "bootstrap_interval",
    "effective_judges",
    "examples_needed",
    "paired_difference",
    "paired_values",
    "prediction_powered_mean",
    "t_interval",
]
