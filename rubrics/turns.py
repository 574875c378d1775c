"""Per-turn scores: nodes that score each assistant turn, and containers combining them turn by turn.

A per-turn node (`reward(fn, per_turn=True)`, or a `Rubric` subclass with `forward_turn`)
scores every assistant message of a rollout from the recorded transcript, so it is stateless:
it batches, runs concurrently and re-scores saved results offline, unlike a trajectory rubric
that accumulates steps while an episode runs. Its scores land in
`rollout.turn_scores[<node path>]` (one float or NaN per assistant turn); its episode score,
which flows up the tree as usual, is their mean (or `reduce_turns="sum" | "last" | "min" | "max"`).

After the root has scored, containers above per-turn nodes combine their children's per-turn
scores turn by turn, and the root's list is `turn_scores[""]`:
  - `WeightedSum`: the weighted sum at each turn. A child scored per episode counts as an
    outcome: its score on the final turn, 0.0 on the turns before.
  - `Gate` / `Sequential`: decided per episode ("prerequisite, then grade"): the last child's
    per-turn scores when the episode passes, zeros when it does not, NaN when it is unscored.
`rubrics.credit` turns these into `rollout.turn_rewards`.
"""

from __future__ import annotations

import asyncio
import inspect
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from harness.aio import is_async_callable
from harness.errors import ConfigError
from harness.types import Message, Rollout
from rubrics.leaf import FunctionRubric, _kwargs_getter, function_name
from rubrics.module import Rubric
from rubrics.scoring import NAN, ScoringError, failure_reason, join_path, to_score

#: Parameter names a per-turn reward function gets from the turn it scores.
TURN_INJECTED: tuple[str, ...] = ("turn", "turn_index", "messages")
TURN_REDUCTIONS: tuple[str, ...] = ("mean", "sum", "last", "min", "max")


@dataclass(frozen=True)
class Turn:
    """One assistant turn: its index among assistant turns, the message, and the conversation up to it."""

    index: int
    message: Message
    messages: list[Message]


def assistant_turns(rollout: Rollout) -> list[Turn]:
    """Every assistant message of the completion as a `Turn`, in order."""
    turns: list[Turn] = []
    for position, message in enumerate(rollout.completion):
        if message.role == "assistant":
            messages = [*rollout.prompt, *rollout.completion[: position + 1]]
            turns.append(Turn(len(turns), message, messages))
    return turns


def num_turns(rollout: Rollout) -> int:
    """How many assistant turns the rollout has."""
    return sum(1 for m in rollout.completion if m.role == "assistant")


def check_reduce_turns(value: Any) -> str:
    if value not in TURN_REDUCTIONS:
        raise ConfigError(f"reduce_turns={value!r}; use one of {', '.join(TURN_REDUCTIONS)}")
    return str(value)


def reduce_turns(values: Sequence[float], how: str) -> float:
    """The episode score from per-turn scores; NaN if any turn is NaN (it flows up)."""
    if any(v != v for v in values):
        return NAN
    if how == "mean":
        return sum(values) / len(values)
    if how == "sum":
        return float(sum(values))
    if how == "last":
        return values[-1]
    return min(values) if how == "min" else max(values)


def _settle_turns(node: Rubric, rollout: Rollout, values: list[float], errors: list[str]) -> float:
    path = node._own_scope(rollout, "forward_turn").path
    rollout.turn_scores[path] = values
    if errors:
        raise ScoringError("; ".join(errors))
    return reduce_turns(values, getattr(node, "reduce_turns", "mean"))


def score_turns(node: Rubric, rollout: Rollout) -> Any:
    """`forward` of a node with `forward_turn`: score each turn, record them, return the episode score.

    Awaitable when the node is async (its turns are then scored concurrently). A turn that
    raises is NaN, and the node is unscored with every failing turn named in the reason.
    """
    turns = assistant_turns(rollout)
    if not turns:
        raise ScoringError(f"{node.label} scores assistant turns, and this rollout has none")
    turn_fn = node.forward_turn
    if node._own_is_async():

        async def scored() -> float:
            async def one(turn: Turn) -> Any:
                out = turn_fn(rollout, turn)
                return await out if inspect.isawaitable(out) else out

            raw = await asyncio.gather(*(one(t) for t in turns), return_exceptions=True)
            return _settle_turns(node, rollout, *_collect(node, list(raw)))

        return scored()
    results: list[Any] = []
    for turn in turns:
        try:
            results.append(turn_fn(rollout, turn))
        except Exception as exc:
            results.append(exc)
    return _settle_turns(node, rollout, *_collect(node, results))


