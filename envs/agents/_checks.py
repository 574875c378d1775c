"""Reward nodes that read the sandbox an agent left, before it is released.

The sandbox is not on the rollout (a record that is saved and copied): it reaches scoring
through the scoring scope (`harness._core.protocol.scoring_scope`, as Inspect's `sandbox()`),
which the engine opens around a rollout's scoring, or its group's, while the sandboxes live.
`sandbox_of(rollout)` reads it there. Each node records in its score details what it ran or
read and, where a call of the agent's touched it, the turn and tool call (`turn`,
`tool_call`, `tool`) from the rollout's recorded model calls, so a view can show why the
rollout scored what it scored. A rollout with no sandbox (no agent ran) leaves the node
unscored with that reason.

A plain reward function can read the sandbox too: `async def passes(sandbox): ...` (a
parameter named `sandbox` gets it).
"""

from __future__ import annotations

from typing import Any

from harness._core.errors import ConfigError
from harness._core.protocol import SANDBOX, scoring_resource
from harness._core.types import Rollout
from harness.runtimes import Sandbox, SandboxError
from rubrics._tree.module import Rubric
from rubrics._tree.scoring import ScoringError

#: The most of a command's output kept in the score details.
DETAIL_OUTPUT = 2000
#: Bytes of each of a checked command's output streams held while it runs (its first and last
#: halves past that): a command the agent made print without end costs the harness this much.
KEPT_OUTPUT = 64 << 10
#: The largest file `file_contains` reads by default.
MAX_FILE_BYTES = 8 << 20


def sandbox_of(rollout: Rollout, node: str = "this node") -> Sandbox:
    """The live sandbox `rollout`'s agent ran in, while the rollout is being scored.

    Args:
        rollout: The rollout a node is scoring.
        node: Who asks, for the message.

    Returns:
        The sandbox, open until the rollout (or its group) is scored.

    Raises:
        ScoringError: The rollout has none (no agent played it), naming the fix.
    """
    sandbox = scoring_resource(rollout, SANDBOX)
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
        sandbox = sandbox_of(rollout, f"command_passes({self.command!r})")
        result = await sandbox.exec(self.command, timeout=self.timeout, max_output=KEPT_OUTPUT)
        output = (result.stdout + result.stderr)[-DETAIL_OUTPUT:]
        detail: dict[str, Any] = {"command": self.command, "exit_code": result.exit_code, "output": output}
        if result.timed_out:
            detail["timed_out"] = True
        if result.stdout_cut or result.stderr_cut:
            detail["output_cut_bytes"] = result.stdout_cut + result.stderr_cut
        self.record_detail(rollout, detail)
        return 1.0 if result.ok else 0.0

    def extra_repr(self) -> str:
        return repr(self.command)


class file_contains(Rubric):
    """1.0 when the file at `path` in the sandbox exists and contains `text` (or, with no
    `text`, merely exists), else 0.0. Its details name the agent's last tool call that
    mentioned the path. A path that is not a regular file (a folder, a device such as
    /dev/zero, a pipe) or holds more than `max_bytes` leaves the node NaN with the reason.

    Args:
        path: The file (relative paths start at the sandbox's working directory).
        text: What it must contain; None: only that it exists.
        max_bytes: The largest file read (8 MiB).
        name: The node's name (default "file_contains").
    """

    def __init__(
        self, path: str, text: str | None = None, *, max_bytes: int = MAX_FILE_BYTES, name: str | None = None
    ) -> None:
        super().__init__(name=name or "file_contains")
        if isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 1:
            raise ConfigError(
                f"file_contains max_bytes must be a positive number of bytes, got {max_bytes!r}"
            )
        self.path = path
        self.text = text
        self.max_bytes = max_bytes

    async def forward(self, rollout: Rollout) -> float:
        sandbox = sandbox_of(rollout, f"file_contains({self.path!r})")
        detail: dict[str, Any] = {"path": self.path}
        touched = last_call_touching(rollout, self.path.rsplit("/", 1)[-1])
        if touched is not None:
            detail.update(touched)
        where = sandbox.resolve(self.path)
        exists = await sandbox.exec(["test", "-e", where], timeout=30, max_output=DETAIL_OUTPUT)
        detail["exists"] = exists.ok
        if not exists.ok:
            self.record_detail(rollout, detail)
            return 0.0
        try:
            data = await sandbox.read(self.path, max_bytes=self.max_bytes)
        except SandboxError as exc:
            self.record_detail(rollout, detail)
            raise ScoringError(f"file_contains({self.path!r}): {exc}") from None
        content = data.decode("utf-8", errors="replace")
        detail["content"] = content[:DETAIL_OUTPUT]
        self.record_detail(rollout, detail)
        return 1.0 if self.text is None or self.text in content else 0.0

    def extra_repr(self) -> str:
        return repr(self.path) + (f", {self.text!r}" if self.text is not None else "")
