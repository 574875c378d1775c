"""What an agent is: a program run in the rollout's sandbox, pointed at its proxy session.

An `Agent` says how to prepare the sandbox (files, configuration) and which command runs it;
`envs.agents._episode` plays it (the proxy session, the budgets, the record) in the sandbox
`envs.agents._sandboxes` makes, for the run `envs.agents.AgentRun` holds.
"""

from __future__ import annotations

import shlex
from abc import ABC, abstractmethod
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from harness._core.errors import RubricError
from harness.runtimes import Sandbox

#: Where `--agent-files DIR` lands in the sandbox.
AGENT_DIR = "/agent"
#: The agent's own folder in the sandbox: its instruction, its home, its output.
STATE_DIR = "/tmp/rubric-agent"
INSTRUCTION_FILE = f"{STATE_DIR}/instruction.md"
HOME_DIR = f"{STATE_DIR}/home"
#: The port of the relay inside the sandbox (its network namespace is its own).
RELAY_PORT = 18080


@dataclass(frozen=True)
class McpServer:
    """An MCP server a task offers its agent (registered in the agent's own configuration by
    the agents that take MCP servers: `codex`, `claude-code`).

    Attributes:
        name: Its name in the agent's configuration.
        transport: "stdio" (a command run in the sandbox), "sse" or "streamable-http" (a URL).
        url: Where it listens (sse, streamable-http).
        command: The program (stdio).
        args: Its arguments (stdio).
    """

    name: str
    transport: Literal["stdio", "sse", "streamable-http"]
    url: str | None = None
    command: str | None = None
    args: tuple[str, ...] = ()


class AgentError(RubricError):
    """An agent could not run or ended badly (it exited non-zero, never called the model...)."""


@dataclass
class AgentContext:
    """What one agent run knows.

    Attributes:
        sandbox: The rollout's sandbox (open).
        instruction: The task, as text.
        env: Variables of the agent's process: OPENAI_BASE_URL, OPENAI_API_KEY,
            ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY (the proxy session), RUBRIC_MODEL, HOME.
        model: The model name the agent should ask for.
        files: The host folder uploaded to /agent (`--agent-files`), if any.
        example: The dataset row's info.
        solution: Puts the task's reference solution in the sandbox and returns the command
            that runs it, or None when the task has none (the task's `solution` hook; what
            the oracle runs).
        notes: The agent's own notes for this episode, from `prepare` to `command` (an agent
            object plays many episodes at once, so it keeps nothing of one on itself).
        mcp_servers: MCP servers the task gives (`TaskSandbox.mcp_servers`), for an agent
            that takes them to register in its configuration.
        skills_dir: The task's folder of skills in the sandbox, for an agent that takes skills
            to install where it reads them.
    """

    sandbox: Sandbox
    instruction: str
    env: dict[str, str]
    model: str
    files: Path | None = None
    example: Mapping[str, Any] = field(default_factory=dict)
    solution: Callable[[], Awaitable[str | None]] | None = None
    notes: dict[str, Any] = field(default_factory=dict)
    mcp_servers: tuple[McpServer, ...] = ()
    skills_dir: str | None = None


#: The model a `command:` agent's run records when no `-m` is given: its program may call no
#: model; a call it makes fails at once, and the rollout's error says to pass -m.
NO_MODEL = "none"


class Agent(ABC):
    """A program that plays an episode in a sandbox; its model calls go through the proxy.

    Subclasses set `name` and `dialect` (the wire format it speaks: "chat", "responses" or
    "messages") and implement `command`; `prepare` may install what it needs first.
    """

    name: ClassVar[str] = "?"
    dialect: ClassVar[str] = "chat"
    #: False for an agent that never calls a model (the oracle): then no call is not an error.
    calls_model: ClassVar[bool] = True
    #: Whether an episode with no answered model call is an error (one rule, whatever the
    #: environment): True for the agents built on a model (`bash`, `mini-swe-agent`, `codex`,
    #: `claude-code`: no call means it never reached the proxy); False for `command:` (a
    #: program may do its work without a model), then scored as it stands, with
    #: `state["agent"]["no_model_call"]`.
    must_call_model: ClassVar[bool] = True
    #: Whether it registers a task's MCP servers (`AgentContext.mcp_servers`) in its own
    #: configuration; a task giving some to an agent that does not is refused.
    takes_mcp_servers: ClassVar[bool] = False
    #: Whether it installs a task's skills (`AgentContext.skills_dir`) where it reads them.
    takes_skills: ClassVar[bool] = False

    async def prepare(self, ctx: AgentContext) -> None:
        """Set the sandbox up before the command runs (the instruction file and /agent are
        already there). The default does nothing."""
        return None

    @abstractmethod
    def command(self, ctx: AgentContext) -> str:
        """The shell command that runs the agent (in the sandbox's working directory)."""

    def sandbox_runtime(self, runtime: str) -> str:
        """The runtime the agent's sandboxes use, given the run's (an agent may derive an image)."""
        return runtime

    def config(self) -> dict[str, Any]:
        """What identifies the agent in metadata.json."""
        return {"name": self.name, "dialect": self.dialect}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def fill_command(template: str, ctx: AgentContext) -> str:
    """`template` with `{instruction}` (shell-quoted) and `{instruction_file}` filled in."""
    return template.replace("{instruction_file}", shlex.quote(INSTRUCTION_FILE)).replace(
        "{instruction}", shlex.quote(ctx.instruction)
    )
