"""The three shapes of episode most tasks need, as thin, checked presets of `Environment`.

- `SingleTurnEnv`: one model turn, no tools (question -> answer -> score).
- `ToolEnv`: the model calls tools until it answers without calling one, or `max_turns`.
- `MultiTurnEnv`: subclass it and override `env_response` (and optionally `setup_state`,
  `is_done`, `@stop` conditions) to script the other side of a conversation (games,
  simulated users).

Each preset only fixes defaults and rejects arguments that contradict its shape, so a
mistake (tools on a single-turn env) fails at construction instead of being ignored. Their
keywords are `Environment`'s, typed once (`EnvironmentOptions`), so a type checker and an
editor show what each preset takes.
"""

from __future__ import annotations

from typing import ClassVar, Unpack

from envs._environment import Environment, EnvironmentOptions
from envs._inputs import DatasetSource, RubricSource
from harness._core.errors import ConfigError


class SingleTurnEnv(Environment):
    """One assistant turn and no tools; `max_turns` is always 1.

    Args:
        dataset: The rows to run, as for `Environment`.
        rubric: What scores a rollout, as for `Environment`.
        **options: `Environment`'s other keywords (`EnvironmentOptions`); `max_turns` may only
            be None or 1 and `tools` only empty (use `ToolEnv` for tools).
    """

    default_max_turns: ClassVar[int] = 1

    def __init__(
        self, dataset: DatasetSource, rubric: RubricSource, **options: Unpack[EnvironmentOptions]
    ) -> None:
        if options.get("tools"):
            raise ConfigError(
                "SingleTurnEnv takes no tools; use ToolEnv(dataset, rubric, tools=[...]) for tool use"
            )
        if options.get("max_turns") not in (None, 1):
            raise ConfigError(
                f"SingleTurnEnv always has max_turns=1 (got {options.get('max_turns')!r}); "
                "use MultiTurnEnv or ToolEnv for longer episodes"
            )
        super().__init__(dataset, rubric, **options)


class ToolEnv(Environment):
    """The model may call `tools`; the episode ends when it answers without a tool call.

    `max_turns` (default 10) bounds a model that never stops calling tools.

    Args:
        dataset: The rows to run, as for `Environment`.
        rubric: What scores a rollout, as for `Environment`.
        **options: `Environment`'s other keywords (`EnvironmentOptions`); `tools` is required.
    """

    default_max_turns: ClassVar[int] = 10

    def __init__(
        self, dataset: DatasetSource, rubric: RubricSource, **options: Unpack[EnvironmentOptions]
    ) -> None:
        if not options.get("tools"):
            raise ConfigError(
                "ToolEnv needs tools=[...] (functions, envs.Tool or envs.mcp_server(...)); without tools use SingleTurnEnv"
            )
        super().__init__(dataset, rubric, **options)


class MultiTurnEnv(Environment):
    """An environment that talks back: subclass it and override `env_response`.

    - `env_response(rollout)` (required): the reply after each model turn: messages, a str
      (one user message), or None to end the episode ("completed").
    - `setup_state(state, example)`: per-rollout state (sync or async).
    - `is_done(rollout)`: True ends the episode ("completed").
    - methods decorated with `@envs.stop`: end it with the method's name as `stop_reason`.
    Tools work too: a turn with tool calls gets the tool results instead of `env_response`.

    What sets it apart from `Environment`: `max_turns` defaults to 10, and a class that does
    not override `env_response` is rejected at construction, since every episode would end
    after the model's first answer (that is `SingleTurnEnv`, or `ToolEnv` with tools).

    Args:
        dataset: The rows to run, as for `Environment`.
        rubric: What scores a rollout, as for `Environment`.
        **options: `Environment`'s other keywords (`EnvironmentOptions`).
    """

    default_max_turns: ClassVar[int] = 10

    def __init__(
        self, dataset: DatasetSource, rubric: RubricSource, **options: Unpack[EnvironmentOptions]
    ) -> None:
        if type(self).env_response is Environment.env_response:
            raise ConfigError(
                f"{type(self).__name__} is a MultiTurnEnv but does not override env_response(rollout), "
                "so every episode would end after the model's first answer; override it to reply, "
                "or use SingleTurnEnv (ToolEnv for tools)"
            )
        super().__init__(dataset, rubric, **options)


__all__ = ["MultiTurnEnv", "SingleTurnEnv", "ToolEnv"]
