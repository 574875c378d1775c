"""Two runs of one environment compared: what `rubric view A B` prints and its HTML page shows.

The numbers are computed once here and drawn by both views (`harness._views.terminal` in the terminal,
`harness._views.report` in the browser), so the two can never disagree: each node's mean in each run
with the difference, per example the reward change and the nodes that flipped, and for runs that
share examples the paired interval of each difference (Student's t by default, chosen by
measured coverage) with the examples a paired test would need to detect it (`harness._core.run.stats`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar

from harness._core.display import HtmlRepr
from harness._core.errors import ResultsError
from harness._core.run.stats import (
    DEFAULT_CONFIDENCE,
    DEFAULT_RESAMPLES,
    DEFAULT_SEED,
    Interval,
    PairedDifference,
    paired_difference,
)
from harness._core.run.storage import section
from harness._core.run.summary import mean_and_stderr
from harness._core.tree import place_paths
from harness._results.eval_results import EvalResults

# A node "flips" between runs when its mean for an example crosses this line (or turns NaN).
FLIP_THRESHOLD = 0.5


@dataclass(frozen=True)
class NodeDelta:
    """One node's mean (± standard error) over each run's scored rollouts; `path` "" is the reward."""

    path: str
    mean_a: float | None
    stderr_a: float | None
    mean_b: float | None
    stderr_b: float | None

    @property
    def delta(self) -> float | None:
        return None if self.mean_a is None or self.mean_b is None else self.mean_b - self.mean_a


@dataclass(frozen=True)
class NodeChange:
    """A node whose mean for one example differs between the runs (NaN when unscored there)."""

    path: str
    a: float
    b: float
    flipped: bool


@dataclass(frozen=True)
class ExampleDelta:
    """One example in both runs: mean rewards, the nodes that changed, and its rollouts' positions."""

    example: str
    reward_a: float
    reward_b: float
    changes: tuple[NodeChange, ...]
    rollouts_a: tuple[int, ...]
    rollouts_b: tuple[int, ...]

    @property
    def delta(self) -> float | None:
        return (
            None if math.isnan(self.reward_a) or math.isnan(self.reward_b) else self.reward_b - self.reward_a
        )

    @property
    def flipped(self) -> bool:
        """A node's mean crossed `FLIP_THRESHOLD` (or became / stopped being NaN), as the HTML
        page's "with a flipped node" filter."""
        return any(c.flipped for c in self.changes)


@dataclass(frozen=True)
class Comparison(HtmlRepr):
    """Run A against run B, node by node and example by example.

    In a notebook the comparison draws itself as a table; `rubric view A B` prints it.

    Attributes:
        a: The baseline run.
        b: The run compared with it.
        paths: The node paths compared, the reward ("") first.
        nodes: Each node's means in both runs and their difference.
        examples: Each shared example's reward in both runs, and whether it flipped.
        differences: In the order of `nodes`, each paired difference over the examples both
            runs scored, with its interval.
    """

    html_kind: ClassVar[str] = "comparison"

    a: EvalResults
    b: EvalResults
    paths: tuple[str, ...]
    nodes: tuple[NodeDelta, ...]
    examples: tuple[ExampleDelta, ...]
    differences: tuple[PairedDifference, ...] = ()

    @property
    def num_shared(self) -> int:
        """Examples present in both runs."""
        return len(
            {str(r.example_id) for r in self.a.rollouts} & {str(r.example_id) for r in self.b.rollouts}
        )

    @property
    def flipped(self) -> list[ExampleDelta]:
        """The examples that flipped, largest reward change first (NaN changes first of all)."""
        chosen = [e for e in self.examples if e.flipped]
        return sorted(chosen, key=lambda e: -math.inf if e.delta is None else -abs(e.delta))


def flipped(before: float, after: float) -> bool:
    if math.isnan(before) or math.isnan(after):
        return math.isnan(before) != math.isnan(after)
    return (before >= FLIP_THRESHOLD) != (after >= FLIP_THRESHOLD)


def node_paths(results: EvalResults) -> list[str]:
    """The run's node paths in tree order (as its summary lists them), any others under their
    parent."""
    return place_paths(results.summary.node_means, sorted({p for r in results.rollouts for p in r.scores}))


def _mean(values: Sequence[float]) -> float:
    kept = [v for v in values if not math.isnan(v)]
    mean = mean_and_stderr(kept)[0]  # huge scores too: no fsum overflow
    return math.nan if mean is None else mean


