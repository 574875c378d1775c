"""CLI agents as policies: an agent program plays each episode in the rollout's sandbox.

Its model calls go through a capture proxy session (recorded as the rollout's turns), and the
rubric reads what it left in the sandbox.

    env.evaluate("my-model", agent="bash", runtime="docker:IMAGE")
    rubric eval ENV -m MODEL --agent 'command:python3 /agent/run.py {instruction_file}' --agent-files DIR --runtime bwrap

- `base`: `Agent` (how to prepare and run one), `AgentContext`, the paths inside the sandbox.
- `builtin`: `command:CMD`, `bash` (our own loop), `oracle` (the task's reference solution).
- `episode`: `AgentSetup` and the episode itself (sandbox, proxy, budgets, stop reasons).
- `checks`: reward nodes that read the sandbox (`command_passes`, `file_contains`).
"""

from __future__ import annotations

from collections.abc import Callable

from envs.agents._base import AGENT_DIR, INSTRUCTION_FILE, Agent, AgentContext, AgentError
from envs.agents._builtin import BashAgent, CommandAgent, OracleAgent
from envs.agents._checks import command_passes, file_contains
from envs.agents._episode import DEFAULT_RUNTIME, DEFAULT_TIMEOUT, AgentEpisodes, AgentSetup
from envs.agents._installed import ClaudeCodeAgent, CodexAgent, MiniSweAgent

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


__all__ = [
    "AGENTS",
    "AGENT_DIR",
    "DEFAULT_RUNTIME",
    "DEFAULT_TIMEOUT",
    "INSTRUCTION_FILE",
    "Agent",
    "AgentContext",
    "AgentEpisodes",
    "AgentError",
    "AgentSetup",
    "BashAgent",
    "ClaudeCodeAgent",
    "CodexAgent",
    "CommandAgent",
    "MiniSweAgent",
    "OracleAgent",
    "command_passes",
    "file_contains",
    "get_agent",
]
