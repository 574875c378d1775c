"""The Rubric base class: an `nn.Module`-like tree node that scores a Rollout.

Why a tree: a reward is usually "a few checks, weighted, some of them prerequisites", and a
user debugging a low reward needs every node's score, not just the total. So every node's
score lands in `rollout.scores` under its dotted path, failures are NaN with a reason instead
of a silent 0, and the tree prints, saves and loads like a PyTorch model.

Scoring paths are computed per call (held in a context variable while a node runs), so one
tree can score many rollouts concurrently. A tree with no async part is scored directly in
the calling thread with no event loop at all: that is the hot path of large evaluations.
Sync, async and group scoring differ only in how they obtain a node's score; `Rubric._record`
is the one place it is settled and written on the rollout.

Over 500 lines for one class, `Rubric`, which like `torch.nn.Module` is a public API users
subclass (children, hooks, state, scoring, display). Its machinery lives below it, in
`scoring`, `turns` and `grouping`; what its public methods return or call (the TRL reward,
the drawings, the batch result, the failed-only re-scoring) lives in `rubrics._trl`, `render`,
`batch` and `rescore`. Each takes a node through a Protocol naming the members it uses
(`scoring.Node`, `grouping.GroupedNode`, `turns.TurnNode`, `render.DrawnNode`), so none
imports this class, even for types.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import weakref
from collections.abc import Awaitable, Callable, Iterable, Iterator, Mapping
from types import MappingProxyType
from typing import Any, ClassVar, NamedTuple

from harness._core.aio import is_async_callable, run_sync
from harness._core.defaults import DEFAULT_CONCURRENCY
from harness._core.errors import ConfigError, ConfigTypeError, NotScoreableError
from harness._core.tree import TreeNode
from harness._core.types import Rollout
from rubrics._tree.batch import ScoredBatch
from rubrics._tree.grouping import ascore_group, ascore_groups, has_group_nodes
from rubrics._tree.render import node_head, render_text, tree_html, tree_nodes
from rubrics._tree.rescore import rescore_failed
from rubrics._tree.scoring import (
    NAN,
    SAVED,
    SCOPE,
    RemovableHandle,
    Scope,
    ScoringError,
    as_rollout,
    check_name,
    check_on_error,
    clear_scores,
    coerce_sync,
    config_names,
    export_value,
    failure_reason,
    hook_score,
    join_path,
    member_scope,
    nonfinite_error,
    path_under,
    saved_score,
    snake_name,
    to_score,
    validate_batch,
)
from rubrics._tree.turns import finish_turns, score_turns
from rubrics._trl import TRLReward, as_trl_reward

PreHook = Callable[["Rubric", Rollout], Any]
ForwardHook = Callable[["Rubric", Rollout, float], Any]


class Parents(weakref.WeakSet["Rubric"]):
    """The nodes holding a node as a child, so a change below reaches every cache above.

    Weak, and empty in a pickle or a copy: the copied parent links its children again
    (`Rubric.__setstate__`), so a copy never points into the tree it was copied from.
    """

    def __reduce__(self) -> tuple[Any, ...]:
        return (Parents, ())


class IncompatibleKeys(NamedTuple):
    """What `load_state_dict(strict=False)` could not match, as torch reports it.

    Attributes:
        missing_keys: Entries of the tree that the state dict has no value for.
        unexpected_keys: Entries of the state dict that match nothing in the tree.
    """

    missing_keys: list[str]
    unexpected_keys: list[str]


class Rubric:
    """A node of a reward tree. Subclass it and implement `forward(self, rollout) -> float`.

    `forward` may be `def` or `async def`. It may score registered children by calling them:
    `self.child(rollout)` in a sync forward, `await self.child.ascore(rollout)` in an async
    one; their scores are recorded under their paths. A sync forward can only call sync
    children (it cannot wait for an async one without blocking a loop): make forward
    `async def` when a child may be async. Containers that can run children concurrently
    may also define `async def aforward(self, rollout)`, used on the async path.

    Override points for subclasses:
      config_fields: class attribute naming attributes that `state_dict()` saves and
        `load_state_dict()` restores (list only your own; base classes' are added).
      extra_repr(): text shown in `repr()` for this node.
      describe(): this node's entry in `tree()` (add settings that shape its score).
      node_required_columns(): dataset columns this node itself reads.
      record_detail / record_error / ScoringError: report per-rollout details or a failure.

    Args:
        name: the node's name among its parent's children (default: from the function or class).
        on_error: the score given when this node fails (default NaN, "unscored", with the reason
            kept in `rollout.score_errors`).
    """

    config_fields: ClassVar[tuple[str, ...]] = ("on_error",)
    _scoreable: ClassVar[bool] = True
    _group_node: ClassVar[bool] = False  # True for `rubrics._group.GroupRubric`
    # False for a node whose forward cannot reach the scoring scope (a plain reward function has
    # no `self`): without hooks, the hot path then sets no scope up for it (`_lean`).
    _scoped: ClassVar[bool] = True
    _config_names: ClassVar[tuple[str, ...]] = ("on_error",)  # config_fields along the MRO

    name: str | None = None
    on_error: float | None = None
    last_score: float | None = None
    last_error: BaseException | None = None
    # Set per instance in __init__ (in __dict__); declared here for readers and type checkers.
    _children: dict[str, Rubric]
    _parents: Parents
    _lean: bool  # scored without a scope: not `_scoped`, and no hooks (`_hooks_changed`)
    _pre_hooks: dict[object, PreHook] = MappingProxyType({})  # type: ignore[assignment]
    _hooks: dict[object, ForwardHook] = MappingProxyType({})  # type: ignore[assignment]
    # What a node knows about its subtree, kept until the subtree changes (`_changed`).
    _sync_tree: bool | None = None
    _turn_nodes: bool | None = None
    _group_cache: tuple[tuple[str, Rubric], ...] | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._config_names = config_names(cls)

    def __init__(self, *, name: str | None = None, on_error: float | None = None) -> None:
        cls = type(self)
        if (
            cls._scoreable
            and cls.forward is Rubric.forward
            and getattr(cls, "aforward", None) is None
            and getattr(cls, "forward_turn", None) is None
        ):
            raise ConfigTypeError(
                f"{cls.__name__} must define forward(self, rollout) -> float, or forward_turn(self, rollout, turn) "
                "-> float to score each assistant turn (def or async def)"
            )
        d = self.__dict__
        d["_children"] = {}
        d["_parents"] = Parents()
        d["_pre_hooks"] = {}
        d["_hooks"] = {}
        d["_lean"] = not cls._scoped
        if name is not None:
            self.name = check_name(name, "name")
        self.on_error = on_error

    # ------------------------------------------------------------------ attributes / children
    def __setattr__(self, name: str, value: Any) -> None:
        if isinstance(value, Rubric):
            self.add_rubric(name, value)
        elif name in self.__dict__.get("_children", ()):
            if value is not None:
                raise ConfigTypeError(
                    f"cannot assign {type(value).__name__} to child rubric {name!r} of {self.label}; "
                    "assign a Rubric, or None to remove it"
                )
            self._remove_child(name)
        elif name == "on_error":
            object.__setattr__(self, name, check_on_error(value))
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name: str) -> Any:
        children = self.__dict__.get("_children")
        if children is not None and name in children:
            return children[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __delattr__(self, name: str) -> None:
        if name in self.__dict__.get("_children", ()):
            self._remove_child(name)
        else:
            object.__delattr__(self, name)

    def __dir__(self) -> Iterable[str]:
        return [*super().__dir__(), *self.__dict__.get("_children", ())]

    def add_rubric(self, name: str, rubric: Rubric) -> None:
        """Register `rubric` as a child called `name` (what attribute assignment does)."""
        children = self.__dict__.get("_children")
        if children is None:
            raise RuntimeError(
                f"call super().__init__() in {type(self).__name__}.__init__ before assigning child rubrics"
            )
        check_name(name, f"child name of {self.label}")
        if not isinstance(rubric, Rubric):
            raise ConfigTypeError(
                f"child {name!r} of {self.label} must be a Rubric, got {type(rubric).__name__}"
            )
        if name not in children and hasattr(type(self), name):
            raise ConfigError(
                f"{name!r} is an attribute of {type(self).__name__}; give the child rubric another name"
            )
        if rubric is self or any(node is self for node in rubric.rubrics()):
            raise ConfigError(f"adding {rubric.label} as {name!r} under {self.label} would make a cycle")
        self.__dict__.pop(name, None)
        previous = children.get(name)
        children[name] = rubric
        rubric._parents.add(self)
        if previous is not None:
            self._unlink(previous)
        self._changed()

    def _remove_child(self, name: str) -> None:
        self._unlink(self._children.pop(name))
        self._on_child_removed(name)
        self._changed()

    def _unlink(self, child: Rubric) -> None:
        if all(node is not child for node in self._children.values()):
            child._parents.discard(self)

    def _changed(self) -> None:
        """Forget what this node and every node above it know about their subtrees (whether
        they are all sync, hold turn or group nodes): a child or a hook came or went."""
        d = self.__dict__
        for key in ("_sync_tree", "_turn_nodes", "_group_cache"):
            d.pop(key, None)
        for parent in list(self._parents):
            parent._changed()

    def __setstate__(self, state: dict[str, Any]) -> None:
        # A copy's children were copied first; they come with no parents (`Parents`): link them.
        self.__dict__.update(state)
        for child in self._children.values():
            child._parents.add(self)

    def _on_child_removed(self, name: str) -> None:
        """Hook for containers that keep per-child config (weights)."""

    @property
    def label(self) -> str:
        """How messages name this node: its name, else its class."""
        return repr(self.name) if self.name else type(self).__name__

    def children(self) -> Iterator[Rubric]:
        return iter(list(self._children.values()))

    def named_children(self) -> Iterator[tuple[str, Rubric]]:
        return iter(list(self._children.items()))

    def named_rubrics(self, prefix: str = "") -> Iterator[tuple[str, Rubric]]:
        """Every descendant (not self) with its dotted path, depth-first, parent first."""
        for name, child in list(self._children.items()):
            path = join_path(prefix, name)
            yield path, child
            yield from child.named_rubrics(path)

    def rubrics(self) -> Iterator[Rubric]:
        for _, node in self.named_rubrics():
            yield node

    def get_rubric(self, path: str) -> Rubric:
        """The descendant at dotted `path` ("" is self); KeyError names what is missing."""
        node: Rubric = self
        walked = ""
        for part in path.split(".") if path else []:
            children = node._children
            if part not in children:
                where = f"{walked!r}" if walked else "the root"
                raise KeyError(
                    f"no rubric at {path!r}: {where} has no child {part!r} "
                    f"(children: {', '.join(children) or 'none'})"
                )
            node = children[part]
            walked = join_path(walked, part)
        return node

    def required_columns(self) -> set[str]:
        """Dataset columns (keys of `rollout.info`) the whole tree needs, without defaults."""
        columns = set(self.node_required_columns())
        for node in self.rubrics():
            columns |= node.node_required_columns()
        return columns

    def node_required_columns(self) -> set[str]:
        """Columns this node alone reads; leaves and judges override it."""
        return set()

    # ------------------------------------------------------------------ hooks
    def register_forward_pre_hook(self, hook: PreHook) -> RemovableHandle:
        """`hook(node, rollout)` runs before `forward` (sync or async); a raise fails the node."""
        return self._add_hook("_pre_hooks", hook)

    def register_forward_hook(self, hook: ForwardHook) -> RemovableHandle:
        """`hook(node, rollout, score)` runs after `forward` (sync or async).

        A returned number (int, float, bool, numpy scalar) replaces the score; anything else
        (None, or the dict a logging hook returns) is ignored, as in OpenEnv. A raise fails
        the node (NaN with the reason).
        """
        return self._add_hook("_hooks", hook)

    def _add_hook(self, attr: str, hook: Callable[..., Any]) -> RemovableHandle:
        if not callable(hook):
            raise ConfigTypeError(f"a hook must be callable, got {type(hook).__name__}")
        hooks = self.__dict__[attr]
        key = object()
        hooks[key] = hook
        self._hooks_changed()
        return RemovableHandle(self, hooks, key)

    def _hooks_changed(self) -> None:
        # A hook may call record_error, so a node with hooks is scored inside a scope.
        self.__dict__["_lean"] = not (type(self)._scoped or self._pre_hooks or self._hooks)
        self._changed()

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        """Forget `last_score`/`last_error` here and below (override and call super for more)."""
        self.__dict__["last_score"] = None
        self.__dict__["last_error"] = None
        for child in self.children():
            child.reset()

    def state_dict(self) -> dict[str, Any]:
        """Every node's config (`config_fields`) by dotted key, e.g. {"gate.threshold": 0.5}."""
        out: dict[str, Any] = {}
        for prefix, node in [("", self), *self.named_rubrics()]:
            for field in node._config_names:
                out[join_path(prefix, field)] = export_value(getattr(node, field))
        return out

    def load_state_dict(self, state: Mapping[str, Any], strict: bool = True) -> IncompatibleKeys:
        """Restore config saved by `state_dict()`; all-or-nothing (a bad value changes nothing).

        Args:
            state: Dotted keys to values, as `state_dict()` returns them.
            strict: When True (the default), any key this tree lacks or a key of this tree
                missing from `state` is a KeyError and nothing is loaded. When False, the keys
                that match are loaded and the others are reported.

        Returns:
            `IncompatibleKeys(missing_keys, unexpected_keys)`, as `torch.nn.Module` returns.
        """
        targets = {
            join_path(prefix, field): (node, field)
            for prefix, node in [("", self), *self.named_rubrics()]
            for field in node._config_names
        }
        unknown = sorted(set(state) - set(targets))
        missing = sorted(set(targets) - set(state))
        if strict and (unknown or missing):
            raise KeyError(
                f"state_dict does not match this rubric tree: unexpected keys {unknown}, missing keys {missing}"
            )
        previous = self.state_dict()
        try:
            for key, value in state.items():
                if key in targets:
                    node, field = targets[key]
                    setattr(node, field, copy.deepcopy(value))
        except Exception:
            for key, value in previous.items():
                node, field = targets[key]
                setattr(node, field, value)
            raise
        return IncompatibleKeys(missing, unknown)

    # ------------------------------------------------------------------ per-rollout reporting
    def record_detail(self, rollout: Rollout, detail: Mapping[str, Any]) -> None:
        """From inside `forward`: merge `detail` into `rollout.score_details[<this node's path>]`.

        Use it for what explains a score (a judge's raw reply, the parsed verdict). For
        Rubric subclasses: a plain reward function reports failure by raising instead.
        """
        path = self._own_scope(rollout, "record_detail").path
        rollout.score_details.setdefault(path, {}).update(detail)

    def record_error(self, rollout: Rollout, reason: str) -> None:
        """From inside `forward`: mark this node unscored (NaN, or `on_error`) with `reason`.

        The value `forward` returns afterwards is ignored. Same effect as raising
        `ScoringError(reason)`, for code that prefers not to raise.
        """
        self._own_scope(rollout, "record_error").fail(ScoringError(reason))

    def _own_scope(self, rollout: Rollout, what: str) -> Scope:
        scope = SCOPE.get()
        if scope is None or scope.node is not self or scope.rollout is not rollout:
            raise RuntimeError(
                f"{self.label}.{what}() must be called from inside its own forward() for that rollout"
            )
        return scope

    def _child_prefix(self) -> str:
        """The path of this node in the current scoring call ("" when called outside one)."""
        scope = SCOPE.get()
        return scope.path if scope is not None and scope.node is self else ""

    # ------------------------------------------------------------------ scoring entry points
    def forward(self, rollout: Rollout) -> float | Awaitable[float]:
        """Score one rollout. Subclasses implement this (sync or async), or `forward_turn`."""
        if getattr(type(self), "forward_turn", None) is not None:
            return score_turns(self, rollout)  # type: ignore[no-any-return]
        raise NotScoreableError(
            f"{type(self).__name__} has no score of its own; it is a container of rubrics"
        )

    def __call__(self, rollout: Rollout | Mapping[str, Any]) -> float:
        """Score synchronously; works in scripts and inside a running loop (Jupyter)."""
        r = rollout if type(rollout) is Rollout else as_rollout(rollout)
        scope = SCOPE.get() or member_scope(r)
        if scope is not None and scope.rollout is r:
            path = path_under(scope, self)
        else:
            self._check_scoreable()
            if has_group_nodes(self):  # scored alone, a rollout is a group of one
                return self.score_group([r])[0]
            path = ""
            clear_scores(r)
        if self._is_sync_tree():
            return self._score_sync(r, path)
        return run_sync(self._ready_then_score(r, path))

    async def ascore(self, rollout: Rollout | Mapping[str, Any]) -> float:
        """Score and fill the rollout (`reward`, `scores`, `score_errors`, `score_details`)."""
        r = as_rollout(rollout)
        scope = SCOPE.get() or member_scope(r)
        if scope is not None and scope.rollout is r:
            return await self._score_async(r, path_under(scope, self))
        self._check_scoreable()
        if has_group_nodes(self):  # scored alone, a rollout is a group of one
            return (await self.ascore_group([r]))[0]
        clear_scores(r)
        return await self._ready_then_score(r, "")

    def score_group(self, rollouts: Iterable[Rollout | Mapping[str, Any]]) -> list[float]:
        """Score the rollouts of one example together (group nodes see them all).

        Args:
            rollouts: the group: rollouts (or dicts) of the same example, e.g. the `-r K`
                rollouts of `rubric eval` or the completions of one prompt in TRL.

        Returns:
            One score per rollout; NaN for a member whose episode errored (it is left out of
            every group node's comparison, with that reason recorded on it) or that is unscored.
        """
        return run_sync(self.ascore_group(rollouts))

    async def ascore_group(self, rollouts: Iterable[Rollout | Mapping[str, Any]]) -> list[float]:
        """The async form of `score_group`."""
        self._check_scoreable()
        items = [as_rollout(r) for r in rollouts]
        await self.acheck_ready()
        return await ascore_group(self, items)

    async def arescore_failed(
        self, rollouts: Iterable[Rollout], *, concurrency: int = DEFAULT_CONCURRENCY
    ) -> None:
        """Score again only the nodes that failed (NaN) on scored rollouts, in place.

        A node that scored keeps its score, reason and detail and does not run; a failed one
        runs again, and so do the nodes above it (their score came from it). A group node that
        failed on any member runs again for the whole group (rollouts sharing an example_id),
        and every member takes the new comparison. Rollouts with nothing failed, or whose
        episode errored (`rollout.error`: they need a new episode, not a new score), are left
        as they are.
        """
        self._check_scoreable()
        await self.acheck_ready()
        await rescore_failed(self, rollouts, concurrency)

    async def _ready_then_score(self, r: Rollout, path: str) -> float:
        if not path:  # a root call: the tree's judges must be able to answer at all
            await self.acheck_ready()
        return await self._score_async(r, path)

    async def acheck_ready(self) -> None:
        """Raise ConfigError now, naming the node and its fix, when a node cannot score any
        rollout (a judge with no API key, or whose endpoint nothing answers): one loud error
        before scoring, rather than NaN on every rollout. Called before a batch, a root score
        and a run (`Environment.preflight`); each node checks once per configuration."""
        for path, node in [("", self), *self.named_rubrics()]:
            await node._check_ready(path)

    async def _check_ready(self, path: str) -> None:
        """This node's own readiness check at dotted `path` (judges override it); nothing for most."""
        return None

    async def aclose(self) -> None:
        """Close the connections this node and its descendants opened (a judge's HTTP pool),
        on the running event loop, which owns them; a node used again reconnects.
        `Environment.release()` calls it when a run ends, so no pool outlives its loop."""
        for node in [self, *self.rubrics()]:
            await node._close_own()

    async def _close_own(self) -> None:
        """Close this node's own connections (judges override it); nothing for most."""
        return None

    def score_batch(
        self, rollouts: Iterable[Rollout | Mapping[str, Any]], *, concurrency: int = DEFAULT_CONCURRENCY
    ) -> ScoredBatch:
        """Score many; a failing item is NaN on its own rollout and never stops the batch.

        Returns the rewards as a list (a `rubrics._tree.batch.ScoredBatch`) that also holds the
        scored rollouts: `.scores` / `.errors` per item, `.summary`, and `.to_pandas()` with
        one column per node in tree order. Dicts are scored as `Rollout`s built from them.
        """
        self._check_scoreable()
        items = validate_batch(rollouts, concurrency)
        if has_group_nodes(self):
            return run_sync(self.ascore_batch(items, concurrency=concurrency))
        if self._is_sync_tree():
            for r in items:
                clear_scores(r)
                self._score_sync(r, "")
            return self._scored(items)
        return run_sync(self.ascore_batch(items, concurrency=concurrency))

    async def ascore_batch(
        self, rollouts: Iterable[Rollout | Mapping[str, Any]], *, concurrency: int = DEFAULT_CONCURRENCY
    ) -> ScoredBatch:
        """Score many concurrently, at most `concurrency` at a time; results in input order
        (a `ScoredBatch`, as `score_batch` returns)."""
        self._check_scoreable()
        items = validate_batch(rollouts, concurrency)
        if has_group_nodes(self):  # rollouts sharing an example_id are one group
            await self.acheck_ready()
            await ascore_groups(self, items, concurrency)
            return self._scored(items)
        if self._is_sync_tree():
            for i, r in enumerate(items):
                clear_scores(r)
                self._score_sync(r, "")
                if i % 256 == 255:
                    await asyncio.sleep(0)  # let other tasks run during a long CPU-only batch
            return self._scored(items)
        await self.acheck_ready()
        semaphore = asyncio.Semaphore(concurrency)

        async def one(r: Rollout) -> None:
            async with semaphore:
                clear_scores(r)
                await self._score_async(r, "")

        await asyncio.gather(*(one(r) for r in items))
        return self._scored(items)

    def _scored(self, items: list[Rollout]) -> ScoredBatch:
        return ScoredBatch(items, self.tree())

    def _check_scoreable(self) -> None:
        if not self._scoreable:
            raise NotScoreableError(
                f"{type(self).__name__} only holds rubrics and has no score; index it, or wrap it: "
                f"WeightedSum(my_{snake_name(type(self).__name__)}) / Sequential(*items)"
            )

    # ------------------------------------------------------------------ scoring engine
    def _own_is_async(self) -> bool:
        return inspect.iscoroutinefunction(self.forward) or inspect.iscoroutinefunction(
            getattr(self, "forward_turn", None)
        )

    def _has_turn_nodes(self) -> bool:
        """Whether a node of this tree scores turns (kept until the tree changes, `_changed`)."""
        answer = self._turn_nodes
        if answer is None:
            answer = any(getattr(type(n), "forward_turn", None) is not None for n in (self, *self.rubrics()))
            self.__dict__["_turn_nodes"] = answer
        return answer

    def combine_turns(
        self, path: str, children: Mapping[str, list[float]], rollout: Rollout, length: int
    ) -> list[float] | None:
        """This node's per-turn scores from its children's (`rubrics._tree.turns`), after the episode
        was scored; None (the default) when the node has no rule for combining turns.

        Args:
            path: this node's dotted path in the tree ("" for the root).
            children: each child's per-turn scores (a child scored per episode as an outcome:
                its score on the final turn, 0.0 before).
            rollout: the scored rollout (episode scores in `scores`, the root's in `reward`).
            length: the number of assistant turns.
        """
        return None

    def _all_hooks(self) -> list[Callable[..., Any]]:
        return [*self._pre_hooks.values(), *self._hooks.values()]

    def _is_sync_tree(self) -> bool:
        """Whether this node, its hooks and its whole subtree run without awaiting anything
        (kept until the subtree changes, `_changed`)."""
        answer = self._sync_tree
        if answer is None:
            answer = (
                not self._own_is_async()
                and not any(is_async_callable(h) for h in self._all_hooks())
                and all(child._is_sync_tree() for child in self._children.values())
            )
            self.__dict__["_sync_tree"] = answer
        return answer

    # Scoring one node has two drivers, which differ only in how they wait: `_score_sync` calls
    # the pre-hooks and `forward` in the calling thread (the hot path of large evaluations),
    # `_score_async` awaits them; a group node reads its member's score from the group's table
    # (`rubrics._group`). All three hand the result to `_record`, the one place a node's score,
    # failure and per-turn scores are settled, passed through the forward hooks and written.
    def _score_sync(self, rollout: Rollout, path: str) -> float:
        if SAVED.get() is not None and (kept := saved_score(rollout, path)) is not None:
            return kept  # a failed-only re-scoring: this node scored before, keep it
        scope: Scope | None = None
        if not self._lean:
            scope = Scope(self, path, rollout)
            token = SCOPE.set(scope)
        try:
            exc: BaseException | None = None
            try:
                if scope is not None and self._pre_hooks:
                    for pre in tuple(self._pre_hooks.values()):  # a hook may remove itself
                        pre(self, rollout)
                raw: Any = self.forward(rollout)  # a float, bool, int, or an awaitable to run
                kind = type(raw)
                score = (
                    raw
                    if kind is float
                    else float(raw)
                    if kind is bool or kind is int
                    else coerce_sync(raw, self)
                )
            except Exception as error:
                exc, score = error, NAN
            if scope is None:
                recorded = self._record(rollout, path, score, exc, None)
            else:
                failure = exc if exc is not None else scope.exc  # raised, else record_error()
                recorded = self._record(rollout, path, score, failure, scope.turns)
            return recorded if type(recorded) is float else coerce_sync(recorded, self)
        finally:
            if scope is not None:
                SCOPE.reset(token)

    async def _score_async(self, rollout: Rollout, path: str) -> float:
        if self._is_sync_tree():
            return self._score_sync(rollout, path)
        if SAVED.get() is not None and (kept := saved_score(rollout, path)) is not None:
            return kept
        scope = Scope(self, path, rollout)
        token = SCOPE.set(scope)
        try:
            exc: BaseException | None = None
            try:
                for pre in tuple(self._pre_hooks.values()):
                    result = pre(self, rollout)
                    if inspect.isawaitable(result):
                        await result
                aforward = getattr(type(self), "aforward", None)
                raw = await aforward(self, rollout) if aforward is not None else self.forward(rollout)
                if inspect.isawaitable(raw):
                    raw = await raw
                score = to_score(raw, self)
            except Exception as error:
                exc, score = error, NAN
            failure = exc if exc is not None else scope.exc  # raised, else record_error()
            recorded = self._record(rollout, path, score, failure, scope.turns)
            return recorded if isinstance(recorded, float) else await recorded
        finally:
            SCOPE.reset(token)

    def _record(
        self,
        rollout: Rollout,
        path: str,
        score: float,
        exc: BaseException | None,
        turns: list[float] | None,
        hooks: tuple[ForwardHook, ...] | None = None,
    ) -> float | Awaitable[float]:
        """Settle this node's score and write it on `rollout`: the one place that does.

        A failure (`exc`) or a non-finite score makes the node unscored (NaN, or `on_error`,
        with the reason in `score_errors`); the forward hooks may then replace the score; the
        score goes to `last_score`, `scores[path]` (`reward` at the root), the per-turn scores
        to `turn_scores[path]`, and the root fills its containers' per-turn scores. Returns the
        score, or, when a forward hook returned an awaitable, a coroutine the async driver
        awaits to run the rest (`hooks` then holds the hooks still to run).
        """
        if exc is None and turns is None and score - score == 0.0 and not self._hooks:
            # The fast path, taken by nearly every node of a large evaluation (nn.Module's
            # _call_impl does the same): a finite score without hooks or per-turn scores has
            # nothing to settle, so it is written as is, with no helper calls.
            d = self.__dict__
            d["last_score"] = score
            d["last_error"] = None
            if path:
                rollout.scores[path] = score
                return score
            rollout.reward = score
            if self._has_turn_nodes():
                finish_turns(self, rollout)
            return score
        if hooks is None:  # not yet settled (a resumed call settled before its first hook)
            score, exc = self._settle(score, exc)
            hooks = tuple(self._hooks.values())  # a hook may remove itself while running
        try:
            for i, post in enumerate(hooks):
                out = post(self, rollout, score)
                if inspect.isawaitable(out):
                    return self._await_hook(out, rollout, path, score, exc, turns, hooks[i + 1 :])
                if out is not None:
                    score = hook_score(out, score)
        except Exception as error:  # a raising hook fails the node; the hooks after it do not run
            score, exc = self._settle(NAN, error)
        d = self.__dict__
        d["last_score"] = score
        d["last_error"] = exc
        if turns is not None:
            rollout.turn_scores[path] = turns
        if path:
            rollout.scores[path] = score
        else:
            rollout.reward = score
            if self._has_turn_nodes():
                finish_turns(self, rollout)
        if exc is not None:
            rollout.score_errors[path] = failure_reason(exc)
        return score

    async def _await_hook(
        self,
        out: Awaitable[Any],
        rollout: Rollout,
        path: str,
        score: float,
        exc: BaseException | None,
        turns: list[float] | None,
        rest: tuple[ForwardHook, ...],
    ) -> float:
        """`_record` from an async forward hook on: await it, then run the rest of the hooks."""
        try:
            result = await out
            if result is not None:
                score = hook_score(result, score)
        except Exception as error:
            score, exc = self._settle(NAN, error)
            rest = ()
        recorded = self._record(rollout, path, score, exc, turns, rest)
        return recorded if isinstance(recorded, float) else await recorded

    def _settle(self, score: float, exc: BaseException | None) -> tuple[float, BaseException | None]:
        # ±inf from any node, NaN from a node without children, is unscored with its reason (a
        # container's NaN comes from a child, which already says why).
        if exc is None and score - score != 0.0 and (score == score or not self._children):
            exc = nonfinite_error(self, score)
        if exc is not None:
            score = NAN
        if score != score and self.on_error is not None:
            score = self.on_error
        return score, exc

    # ------------------------------------------------------------------ training
    def as_trl_reward(
        self,
        *,
        name: str | None = None,
        log_metrics: bool = True,
        log_extras: bool = True,
        concurrency: int = 64,
    ) -> TRLReward:
        """This tree as a picklable TRL reward function; see `rubrics._trl.as_trl_reward`.

        Args:
            name: what TRL logs the reward as (default: this node's name, else its class).
            log_metrics: log each node's batch mean as `rubric/<path>` through TRL's `log_metric`.
            log_extras: log each node's per-completion scores through TRL's `log_extra`.
            concurrency: most completions scored at once by an async tree.

        Returns:
            `f(prompts, completions, completion_ids, **kwargs) -> list[float | None]` (async
            when the tree has async nodes); None marks a completion the tree could not score.
        """
        return as_trl_reward(
            self, name=name, log_metrics=log_metrics, log_extras=log_extras, concurrency=concurrency
        )

    def as_trl_reward_funcs(self, *, concurrency: int = 64) -> tuple[list[TRLReward], list[float]]:
        """`(funcs, weights)`: one TRL reward per child of a WeightedSum, for GDPO.

        Use with `GRPOConfig(reward_weights=weights, multi_objective_aggregation="normalize_then_sum")`.
        A single leaf gives itself with weight 1.0; any other tree raises ConfigError pointing
        to `as_trl_reward()` (`WeightedSum` overrides this with its per-child split).
        """
        if not any(True for _ in self.children()) and self._scoreable:
            return [as_trl_reward(self, concurrency=concurrency)], [1.0]
        raise ConfigError(
            f"as_trl_reward_funcs() splits a WeightedSum into one reward per child; {self.label} is a "
            f"{type(self).__name__}, whose score is not a weighted sum of its children. "
            "Use as_trl_reward() to train on the whole tree's score"
        )

    # ------------------------------------------------------------------ display
    def extra_repr(self) -> str:
        """Extra text for `repr()`, like `nn.Module.extra_repr`."""
        return f"on_error={self.on_error:g}" if self.on_error is not None else ""

    def describe(self) -> TreeNode:
        """This node's own entry in `tree()`, like `extra_repr` for `repr()`.

        Subclasses that have settings shaping their score add them to what the base class
        returns (a Gate its `threshold`, a judge its `settings` model and parse mode).

        Returns:
            The node's `type` (its class name) and `head` (as `repr()` heads it), with
            `group` set on a node that scores the rollouts of one example together.
        """
        entry: TreeNode = {"type": type(self).__name__, "head": self._repr_head()}
        if self._group_node:
            entry["group"] = True
        return entry

    def tree(self) -> list[TreeNode]:
        """Describe the whole tree as a flat list of nodes: what the notebook and terminal views
        draw, what a run records in its metadata.json and what `rubric build` ships on a hub card.

        Returns:
            One `harness.TreeNode` per node, the root first (path ""), then every descendant
            depth-first, each parent before its children: its `describe()` entry, plus its
            `path`, what its parent notes about it (`note`, e.g. "weight=0.8") and its `weight`
            under a WeightedSum.
        """
        return tree_nodes(self)

    def __repr__(self) -> str:
        return render_text(self)

    def _repr_html_(self) -> str | None:
        return tree_html(self)

    def _child_note(self, name: str) -> str:
        """Per-child annotation for `repr()` (WeightedSum shows the weight)."""
        return ""

    def _child_weight(self, name: str) -> float | None:
        """The weight of child `name` in this node's score, for `tree()` (WeightedSum's)."""
        return None

    def _repr_head(self) -> str:
        """The node's line in `repr()` and its `head` in `tree()`; a leaf shows `reward(name)`."""
        return node_head(self)


__all__ = [
    "NAN", "IncompatibleKeys", "RemovableHandle", "Rubric", "ScoringError", "as_rollout", "check_name",
    "coerce_sync", "failure_reason", "join_path", "snake_name", "to_score",
]  # fmt: skip
