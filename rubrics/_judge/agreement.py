"""How far two raters agree: accuracy, Cohen's kappa, Spearman's rho, MAE, a confusion table.

Plain standard-library statistics over paired lists (a human's label and a judge's verdict per
item), used by `rubrics.calibration`. A figure that is undefined for the data (kappa when
both raters give one class only, rho when either is constant, anything over no items) is None,
never a made-up 0 or 1.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Hashable, Sequence


def accuracy(truth: Sequence[Hashable], predicted: Sequence[Hashable]) -> float | None:
    """Share of items where the two agree exactly (None for no items)."""
    _same_length(truth, predicted)
    return sum(t == p for t, p in zip(truth, predicted)) / len(truth) if truth else None


def cohen_kappa(truth: Sequence[Hashable], predicted: Sequence[Hashable]) -> float | None:
    """Cohen's kappa: (p_o − p_e) / (1 − p_e), agreement beyond what chance would give.

    p_o is the observed agreement and p_e = Σ_k p_truth(k) · p_predicted(k) the agreement of
    two raters who kept their own label frequencies but chose independently. None when
    p_e = 1 (both raters always give the same single class: nothing to measure).
    """
    observed = accuracy(truth, predicted)
    if observed is None:
        return None
    n = len(truth)
    counts_t, counts_p = Counter(truth), Counter(predicted)
    expected = math.fsum(counts_t[k] * counts_p[k] for k in counts_t) / (n * n)
    if expected >= 1 - 1e-12:
        return None
    return (observed - expected) / (1 - expected)


def ranks(values: Sequence[float]) -> list[float]:
    """1-based ranks, ties sharing the mean of the ranks they span ([3, 1, 3] -> [2.5, 1, 2.5])."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    result = [0.0] * len(values)
    start = 0
    while start < len(order):
        end = start
        while end + 1 < len(order) and values[order[end + 1]] == values[order[start]]:
            end += 1
        shared = (start + end) / 2 + 1
        for i in order[start : end + 1]:
            result[i] = shared
        start = end + 1
    return result


def pearson(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Pearson's correlation (None for fewer than two items or a constant list)."""
    _same_length(x, y)
    n = len(x)
    if n < 2:
        return None
    mx, my = math.fsum(x) / n, math.fsum(y) / n
    sxy = math.fsum((a - mx) * (b - my) for a, b in zip(x, y))
    sxx = math.fsum((a - mx) ** 2 for a in x)
    syy = math.fsum((b - my) ** 2 for b in y)
    if sxx == 0 or syy == 0:
        return None
    return sxy / math.sqrt(sxx * syy)


def spearman_rho(x: Sequence[float], y: Sequence[float]) -> float | None:
    """Spearman's rho: Pearson's correlation of the ranks (ties get mean ranks)."""
    return pearson(ranks(x), ranks(y))


def mean_abs_error(truth: Sequence[float], predicted: Sequence[float]) -> float | None:
    """Mean of |predicted − truth| (None for no items)."""
    _same_length(truth, predicted)
    return math.fsum(abs(p - t) for t, p in zip(truth, predicted)) / len(truth) if truth else None


def confusion(
    truth: Sequence[Hashable], predicted: Sequence[Hashable], classes: Sequence[Hashable]
) -> tuple[tuple[int, ...], ...]:
    """Counts with one row per true class and one column per predicted class, in `classes` order."""
    _same_length(truth, predicted)
    index = {c: i for i, c in enumerate(classes)}
    table = [[0] * len(classes) for _ in classes]
    for t, p in zip(truth, predicted):
        table[index[t]][index[p]] += 1
    return tuple(tuple(row) for row in table)


def _same_length(a: Sequence[object], b: Sequence[object]) -> None:
    if len(a) != len(b):
        raise ValueError(f"paired ratings need equal lengths, got {len(a)} and {len(b)}")


__all__ = [
    "accuracy",
    "cohen_kappa",
    "confusion",
    "mean_abs_error",
    "pearson",
    "ranks",
    "spearman_rho",
]
