"""Score a group of rollouts of one example: group nodes first, then each member through the tree.

A group node (`rubrics._group.GroupRubric`) needs every member of the group at once, while the
rest of the tree scores one rollout at a time. So a group is scored in two phases:

1. every group node of the tree scores the whole group (its `forward(group)` returns one score
   per member); the scores wait in a table held in a context variable;
2. each member is scored through the tree as today; when the walk reaches a group node, the
   node reads its score for that member from the table (with its hooks, `on_error` and paths
   as any node), so containers mix group and per-rollout children unchanged.

A member whose episode errored (`rollout.error`) is left out: it is not scored, and each group
node records on it why ("left out of the group: the rollout errored"). Group nodes under a group
node are refused (the outer node's children are scored one rollout at a time).
"""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Protocol

from harness._core.errors import ConfigError
from harness._core.types import Rollout
from rubrics._tree.scoring import NAN, SAVED, Node, Scope, clear_scores

#: Phase 1's results while phase 2 runs: (id(rollout), node path) -> (score, the member's scope,
#: holding its failure if any).
GroupTable = dict[tuple[int, str], tuple[float, Scope]]
GROUP_TABLE: contextvars.ContextVar[GroupTable | None] = contextvars.ContextVar(
    "rubric_group_table", default=None
)
ERRORED_MEMBER = "left out of the group: the rollout errored ({error})"


class GroupedNode(Node, Protocol):
    """What group scoring needs of a rubric node (`Rubric` is one, `GroupRubric` a group node)."""

    @property
    def _group_node(self) -> bool: ...

    @property
    def _group_cache(self) -> tuple[tuple[str, GroupedNode], ...] | None: ...

    def named_rubrics(self) -> Iterator[tuple[str, GroupedNode]]: ...

    async def _score_async(self, rollout: Rollout, path: str) -> float: ...

    async def _score_members(self, path: str, members: list[Rollout], table: GroupTable) -> None: ...


def group_nodes(root: GroupedNode) -> list[tuple[str, GroupedNode]]:
    """The group nodes of `root`'s tree with their paths (cached until any tree changes shape).

    Raises:
        ConfigError: a group node sits under another group node.
    """
    cache = root._group_cache  # kept until the tree changes (`Rubric._changed`)
    if cache is not None:
        return list(cache)
    found = [(path, node) for path, node in [("", root), *root.named_rubrics()] if node._group_node]
    for path, node in found:
        for inner, child in node.named_rubrics():
            if child._group_node:
                raise ConfigError(
                    f"group node {path or node.label!r} holds another group node {inner!r}; a group node's "
                    "children are scored one rollout at a time: put the inner group node beside it instead"
                )
    root.__dict__["_group_cache"] = tuple(found)
    return found


def has_group_nodes(root: GroupedNode) -> bool:
    """Whether scoring `root` needs whole groups (any node of its tree is a group node)."""
    cache = root._group_cache
    if cache is not None:  # the per-rollout hot path asks this
        return bool(cache)
    return bool(group_nodes(root))


async def ascore_group(
    root: GroupedNode,
    rollouts: Sequence[Rollout],
    *,
    keep: bool = False,
) -> list[float]:
    """Score the rollouts of one example together; see the module docstring.

    With `keep` (a failed-only re-scoring, `Rubric.arescore_failed`), scores are not cleared
    and only the group nodes that failed on some member run again (`stale_group_nodes`).

    Returns:
        One score per rollout, in order; NaN for an errored or unscored member.
    """
    if not keep:
        for r in rollouts:
            clear_scores(r)
    return await _score_group(root, rollouts, keep)


async def _score_group(root: GroupedNode, rollouts: Sequence[Rollout], keep: bool) -> list[float]:
    members: list[Rollout] = []
    for r in rollouts:
        if r.error is None:
            members.append(r)
        elif not keep:
            r.reward = NAN
    nodes = group_nodes(root)
    if keep:
        nodes = stale_group_nodes(nodes, members)
    else:
        _mark_errored(rollouts, nodes)
    table: GroupTable = {}
    if members:
        await asyncio.gather(*(node._score_members(path, members, table) for path, node in nodes))
    token = GROUP_TABLE.set(table)
    try:
        await asyncio.gather(*(root._score_async(r, "") for r in members))
    finally:
        GROUP_TABLE.reset(token)
    # Group nodes' children were scored first (phase 1): put each rollout's scores in tree order.
    order = {path: i for i, (path, _) in enumerate(root.named_rubrics())}
    for r in members:
        r.scores = dict(sorted(r.scores.items(), key=lambda item: order.get(item[0], len(order))))
    return [r.reward for r in rollouts]


def stale_group_nodes(
    nodes: list[tuple[str, GroupedNode]], members: list[Rollout]
) -> list[tuple[str, GroupedNode]]:
    """The group nodes a failed-only re-scoring runs again: those that failed on any member.

    Their comparison changes for every member, so their saved scores, and those of the nodes
    above them, are dropped on all members (the rest of the saved scores stay)."""
    saved = SAVED.get() or {}
    stale = [(p, n) for p, n in nodes if any(p not in saved.get(id(r), {}) for r in members)]
    for path, _ in stale:
        parts = path.split(".") if path else []
        above = ["", *(".".join(parts[: i + 1]) for i in range(len(parts)))]
        for r in members:
            kept = saved.get(id(r), {})
            for q in above:
                kept.pop(q, None)
                r.score_errors.pop(q, None)
                r.score_details.pop(q, None)
                if q:
                    r.scores.pop(q, None)
    return stale


def _mark_errored(rollouts: Iterable[Rollout], nodes: list[tuple[str, GroupedNode]]) -> None:
    for r in rollouts:
        if r.error is not None:
            for path, _ in nodes:
                if path:
                    r.scores[path] = NAN
                r.score_errors[path] = ERRORED_MEMBER.format(error=r.error[:200])


def split_groups(rollouts: Sequence[Rollout]) -> list[list[Rollout]]:
    """Rollouts grouped by `example_id`, groups in order of first appearance."""
    groups: dict[Any, list[Rollout]] = {}
    for r in rollouts:
        groups.setdefault(r.example_id, []).append(r)
    return list(groups.values())


async def ascore_groups(
    root: GroupedNode, rollouts: Sequence[Rollout], concurrency: int, *, keep: bool = False
) -> None:
    """Score a batch by groups of `example_id`, at most `concurrency` groups at once."""
    semaphore = asyncio.Semaphore(concurrency)

    async def one(group: list[Rollout]) -> None:
        async with semaphore:
            await ascore_group(root, group, keep=keep)

    await asyncio.gather(*(one(g) for g in split_groups(rollouts)))


__all__ = [
    "GROUP_TABLE",
    "ascore_group",
    "ascore_groups",
    "group_nodes",
    "has_group_nodes",
    "split_groups",
    "stale_group_nodes",
]
