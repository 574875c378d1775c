"""Score again only the nodes that failed on scored rollouts, keeping every score that stands.

`rubric score --failed-only`: a judge was down for part of a run, and re-running the whole tree
would pay every judge again and could change scores that were fine. Here the rollouts keep
their scores: while `rescore_failed` runs, a node whose saved score is finite returns it
without running (`rubrics._tree.scoring.saved_score`, checked at the top of the scoring engine), and
only failed nodes, and the nodes above them, run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from harness._core.types import Rollout
from rubrics._tree.grouping import GroupedNode, ascore_groups, has_group_nodes
from rubrics._tree.scoring import SAVED, keep_scored


def failed_rollouts(root: GroupedNode, rollouts: Iterable[Rollout]) -> list[Rollout]:
    """The rollouts to score again: scored ones (no episode error) with a NaN node or reward;
    with group nodes, every member of a group with such a rollout (its comparison may change)."""
    items = [r for r in rollouts if r.error is None]
    failed = [r for r in items if not (r.reward == r.reward and all(v == v for v in r.scores.values()))]
    if has_group_nodes(root):
        touched = {r.example_id for r in failed}
        failed = [r for r in items if r.example_id in touched]
    return failed


async def rescore_failed(root: GroupedNode, rollouts: Iterable[Rollout], concurrency: int) -> None:
    """See `Rubric.arescore_failed`."""
    items = failed_rollouts(root, rollouts)
    saved = {id(r): keep_scored(r) for r in items}
    token = SAVED.set(saved)
    try:
        if has_group_nodes(root):
            await ascore_groups(root, items, concurrency, keep=True)
        else:
            semaphore = asyncio.Semaphore(concurrency)

            async def one(r: Rollout) -> None:
                async with semaphore:
                    await root._score_async(r, "")

            await asyncio.gather(*(one(r) for r in items))
    finally:
        SAVED.reset(token)


__all__ = ["failed_rollouts", "rescore_failed"]
