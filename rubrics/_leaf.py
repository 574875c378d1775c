"""Leaves: plain functions as rubric nodes, scored per episode or per assistant turn.

`reward(fn)` (or `@reward`) makes a `FunctionRubric`, whose arguments are filled by
parameter name through a plan built once (`rubrics._injection`); `reward(fn, per_turn=True)`
makes a `TurnFunctionRubric`, which scores every assistant turn (`rubrics._tree.turns`).
"""

from __future__ import annotations

import importlib
import math
import sys
from collections.abc import Callable
from typing import Any, ClassVar, SupportsIndex, overload

from harness._core.aio import is_async_callable
from harness._core.errors import ConfigError, ConfigTypeError
from harness._core.types import Rollout
from rubrics._injection import (
    build_plan,
    function_name,
    kwargs_getter,
    make_caller,
    turn_getter,
    turn_plan,
)
from rubrics._tree.module import Rubric
from rubrics._tree.turns import TURN_INJECTED, Turn, TurnReduce, check_reduce_turns


class FunctionRubric(Rubric):
    """A leaf wrapping a reward function; made by `reward(fn)` or by passing a function to a container.

    Args:
        fn: the reward function (sync or `async def`); its parameters are filled by name.
        name: the node's name among its parent's children (default: from the function or class).
        on_error: the score given when this node fails (default NaN, "unscored", with the reason
            kept in `rollout.score_errors`).
    """

    # A reward function has no `self`, so it cannot reach the scoring scope (record_error,
    # child calls): scored without one, the leaf takes the hot path's shortest route.
    _scoped: ClassVar[bool] = False
    _fn: Callable[..., Any]
    _async: bool
    _call: Callable[[Rollout], Any]
    _columns: set[str]

    def __init__(
        self, fn: Callable[..., Any], *, name: str | None = None, on_error: float | None = math.nan
    ) -> None:
        if isinstance(fn, Rubric):
            raise ConfigTypeError(
                f"{fn.label} is already a Rubric; use it directly instead of wrapping it in reward()"
            )
        if not callable(fn):
            raise ConfigTypeError(f"reward() needs a function, got {type(fn).__name__} {fn!r}")
        super().__init__(name=name if name is not None else function_name(fn), on_error=on_error)
        d = self.__dict__
        d["_fn"] = fn
        d["_async"] = is_async_callable(fn)
        plan = build_plan(fn, f"reward {self.name!r}")
        d["_call"] = make_caller(fn, plan)
        d["_columns"] = plan.columns
        # The caller closure shadows the `forward` method on this instance: one Python frame
        # less per leaf on the scoring hot path. `forward` still behaves the same.
        d["forward"] = d["_call"]

    def __reduce_ex__(self, protocol: SupportsIndex) -> Any:
        # `@reward def f(...)` rebinds the module's `f` to this leaf, so the function cannot be
        # pickled by reference any more ("not the same object as mymod.f"): such a leaf is
        # pickled by reference itself. Any other leaf pickles its state (below).
        if _named_at_module_level(self):
            return (_leaf_by_name, (self._fn.__module__, self._fn.__qualname__))
        return super().__reduce_ex__(protocol)

    def __getstate__(self) -> dict[str, Any]:
        # The caller closure cannot be pickled; it is rebuilt from the function on load
        # (TRL's async trainer and worker processes pickle reward functions).
        state = dict(self.__dict__)
        state.pop("_call", None)
        state.pop("forward", None)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        call = make_caller(self._fn, build_plan(self._fn, f"reward {self.name!r}"))
        self.__dict__["_call"] = call
        self.__dict__["forward"] = call

    @property
    def fn(self) -> Callable[..., Any]:
        """The wrapped function (call it directly to bypass the tree)."""
        return self._fn

    def forward(self, rollout: Rollout) -> Any:
        return self._call(rollout)

    def _own_is_async(self) -> bool:
        return self._async

    def node_required_columns(self) -> set[str]:
        return set(self._columns)

    def extra_repr(self) -> str:
        parts = [str(self.name)]
        if self._async:
            parts.append("async")
        if self.on_error is not None:
            parts.append(f"on_error={self.on_error:g}")
        return ", ".join(parts)

    def _repr_head(self) -> str:
        return f"reward({self.extra_repr()})"


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
        reduce_turns: TurnReduce = "mean",
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
            _getters=getters, _columns=columns, _extra=kwargs_getter(explicit) if var_kw else None
        )

    @property
    def reduce_turns(self) -> TurnReduce:
        """How the per-turn scores make the episode score: mean, sum, last, min or max."""
        how: TurnReduce = self.__dict__["_reduce_turns"]
        return how

    @reduce_turns.setter
    def reduce_turns(self, value: TurnReduce) -> None:
        self.__dict__["_reduce_turns"] = check_reduce_turns(value)

    forward = Rubric.forward  # per turn (FunctionRubric's forward calls the function once)
    _scoped = True  # its turns are recorded on the scope (`rubrics._tree.turns`)

    def forward_turn(self, rollout: Rollout, turn: Turn) -> Any:
        kwargs = {name: get(rollout, turn) for name, get in self._getters}
        if self._extra is not None:
            extra = self._extra(rollout)
            for name in TURN_INJECTED:
                if name not in kwargs:
                    extra[name] = turn_getter(name)(rollout, turn)
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


