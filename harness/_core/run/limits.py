"""The limits of a run's settings, checked before anything is loaded, written or started.

One table for `evaluate` and `rubric eval` alike, so a value the command line refuses is
refused from Python too, with the same words. Each check raises `ConfigError` naming the
setting as the caller spells it (`-r/--rollouts-per-example` on the command line,
`rollouts_per_example` in Python) and the values allowed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from harness._core.errors import ConfigError

#: Caps sane for one machine (24 GiB): each planned rollout is kept in memory until the run ends.
MAX_ROLLOUTS_PER_RUN = 1_000_000

#: name -> (least, most); None: no upper bound.
INT_LIMITS: dict[str, tuple[int, int | None]] = {
    "num_examples": (1, None),
    "rollouts_per_example": (1, 1000),
    "concurrency": (1, 4096),
    "max_turns": (1, 1000),
    "max_tokens": (1, 1_000_000),
    "max_retries": (0, 100),
    "workers": (1, 256),
    "seed": (0, 2**32 - 1),
}
#: name -> (low, high, low inclusive).
FLOAT_LIMITS: dict[str, tuple[float, float, bool]] = {
    "timeout": (0.0, 86400.0, False),  # "a positive number of seconds"
    "temperature": (0.0, 2.0, True),
}


def check_limit(name: str, value: object, spelled: str | None = None) -> None:
    """Raise ConfigError when `value` (None: not given) is outside the limits of setting `name`."""
    if value is None:
        return
    flag = spelled or name
    if name == "fail_on_error":
        _check_fail_on_error(value, flag)
        return
    if name in INT_LIMITS:
        least, most = INT_LIMITS[name]
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{flag} must be an integer, got {value!r}")
        allowed = f" (allowed: {least} to {most:,})" if most is not None else ""
        if value < least:
            raise ConfigError(f"{flag} must be at least {least}, got {value}{allowed}")
        if most is not None and value > most:
            raise ConfigError(f"{flag} must be at most {most:,}, got {value:,}{allowed}")
        return
    low, high, inclusive = FLOAT_LIMITS[name]
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ConfigError(f"{flag} must be a number, got {value!r}")
    above = value >= low if inclusive else value > low
    if not (math.isfinite(value) and above and value <= high):
        what = f"a number from {low:g} to {high:g}" if inclusive else f"a positive number up to {high:g}"
        raise ConfigError(f"{flag} must be {what}, got {value}")


def _check_fail_on_error(value: object, flag: str) -> None:
    """Inspect's meaning of fail_on_error: a share below 1, or a whole count of rollouts."""
    if (
        isinstance(value, (int, float))
        and not isinstance(value, bool)
        and math.isfinite(value)
        and value >= 0
    ):
        if value < 1 or float(value).is_integer():
            return
    raise ConfigError(f"{flag} must be a share below 1 (0.1) or a count of rollouts (5), got {value}")


def check_limits(values: Mapping[str, object], spelled: Mapping[str, str] | None = None) -> None:
    """Check run settings against the limits `evaluate` and `rubric eval` share.

    Args:
        values: Settings by name (`concurrency`, `rollouts_per_example`, `max_tokens`,
            `timeout`, `fail_on_error`, ...); None means not given, and names without limits
            are ignored.
        spelled: How the caller spells a setting in messages, e.g.
            `{"concurrency": "-c/--concurrency"}` (default: its name).

    Raises:
        ConfigError: A value is outside its limits; the message names the values allowed.
    """
    for name, value in values.items():
        if name in INT_LIMITS or name in FLOAT_LIMITS or name == "fail_on_error":
            check_limit(name, value, (spelled or {}).get(name))


def check_planned(
    examples: int, rollouts_per_example: int, spelled: str = "num_examples x rollouts_per_example"
) -> int:
    """The run's size (examples x rollouts), refused above `MAX_ROLLOUTS_PER_RUN`: it must fit
    in memory, and is checked before the run starts."""
    planned = examples * rollouts_per_example
    if planned > MAX_ROLLOUTS_PER_RUN:
        raise ConfigError(
            f"{spelled}: {examples:,} examples x {rollouts_per_example:,} rollouts = {planned:,} rollouts, "
            f"more than {MAX_ROLLOUTS_PER_RUN:,} per run; lower the examples or rollouts, or split the run "
            "into shards"
        )
    return planned


__all__ = [
    "FLOAT_LIMITS",
    "INT_LIMITS",
    "MAX_ROLLOUTS_PER_RUN",
    "check_limit",
    "check_limits",
    "check_planned",
]
