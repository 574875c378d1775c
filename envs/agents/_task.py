"""What an agent run asks of a task: its instruction, its sandbox, its setup step, its solution.

An `Environment` describes a task; who plays it, in which runtime and within which limits, is a
run setting (`envs.agents.AgentRun`). So the environment holds no agent: it keeps these task
hooks (it inherits `AgentTask`), each with a default that a subclass overrides.

- `instruction(rollout)`: what the agent is asked to do (the text of the rollout's prompt).
- `task_sandbox(rollout)`: the sandbox this row asks for, a `TaskSandbox` (its runtime or
  image, CPUs, memory, disk, workdir, network, time, variables, the agent's user, a readiness
  check, MCP servers and skills for the agent), e.g. a Harbor task's own image and limits, or
  one image per row of a SWE-style dataset; None: the run's settings alone.
- `setup_sandbox(sandbox, rollout)`: prepares a fresh sandbox before the agent starts (clone a
  repository, install dependencies); an environment declares one by overriding it, and with
  `-r N` it runs once per example and each rollout gets a fork of the result.
- `task_steps(rollout)`: the steps of a multi-step task (`TaskStep`: each its instruction, a
  step before the agent, a check after it that says whether the next runs, its solution);
  None: one step.
- `solution(sandbox, rollout)`: puts the task's reference solution in the sandbox and returns
  the command running it, which is what `--agent oracle` runs (default: the row's `solution`
  column, a shell script); None: the task has none.

The run's settings win over the task's, one by one: a `runtime` given to the run replaces
every task's, the run's limits replace the task's, the run's timeout the task's.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Literal

from envs.agents._base import STATE_DIR, McpServer
from harness._core.errors import ConfigError
from harness._core.types import Rollout
from harness.runtimes import Sandbox

#: The row column (in `info`) the default `solution` hook reads: a shell script solving the task.
SOLUTION_COLUMN = "solution"
#: A runtime a task names: a runtime string ("docker:IMAGE"), or an async function making one
#: (building the task's image), called only when the run gives no runtime of its own.
TaskRuntime = str | Callable[[], Awaitable[str]]
#: A check a sandbox must pass before the agent starts (it raises, with the reason, when not).
ReadyCheck = Callable[[Sandbox], Awaitable[None]]


@dataclass(frozen=True)
class TaskSandbox:
    """The sandbox one task (one row) asks for; None fields leave the choice to the run.

    Attributes:
        runtime: Its runtime ("docker:IMAGE", "bwrap:ROOTFS", ...), or an async function
            returning one (e.g. one that builds the task's image), called only when the run
            names no runtime of its own.
        cpus: CPUs (a CFS quota).
        memory_mb: Memory for everything in the sandbox.
        pids: Processes and threads at once.
        disk_mb: The sandbox's disk (largest file, and where the runtime caps it, its layer).
        workdir: The agent's working folder (an image's WORKDIR).
        network: "none" (the default: only the socket back to the harness), "host", or
            "public": a network of the sandbox's own where the runtime has one (Docker's
            default bridge), the machine's where it has not (bwrap), with one line saying so.
        timeout: Seconds the agent may take on this task.
        env: Variables of every command in the sandbox (the agent's, a check's, a verifier's).
        agent_env: Variables of the agent's process only (never the sandbox's or a verifier's).
        user: The OS user the agent runs as ("NAME", "UID" or "UID:GID"; None: the runtime's).
        ready: A check the sandbox must pass before the agent starts (e.g. a Harbor
            healthcheck); when it raises, the rollout fails with its reason and no agent runs.
        mcp_servers: MCP servers for the agent; an agent that cannot take them refuses the task.
        skills_dir: A folder of skills (SKILL.md folders) in the sandbox, installed where the
            agent reads skills; an agent that has no skills refuses the task.
    """

    runtime: TaskRuntime | None = None
    cpus: float | None = None
    memory_mb: int | None = None
    pids: int | None = None
    disk_mb: int | None = None
    workdir: str | None = None
    network: Literal["none", "host", "public"] = "none"
    timeout: float | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    agent_env: Mapping[str, str] = field(default_factory=dict)
    user: str | None = None
    ready: ReadyCheck | None = None
    mcp_servers: tuple[McpServer, ...] = ()
    skills_dir: str | None = None

    def __post_init__(self) -> None:
        if self.timeout is not None and not self.timeout > 0:
            raise ConfigError(
                f"TaskSandbox timeout must be a positive number of seconds, got {self.timeout!r}"
            )
        if self.runtime is not None and not (isinstance(self.runtime, str) or callable(self.runtime)):
            raise ConfigError(
                "TaskSandbox runtime must be a runtime such as 'docker:IMAGE', or an async function "
                f"returning one; got {type(self.runtime).__name__}"
            )


@dataclass(frozen=True)
class TaskStep:
    """One step of a multi-step task (`AgentTask.task_steps`): the agent plays each step's
    instruction in turn in the same sandbox, and the step is checked before the next starts.

    Attributes:
        name: The step's name (recorded with its model calls in `rollout.state["steps"]`).
        instruction: What the agent is asked to do in this step.
        timeout: Seconds the agent may take on this step (None: the episode's).
        prepare: Run before the step's agent starts (upload the step's files, a setup script).
        check: Run after the step's agent has finished and every process in the sandbox
            ended: scores the step (recording it on the rollout) and returns whether the next
            step runs.
        solution: Put the step's reference solution in the sandbox and return the command
            running it (what `--agent oracle` runs), or None when the step has none.
    """

    name: str
    instruction: str
    timeout: float | None = None
    prepare: Callable[[Sandbox], Awaitable[None]] | None = None
    check: Callable[[Sandbox], Awaitable[bool]] | None = None
    solution: Callable[[Sandbox], Awaitable[str | None]] | None = None


class AgentTask:
    """The task hooks an agent run reads (see the module docstring); `envs.Environment` has them.

    Override them in an environment to give each row its own sandbox, a setup step, or a
    reference solution.
    """

    def instruction(self, rollout: Rollout) -> str:
        """What an agent is asked to do: the text of the rollout's prompt (system, then user turns)."""
        return "\n\n".join(m.text for m in rollout.prompt if m.role in ("system", "user") and m.text)

    def task_sandbox(self, rollout: Rollout) -> TaskSandbox | None:
        """The sandbox this rollout's task asks for (its image, limits, workdir, time); None:
        the run's settings alone. The default asks for nothing."""
        return None

    def task_steps(self, rollout: Rollout) -> list[TaskStep] | None:
        """The steps of a multi-step task, in order (the agent plays each in the same sandbox,
        each checked before the next); None (the default): one step, `instruction(rollout)`."""
        return None

    async def setup_sandbox(self, sandbox: Sandbox, rollout: Rollout) -> None:
        """The task's setup step for its agent's sandboxes (override it): clone a repository,
        install dependencies, write fixtures. It runs before the agent starts; with several
        rollouts per example (`-r N`) it runs once per example in a template sandbox and each
        rollout gets a fork of it, so N rollouts pay for one setup. A failure is recorded on
        the rollouts of that example."""

    def named_runtimes(self) -> dict[str, str]:
        """The runtime each task names for itself, by task name, where the environment knows
        them before any rollout (a Harbor task's image); a run's `--runtime` replaces them."""
        return {}

    async def solution(self, sandbox: Sandbox, rollout: Rollout) -> str | None:
        """Put the task's reference solution in `sandbox` and return the shell command that runs
        it (what `--agent oracle` runs), or None when the task has none. The default writes the
        row's `solution` column (a shell script) into the agent's folder."""
        script = rollout.info.get(SOLUTION_COLUMN)
        if not isinstance(script, str) or not script.strip():
            return None
        await sandbox.write(f"{STATE_DIR}/solution.sh", script)
        return f"bash {STATE_DIR}/solution.sh"


def declares_setup(task: AgentTask) -> bool:
    """Whether `task` overrides `setup_sandbox` (a setup step worth forking per group)."""
    return type(task).setup_sandbox is not AgentTask.setup_sandbox


def names_sandboxes(task: AgentTask) -> bool:
    """Whether `task` overrides `task_sandbox` (its rows name their own sandboxes)."""
    return type(task).task_sandbox is not AgentTask.task_sandbox


__all__ = [
    "SOLUTION_COLUMN",
    "AgentTask",
    "McpServer",
    "ReadyCheck",
    "TaskRuntime",
    "TaskSandbox",
    "TaskStep",
    "declares_setup",
    "names_sandboxes",
]
