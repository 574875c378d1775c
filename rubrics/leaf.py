"""Leaves: plain functions as rubric nodes, with arguments injected by parameter name.

A reward function should read like the thing it checks — `def correct(response, answer)` —
so the rollout's fields are passed by the names the function asks for. The injection plan is
built once, at construction, from the signature: scoring never inspects a signature, and a
function rubric cannot call by name (`*args`, positional-only) fails at once, naming it.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import math
import sys
from collections.abc import Callable
from operator import attrgetter
from typing import Any, NamedTuple, SupportsIndex, overload

from harness.aio import is_async_callable
from harness.errors import ConfigError, ConfigTypeError
from harness.types import INJECTED, Rollout
from rubrics.module import NAN, Rubric, ScoringError, coerce_sync, failure_reason, snake_name
from rubrics.scoring import nonfinite_error

_MISSING = object()
Getter = Callable[[Rollout], Any]


def function_name(fn: Callable[..., Any]) -> str:
    """A node name for `fn`: its `__name__`, `lambda` for lambdas, the class for callables."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    name = getattr(fn, "__name__", None)
    if not isinstance(name, str):
        return snake_name(type(fn).__name__)
    if name == "<lambda>":
        return "lambda"
    return snake_name(name) if not name.isidentifier() else name


def _qualified_name(fn: Callable[..., Any]) -> str:
    return getattr(fn, "__qualname__", None) or function_name(fn)


def _missing(leaf: str, field: str, rollout: Rollout) -> ScoringError:
    if field == "answer":
        return ScoringError(
            f"{leaf} asks for 'answer', but this rollout's answer is None; give the dataset an answer "
            "column, or the parameter a default (answer=None) if the answer is optional"
        )
    columns = ", ".join(sorted(map(str, rollout.info))) or "none"
    return ScoringError(
        f"{leaf} asks for {field!r}, which this rollout does not have; available columns: {columns}; "
        f"rollout fields: {', '.join(INJECTED)}. Add the column to the dataset or give the parameter a default"
    )


def _field_getter(leaf: str, field: str, default: Any) -> Getter:
    if field == "answer":

        def get_answer(r: Rollout) -> Any:
            value = r.answer
            if value is None:
                if default is _MISSING:
                    raise _missing(leaf, "answer", r)
                return default
            return value

        return get_answer
    return attrgetter(field) if field != "rollout" else _identity


def _identity(r: Rollout) -> Rollout:
    return r


def _column_getter(leaf: str, column: str, default: Any) -> Getter:
    if default is not _MISSING:
        return lambda r: r.info.get(column, default)

    def get_column(r: Rollout) -> Any:
        info = r.info
        if column in info:
            return info[column]
        raise _missing(leaf, column, r)

    return get_column


def _kwargs_getter(explicit: frozenset[str]) -> Callable[[Rollout], dict[str, Any]]:
    def everything(r: Rollout) -> dict[str, Any]:
        out = {k: v for k, v in r.info.items() if k not in explicit and k not in INJECTED}
        for field in INJECTED:
            if field not in explicit:
                out[field] = r if field == "rollout" else getattr(r, field)
        return out

    return everything


class Plan(NamedTuple):
    """How to call one reward function: getters for its parameters, built once."""

    positional: tuple[Getter, ...]  # positional-or-keyword parameters, in order
    keyword: tuple[tuple[str, Getter], ...]  # keyword-only parameters
    extra: Callable[[Rollout], dict[str, Any]] | None  # fills **kwargs
    columns: set[str]  # dataset columns without a default


