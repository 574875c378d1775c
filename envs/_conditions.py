"""`@stop`: mark an environment method as a condition that ends the episode.

A marked method takes the rollout and returns a truthy value (sync or async) when the episode
should end; the rollout's `stop_reason` becomes the method's name, so results say *which*
condition fired. Conditions are checked in the order they are defined, base classes first.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from harness._core.errors import ConfigTypeError

F = TypeVar("F", bound=Callable[..., Any])

_MARK = "__rubric_stop__"


def stop(fn: F) -> F:
    """Decorator: `fn(self, rollout) -> bool` ends the episode with stop_reason `fn.__name__`.

    Args:
        fn: The method to mark as a stop condition.

    Returns:
        `fn` itself, marked.

    Raises:
        ConfigTypeError: `fn` is not callable.
    """
    if not callable(fn):
        raise ConfigTypeError(f"@stop decorates a method (self, rollout) -> bool, got {type(fn).__name__}")
    setattr(fn, _MARK, True)
    return fn


def is_stop_condition(value: Any) -> bool:
    """True for a function marked with `@stop`."""
    return bool(getattr(value, _MARK, False))


@functools.cache
def stop_condition_names(cls: type) -> tuple[str, ...]:
    """Names of the `@stop` methods of `cls`, in definition order, base classes first.

    A subclass that overrides a condition keeps its position; overriding without `@stop`
    removes it, which is how a subclass switches an inherited condition off. Cached per
    class: it runs after every model turn.
    """
    names: list[str] = []
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            if is_stop_condition(value) and name not in names:
                names.append(name)
    return tuple(name for name in names if is_stop_condition(getattr(cls, name, None)))


__all__ = ["is_stop_condition", "stop", "stop_condition_names"]
