"""Group nodes: rubric nodes that score the rollouts of one example together, and `relative()`.

GRPO learns from the differences between completions of one prompt. A `GroupRubric` sees the
whole group (the `-r K` rollouts of `rubric eval`, the `num_generations` completions of a
prompt in TRL) and returns one score per member; each member's score is recorded under the
node's path on that member, as for any node, so containers mix group and per-rollout children.
How a group is scored (group nodes first, then each member through the tree) is in
`rubrics._tree.grouping`.

Failures never poison a group: a member the node cannot score is NaN with its reason and is
left out of the group's statistics, and the node records on every member how many members
were compared (`score_details[path]["scored_members"]`).
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, ClassVar, Literal, get_args

from harness._core.aio import run_sync
from harness._core.errors import ConfigError, ConfigTypeError, ScoringError
from harness._core.types import Rollout
from rubrics._leaf import as_rubric
from rubrics._tree.grouping import GROUP_TABLE, GroupTable
from rubrics._tree.module import NAN, Rubric, coerce_sync, snake_name
from rubrics._tree.scoring import MEMBER_SCOPES, SAVED, SCOPE, Scope, path_under, saved_score

#: How `relative` turns a group's scores into rewards.
RelativeMethod = Literal["rank", "zscore"]
RELATIVE_METHODS: tuple[RelativeMethod, ...] = get_args(RelativeMethod)


class GroupRubric(Rubric):
    """A node that scores a group of rollouts of the same example together.

    Subclass it and implement `forward(self, group) -> list[float]` (def or async def): `group`
    is the list of scored-able members (rollouts whose episode errored are left out before), and
    the result holds one score per member, in order. Inside forward:

    - `self.record_error(member, reason)` marks one member unscored (NaN with the reason);
      raising marks the whole group unscored with the exception as the reason;
    - `self.record_detail(member, {...})` keeps what explains a member's score;
    - `await self.ascore_child(child, member)` (or `self.score_child(child, member)` in a sync
      forward) scores a registered child on one member, its score recorded under the child's
      path (`child(member)` and `await child.ascore(member)` do the same).

    Scored alone (`node(rollout)`, `score_batch` of rollouts with distinct `example_id`s), a
    rollout is a group of one. Hooks of a group node run per member; its pre-hooks must be sync.

    Args:
        name: the node's name among its parent's children (default: from the class).
        on_error: the score given when this node fails (default NaN, "unscored", with the reason
            kept).
    """

    _group_node: ClassVar[bool] = True

    def __init__(self, *, name: str | None = None, on_error: float | None = None) -> None:
        if type(self).forward is GroupRubric.forward:
            raise ConfigTypeError(
                f"{type(self).__name__} must define forward(self, group) -> list[float] (def or async def): "
                "one score per member of the group"
            )
        super().__init__(name=name, on_error=on_error)

    def forward(self, group: list[Rollout]) -> Sequence[float] | Awaitable[Sequence[float]]:  # type: ignore[override]
        """Score every member of `group`; subclasses implement this."""
        raise NotImplementedError

    def _group_is_async(self) -> bool:
        """Whether scoring a group waits on I/O (a judge): TRL then gets an async reward."""
        return inspect.iscoroutinefunction(self.forward)

    # ------------------------------------------------------------------ phase 1: the group
    async def _score_members(self, path: str, members: list[Rollout], table: GroupTable) -> None:
        """Run `forward(members)` once and put each member's score and scope in `table`."""
        scopes = {id(r): Scope(self, path, r) for r in members}
        token = MEMBER_SCOPES.set(scopes)
        try:
            raw: Any = self.forward(list(members))
            if inspect.isawaitable(raw):
                raw = await raw
            scores = self._check_scores(raw, len(members))
        except Exception as exc:  # the whole group is unscored, each member with the reason
            scores = [NAN] * len(members)
            for scope in scopes.values():
                scope.fail(exc)
        finally:
            MEMBER_SCOPES.reset(token)
        for r, score in zip(members, scores):
            table[(id(r), path)] = (score, scopes[id(r)])

    def _check_scores(self, raw: Any, size: int) -> list[float]:
        if isinstance(raw, (str, bytes)) or not isinstance(raw, Sequence):
            raise ScoringError(
                f"{self.label} returned {type(raw).__name__}; a group node returns a list with one score per member"
            )
        if len(raw) != size:
            raise ScoringError(f"{self.label} returned {len(raw)} scores for a group of {size}")
        scores = []
        for value in raw:
            if isinstance(value, (str, bytes)) or value is None:
                raise ScoringError(f"{self.label} returned {value!r} for a member; scores must be numbers")
            scores.append(float(value))
        return scores

    def score_child(self, child: Rubric, member: Rollout) -> float:
        """From inside a sync `forward`: score registered (sync) `child` on one member."""
        scope = self._own_scope(member, "score_child")
        token = SCOPE.set(scope)
        try:
            return child._score_sync(member, path_under(scope, child))
        finally:
            SCOPE.reset(token)

    async def ascore_child(self, child: Rubric, member: Rollout) -> float:
        """From inside `forward`: score registered `child` on one member of the group."""
        scope = self._own_scope(member, "ascore_child")
        token = SCOPE.set(scope)
        try:
            return await child._score_async(member, path_under(scope, child))
        finally:
            SCOPE.reset(token)

    def _own_scope(self, rollout: Rollout, what: str) -> Scope:
        scopes = MEMBER_SCOPES.get()
        scope = scopes.get(id(rollout)) if scopes is not None else None
        if scope is not None and scope.node is self:
            return scope
        return super()._own_scope(rollout, what)

    # ------------------------------------------------------------------ phase 2: one member
    def _own_is_async(self) -> bool:
        return False  # per member, a group node reads its score from the group's table

    def _entry(self, rollout: Rollout, path: str) -> tuple[float, Scope] | None:
        table = GROUP_TABLE.get()
        return table.get((id(rollout), path)) if table is not None else None

    def _score_sync(self, rollout: Rollout, path: str) -> float:
        entry = self._entry(rollout, path)
        if entry is None and SAVED.get() is not None and (kept := saved_score(rollout, path)) is not None:
            return kept  # a failed-only re-scoring that did not need this node again
        if entry is None:  # called outside a group (from a custom forward): a group of one
            table: GroupTable = {}
            run_sync(self._score_members(path, [rollout], table))
            entry = table[(id(rollout), path)]
        recorded = self._finish_member(rollout, path, entry)
        return recorded if type(recorded) is float else coerce_sync(recorded, self)

    async def _score_async(self, rollout: Rollout, path: str) -> float:
        entry = self._entry(rollout, path)
        if entry is None and SAVED.get() is not None and (kept := saved_score(rollout, path)) is not None:
            return kept
        if entry is None:
            table: GroupTable = {}
            await self._score_members(path, [rollout], table)
            entry = table[(id(rollout), path)]
        recorded = self._finish_member(rollout, path, entry)
        return recorded if isinstance(recorded, float) else await recorded

    def _finish_member(
        self, rollout: Rollout, path: str, entry: tuple[float, Scope]
    ) -> float | Awaitable[float]:
        """Record one member's group score as the node's score (`Rubric._record`: hooks,
        `on_error`, paths), after the pre-hooks, which run per member and must be sync."""
        score, found = entry
        scope = Scope(self, path, rollout)
        scope.exc = found.exc
        token = SCOPE.set(scope)
        try:
            try:
                for pre in tuple(self._pre_hooks.values()):
                    result = pre(self, rollout)
                    if inspect.isawaitable(result):
                        if inspect.iscoroutine(result):
                            result.close()
                        raise TypeError(f"pre-hooks on group node {self.label} must be sync functions")
            except Exception as exc:
                score = scope.fail(exc)
            return self._record(rollout, path, score, scope.exc, None)
        finally:
            SCOPE.reset(token)


