"""`ScoredBatch`: what `Rubric.score_batch` returns, the rewards plus why each scored what it did.

It is a list of the rewards, so code that wants floats (TRL's reward functions, `sum(...)`,
`== [1.0, 0.0]`) keeps working; besides, it holds the scored rollouts with every node's score
and NaN reason, in the order of the rubric tree. Plain dicts given to `score_batch` become
`Rollout`s here, so their per-node scores are not lost.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, SupportsIndex, overload

from harness._core.display import render_html
from harness._core.run.summary import Summary, summarize
from harness._core.tree import TreeNode, tree_paths
from harness._core.types import CONVERSATION_COLUMNS, Rollout, conversation_columns

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd


class ScoredBatch(list[float]):
    """The rewards of a batch (a `list[float]`, NaN for an unscored item) with their rollouts.

    Attributes:
        rollouts: The scored rollouts, in input order: `reward`, `scores` (node path -> score)
            and `score_errors` (node path -> why it is NaN).
        nodes: The rubric tree that scored them, parents first (for tree-ordered columns).
    """

    def __init__(self, rollouts: Iterable[Rollout], nodes: Sequence[TreeNode]) -> None:
        self.rollouts: list[Rollout] = list(rollouts)
        self.nodes: list[TreeNode] = list(nodes)
        super().__init__(r.reward for r in self.rollouts)

    @property
    def paths(self) -> list[str]:
        """Node paths in tree order (the root, "", excluded), then any others that scored."""
        paths = tree_paths(self.nodes)
        seen = set(paths)
        for r in self.rollouts:
            for path in r.scores:
                if path and path not in seen:
                    seen.add(path)
                    paths.append(path)
        return paths

    @property
    def scores(self) -> list[dict[str, float]]:
        """Every item's node scores (path -> score, NaN where the node failed)."""
        return [dict(r.scores) for r in self.rollouts]

    @property
    def errors(self) -> list[dict[str, str]]:
        """Every item's NaN reasons (node path -> reason); empty for a fully scored item."""
        return [dict(r.score_errors) for r in self.rollouts]

    @property
    def summary(self) -> Summary:
        """Mean reward and per-node means (tree order) with standard errors, unscored reasons."""
        return summarize(self.rollouts, node_order=self.paths)

    def to_pandas(self) -> pd.DataFrame:
        """One row per item: `reward`, one column per node path in tree order (NaN where the
        node failed), `nan_reasons` (path -> reason), then `response`, `answer` as given,
        `task`, `info`, and `prompt` / `completion` as lists of message dicts."""
        import pandas as pd  # comes with `datasets`; imported here so importing rubrics stays fast

        paths = self.paths
        rows = []
        for r in self.rollouts:
            row: dict[str, Any] = {"reward": r.reward}
            row.update({p: r.scores.get(p, math.nan) for p in paths})
            row["nan_reasons"] = dict(r.score_errors)
            row.update(conversation_columns(r))
            rows.append(row)
        columns = ["reward", *paths, "nan_reasons", *CONVERSATION_COLUMNS]
        return pd.DataFrame(rows, columns=columns)

    def _repr_html_(self) -> str | None:
        """The batch's summary (node means in tree order, NaN reasons), reward histogram, and
        a table of the first items: reward, every node's score in tree order, NaN reasons."""
        return render_html("scored_batch", self, self.rollouts, self.summary, self.nodes, self.paths)

    @overload
    def __getitem__(self, index: SupportsIndex) -> float: ...

    @overload
    def __getitem__(self, index: slice) -> ScoredBatch: ...

    def __getitem__(self, index: SupportsIndex | slice) -> float | ScoredBatch:
        if isinstance(index, slice):
            return ScoredBatch(self.rollouts[index], self.nodes)
        return super().__getitem__(index)

    def __reduce__(self) -> tuple[Any, ...]:
        return (ScoredBatch, (self.rollouts, self.nodes))


__all__ = ["ScoredBatch"]
