"""The three shapes of episode most tasks need, as thin, checked presets of `Environment`.

- `SingleTurnEnv`: one model turn, no tools (question -> answer -> score).
- `ToolEnv`: the model calls tools until it answers without calling one, or `max_turns`.
- `MultiTurnEnv`: subclass it and override `env_response` (and optionally `setup_state`,
  `is_done`, `@stop` conditions) to script the other side of a conversation (games,
  simulated users).

Each preset only fixes defaults and rejects arguments that contradict its shape, so a
mistake (tools on a single-turn env) fails at construction instead of being ignored. Their
signatures spell out `Environment`'s keywords (no `**kwargs` pass-through), so a type checker
and an editor show what each preset takes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar

from envs._environment import Environment
from envs._inputs import DatasetSource, ParserSource, RubricSource, ToolSource
from harness._core.errors import ConfigError
from harness._core.types import Rollout


class SingleTurnEnv(Environment):
    """One assistant turn and no tools; `max_turns` is always 1.

    Args:
        dataset: The rows to run, as for `Environment`.
        rubric: What scores a rollout, as for `Environment`.
        system_prompt: As for `Environment`.
        prompt_template: As for `Environment`.
        parser: As for `Environment`.
        max_turns: Only None or 1 (anything else is a ConfigError).
        sampling: As for `Environment`.
        eval_dataset: As for `Environment`.
        name: As for `Environment`.
        columns: As for `Environment`.
        split: As for `Environment`.
        credit: As for `Environment`.
        success: As for `Environment`.
        tools: Only None or empty: a single-turn environment has no tools (use `ToolEnv`).
    """

    default_max_turns: ClassVar[int] = 1

    def __init__(
        self,
        dataset: DatasetSource,
        rubric: RubricSource,
        *,
        system_prompt: str | None = None,
        prompt_template: str | None = None,
        parser: ParserSource | None = None,
        max_turns: int | None = None,
        sampling: Mapping[str, Any] | None = None,
        eval_dataset: DatasetSource | None = None,
        name: str | None = None,
        columns: Mapping[str, str] | None = None,
        split: str | None = None,
        credit: Callable[[Rollout], Sequence[float]] | None = None,
        success: str | tuple[str, float] | None = None,
        tools: Sequence[ToolSource] | None = None,
    ) -> None:
        if tools:
            raise ConfigError(
                "SingleTurnEnv takes no tools; use ToolEnv(dataset, rubric, tools=[...]) for tool use"
            )
        if max_turns not in (None, 1):
            raise ConfigError(
                f"SingleTurnEnv always has max_turns=1 (got {max_turns!r}); "
                "use MultiTurnEnv or ToolEnv for longer episodes"
            )
        super().__init__(
            dataset,
            rubric,
            system_prompt=system_prompt,
            prompt_template=prompt_template,
            parser=parser,
            max_turns=max_turns,
            sampling=sampling,
            eval_dataset=eval_dataset,
            name=name,
            columns=columns,
            split=split,
            credit=credit,
            success=success,
        )


class ToolEnv(Environment):
    """The model may call `tools`; the episode ends when it answers without a tool call.

    `max_turns` (default 10) bounds a model that never stops calling tools.

    Args:
        dataset: The rows to run, as for `Environment`.
        rubric: What scores a rollout, as for `Environment`.
        tools: Required: functions, `envs.Tool`s or MCP servers' tools, as for `Environment`.
        system_prompt: As for `Environment`.
        prompt_template: As for `Environment`.
        parser: As for `Environment`.
        max_turns: The most assistant turns per rollout (default 10).
        sampling: As for `Environment`.
        eval_dataset: As for `Environment`.
        name: As for `Environment`.
        columns: As for `Environment`.
        split: As for `Environment`.
        credit: As for `Environment`.
        success: As for `Environment`.
    """

    default_max_turns: ClassVar[int] = 10

    def __init__(
        self,
        dataset: DatasetSource,
        rubric: RubricSource,
        *,
        tools: Sequence[ToolSource] | None = None,
        system_prompt: str | None = None,
        prompt_template: str | None = None,
        parser: ParserSource | None = None,
        max_turns: int | None = None,
        sampling: Mapping[str, Any] | None = None,
        eval_dataset: DatasetSource | None = None,
        name: str | None = None,
        columns: Mapping[str, str] | None = None,
        split: str | None = None,
        credit: Callable[[Rollout], Sequence[float]] | None = None,
        success: str | tuple[str, float] | None = None,
    ) -> None:
        if not tools:
            raise ConfigError(
                "ToolEnv needs tools=[...] (functions, envs.Tool or envs.mcp_server(...)); without tools use SingleTurnEnv"
            )
        super().__init__(
            dataset,
            rubric,
            system_prompt=system_prompt,
            prompt_template=prompt_template,
            tools=tools,
            parser=parser,
            max_turns=max_turns,
            sampling=sampling,
            eval_dataset=eval_dataset,
            name=name,
            columns=columns,
            split=split,
            credit=credit,
            success=success,
        )


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
        system_prompt: As for `Environment`.
        prompt_template: As for `Environment`.
        tools: As for `Environment` (a turn with tool calls gets the tool results).
        parser: As for `Environment`.
        max_turns: The most assistant turns per rollout (default 10).
        sampling: As for `Environment`.
        eval_dataset: As for `Environment`.
        name: As for `Environment`.
        columns: As for `Environment`.
        split: As for `Environment`.
        credit: As for `Environment`.
        success: As for `Environment`.
    """

    default_max_turns: ClassVar[int] = 10

    def __init__(
        self,
        dataset: DatasetSource,
        rubric: RubricSource,
        *,
        system_prompt: str | None = None,
        prompt_template: str | None = None,
        tools: Sequence[ToolSource] | None = None,
        parser: ParserSource | None = None,
        max_turns: int | None = None,
        sampling: Mapping[str, Any] | None = None,
        eval_dataset: DatasetSource | None = None,
        name: str | None = None,
        columns: Mapping[str, str] | None = None,
        split: str | None = None,
        credit: Callable[[Rollout], Sequence[float]] | None = None,
        success: str | tuple[str, float] | None = None,
    ) -> None:
        if type(self).env_response is Environment.env_response:
            raise ConfigError(
                f"{type(self).__name__} is a MultiTurnEnv but does not override env_response(rollout), "
                "so every episode would end after the model's first answer; override it to reply, "
                "or use SingleTurnEnv (ToolEnv for tools)"
            )
        super().__init__(
            dataset,
            rubric,
            system_prompt=system_prompt,
            prompt_template=prompt_template,
            tools=tools,
            parser=parser,
            max_turns=max_turns,
            sampling=sampling,
            eval_dataset=eval_dataset,
            name=name,
            columns=columns,
            split=split,
            credit=credit,
            success=success,
        )


__all__ = ["MultiTurnEnv", "SingleTurnEnv", "ToolEnv"]