def relative_scores(values: Sequence[float], method: RelativeMethod = "rank") -> list[float]:
    """Each value relative to the others (non-finite values are left out and stay NaN).

    Args:
        values: one score per member.
        method: "rank": the fraction of the other scored members this one beats, ties
            counting half, so scores lie in [0, 1] and tied members share the mid-rank;
            "zscore": (value - mean) / population std.

    Returns:
        One score per member. Fewer than two scored members, or all scored members equal,
        gives the neutral score (0.5 for rank, 0.0 for zscore): nothing to learn from them.
    """
    if method not in RELATIVE_METHODS:
        raise ConfigError(f"relative method must be one of {RELATIVE_METHODS}, got {method!r}")
    scored = [v for v in values if math.isfinite(v)]
    n = len(scored)
    if method == "rank":
        if n < 2:
            return [0.5 if math.isfinite(v) else NAN for v in values]
        out = []
        for v in values:
            if not math.isfinite(v):
                out.append(NAN)
                continue
            below = sum(1 for w in scored if w < v)
            ties = sum(1 for w in scored if w == v) - 1
            out.append((below + 0.5 * ties) / (n - 1))
        return out
    mean = sum(scored) / n if n else 0.0
    std = math.sqrt(sum((v - mean) ** 2 for v in scored) / n) if n else 0.0
    return [NAN if not math.isfinite(v) else (v - mean) / std if std > 0 else 0.0 for v in values]


