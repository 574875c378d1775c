"""The agents rubric ships: `command:CMD` (any program), `bash` (our own loop), `oracle`."""

from __future__ import annotations

import shlex
from importlib import resources
from typing import Any

from envs.agents._base import (
    AGENT_DIR,
    INSTRUCTION_FILE,
    STATE_DIR,
    Agent,
    AgentContext,
    AgentError,
    fill_command,
)

#: The row column (in `info`) an oracle reads: a shell script solving the task.
SOLUTION_COLUMN = "solution"


class CommandAgent(Agent):
    """Any program: `command:CMD`. `{instruction}` (shell-quoted) and `{instruction_file}` are
    filled in; `--agent-files DIR` is at /agent. The program reads its endpoint and key from
    OPENAI_BASE_URL / OPENAI_API_KEY or ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY (and the
    model name from RUBRIC_MODEL); every call it makes is a turn of the rollout.

    Args:
        template: The command line, with `{instruction}` / `{instruction_file}` to fill in."""

    name = "command"

    def __init__(self, template: str) -> None:
        if not template.strip():
            raise AgentError(
                "agent 'command:' needs a command line, e.g. --agent 'command:python3 /agent/run.py {instruction_file}'"
            )
        self.template = template

    def command(self, ctx: AgentContext) -> str:
        return fill_command(self.template, ctx)

    def config(self) -> dict[str, Any]:
        return {**super().config(), "command": self.template}

    def __repr__(self) -> str:
        return f"CommandAgent({self.template!r})"


class BashAgent(Agent):
    """Our own loop (`envs/agents/_bash_loop.py`, stdlib python3 in the sandbox): Chat
    Completions with one `bash` tool, until the model answers without calling it."""

    name = "bash"

    async def prepare(self, ctx: AgentContext) -> None:
        script = resources.files("envs.agents").joinpath("_bash_loop.py").read_text()
        await ctx.sandbox.write(f"{STATE_DIR}/bash_loop.py", script)

    def command(self, ctx: AgentContext) -> str:
        return f"python3 -I {STATE_DIR}/bash_loop.py {shlex.quote(INSTRUCTION_FILE)}"


class OracleAgent(Agent):
    """Runs the task's reference solution instead of a model, to check that a task is solvable
    and its rubric gives full marks: the row's `solution` column (a shell script), or a
    `solution.sh` in `--agent-files` (at /agent/solution.sh). Makes no model call."""

    name = "oracle"
    calls_model = False

    async def prepare(self, ctx: AgentContext) -> None:
        solution = ctx.example.get(SOLUTION_COLUMN)
        if isinstance(solution, str) and solution.strip():
            await ctx.sandbox.write(f"{STATE_DIR}/solution.sh", solution)
            return
        if ctx.files is not None and (ctx.files / "solution.sh").is_file():
            return
        columns = ", ".join(sorted(map(str, ctx.example))) or "none"
        raise AgentError(
            f"agent 'oracle' needs the task's reference solution: a {SOLUTION_COLUMN!r} column holding a shell "
            f"script (this row's columns: {columns}), or --agent-files DIR with DIR/solution.sh"
        )

    def command(self, ctx: AgentContext) -> str:
        solution = ctx.example.get(SOLUTION_COLUMN)
        path = (
            f"{STATE_DIR}/solution.sh"
            if isinstance(solution, str) and solution.strip()
            else f"{AGENT_DIR}/solution.sh"
        )
        return f"bash {path}"
