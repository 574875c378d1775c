"""Reward nodes that read the sandbox an agent left, before it is released.

Each records in its score details what it ran or read and, where a call of the agent's
touched it, the turn and tool call (`turn`, `tool_call`, `tool`) from the rollout's recorded
model calls, so a view can show why the rollout scored what it scored. A rollout with no
sandbox (no agent ran) leaves the node unscored with that reason.

A plain reward function can read the sandbox too: `async def passes(sandbox): ...` (a
parameter named `sandbox` gets it).
"""

from __future__ import annotations

from typing import Any

from harness._core.types import Rollout
from harness.runtimes import Sandbox
from rubrics._module import Rubric
from rubrics._scoring import ScoringError

#: The most of a command's output kept in the score details.
DETAIL_OUTPUT = 2000


def _sandbox(rollout: Rollout, node: str) -> Sandbox:
    sandbox = rollout.sandbox
    if not isinstance(sandbox, Sandbox):
        raise ScoringError(
            f"{node} reads the agent's sandbox, but this rollout has none: run the environment with an agent "
            "(rubric eval --agent NAME, env.evaluate(..., agent=NAME))"
        )
    return sandbox


def last_call_touching(rollout: Rollout, needle: str) -> dict[str, Any] | None:
    """The last tool call of the agent (in its recorded model calls) whose arguments mention
    `needle`: {"turn": model call index, "tool_call": its id, "tool": its name}, or None."""
    found = None
    for call in rollout.model_calls:
        for tool_call in (call.reply.tool_calls or []) if call.reply is not None else []:
            if needle and needle in tool_call.arguments:
                found = {"turn": call.index, "tool_call": tool_call.id, "tool": tool_call.name}
    return found


class command_passes(Rubric):
    """1.0 when `command` exits 0 in the sandbox (e.g. "the tests pass"), else 0.0.

    Args:
        command: A shell command, run in the sandbox's working directory.
        timeout: Seconds before it is killed (then 0.0).
        name: The node's name (default "command_passes").
    """

    def __init__(self, command: str, *, timeout: float = 60.0, name: str | None = None) -> None:
        super().__init__(name=name or "command_passes")
        self.command = command
        self.timeout = timeout

    async def forward(self, rollout: Rollout) -> float:
        sandbox = _sandbox(rollout, f"command_passes({self.command!r})")
        result = await sandbox.exec(self.command, timeout=self.timeout)
        output = (result.stdout + result.stderr)[-DETAIL_OUTPUT:]
        detail: dict[str, Any] = {"command": self.command, "exit_code": result.exit_code, "output": output}
        if result.timed_out:
            detail["timed_out"] = True
        self.record_detail(rollout, detail)
        return 1.0 if result.ok else 0.0

    def extra_repr(self) -> str:
        return repr(self.command)


class file_contains(Rubric):
    """1.0 when the file at `path` in the sandbox exists and contains `text` (or, with no
    `text`, merely exists), else 0.0. Its details name the agent's last tool call that
    mentioned the path.

    Args:
        path: The file (relative paths start at the sandbox's working directory).
        text: What it must contain; None: only that it exists.
        name: The node's name (default "file_contains").
    """

    def __init__(self, path: str, text: str | None = None, *, name: str | None = None) -> None:
        super().__init__(name=name or "file_contains")
        self.path = path
        self.text = text

    async def forward(self, rollout: Rollout) -> float:
        sandbox = _sandbox(rollout, f"file_contains({self.path!r})")
        result = await sandbox.exec(["cat", "--", sandbox.resolve(self.path)], timeout=30)
        detail: dict[str, Any] = {"path": self.path, "exists": result.exit_code == 0}
        touched = last_call_touching(rollout, self.path.rsplit("/", 1)[-1])
        if touched is not None:
            detail.update(touched)
        if result.exit_code == 0:
            detail["content"] = result.stdout[:DETAIL_OUTPUT]
        self.record_detail(rollout, detail)
        if result.exit_code != 0:
            return 0.0
        return 1.0 if self.text is None or self.text in result.stdout else 0.0

    def extra_repr(self) -> str:
        return repr(self.path) + (f", {self.text!r}" if self.text is not None else "")
