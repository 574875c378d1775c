"""Containers that combine rubrics: WeightedSum, Sequential, Gate, RubricList, RubricDict.

Semantics follow OpenEnv's where both define a container. NaN ("unscored") always flows up:
a total built on a check that could not run is itself unknown, never a quiet 0.
"""

from __future__ import annotations

import asyncio
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, overload

from harness._core.defaults import DEFAULT_CONCURRENCY
from harness._core.errors import ConfigError, ConfigTypeError
from harness._core.tree import TreeNode
from harness._core.types import Rollout
from rubrics._leaf import as_rubric
from rubrics._tree.module import NAN, Rubric, ScoringError, check_name, join_path, snake_name
from rubrics._tree.turns import episode_score
from rubrics._trl import TRLReward, child_rewards

RubricLike = Rubric | Callable[..., Any]


def default_name(rubric: Rubric) -> str:
    return rubric.name or snake_name(type(rubric).__name__)


def unique_name(base: str, taken: Iterable[str]) -> str:
    """`base`, else `base_1`, `base_2`, ... (sibling leaves often share a function name)."""
    taken = set(taken)
    if base not in taken:
        return base
    i = 1
    while f"{base}_{i}" in taken:
        i += 1
    return f"{base}_{i}"


def _scoreable_child(value: Any, owner: str) -> Rubric:
    rubric = as_rubric(value, owner)
    if not rubric._scoreable:
        raise ConfigTypeError(
            f"{owner} cannot score a {type(rubric).__name__} (it has no score); "
            f"pass its items instead, e.g. {owner.split('(')[0]}(list(...))"
        )
    return rubric


def add_children(owner: Rubric, rubrics: Any, what: str) -> list[str]:
    """Register a list or dict of rubrics (or functions) on `owner`; returns names in order."""
    names: list[str] = []
    if isinstance(rubrics, (Mapping, RubricDict)):
        for key, value in rubrics.items():
            check_name(key, f"{what} key")
            owner.add_rubric(key, _scoreable_child(value, what))
            names.append(key)
        return names
    if isinstance(rubrics, Rubric) and rubrics._scoreable:  # e.g. a Sequential, which is iterable
        raise ConfigTypeError(
            f"{what} takes a list or dict of rubrics, got one {type(rubrics).__name__}; "
            f"wrap it in a list to use it as one child: [{default_name(rubrics)}]"
        )
    if isinstance(rubrics, (str, bytes)) or not isinstance(rubrics, Iterable):
        raise ConfigTypeError(
            f"{what} takes a list or dict of rubrics/functions, got {type(rubrics).__name__}"
        )
    reserved = set(dir(type(owner)))
    for value in rubrics:
        rubric = _scoreable_child(value, what)
        name = unique_name(default_name(rubric), [*owner._children, *reserved])
        owner.add_rubric(name, rubric)
        names.append(name)
    return names


def _finite(value: Any, what: str) -> float:
    if isinstance(value, (str, bytes)) or value is None:
        raise ConfigError(f"{what} must be a finite number, got {value!r}")
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"{what} must be a finite number, got {value!r}") from None
    if not math.isfinite(number):
        raise ConfigError(f"{what} must be a finite number, got {value!r}")
    return number