def _named_at_module_level(leaf: FunctionRubric) -> bool:
    """True when the leaf is what its function's module-level name now refers to (`@reward`)."""
    module = sys.modules.get(getattr(leaf._fn, "__module__", None) or "")
    qualname = getattr(leaf._fn, "__qualname__", "")
    if module is None or not qualname or "<" in qualname:
        return False
    target: Any = module
    for part in qualname.split("."):
        target = getattr(target, part, None)
    return target is leaf


def _leaf_by_name(module: str, qualname: str) -> Any:
    """Unpickle a `@reward` leaf: the object its module defines under that name."""
    target: Any = importlib.import_module(module)
    for part in qualname.split("."):
        target = getattr(target, part)
    return target


@overload
def reward(
    fn: Callable[..., Any],
    *,
    name: str | None = None,
    on_error: float | None = math.nan,
    per_turn: bool = False,
    reduce_turns: TurnReduce = "mean",
) -> FunctionRubric: ...
@overload
def reward(
    fn: None = None,
    *,
    name: str | None = None,
    on_error: float | None = math.nan,
    per_turn: bool = False,
    reduce_turns: TurnReduce = "mean",
) -> Callable[[Callable[..., Any]], FunctionRubric]: ...


def reward(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    on_error: float | None = math.nan,
    per_turn: bool = False,
    reduce_turns: TurnReduce = "mean",
) -> FunctionRubric | Callable[[Callable[..., Any]], FunctionRubric]:
    """Turn a function into a rubric leaf: `reward(fn)`, `@reward`, or `@reward(name=..., on_error=0.0)`.

    Parameters are filled by name (rollout, prompt, completion, response, answer, info, task,
    state; any other name is a dataset column). If the function raises or returns a
    non-number the node scores NaN with the reason recorded, unless `on_error` gives a value.

    With `per_turn=True` the function scores each assistant turn and may also ask for `turn`
    (that message), `turn_index` and `messages` (the conversation up to it); the scores land
    in `rollout.turn_scores`, and `reduce_turns` ("mean", "sum", "last", "min", "max") makes
    the node's episode score from them. See `rubrics._tree.turns`.

    Args:
        fn: the reward function; without it, `reward(...)` returns a decorator.
        name: the node's name among its parent's children (default: from the function or class).
        on_error: the score given when this node fails (default NaN, "unscored", with the reason
            kept in `rollout.score_errors`).
        per_turn: score each assistant turn rather than the whole rollout.
        reduce_turns: how a per-turn node's episode score is made from its turn scores.

    Returns:
        The leaf (a `FunctionRubric`), or a decorator making one when `fn` is not given.

    Raises:
        ConfigError: `reduce_turns` given for a leaf that is not per-turn.
    """

    def make(f: Callable[..., Any]) -> FunctionRubric:
        if per_turn:
            return TurnFunctionRubric(f, name=name, on_error=on_error, reduce_turns=reduce_turns)
        if reduce_turns != "mean":
            raise ConfigError("reduce_turns only applies to per-turn leaves: reward(fn, per_turn=True, ...)")
        return FunctionRubric(f, name=name, on_error=on_error)

    return make if fn is None else make(fn)


def as_rubric(value: Any, where: str = "a rubric container") -> Rubric:
    """A Rubric as is; a plain callable as a leaf; anything else is a TypeError naming `where`."""
    if isinstance(value, Rubric):
        return value
    if callable(value):
        return FunctionRubric(value)
    raise ConfigTypeError(
        f"{where} takes Rubrics or reward functions, got {type(value).__name__} {value!r:.60}"
    )


__all__ = ["FunctionRubric", "TurnFunctionRubric", "as_rubric", "function_name", "reward"]
