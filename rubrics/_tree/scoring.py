"""The machinery under `Rubric`: the per-call scoring scope and small shared helpers.

While a node scores a rollout, a `Scope` (node, dotted path, rollout, error) sits in a context
variable. That is how a child called from inside `forward` learns its path, and how
`record_error` / `record_detail` find the rollout's entry, without any state on the shared
tree: many rollouts can be scored through one tree at once. The module keeps no other state:
the scope, a group's member scopes and a re-scoring's saved scores are context variables, set
and reset around one call, and what a node knows about its subtree is kept on the node.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import copy
import inspect
import math
import numbers
import re
from collections.abc import Awaitable, Iterable, Iterator, Mapping
from typing import Any, Protocol

from harness._core.aio import run_sync
from harness._core.errors import ConfigError, ConfigTypeError, ScoringError, raised_at
from harness._core.types import Rollout, Usage

NAN = math.nan


class Node(Protocol):
    """What these helpers need of a rubric node; `rubrics._tree.module.Rubric` is one.

    Declared by its users, as each helper module under `Rubric` declares its own, so the
    machinery never imports the class it serves (`tests/test_layout.py` keeps it so).
    """

    @property
    def name(self) -> str | None: ...

    @property
    def label(self) -> str: ...

    @property
    def _children(self) -> Mapping[str, Node]: ...

    def named_rubrics(self) -> Iterator[tuple[str, Node]]: ...

    def _hooks_changed(self) -> None: ...


class Scope:
    """What one node is doing right now: which rollout, under which path, its failure, and
    the per-turn scores its forward computed (`rubrics._tree.turns`), for `Rubric._record`."""

    __slots__ = ("exc", "node", "path", "rollout", "turns")

    def __init__(self, node: Node, path: str, rollout: Rollout) -> None:
        self.node = node
        self.path = path
        self.rollout = rollout
        self.exc: BaseException | None = None
        self.turns: list[float] | None = None

    def fail(self, exc: BaseException) -> float:
        self.exc = exc
        return NAN


def nonfinite_error(node: Node, score: float) -> ScoringError:
    """Why a node that returned NaN or ±inf is unscored: "correct returned inf"."""
    shown = "NaN" if score != score else "inf" if score > 0 else "-inf"
    return ScoringError(f"{node.name or type(node).__name__} returned {shown}")


def failure_reason(exc: BaseException) -> str:
    """The text recorded in `rollout.score_errors` for an exception raised while scoring.

    A KeyError or IndexError says only the key, so where it was raised is added.
    """
    if isinstance(exc, ScoringError):
        return str(exc)
    where = f" (at {raised_at(exc)})" if isinstance(exc, LookupError) else ""
    return f"{type(exc).__name__}: {exc}{where}"


SCOPE: contextvars.ContextVar[Scope | None] = contextvars.ContextVar("rubric_scope", default=None)


#: While a group node's forward runs (`rubrics._group`): id(member) -> that member's scope, so
#: `child(member)` called there scores the child under the group node, as in a per-rollout forward.
MEMBER_SCOPES: contextvars.ContextVar[dict[int, Scope] | None] = contextvars.ContextVar(
    "rubric_member_scopes", default=None
)


def member_scope(rollout: Rollout) -> Scope | None:
    """The scope of `rollout` as a member of the group a group node is scoring now, if any."""
    scopes = MEMBER_SCOPES.get()
    return scopes.get(id(rollout)) if scopes is not None else None


#: During a failed-only re-scoring: id(rollout) -> node path ("" the reward) -> saved score.
SAVED: contextvars.ContextVar[dict[int, dict[str, float]] | None] = contextvars.ContextVar(
    "rubric_saved_scores", default=None
)


def saved_score(rollout: Rollout, path: str) -> float | None:
    """The finite score node `path` kept from before on `rollout` in a failed-only re-scoring
    (still in `rollout.scores` / `reward`), or None: the node runs."""
    saved = SAVED.get()
    if saved is None:
        return None
    return saved.get(id(rollout), {}).get(path)


def keep_scored(rollout: Rollout) -> dict[str, float]:
    """Prepare `rollout` for a failed-only re-scoring: its finite scores (returned, "" the
    reward) stay; its failed nodes' scores, reasons and details are dropped so they run again."""
    kept = {p: v for p, v in rollout.scores.items() if v == v}
    if rollout.reward == rollout.reward:
        kept[""] = rollout.reward
    for path in [p for p in rollout.scores if p not in kept]:
        del rollout.scores[path]
    for table in (rollout.score_errors, rollout.score_details):
        for path in [p for p in table if p not in kept]:
            del table[path]
    return kept


