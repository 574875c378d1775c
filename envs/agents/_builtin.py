"""The agents rubric ships, by name: `command:CMD` (any program), `bash` (our own loop),
`oracle` (the task's reference solution) and the published agents of `_installed`."""

from __future__ import annotations

import shlex
from collections.abc import Callable
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
from envs.agents._installed import ClaudeCodeAgent, CodexAgent, MiniSweAgent
from envs.agents._task import SOLUTION_COLUMN


class CommandAgent(Agent):
    """Any program: `command:CMD`. `{instruction}` (shell-quoted) and `{instruction_file}` are
    filled in; `--agent-files DIR` is at /agent. The program reads its endpoint and key from
    OPENAI_BASE_URL / OPENAI_API_KEY or ANTHROPIC_BASE_URL / ANTHROPIC_API_KEY (and the
    model name from RUBRIC_MODEL); every call it makes is a turn of the rollout.

    Args:
        template: The command line, with `{instruction}` / `{instruction_file}` to fill in."""

    name = "command"
    must_call_model = False  # a program may do its work without the model: scored as it stands

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
    and its rubric gives full marks: what the task's `solution` hook puts in the sandbox (by
    default the row's `solution` column, a shell script; a Harbor task's solution/solve.sh), or
    a `solution.sh` in `--agent-files` (at /agent/solution.sh). Makes no model call."""

    name = "oracle"
    calls_model = False
    # Its solution needs no MCP server or skill registered: a task giving them is played as is.
    takes_mcp_servers = True
    takes_skills = True

    async def prepare(self, ctx: AgentContext) -> None:
        command = await ctx.solution() if ctx.solution is not None else None
        if command is not None:
            ctx.notes["command"] = command
            return
        if ctx.files is not None and (ctx.files / "solution.sh").is_file():
            ctx.notes["command"] = f"bash {AGENT_DIR}/solution.sh"
            return
        columns = ", ".join(sorted(map(str, ctx.example))) or "none"
        raise AgentError(
            f"agent 'oracle' needs the task's reference solution: a {SOLUTION_COLUMN!r} column holding a shell "
            f"script (this row's columns: {columns}), or --agent-files DIR with DIR/solution.sh"
        )

    def command(self, ctx: AgentContext) -> str:
        command: str = ctx.notes["command"]
        return command


#: The agents by name (`command:CMD` takes its command after the colon).
AGENTS: dict[str, Callable[[], Agent]] = {
    "bash": BashAgent,
    "oracle": OracleAgent,
    "mini-swe-agent": MiniSweAgent,
    "codex": CodexAgent,
    "claude-code": ClaudeCodeAgent,
}


def get_agent(agent: str | Agent) -> Agent:
    """The agent a name gives: `command:CMD`, or one of `AGENTS` (an `Agent` is returned as is).

    Args:
        agent: A name, or an agent.

    Returns:
        The agent.

    Raises:
        AgentError: no agent of that name (the names are listed).
    """
    if isinstance(agent, Agent):
        return agent
    if not isinstance(agent, str):
        raise AgentError(f"agent must be a name or an envs.agents.Agent, got {type(agent).__name__}")
    kind, colon, rest = agent.partition(":")
    if kind == "command" and colon:
        return CommandAgent(rest)
    if agent in AGENTS:
        return AGENTS[agent]()
    names = ", ".join(["command:CMD", *sorted(AGENTS)])
    raise AgentError(f"no agent {agent!r}; the agents are: {names}")
