"""A multi-step task's episode: its steps played in turn in one sandbox, each checked before the next.

    for each step (`AgentTask.task_steps`, `TaskStep`):
        its `prepare` (the step's files, its setup script)
        -> one agent episode on the step's instruction (`play_episode`: its own proxy session
           and relay, every process ended afterwards), within the step's time and the calls
           the episode has left
        -> its `check` (the task scores the step and records it) -> the next step, or stop
           (the check said so, or the agent's episode failed: the rollout's error)

The rollout holds the whole episode: its prompt is the first step's, its completion, turns,
model calls and token ids are the steps' in order, and `rollout.state["steps"]` says which
calls each step made (`calls`: [first, end) indices into `rollout.model_calls`), how its agent
ended, and whether the episode stopped after it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from envs.agents._episode import Episode
from envs.agents._task import TaskStep
from harness._core.types import Rollout
from harness.runtimes import Sandbox

#: Where the steps are recorded on the rollout.
STEPS_KEY = "steps"


async def play_steps(
    steps: Sequence[TaskStep],
    episode: Episode,
    sandbox: Sandbox,
    rollout: Rollout,
    play: Callable[[Episode], Awaitable[None]],
) -> None:
    """Play `steps` in turn in `sandbox` into `rollout` (see the module docstring).

    Args:
        steps: The task's steps, in order.
        episode: The episode's settings; each step replaces its instruction, solution and
            (when the step gives one) its time limit, and its calls are what the steps before
            it left of `episode.max_turns`.
        sandbox: The sandbox every step plays in.
        rollout: The rollout the whole episode is recorded into.
        play: Plays one episode into `rollout` in `sandbox` (`play_episode` with the run's
            proxy, model and sampling).
    """
    record: list[dict[str, Any]] = []
    rollout.state[STEPS_KEY] = record
    for step in steps:
        entry: dict[str, Any] = {"name": step.name}
        record.append(entry)
        calls_left = episode.max_turns - len(rollout.model_calls)
        if calls_left < 1:
            entry["skipped"] = "the episode's model calls are spent"
            rollout.stop_reason = "max_turns"
            break
        if step.prepare is not None:
            await step.prepare(sandbox)
        before = _Before.of(rollout)
        await play(_step_episode(episode, step, sandbox, calls_left))
        before.merge_into(rollout)
        agent = rollout.state.get("agent", {})
        entry.update(
            calls=[before.calls, len(rollout.model_calls)],
            stop_reason=rollout.stop_reason,
            exit_code=agent.get("exit_code"),
        )
        if rollout.error:
            entry["error"] = rollout.error
            break
        if step.check is not None and not await step.check(sandbox):
            entry["stopped"] = True
            break


def _step_episode(episode: Episode, step: TaskStep, sandbox: Sandbox, calls_left: int) -> Episode:
    """The episode of one step: its instruction, its solution, its time, the calls left."""
    solve: Callable[[Sandbox], Any] | None = step.solution

    async def solution() -> str | None:
        return await solve(sandbox) if solve is not None else None

    return replace(
        episode,
        instruction=step.instruction,
        timeout=step.timeout or episode.timeout,
        max_turns=calls_left,
        solution=solution if solve is not None else episode.solution,
    )


class _Before:
    """What the rollout held before a step's episode, put back in front of the step's own."""

    def __init__(self, rollout: Rollout) -> None:
        self.completion = list(rollout.completion)
        self.turns = rollout.turns
        self.turn_tokens = list(rollout.turn_tokens)
        self.model_calls = list(rollout.model_calls)
        self.calls = len(self.model_calls)

    @classmethod
    def of(cls, rollout: Rollout) -> _Before:
        return cls(rollout)

    def merge_into(self, rollout: Rollout) -> None:
        """The steps so far, then this step's (its token ids numbered after theirs)."""
        if not self.model_calls and not self.completion:
            return
        offset = sum(m.role == "assistant" for m in self.completion)
        rollout.completion = self.completion + list(rollout.completion)
        rollout.turns = self.turns + rollout.turns
        rollout.turn_tokens = self.turn_tokens + [
            t.model_copy(update={"turn": t.turn + offset}) for t in rollout.turn_tokens
        ]
        rollout.model_calls = self.model_calls + list(rollout.model_calls)