class WeightedSum(Rubric):
    """sum(weight * child score); children run concurrently when any of them is async.

    Args:
        rubrics: the children: a list (names come from the functions / rubric names) or a dict
            of name -> rubric; plain functions become `reward` leaves.
        weights: one weight per child, a list in the same order or a dict by name (default 1/n).
        name: the node's name among its parent's children (default: from the function or class).
        on_error: the score given when this node fails (default NaN, "unscored", with the reason
            kept in `rollout.score_errors`).

    Raises:
        ConfigError: when there is no child, or the weights do not match the children.
    """

    config_fields = ("weights",)
    _weights: dict[str, float]

    def __init__(
        self,
        rubrics: Sequence[RubricLike] | Mapping[str, RubricLike],
        weights: Sequence[float] | Mapping[str, float] | None = None,
        *,
        name: str | None = None,
        on_error: float | None = None,
    ) -> None:
        super().__init__(name=name, on_error=on_error)
        self.__dict__["_weights"] = {}
        names = add_children(self, rubrics, "WeightedSum(rubrics)")
        if not names:
            raise ConfigError("WeightedSum needs at least one rubric; a sum of nothing would be a silent 0")
        if weights is None:
            weights = [1.0 / len(names)] * len(names)
        self.weights = weights

    @property
    def weights(self) -> Mapping[str, float]:
        """Read-only view, child name -> weight; assign a new list/dict to change them."""
        return MappingProxyType(self._weights)

    @weights.setter
    def weights(self, weights: Sequence[float] | Mapping[str, float]) -> None:
        names = list(self._children)
        if isinstance(weights, Mapping):
            missing = [n for n in names if n not in weights]
            extra = [k for k in weights if k not in self._children]
            if missing or extra:
                raise ConfigError(
                    f"WeightedSum weights must match the children {names}: missing {missing}, unknown {extra}"
                )
            resolved = {n: _finite(weights[n], f"weight {n!r}") for n in names}
        else:
            values = list(weights)
            if len(values) != len(names):
                raise ConfigError(f"WeightedSum got {len(values)} weights for {len(names)} rubrics {names}")
            resolved = {n: _finite(w, f"weight {n!r}") for n, w in zip(names, values)}
        self.__dict__["_weights"] = resolved

    def _on_child_removed(self, name: str) -> None:
        self._weights.pop(name, None)

    def _weight(self, name: str) -> float:
        try:
            return self._weights[name]
        except KeyError:
            raise ScoringError(f"child {name!r} has no weight; set .weights to include it") from None

    def forward(self, rollout: Rollout) -> float:
        prefix = self._child_prefix()
        weights = self._weights
        total = 0.0
        for name, child in self._children.items():
            weight = weights[name] if name in weights else self._weight(name)
            total += weight * child._score_sync(rollout, f"{prefix}.{name}" if prefix else name)
        return total

    async def aforward(self, rollout: Rollout) -> float:
        prefix = self._child_prefix()
        items = list(self._children.items())
        weights = [self._weight(name) for name, _ in items]
        scores = await asyncio.gather(*(c._score_async(rollout, join_path(prefix, n)) for n, c in items))
        return sum(w * s for w, s in zip(weights, scores))

    def _child_note(self, name: str) -> str:
        weight = self._weights.get(name)
        return f"weight={weight:g}" if weight is not None else "weight=?"

    def _child_weight(self, name: str) -> float | None:
        return self._weights.get(name)

    def combine_turns(
        self, path: str, children: Mapping[str, list[float]], rollout: Rollout, length: int
    ) -> list[float] | None:
        """The weighted sum at each turn."""
        weights = self.weights
        return [sum(weights[name] * vector[t] for name, vector in children.items()) for t in range(length)]

    def as_trl_reward_funcs(
        self, *, concurrency: int = DEFAULT_CONCURRENCY
    ) -> tuple[list[TRLReward], list[float]]:
        """`(funcs, weights)`: one TRL reward per child, with its weight (see `Rubric.as_trl_reward_funcs`).

        Raises:
            ConfigError: this node changes the plain weighted sum (its own forward, hooks, or
                `on_error`), which per-child rewards would silently drop.
        """
        if type(self).forward is not WeightedSum.forward or self._pre_hooks or self._hooks:
            raise ConfigError(
                f"{self.label} changes the plain weighted sum (own forward or hooks), which per-child "
                "rewards would silently drop; use as_trl_reward() instead"
            )
        if self.on_error is not None:
            raise ConfigError(
                f"{self.label} has on_error={self.on_error:g}, which per-child rewards cannot apply; "
                "use as_trl_reward() instead"
            )
        funcs = child_rewards(self, concurrency=concurrency)
        return funcs, [self.weights[name] for name in self._children]