def _collect(node: Rubric, raw: list[Any]) -> tuple[list[float], list[str]]:
    """Per-turn scores and the failures; a failed turn takes the node's `on_error` value, as
    a failed episode does (NaN by default), so a node told to score failures never hands
    NaN turn rewards to training."""
    fallback = NAN if node.on_error is None else node.on_error
    values: list[float] = []
    errors: list[str] = []
    for index, item in enumerate(raw):
        if isinstance(item, BaseException):
            if not isinstance(item, Exception):
                raise item
            values.append(fallback)
            errors.append(f"turn {index}: {failure_reason(item)}")
            continue
        try:
            values.append(to_score(item, node))
        except TypeError as exc:
            values.append(fallback)
            errors.append(f"turn {index}: {exc}")
    return values, errors


# ---------------------------------------------------------------- per-turn reward functions
TurnGetter = Callable[[Rollout, Turn], Any]


def _turn_getter(name: str) -> TurnGetter:
    if name == "turn":
        return lambda r, t: t.message
    if name == "turn_index":
        return lambda r, t: t.index
    return lambda r, t: t.messages


def turn_plan(fn: Callable[..., Any], leaf: str) -> tuple[list[tuple[str, TurnGetter]], bool, set[str]]:
    """(keyword getters, takes **kwargs, required columns) for a per-turn reward function."""
    from harness.types import INJECTED
    from rubrics.leaf import _MISSING, _column_getter, _field_getter, build_plan

    build_plan(fn, leaf)  # the same checks (readable signature, no *args / positional-only)
    getters: list[tuple[str, TurnGetter]] = []
    columns: set[str] = set()
    var_kw = False
    for p in inspect.signature(fn).parameters.values():
        if p.kind is p.VAR_KEYWORD:
            var_kw = True
            continue
        default = _MISSING if p.default is p.empty else p.default
        if p.name in TURN_INJECTED:
            getters.append((p.name, _turn_getter(p.name)))
            continue
        if p.name in INJECTED:
            base = _field_getter(leaf, p.name, default)
        else:
            base = _column_getter(leaf, p.name, default)
            if default is _MISSING:
                columns.add(p.name)
        getters.append((p.name, _rollout_getter(base)))
    return getters, var_kw, columns


def _rollout_getter(get: Callable[[Rollout], Any]) -> TurnGetter:
    """A getter of the rollout, called with the turn too (and ignoring it)."""

    def getter(rollout: Rollout, turn: Turn) -> Any:
        return get(rollout)

    return getter


