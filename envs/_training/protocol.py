"""What the trainer adapters read from an environment: `TrainableEnvironment`.

`Environment.trl()` and `Environment.verl()` build the adapters (`envs._training.trl`,
`envs._training.verl`), so the adapters cannot name `Environment` without a circle, not even
for types. They take this Protocol instead: the members they use, typed here, below both.
`Environment` satisfies it structurally, and mypy checks that wherever `env.trl()` or
`env.verl()` passes the environment in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from envs._tools.functions import ToolLike
from harness._core.protocol import EnvironmentProtocol
from harness._core.types import Message, Rollout

if TYPE_CHECKING:  # pragma: no cover
    from datasets import Dataset
    from rubrics._tree.module import Rubric


class RegistrySource(Protocol):
    """How the registry built an environment (`envs._registry.EnvironmentSpec`): what a worker
    process loads again, and the spec and arguments the verl config names it by."""

    @property
    def spec(self) -> str: ...

    @property
    def kwargs(self) -> Mapping[str, Any]: ...

    def load(self, *, worker: bool = False) -> EnvironmentProtocol: ...


class TrainableEnvironment(EnvironmentProtocol, Protocol):
    """The members of an `envs.Environment` the TRL and verl adapters use."""

    @property
    def rubric(self) -> Rubric: ...

    @property
    def tools(self) -> Sequence[ToolLike]: ...

    @property
    def parser(self) -> object: ...

    @property
    def source(self) -> RegistrySource | None: ...

    def get_dataset(self, split: str = "eval", n: int | None = None, seed: int | None = None) -> Dataset: ...

    def format_prompt(self, row: Mapping[str, Any]) -> list[Message]: ...

    def prepare_for_scoring(self, rollout: Rollout) -> None: ...


__all__ = ["RegistrySource", "TrainableEnvironment"]