def _by_example(results: EvalResults) -> dict[str, list[int]]:
    groups: dict[str, list[int]] = {}
    for i, r in enumerate(results.rollouts):
        groups.setdefault(str(r.example_id), []).append(i)
    return groups


def _node_delta(a: EvalResults, b: EvalResults, path: str) -> NodeDelta:
    stats = []
    for results in (a, b):
        scores = [r.reward if not path else r.scores.get(path, math.nan) for r in results.rollouts]
        stats.append(mean_and_stderr([s for s in scores if not math.isnan(s)]))
    (mean_a, stderr_a), (mean_b, stderr_b) = stats
    return NodeDelta(path, mean_a, stderr_a, mean_b, stderr_b)


def _example_delta(
    a: EvalResults, b: EvalResults, example: str, ia: list[int], ib: list[int], paths: Sequence[str]
) -> ExampleDelta:
    changes = []
    for path in paths:
        na = _mean([a.rollouts[i].scores.get(path, math.nan) for i in ia])
        nb = _mean([b.rollouts[i].scores.get(path, math.nan) for i in ib])
        if flipped(na, nb) or (not math.isnan(na) and not math.isnan(nb) and abs(nb - na) > 1e-9):
            changes.append(NodeChange(path, na, nb, flipped(na, nb)))
    reward_a = _mean([a.rollouts[i].reward for i in ia])
    reward_b = _mean([b.rollouts[i].reward for i in ib])
    return ExampleDelta(example, reward_a, reward_b, tuple(changes), tuple(ia), tuple(ib))


def _example_means(results: EvalResults, groups: dict[str, list[int]], path: str) -> dict[str, float]:
    """Each example's mean score of node `path` ("" the reward) over its scored rollouts."""
    rollouts = results.rollouts
    return {
        e: _mean([rollouts[i].reward if not path else rollouts[i].scores.get(path, math.nan) for i in ids])
        for e, ids in groups.items()
    }


def _check_comparable(a: EvalResults, b: EvalResults) -> None:
    """Refuse runs of two environments: their examples and rubrics differ, so the tables would
    be NaN and every shared example id a meaningless flip. Runs that do not record their
    environment (results built in memory) are compared as they are."""
    names = [section(run.metadata, "env").get("name") for run in (a, b)]
    if all(isinstance(name, str) and name for name in names) and names[0] != names[1]:
        raise ResultsError(
            f"run A is of environment {names[0]!r} and run B of {names[1]!r}: their examples and "
            f"rubrics differ, so there is nothing to compare; compare two runs of one environment, "
            f"or view each on its own"
        )


def compare(
    a: EvalResults,
    b: EvalResults,
    *,
    confidence: float = DEFAULT_CONFIDENCE,
    interval: Interval = "t",
    resamples: int = DEFAULT_RESAMPLES,
    seed: int = DEFAULT_SEED,
) -> Comparison:
    """Compare run A with run B (B − A); examples are matched by `example_id`.

    Args:
        a: The baseline run.
        b: The run compared with it.
        confidence: Nominal coverage of each paired interval.
        interval: "t" (Student's t over the per-example differences; it keeps its coverage
            from 10 examples up) or "bootstrap" (the percentile bootstrap of examples).
        resamples: Bootstrap resamples of the shared examples (`interval="bootstrap"`).
        seed: Seed of the resampling, so a comparison is reproducible (`interval="bootstrap"`).

    Returns:
        The comparison; `differences` are paired over the examples both runs scored, each
        example's rollouts averaged first.

    Raises:
        ResultsError: the runs are of two different environments (by their metadata).
    """
    _check_comparable(a, b)
    paths = tuple(dict.fromkeys([*node_paths(a), *node_paths(b)]))
    nodes = tuple(_node_delta(a, b, path) for path in ("", *paths))
    groups_a, groups_b = _by_example(a), _by_example(b)
    order = [*groups_a, *(e for e in groups_b if e not in groups_a)]
    examples = tuple(_example_delta(a, b, e, groups_a.get(e, []), groups_b.get(e, []), paths) for e in order)
    differences = tuple(
        paired_difference(
            path,
            _example_means(a, groups_a, path),
            _example_means(b, groups_b, path),
            confidence=confidence,
            interval=interval,
            resamples=resamples,
            seed=seed,
        )
        for path in ("", *paths)
    )
    return Comparison(a, b, paths, nodes, examples, differences)


__all__ = [
    "FLIP_THRESHOLD",
    "Comparison",
    "ExampleDelta",
    "NodeChange",
    "NodeDelta",
    "compare",
    "flipped",
    "node_paths",
]