class Sequential(Rubric):
    """Prerequisite, then grade: in order; the first 0.0 returns 0.0 without running the rest.

    Otherwise the last child's score; an empty Sequential scores 1.0. A NaN child also stops
    the chain (what follows cannot be trusted) and makes the result NaN.

    Args:
        *rubrics: the steps, in order (or one dict of name -> rubric); plain functions become
            `reward` leaves.
        name: the node's name among its parent's children (default: from the function or class).
        on_error: the score given when this node fails (default NaN, "unscored", with the reason
            kept in `rollout.score_errors`).
    """

    def __init__(
        self,
        *rubrics: RubricLike | Mapping[str, RubricLike],
        name: str | None = None,
        on_error: float | None = None,
    ) -> None:
        super().__init__(name=name, on_error=on_error)
        source: Any = rubrics[0] if len(rubrics) == 1 and isinstance(rubrics[0], Mapping) else rubrics
        add_children(self, source, "Sequential(...)")

    # Indexing and length as `nn.Sequential`: by position, a slice is a new Sequential
    # keeping the children's names.
    def __len__(self) -> int:
        return len(self._children)

    def __bool__(self) -> bool:
        return True  # a rubric, even with no steps (it scores 1.0): never falsy because empty

    def __iter__(self) -> Iterator[Rubric]:
        return iter(list(self._children.values()))

    @overload
    def __getitem__(self, index: int) -> Rubric: ...
    @overload
    def __getitem__(self, index: slice) -> Sequential: ...
    def __getitem__(self, index: int | slice) -> Rubric | Sequential:
        items = list(self._children.items())
        if isinstance(index, slice):
            return Sequential(dict(items[index]))
        try:
            return items[index][1]
        except IndexError:
            raise IndexError(f"Sequential index {index} out of range (length {len(items)})") from None

    def forward(self, rollout: Rollout) -> float:
        prefix = self._child_prefix()
        score = 1.0
        for name, child in self._children.items():
            score = child._score_sync(rollout, f"{prefix}.{name}" if prefix else name)
            if score != score:
                return NAN
            if score == 0.0:
                return 0.0
        return score

    async def aforward(self, rollout: Rollout) -> float:
        prefix = self._child_prefix()
        score = 1.0
        for name, child in list(self._children.items()):
            score = await child._score_async(rollout, join_path(prefix, name))
            if score != score:
                return NAN
            if score == 0.0:
                return 0.0
        return score

    def combine_turns(
        self, path: str, children: Mapping[str, list[float]], rollout: Rollout, length: int
    ) -> list[float] | None:
        """Decided per episode: the last child's per-turn scores when the chain passed, zeros
        when it stopped at a 0, NaN when it is unscored."""
        episode = episode_score(rollout, path)
        if episode != episode:
            return [NAN] * length
        if episode == 0.0:
            return [0.0] * length
        return children[list(children)[-1]]


class Gate(Rubric):
    """The child's score if it reaches `threshold` (inclusive), else 0.0; NaN stays NaN.

    Args:
        rubric: the gated child (a plain function becomes a `reward` leaf).
        threshold: the lowest score that passes, inclusive.
        name: the node's name among its parent's children (default: from the function or class).
        on_error: the score given when this node fails (default NaN, "unscored", with the reason
            kept in `rollout.score_errors`).
    """

    config_fields = ("threshold",)
    _threshold: float

    def __init__(
        self,
        rubric: RubricLike,
        threshold: float = 1.0,
        *,
        name: str | None = None,
        on_error: float | None = None,
    ) -> None:
        super().__init__(name=name, on_error=on_error)
        self.threshold = threshold
        add_children(self, [rubric], "Gate(rubric)")

    @property
    def threshold(self) -> float:
        return self._threshold

    @threshold.setter
    def threshold(self, value: float) -> None:
        self.__dict__["_threshold"] = _finite(value, "Gate threshold")

    def _child(self) -> tuple[str, Rubric]:
        if len(self._children) != 1:
            raise ScoringError(f"Gate needs exactly one child rubric, has {len(self._children)}")
        return next(iter(self._children.items()))

    @staticmethod
    def _gate(score: float, threshold: float) -> float:
        if score != score:
            return NAN
        return 0.0 if score < threshold else score

    def forward(self, rollout: Rollout) -> float:
        name, child = self._child()
        return self._gate(child._score_sync(rollout, join_path(self._child_prefix(), name)), self._threshold)

    async def aforward(self, rollout: Rollout) -> float:
        name, child = self._child()
        return self._gate(
            await child._score_async(rollout, join_path(self._child_prefix(), name)), self._threshold
        )

    def combine_turns(
        self, path: str, children: Mapping[str, list[float]], rollout: Rollout, length: int
    ) -> list[float] | None:
        """The gate's own rule on its child's episode score: the child's per-turn scores when
        it passes, zeros when it does not, NaN when it is unscored."""
        (name,) = children
        child = episode_score(rollout, join_path(path, name))
        if child != child:
            return [NAN] * length
        return children[name] if child >= self.threshold else [0.0] * length

    def extra_repr(self) -> str:
        base = super().extra_repr()
        return f"threshold={self._threshold:g}" + (f", {base}" if base else "")

    def describe(self) -> TreeNode:
        entry = super().describe()
        entry["threshold"] = self._threshold
        return entry


