"""Harbor tasks (task.toml, instruction.md, environment/, tests/, solution/) run by our harness.

    envs.from_harbor("datasets/harbor").evaluate("scripted:harbor", agent="bash")
    rubric eval harbor:datasets/harbor --agent oracle

- `files`: every read of a task's files: regular files inside the folder, size-capped.
- `task`: the folder format, parsed with `tomllib` and a pydantic model (Harbor needs Python 3.12).
- `trust`: what the verifier checks before it runs in the agent's sandbox.
- `verifier`: `HarborVerifier`, the task's tests/test.sh as a rubric node.
- `separate`: `[[verifier.collect]]`, `artifacts` and a separate verifier's own sandbox.
- `steps`: a multi-step task's steps (`[[steps]]`) as the agent run plays them.
- `environment`: `from_harbor`, one row per task; its hooks name each task's sandbox (its own
  image and limits) and its solution (for `--agent oracle`).
"""

from __future__ import annotations

from envs._harbor.environment import HarborEnvironment, HarborScript, from_harbor
from envs._harbor.files import HarborTaskError
from envs._harbor.task import HarborTask, TaskConfig, load_task, task_folders
from envs._harbor.verifier import HarborVerifier, parse_reward

__all__ = [
    "HarborEnvironment",
    "HarborScript",
    "HarborTask",
    "HarborTaskError",
    "HarborVerifier",
    "TaskConfig",
    "from_harbor",
    "load_task",
    "parse_reward",
    "task_folders",
]