class Relative(GroupRubric):
    """A per-rollout node's score made relative to its group (see `relative_scores`).

    The child is scored on every member (recorded under `<path>.<child name>`); a member the
    child could not score is NaN here too and is left out of the others' ranks and statistics.

    Args:
        rubric: the node scored on each member (a plain function becomes a `reward` leaf).
        method: "rank" or "zscore", as for `relative`.
        name: the node's name among its parent's children (default: from the class).
        on_error: the score given when this node fails (default NaN, "unscored", with the reason
            kept).
    """

    config_fields = ("method",)
    _method: RelativeMethod

    def __init__(
        self,
        rubric: Rubric | Callable[..., Any],
        method: RelativeMethod = "rank",
        *,
        name: str | None = None,
        on_error: float | None = None,
    ) -> None:
        super().__init__(name=name, on_error=on_error)
        self.method = method
        child = as_rubric(rubric, "relative(rubric)")
        self.add_rubric(child.name or snake_name(type(child).__name__), child)

    @property
    def method(self) -> RelativeMethod:
        """ "rank" (the default) or "zscore"."""
        return self._method

    @method.setter
    def method(self, value: RelativeMethod) -> None:
        if value not in RELATIVE_METHODS:
            raise ConfigError(f"relative method must be one of {RELATIVE_METHODS}, got {value!r}")
        self.__dict__["_method"] = value

    def _group_is_async(self) -> bool:
        return not all(child._is_sync_tree() for child in self.children())

    async def forward(self, group: list[Rollout]) -> list[float]:  # type: ignore[override]
        ((_, child),) = self.named_children()
        values = await asyncio.gather(*(self.ascore_child(child, r) for r in group))
        scored = sum(1 for v in values if math.isfinite(v))
        for r in group:
            self.record_detail(r, {"group_size": len(group), "scored_members": scored})
        return relative_scores(values, self._method)

    def extra_repr(self) -> str:
        base = super().extra_repr()
        return f"method={self._method!r}" + (f", {base}" if base else "")


def relative(
    rubric: Rubric | Callable[..., Any], method: RelativeMethod = "rank", *, name: str | None = None
) -> Relative:
    """Turn any per-rollout node (or reward function) into a group-relative score.

    Args:
        rubric: the node scored on each member.
        method: "rank" (fraction of the group beaten, ties half, in [0, 1]) or "zscore"
            ((score - group mean) / group std).
        name: the node's name (default: "relative" when placed in a container).

    Returns:
        A `Relative` group node. A group with fewer than two scored members, or whose scored
        members all tie, gets the neutral score (0.5 for rank, 0.0 for zscore).
    """
    return Relative(rubric, method, name=name)


__all__ = ["GroupRubric", "Relative", "relative", "relative_scores"]