class TurnFunctionRubric(FunctionRubric):
    """A leaf that scores each assistant turn with a function; made by `reward(fn, per_turn=True)`.

    The function gets `turn` (the assistant message), `turn_index` (0-based among assistant
    turns) and `messages` (the conversation up to and including that turn), besides every
    name a plain reward function can ask for.
    """

    config_fields = ("reduce_turns",)

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        on_error: float | None = math.nan,
        reduce_turns: str = "mean",
    ) -> None:
        if isinstance(fn, Rubric) or not callable(fn):
            raise ConfigError(f"reward(per_turn=True) needs a function, got {type(fn).__name__}")
        # Not FunctionRubric.__init__: that plans rollout-level calls; turns need their own plan.
        Rubric.__init__(self, name=name if name is not None else function_name(fn), on_error=on_error)
        self.__dict__["_fn"] = fn
        self.__dict__["_async"] = is_async_callable(fn)
        self._plan()
        self.reduce_turns = reduce_turns

    def _plan(self) -> None:
        getters, var_kw, columns = turn_plan(self._fn, f"reward {self.name!r}")
        explicit = frozenset(name for name, _ in getters)
        self.__dict__.update(
            _getters=getters, _columns=columns, _extra=_kwargs_getter(explicit) if var_kw else None
        )

    @property
    def reduce_turns(self) -> str:
        """How the per-turn scores make the episode score: mean, sum, last, min or max."""
        return str(self.__dict__["_reduce_turns"])

    @reduce_turns.setter
    def reduce_turns(self, value: str) -> None:
        self.__dict__["_reduce_turns"] = check_reduce_turns(value)

    forward = Rubric.forward  # per turn (FunctionRubric's forward calls the function once)
    _score_sync = Rubric._score_sync

    def forward_turn(self, rollout: Rollout, turn: Turn) -> Any:
        kwargs = {name: get(rollout, turn) for name, get in self._getters}
        if self._extra is not None:
            extra = self._extra(rollout)
            for name in TURN_INJECTED:
                if name not in kwargs:
                    extra[name] = _turn_getter(name)(rollout, turn)
            kwargs.update(extra)
        return self._fn(**kwargs)

    def _own_is_async(self) -> bool:
        return self._async

    def node_required_columns(self) -> set[str]:
        return set(self._columns)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        for key in ("_getters", "_extra"):
            state.pop(key, None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._plan()

    def extra_repr(self) -> str:
        parts = [str(self.name), "per_turn", f"reduce_turns={self.reduce_turns!r}"]
        if self._async:
            parts.append("async")
        if self.on_error is not None:
            parts.append(f"on_error={self.on_error:g}")
        return ", ".join(parts)

    def _repr_head(self) -> str:
        return f"reward({self.extra_repr()})"


# ---------------------------------------------------------------- containers, turn by turn
def has_turn_nodes(root: Rubric) -> bool:
    """Whether any node of the tree scores turns (`forward_turn`)."""
    return root._has_turn_nodes()


def finish_turns(root: Rubric, rollout: Rollout) -> None:
    """After the root scored: fill each container's per-turn scores from its children's, bottom-up."""
    length = num_turns(rollout)
    if length:
        _turns_of(root, "", rollout, length)


def _turns_of(node: Rubric, path: str, rollout: Rollout, length: int) -> list[float] | None:
    if not has_turn_nodes(node):
        return None
    children = {
        name: _turns_of(child, join_path(path, name), rollout, length)
        for name, child in node.named_children()
    }
    own = rollout.turn_scores.get(path)
    if own is not None or not children:
        return own
    combined = _combine(node, path, children, rollout, length)
    if combined is not None:
        rollout.turn_scores[path] = combined
    return combined


def _episode_score(rollout: Rollout, path: str) -> float:
    return rollout.reward if not path else rollout.scores.get(path, NAN)


def _outcome(rollout: Rollout, path: str, length: int) -> list[float]:
    """A per-episode score as per-turn scores: on the final turn, 0.0 before it."""
    return [0.0] * (length - 1) + [_episode_score(rollout, path)]


def _combine(
    node: Rubric, path: str, children: Mapping[str, list[float] | None], rollout: Rollout, length: int
) -> list[float] | None:
    from rubrics.containers import Gate, Sequential, WeightedSum  # containers import leaves and this tree

    vectors = {
        name: vector if vector is not None else _outcome(rollout, join_path(path, name), length)
        for name, vector in children.items()
    }
    if isinstance(node, WeightedSum):
        weights = node.weights
        return [sum(weights[name] * vector[t] for name, vector in vectors.items()) for t in range(length)]
    if isinstance(node, Gate):  # the gate's own rule, on its child's episode score
        (name,) = vectors
        child = _episode_score(rollout, join_path(path, name))
        if child != child:
            return [NAN] * length
        return vectors[name] if child >= node.threshold else [0.0] * length
    if isinstance(node, Sequential):
        episode = _episode_score(rollout, path)
        if episode != episode:
            return [NAN] * length
        if episode == 0.0:
            return [0.0] * length
        return vectors[list(vectors)[-1]]
    return None  # a custom container: its own rule for combining turns is unknown