def join_path(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def snake_name(text: str) -> str:
    """`WeightedSum` -> `weighted_sum`; anything that is not an identifier char becomes `_`."""
    text = re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", text).lower()
    text = re.sub(r"\W+", "_", text).strip("_")
    return text or "rubric"


def to_score(value: Any, source: Node) -> float:
    """A number (bool/int/float/numpy scalar) as float; anything else is the node's error."""
    if type(value) is float:
        return value
    if value is not None and not isinstance(value, (str, bytes)):
        with contextlib.suppress(TypeError, ValueError):  # falls through to the clear error below
            return float(value)
    raise TypeError(
        f"{source.label} returned {type(value).__name__} {repr(value)[:80]}; a reward must be a number "
        "(float, int or bool)"
    )


def hook_score(out: Any, score: float) -> float:
    """What a forward hook's result does: a number replaces `score`; anything else (a dict
    a logging hook returned, say) leaves it unchanged."""
    return float(out) if isinstance(out, numbers.Real) else score


def as_rollout(value: Any) -> Rollout:
    """Accept a Rollout or a mapping that validates into one (notebook-friendly samples)."""
    if isinstance(value, Rollout):
        return value
    if isinstance(value, Mapping):
        return Rollout.model_validate(dict(value))
    raise TypeError(
        f"a rubric scores a Rollout or a dict such as {{'completion': ..., 'answer': ...}}, "
        f"got {type(value).__name__}"
    )


async def await_it(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def coerce_sync(raw: Any, node: Node) -> float:
    """A sync forward's result as a float; an awaitable it returned is run to completion."""
    if type(raw) is int or type(raw) is bool:
        return float(raw)
    if inspect.isawaitable(raw):
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            raw = run_sync(await_it(raw))
        else:  # cannot block a running loop to wait for it
            if inspect.iscoroutine(raw):
                raw.close()
            raise TypeError(
                f"{node.label} is a sync function that returned an awaitable; declare it `async def`"
            )
    return to_score(raw, node)


class RemovableHandle:
    """Returned by hook registration; `.remove()` detaches the hook (idempotent).

    Args:
        node: The node the hook was registered on (told when its hooks change).
        hooks: The registry the hook was added to.
        key: The hook's key in `hooks` (an object of its own, so a key is never reused).
    """

    __slots__ = ("_hooks", "_key", "_node")

    def __init__(self, node: Node, hooks: dict[object, Any], key: object) -> None:
        self._node, self._hooks, self._key = node, hooks, key

    def remove(self) -> None:
        if self._hooks.pop(self._key, None) is not None:
            self._node._hooks_changed()


def config_names(cls: type) -> tuple[str, ...]:
    """Every `config_fields` entry declared along the class's MRO, base classes first."""
    seen: dict[str, None] = {}
    for klass in reversed(cls.__mro__):
        for field in klass.__dict__.get("config_fields", ()):
            seen[field] = None
    return tuple(seen)


def export_value(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: export_value(v) for k, v in value.items()}
    return copy.deepcopy(value)


def check_on_error(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)):
        raise ConfigTypeError(
            f"on_error must be a number (the score to use when the node fails), got {value!r}"
        )
    value = float(value)
    return None if math.isnan(value) else value


def check_name(name: Any, what: str) -> str:
    if not isinstance(name, str) or not name or "." in name:
        raise ConfigError(f"{what} must be a non-empty string without '.', got {name!r}")
    return name


def path_under(scope: Scope, node: Node) -> str:
    """Path of `node` when the node scoring now calls it: it must be in that node's tree."""
    parent = scope.node
    for name, child in parent._children.items():
        if child is node:
            return join_path(scope.path, name)
    for path, child in parent.named_rubrics():
        if child is node:
            return join_path(scope.path, path)
    raise ValueError(
        f"{node.label} is not a child of {parent.label}; assign it as an attribute "
        f"(self.x = ...) so its score gets a path"
    )


def clear_scores(rollout: Rollout) -> None:
    rollout.turn_scores.clear()
    rollout.turn_rewards.clear()
    rollout.scores.clear()
    rollout.score_errors.clear()
    rollout.score_details.clear()
    rollout.judge_usage = Usage()  # re-scoring counts the judges' tokens afresh


def validate_batch(rollouts: Iterable[Any], concurrency: int) -> list[Rollout]:
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigError(f"concurrency must be an int >= 1, got {concurrency!r}")
    items = []
    for i, value in enumerate(rollouts):
        if isinstance(value, Mapping) and "example_id" not in value:
            # Each dict is its own example unless the caller groups them (same example_id):
            # otherwise every item would be example 0 and pass@k would read them as k tries.
            value = {**value, "example_id": i}
        try:
            items.append(as_rollout(value))
        except TypeError as exc:
            raise TypeError(f"item {i} of the batch: {exc}") from None
        except ValueError as exc:  # pydantic's ValidationError
            raise ValueError(f"item {i} of the batch is not a valid rollout: {exc}") from exc
    return items


__all__ = [
    "NAN",
    "Node",
    "RemovableHandle",
    "Scope",
    "ScoringError",
    "as_rollout",
    "failure_reason",
    "to_score",
]
