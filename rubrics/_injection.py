"""How a reward function's arguments are filled from a rollout (and, per turn, from a turn).

A reward function should read like the thing it checks — `def correct(response, answer)` —
so the rollout's fields are passed by the names the function asks for. The injection plan is
built once, at construction, from the signature: scoring never inspects a signature, and a
function that cannot be called by name (`*args`, positional-only) fails at once, naming it.
The leaves in `rubrics._leaf` hold a plan and call through it.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from operator import attrgetter
from typing import Any, NamedTuple

from harness._core.errors import ConfigError
from harness._core.protocol import SANDBOX, scoring_resource
from harness._core.types import INJECTED, Rollout
from rubrics._tree.scoring import ScoringError, snake_name
from rubrics._tree.turns import TURN_INJECTED, Turn

MISSING = object()
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


def sandbox_getter(leaf: str, default: Any) -> Getter:
    """The rollout's live sandbox, for a parameter named `sandbox` (`SANDBOX`): an agent's,
    found in the scoring scope while the rollout is scored (never on the saved record)."""

    def get_sandbox(r: Rollout) -> Any:
        sandbox = scoring_resource(r, SANDBOX)
        if sandbox is None:
            if default is MISSING:
                raise ScoringError(
                    f"{leaf} asks for 'sandbox', but this rollout has none: it reads the sandbox an agent "
                    "ran in, so run the environment with an agent (rubric eval --agent NAME, or "
                    "env.evaluate(..., agent=NAME)), and score it before the sandbox is released"
                )
            return default
        return sandbox

    return get_sandbox


def field_getter(leaf: str, field: str, default: Any) -> Getter:
    if field == "answer":

        def get_answer(r: Rollout) -> Any:
            value = r.answer
            if value is None:
                if default is MISSING:
                    raise _missing(leaf, "answer", r)
                return default
            return value

        return get_answer
    return attrgetter(field) if field != "rollout" else _identity


def _identity(r: Rollout) -> Rollout:
    return r


def column_getter(leaf: str, column: str, default: Any) -> Getter:
    if default is not MISSING:
        return lambda r: r.info.get(column, default)

    def get_column(r: Rollout) -> Any:
        info = r.info
        if column in info:
            return info[column]
        raise _missing(leaf, column, r)

    return get_column


def kwargs_getter(explicit: frozenset[str]) -> Callable[[Rollout], dict[str, Any]]:
    def everything(r: Rollout) -> dict[str, Any]:
        out = {k: v for k, v in r.info.items() if k not in explicit and k not in INJECTED}
        for field in INJECTED:
            if field not in explicit:
                out[field] = r if field == "rollout" else getattr(r, field)
        return out

    return everything


class CallPlan(NamedTuple):
    """How to call one reward function: getters for its parameters, built once."""

    positional: tuple[Getter, ...]  # positional-or-keyword parameters, in order
    keyword: tuple[tuple[str, Getter], ...]  # keyword-only parameters
    extra: Callable[[Rollout], dict[str, Any]] | None  # fills **kwargs
    columns: set[str]  # dataset columns without a default


def build_plan(fn: Callable[..., Any], leaf: str) -> CallPlan:
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
        default = MISSING if p.default is p.empty else p.default
        if p.name in INJECTED:
            getter = field_getter(leaf, p.name, default)
        elif p.name == SANDBOX:
            getter = sandbox_getter(leaf, default)
        else:
            getter = column_getter(leaf, p.name, default)
            if default is MISSING:
                columns.add(p.name)
        if p.kind is p.KEYWORD_ONLY:
            keyword.append((p.name, getter))
        else:
            positional.append(getter)
    explicit = frozenset(signature.parameters)
    extra = kwargs_getter(explicit) if var_kw else None
    return CallPlan(tuple(positional), tuple(keyword), extra, columns)


def make_caller(fn: Callable[..., Any], plan: CallPlan) -> Callable[[Rollout], Any]:
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


# ---------------------------------------------------------------- per-turn reward functions
TurnGetter = Callable[[Rollout, Turn], Any]


def turn_getter(name: str) -> TurnGetter:
    if name == "turn":
        return lambda r, t: t.message
    if name == "turn_index":
        return lambda r, t: t.index
    return lambda r, t: t.messages


def turn_plan(fn: Callable[..., Any], leaf: str) -> tuple[list[tuple[str, TurnGetter]], bool, set[str]]:
    """(keyword getters, takes **kwargs, required columns) for a per-turn reward function."""
    build_plan(fn, leaf)  # the same checks (readable signature, no *args / positional-only)
    getters: list[tuple[str, TurnGetter]] = []
    columns: set[str] = set()
    var_kw = False
    for p in inspect.signature(fn).parameters.values():
        if p.kind is p.VAR_KEYWORD:
            var_kw = True
            continue
        default = MISSING if p.default is p.empty else p.default
        if p.name in TURN_INJECTED:
            getters.append((p.name, turn_getter(p.name)))
            continue
        if p.name in INJECTED:
            base = field_getter(leaf, p.name, default)
        elif p.name == SANDBOX:
            base = sandbox_getter(leaf, default)
        else:
            base = column_getter(leaf, p.name, default)
            if default is MISSING:
                columns.add(p.name)
        getters.append((p.name, _rollout_getter(base)))
    return getters, var_kw, columns


def _rollout_getter(get: Callable[[Rollout], Any]) -> TurnGetter:
    """A getter of the rollout, called with the turn too (and ignoring it)."""

    def getter(rollout: Rollout, turn: Turn) -> Any:
        return get(rollout)

    return getter


__all__ = [
    "MISSING",
    "CallPlan",
    "Getter",
    "TurnGetter",
    "build_plan",
    "column_getter",
    "field_getter",
    "function_name",
    "kwargs_getter",
    "make_caller",
    "turn_getter",
    "turn_plan",
]
