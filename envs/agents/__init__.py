"""CLI agents as policies: an agent program plays each episode in a sandbox of the task's.

Who plays a task is a run setting (`AgentRun`: the agent, the runtime, the limits), handed to
the engine; the `Environment` stays the task (its hooks: `AgentTask`). The agent's model calls
go through the run's capture proxy (recorded as the rollout's turns), and the rubric reads
what it left in the sandbox.

    env.evaluate("my-model", agent="bash", runtime="docker:IMAGE")
    harness.evaluate(env, client, episodes=AgentRun("bash", runtime="bwrap"), workers=2)
    rubric eval ENV -m MODEL --agent 'command:python3 /agent/run.py {instruction_file}' --agent-files DIR --runtime bwrap

- `base`: `Agent` (how to prepare and run one), `AgentContext`, the paths inside the sandbox.
- `builtin`: the agents by name: `command:CMD`, `bash` (our own loop), `oracle` (the task's
  reference solution), and the published ones of `installed`.
- `task`: `AgentTask`, the task hooks an environment keeps, and `TaskSandbox` (with `McpServer`).
- `run`: `AgentRun`, the run setting; `sandboxes`: where each episode's sandbox comes from;
  `episode`: one episode in its sandbox (proxy session, budgets, stop reasons); `steps`: a
  multi-step task's steps played in turn in one sandbox.
- `checks`: reward nodes that read the sandbox (`command_passes`, `file_contains`).
- `training`: an agent environment in TRL's GRPOTrainer.

May import the foundation, the endpoint client, the runtimes and the proxy, never
`envs._environment` (which builds on it).
"""

from __future__ import annotations

from envs.agents._base import (
    AGENT_DIR,
    INSTRUCTION_FILE,
    NO_MODEL,
    Agent,
    AgentContext,
    AgentError,
    McpServer,
)
from envs.agents._builtin import AGENTS, BashAgent, CommandAgent, OracleAgent, get_agent
from envs.agents._checks import command_passes, file_contains, sandbox_of
from envs.agents._installed import ClaudeCodeAgent, CodexAgent, MiniSweAgent
from envs.agents._run import DEFAULT_MAX_CALLS, DEFAULT_TIMEOUT, AgentRun, AgentRunSpec
from envs.agents._sandboxes import DEFAULT_RUNTIME
from envs.agents._task import AgentTask, TaskSandbox, TaskStep

__all__ = [
    "AGENTS",
    "AGENT_DIR",
    "DEFAULT_MAX_CALLS",
    "DEFAULT_RUNTIME",
    "DEFAULT_TIMEOUT",
    "INSTRUCTION_FILE",
    "NO_MODEL",
    "Agent",
    "AgentContext",
    "AgentError",
    "AgentRun",
    "AgentRunSpec",
    "AgentTask",
    "BashAgent",
    "ClaudeCodeAgent",
    "CodexAgent",
    "CommandAgent",
    "McpServer",
    "MiniSweAgent",
    "OracleAgent",
    "TaskSandbox",
    "TaskStep",
    "command_passes",
    "file_contains",
    "get_agent",
    "sandbox_of",
]
