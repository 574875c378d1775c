"""Fake environments implementing harness.protocol.EnvironmentProtocol, and the scripted-endpoint
policies that play them, so the rollout loop and evaluate are tested without `envs`."""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness import Message, Rollout


class FakeEnv:
    """Single-turn: "What is A+B?" -> reward 1.0 when the reply is the sum."""

    name = "fake-single"

    def __init__(
        self,
        n: int = 6,
        *,
        max_turns: int = 1,
        sampling: Mapping[str, Any] | None = None,
        score_raises: bool = False,
        setup_raises: bool = False,
        stop_when: str | None = None,
    ) -> None:
        self.n = n
        self.max_turns = max_turns
        self.sampling = dict(sampling or {})
        self.score_raises = score_raises
        self.setup_raises = setup_raises
        self.stop_when = stop_when

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        return []

    def get_dataset(
        self, split: str = "eval", n: int | None = None, seed: int | None = None
    ) -> Iterable[Mapping[str, Any]]:
        rows = [
            {"example_id": i, "question": f"What is {i}+{i + 1}?", "answer": str(2 * i + 1)}
            for i in range(self.n)
        ]
        if seed is not None:
            rows = rows[seed % len(rows) :] + rows[: seed % len(rows)]
        return rows[:n] if n is not None else rows

    async def setup_rollout(self, example: Mapping[str, Any], rollout_index: int = 0) -> Rollout:
        if self.setup_raises:
            raise KeyError("question")
        return Rollout(
            example_id=example["example_id"],
            rollout_index=rollout_index,
            prompt=[Message(role="user", content=example["question"])],
            answer=example["answer"],
            state={"feedback": 0},
        )

    async def respond(self, rollout: Rollout) -> list[Message] | None:
        return None

    async def stop_reason(self, rollout: Rollout) -> str | None:
        if self.stop_when and self.stop_when in rollout.response:
            return "said_stop_word"
        return None

    async def score(self, rollout: Rollout) -> None:
        if self.score_raises:
            raise RuntimeError("rubric exploded")
        correct = 1.0 if rollout.response.strip() == str(rollout.answer) else 0.0
        rollout.scores = {"correct": correct, "correct.exact": correct}
        rollout.reward = correct

    def config(self) -> dict[str, Any]:
        return {"name": self.name, "n": self.n, "max_turns": self.max_turns}


class ToolFakeEnv(FakeEnv):
    """Tool use: the model calls add(a, b), gets the sum back, then answers."""

    name = "fake-tool"

    def __init__(
        self, n: int = 6, *, max_turns: int = 4, respond_raises: bool = False, **kwargs: Any
    ) -> None:
        super().__init__(n, max_turns=max_turns, **kwargs)
        self.respond_raises = respond_raises

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        return [
            {
                "type": "function",
                "function": {
                    "name": "add",
                    "description": "Add two integers.",
                    "parameters": {
                        "type": "object",
                        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                        "required": ["a", "b"],
                    },
                },
            }
        ]

    async def respond(self, rollout: Rollout) -> list[Message] | None:
        last = rollout.completion[-1]
        if not last.tool_calls:
            return None
        if self.respond_raises:
            raise ValueError("tool runner bug")
        out = []
        for call in last.tool_calls:
            args = json.loads(call.arguments)
            out.append(
                Message(role="tool", tool_call_id=call.id, name=call.name, content=str(args["a"] + args["b"]))
            )
        return out


class MultiTurnFakeEnv(FakeEnv):
    """Guessing game: the env answers "higher"/"lower" until the model names the number."""

    name = "fake-multi"

    def __init__(self, n: int = 4, *, max_turns: int = 10, **kwargs: Any) -> None:
        super().__init__(n, max_turns=max_turns, **kwargs)

    def get_dataset(
        self, split: str = "eval", n: int | None = None, seed: int | None = None
    ) -> Iterable[Mapping[str, Any]]:
        rows = [
            {"example_id": f"g{i}", "question": "Guess my number between 0 and 15.", "answer": str(3 * i + 2)}
            for i in range(self.n)
        ]
        return rows[:n] if n is not None else rows

    async def respond(self, rollout: Rollout) -> list[Message] | None:
        guess = int(rollout.response.strip())
        target = int(rollout.answer)
        rollout.state["guesses"] = rollout.state.get("guesses", 0) + 1
        if guess == target:
            return [Message(role="user", content="correct")]
        return [Message(role="user", content="higher" if guess < target else "lower")]

    async def stop_reason(self, rollout: Rollout) -> str | None:
        last = rollout.completion[-1] if rollout.completion else None
        if last is not None and last.role == "user" and last.content == "correct":
            return "solved"
        return None

    async def score(self, rollout: Rollout) -> None:
        rollout.reward = 1.0 if rollout.stop_reason == "solved" else 0.0
        rollout.scores = {"solved": rollout.reward}


@dataclass(frozen=True)
class FakeSource:
    """How a worker builds a SpecFakeEnv again (`harness._core.protocol.EnvironmentSource`)."""

    spec: str
    kwargs: dict[str, Any] = field(default_factory=dict)

    def load(self, *, worker: bool = False) -> SpecFakeEnv:
        return load_fake(self.spec, **self.kwargs)

    def __str__(self) -> str:
        return self.spec


class SpecFakeEnv(FakeEnv):
    """FakeEnv that a worker can rebuild from its source; it can kill its own worker once."""

    def __init__(
        self, n: int = 6, *, die_on: int | None = None, marker: str | None = None, lock_on: int | None = None
    ) -> None:
        super().__init__(n)
        self.die_on, self.marker, self.lock_on = die_on, marker, lock_on
        self.source: FakeSource | None = None
        self.provenance: dict[str, Any] | None = None

    async def setup_rollout(self, example: Any, rollout_index: int = 0) -> Rollout:
        if example["example_id"] == self.die_on and (self.marker is None or not os.path.exists(self.marker)):
            if self.marker is not None:
                Path(self.marker).write_text(str(os.getpid()))
            await asyncio.sleep(0.2)  # let the worker's other rollouts be in flight when it dies
            os.kill(os.getpid(), signal.SIGKILL)
        rollout = await super().setup_rollout(example, rollout_index)
        if example["example_id"] == self.lock_on:
            rollout.state["lock"] = threading.Lock()  # state that cannot leave the worker
        return rollout


def load_fake(spec: str, **kwargs: Any) -> SpecFakeEnv:
    env = SpecFakeEnv(**kwargs)
    env.source = FakeSource(spec, dict(kwargs))
    return env


def sum_policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any] | str:
    """Answers "What is A+B?": with tools, calls add first, then repeats the tool's result."""
    last = messages[-1]
    if last["role"] == "tool":
        return last["content"]
    question = next(m["content"] for m in messages if m["role"] == "user")
    a, b = map(int, re.findall(r"\d+", question))
    if tools:
        return {"tool_calls": [{"function": {"name": "add", "arguments": {"a": a, "b": b}}}]}
    return str(a + b)


def bisect_policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
    """Binary search over 0..15 driven by the env's "higher"/"lower" replies."""
    low, high = 0, 15
    guess = None
    for m in messages:
        if m["role"] == "assistant":
            guess = int(m["content"])
        elif m["role"] == "user" and guess is not None:
            if m["content"] == "higher":
                low = guess + 1
            elif m["content"] == "lower":
                high = guess - 1
    return str((low + high) // 2)
