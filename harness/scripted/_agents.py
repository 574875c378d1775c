"""Scripted policies that play the model's side for an agent program (through the capture proxy).

`ShellScript(commands)` drives any agent that has a shell tool: each call it answers with the
next command as a call of that agent's own shell tool, in that tool's own argument format
(`bash`/`Bash` take `command`, Codex's `exec_command` takes `cmd`, ...), then with `final`.
An agent with no tools (a text-protocol agent) gets each command in a fenced ```bash block.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

#: Shell tool names, in the order they are looked for among an agent's tools.
SHELL_TOOLS = ("bash", "Bash", "exec_command", "shell", "run_shell_command", "execute_bash")
#: Argument names a shell tool may take its command line under.
COMMAND_KEYS = ("command", "cmd", "script")


class ShellScript:
    """A policy running `commands` one per call through the agent's shell tool, then `final`.

    Progress is read from the conversation the agent sends (its tool results, or in text
    mode its earlier replies), so the policy is stateless and serves many rollouts at once.
    A call that is not the agent's main line (no shell tool and `text_mode=False`: a title
    or summary request) is answered with `side_answer`.

    Args:
        commands: Shell command lines, in order.
        final: The last answer, with no tool call.
        text_mode: Answer calls without tools with fenced ```bash blocks (text-protocol agents).
        text_final: In text mode, the reply that ends the agent's episode (its own convention).
        side_answer: The answer to a call that has no shell tool.
    """

    def __init__(
        self,
        commands: Sequence[str],
        final: str = "done",
        *,
        text_mode: bool = False,
        text_final: str | None = None,
        side_answer: str = "ok",
    ) -> None:
        self.commands = list(commands)
        self.final = final
        self.text_mode = text_mode
        self.text_final = text_final
        self.side_answer = side_answer

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Any:
        tool = shell_tool(tools or [])
        if tool is None:
            return self._text(messages) if self.text_mode else self.side_answer
        step = sum(m.get("role") == "tool" for m in messages)
        if step >= len(self.commands):
            return self.final
        name, arguments = tool_call_for(tool, self.commands[step])
        return {
            "content": f"step {step + 1}",
            "tool_calls": [{"function": {"name": name, "arguments": arguments}}],
        }

    def _text(self, messages: list[dict[str, Any]]) -> str:
        step = sum(m.get("role") == "assistant" for m in messages)
        if step >= len(self.commands):
            return self.text_final if self.text_final is not None else self.final
        return f"THOUGHT: step {step + 1}\n\n```bash\n{self.commands[step]}\n```"


def shell_tool(tools: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The agent's shell tool among `tools` (OpenAI function tools), or None."""
    by_name = {t.get("function", {}).get("name"): t["function"] for t in tools if t.get("type") == "function"}
    return next((by_name[n] for n in SHELL_TOOLS if n in by_name), None)


def tool_call_for(tool: dict[str, Any], command: str) -> tuple[str, str]:
    """(name, JSON arguments) calling the shell `tool` with `command`, in its own format."""
    properties = (tool.get("parameters") or {}).get("properties") or {}
    key = next((k for k in COMMAND_KEYS if k in properties), "command")
    kind = properties.get(key, {}).get("type")
    value: Any = ["bash", "-lc", command] if kind == "array" else command
    return tool["name"], json.dumps({key: value})


__all__ = ["COMMAND_KEYS", "SHELL_TOOLS", "ShellScript", "shell_tool", "tool_call_for"]