def build_plan(fn: Callable[..., Any], leaf: str) -> Plan:
    """Read `fn`'s signature once and map each parameter to a getter on the rollout."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ConfigError(
            f"cannot read the parameters of reward function {_qualified_name(fn)}: {exc}; wrap it in a def"
        ) from None
    positional: list[Getter] = []
    keyword: list[tuple[str, Getter]] = []
    columns: set[str] = set()
    var_kw = False
    for p in signature.parameters.values():
        if p.kind is p.VAR_POSITIONAL or p.kind is p.POSITIONAL_ONLY:
            shown = f"*{p.name}" if p.kind is p.VAR_POSITIONAL else f"{p.name}, /"
            raise ConfigError(
                f"reward function {_qualified_name(fn)} takes {shown!r}; rubric passes arguments by name, so use "
                f"named parameters ({', '.join(INJECTED)}, or dataset column names) or **kwargs"
            )
        if p.kind is p.VAR_KEYWORD:
            var_kw = True
            continue
        default = _MISSING if p.default is p.empty else p.default
        if p.name in INJECTED:
            getter = _field_getter(leaf, p.name, default)
        else:
            getter = _column_getter(leaf, p.name, default)
            if default is _MISSING:
                columns.add(p.name)
        if p.kind is p.KEYWORD_ONLY:
            keyword.append((p.name, getter))
        else:
            positional.append(getter)
    explicit = frozenset(signature.parameters)
    extra = _kwargs_getter(explicit) if var_kw else None
    return Plan(tuple(positional), tuple(keyword), extra, columns)


def make_caller(fn: Callable[..., Any], plan: Plan) -> Callable[[Rollout], Any]:
    """A closure calling `fn` for a rollout; small positional cases skip building a kwargs dict."""
    pos, kw, extra = plan.positional, plan.keyword, plan.extra
    if not kw and extra is None:
        if len(pos) == 0:
            return lambda r: fn()
        if len(pos) == 1:
            (g0,) = pos
            return lambda r: fn(g0(r))
        if len(pos) == 2:
            g0, g1 = pos
            return lambda r: fn(g0(r), g1(r))
        if len(pos) == 3:
            g0, g1, g2 = pos
            return lambda r: fn(g0(r), g1(r), g2(r))

    def call(r: Rollout) -> Any:
        kwargs = {name: get(r) for name, get in kw}
        if extra is not None:
            kwargs.update(extra(r))
        return fn(*[get(r) for get in pos], **kwargs)

    return call


class FunctionRubric(Rubric):
    """A leaf wrapping a reward function; made by `reward(fn)` or by passing a function to a container."""

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

    def _score_sync(self, rollout: Rollout, path: str) -> float:
        # Lean version of Rubric._score_sync for the common hook-free leaf: a reward
        # function cannot reach the scoring scope (it has no `self`), so none is set up.
        if self._pre_hooks or self._hooks:
            return Rubric._score_sync(self, rollout, path)
        exc: Exception | None = None
        try:
            raw = self._call(rollout)
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
        if score - score != 0.0:  # NaN or ±inf (x - x is 0.0 only for finite x): unscored, say why
            exc = exc or nonfinite_error(self, score)
            score = NAN if self.on_error is None else self.on_error
        d = self.__dict__
        d["last_score"] = score
        d["last_error"] = exc
        if path:
            rollout.scores[path] = score
        else:
            rollout.reward = score
        if exc is not None:
            rollout.score_errors[path] = failure_reason(exc)
        return score

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
    reduce_turns: str = "mean",
) -> FunctionRubric: ...
@overload
def reward(
    fn: None = None,
    *,
    name: str | None = None,
    on_error: float | None = math.nan,
    per_turn: bool = False,
    reduce_turns: str = "mean",
) -> Callable[[Callable[..., Any]], FunctionRubric]: ...


def reward(
    fn: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    on_error: float | None = math.nan,
    per_turn: bool = False,
    reduce_turns: str = "mean",
) -> FunctionRubric | Callable[[Callable[..., Any]], FunctionRubric]:
    """Turn a function into a rubric leaf: `reward(fn)`, `@reward`, or `@reward(name=..., on_error=0.0)`.

    Parameters are filled by name (rollout, prompt, completion, response, answer, info, task,
    state; any other name is a dataset column). If the function raises or returns a
    non-number the node scores NaN with the reason recorded, unless `on_error` gives a value.

    With `per_turn=True` the function scores each assistant turn and may also ask for `turn`
    (that message), `turn_index` and `messages` (the conversation up to it); the scores land
    in `rollout.turn_scores`, and `reduce_turns` ("mean", "sum", "last", "min", "max") makes
    the node's episode score from them. See `rubrics.turns`.
    """

    def make(f: Callable[..., Any]) -> FunctionRubric:
        if per_turn:
            from rubrics.turns import TurnFunctionRubric  # rubrics.turns builds on this module

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


__all__ = ["FunctionRubric", "as_rubric", "function_name", "reward"]
