"""What a run is asked for: `evaluate`'s options, checked by name, and the shard it runs.

Both sit in the foundation because environments (`Environment.evaluate`, the CLI's run
driver) pass them on to the engine without importing it.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypedDict, TypeVar

from harness._core.errors import ConfigError, ConfigTypeError
from harness._core.protocol import Episodes

T = TypeVar("T")
_SHARD_TEXT = re.compile(r"^\s*(-?\d+)\s*/\s*(-?\d+)\s*$")


@dataclass(frozen=True)
class Shard:
    """Slice `index` (from 0) of `count`: the examples at plan positions p with p % count == index.

    Attributes:
        index: Which slice, from 0.
        count: How many slices the examples are cut into.
    """

    index: int
    count: int

    def __post_init__(self) -> None:
        for name in ("index", "count"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise ConfigError(f"shard {name} must be an integer, got {value!r}")
        if self.count < 1:
            raise ConfigError(f"shard {self}: the number of shards must be at least 1; e.g. 0/2")
        if not 0 <= self.index < self.count:
            raise ConfigError(
                f"shard {self}: the index must be 0..{self.count - 1} (shards are numbered from 0), "
                f"e.g. 0/{self.count}"
            )

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    @classmethod
    def parse(cls, value: str | Shard | tuple[int, int]) -> Shard:
        """A Shard from "i/N" text (what `--shard` takes), an (i, N) pair, or a Shard."""
        if isinstance(value, Shard):
            return value
        if isinstance(value, tuple) and len(value) == 2:
            return cls(*value)
        match = _SHARD_TEXT.match(value) if isinstance(value, str) else None
        if match is None:
            raise ConfigError(f"shard {value!r} is not of the form i/N (e.g. 0/4: the first of four shards)")
        return cls(int(match.group(1)), int(match.group(2)))

    def select(self, items: Sequence[T]) -> list[T]:
        """This shard's items of `items` (in plan order)."""
        return list(items[self.index :: self.count])


#: Where the rollouts of an evaluation run: the driver's own processes, or Ray actors.
ExecutorName = Literal["local", "ray"]


class EvaluateOptions(TypedDict, total=False):
    """The keyword arguments of `aevaluate` / `evaluate`, for the functions that pass them on
    (`Environment.evaluate` / `aevaluate`): typed, so a misspelt option is a type error.
    `tests/harness/engine/test_evaluation.py` checks that it lists exactly `aevaluate`'s keywords."""

    num_examples: int | None
    rollouts_per_example: int
    concurrency: int
    output_dir: str | Path | None
    resume: bool
    overwrite: bool
    progress: bool
    seed: int | None
    split: str
    sampling: Mapping[str, Any] | None
    shard: Shard | str | None
    workers: int
    executor: ExecutorName
    ray_address: str | None
    fail_on_error: float | None
    episodes: Episodes | None


def check_evaluate_options(options: Mapping[str, object], where: str) -> None:
    """Raise for a keyword `aevaluate` does not take, naming the closest one it does (Python's
    own error names only the misspelt keyword, from deep inside the call).

    Args:
        options: The keyword arguments given to `where`.
        where: The function they were given to, for the message (e.g. "env.evaluate").

    Raises:
        ConfigTypeError: An option is not one of `EvaluateOptions`.
    """
    known = list(EvaluateOptions.__annotations__)
    for name in options:
        if name not in known:
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            hint = f"did you mean {close[0]!r}? " if close else ""
            raise ConfigTypeError(
                f"{where}() has no option {name!r}; {hint}its options are: {', '.join(known)}"
            )


__all__ = ["EvaluateOptions", "ExecutorName", "Shard", "check_evaluate_options"]