class RubricList(Rubric):
    """A list of rubrics registered as children "0", "1", ... (like `nn.ModuleList`); no score.

    Args:
        rubrics: the first children (plain functions become `reward` leaves).
    """

    _scoreable = False

    def __init__(self, rubrics: Iterable[RubricLike] = ()) -> None:
        super().__init__()
        self.extend(rubrics)

    def _items(self) -> list[Rubric]:
        return list(self._children.values())

    def _reload(self, items: list[Rubric]) -> None:
        for name in list(self._children):
            self._remove_child(name)
        for i, item in enumerate(items):
            self.add_rubric(str(i), item)

    def append(self, rubric: RubricLike) -> RubricList:
        self.add_rubric(str(len(self)), as_rubric(rubric, "RubricList"))
        return self

    def extend(self, rubrics: Iterable[RubricLike]) -> RubricList:
        for rubric in rubrics:
            self.append(rubric)
        return self

    def insert(self, index: int, rubric: RubricLike) -> None:
        items = self._items()
        items.insert(index, as_rubric(rubric, "RubricList"))
        self._reload(items)

    def __getitem__(self, index: int | slice) -> Any:
        items = self._items()
        if isinstance(index, slice):
            return RubricList(items[index])
        try:
            return items[index]
        except IndexError:
            raise IndexError(f"RubricList index {index} out of range (length {len(items)})") from None

    def __setitem__(self, index: int, rubric: RubricLike) -> None:
        items = self._items()
        items[index] = as_rubric(rubric, "RubricList")
        self._reload(items)

    def __delitem__(self, index: int | slice) -> None:
        items = self._items()
        del items[index]
        self._reload(items)

    def __len__(self) -> int:
        return len(self._children)

    def __iter__(self) -> Iterator[Rubric]:
        return iter(self._items())

    def __contains__(self, rubric: object) -> bool:
        return any(item is rubric for item in self._children.values())


class RubricDict(Rubric):
    """A dict of named rubrics (like `nn.ModuleDict`); no score of its own.

    Args:
        rubrics: the first children, a dict or (name, rubric) pairs.
    """

    _scoreable = False

    def __init__(
        self, rubrics: Mapping[str, RubricLike] | Iterable[tuple[str, RubricLike]] | None = None
    ) -> None:
        super().__init__()
        if rubrics is not None:
            self.update(rubrics)

    def __getitem__(self, key: str) -> Rubric:
        try:
            return self._children[key]
        except KeyError:
            raise KeyError(
                f"RubricDict has no key {key!r} (keys: {', '.join(self._children) or 'none'})"
            ) from None

    def __setitem__(self, key: str, rubric: RubricLike) -> None:
        self.add_rubric(key, as_rubric(rubric, "RubricDict"))

    def __delitem__(self, key: str) -> None:
        self[key]  # KeyError naming the keys
        self._remove_child(key)

    def __len__(self) -> int:
        return len(self._children)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._children))

    def __contains__(self, key: object) -> bool:
        return key in self._children

    def keys(self) -> list[str]:
        return list(self._children)

    def values(self) -> list[Rubric]:
        return list(self._children.values())

    def items(self) -> list[tuple[str, Rubric]]:
        return list(self._children.items())

    def pop(self, key: str) -> Rubric:
        value = self[key]
        self._remove_child(key)
        return value

    def update(self, rubrics: Mapping[str, RubricLike] | Iterable[tuple[str, RubricLike]]) -> None:
        pairs = rubrics.items() if isinstance(rubrics, (Mapping, RubricDict)) else rubrics
        for key, value in pairs:
            self[key] = value


__all__ = ["Gate", "RubricDict", "RubricList", "Sequential", "WeightedSum"]
