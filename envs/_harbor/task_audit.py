"""Checks of Harbor tasks themselves (`rubric check TASK_DIR`, `rubric audit harbor:PATH`).

Per task, in real sandboxes of its image:
- `oracle`: its solution/solve.sh scores 1 (a multi-step task: each step's solution in turn;
  a task without a solution is not flagged for it);
- `do-nothing`: an agent that does nothing scores 0 (above 0: the reward is free);
- `image-leak`: no file of tests/ or solution/ is readable in the agent's image (the answer
  baked into the image);
- `planted-reward`: with a reward of 1 planted at /logs/verifier/reward.txt by the agent and the
  folder left as it is (runners that do not empty it, as rubric does), test.sh does not score 1
  for a task left undone: it always writes its own reward.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envs._harbor.environment import HarborEnvironment
from envs._harbor.files import task_folder_files
from envs._harbor.task import STEPS_DIR, task_folders
from envs._harbor.verifier import LOGS_DIR, HarborVerifier
from envs.agents import CommandAgent, sandbox_of
from harness._core.aio import run_sync
from harness._core.types import Rollout
from rubrics._tree.module import Rubric

#: Files smaller than this are not looked for in the image (an empty `__init__.py` is everywhere).
MIN_LEAK_BYTES = 16
_HASH_IMAGE = (
    "find / -xdev \\( -path /proc -o -path /sys -o -path /dev -o -path /tmp/rubric-agent \\) -prune "
    "-o -type f -size -4M -print0 2>/dev/null | xargs -0 sha256sum 2>/dev/null"
)
_PLANT = f"mkdir -p {LOGS_DIR} && echo 1 > {LOGS_DIR}/reward.txt"


@dataclass
class HarborTaskCheck:
    """The checks of one Harbor task (`check_harbor_tasks`).

    Attributes:
        task: The task's folder name.
        results: Each check's name -> (passed, what was found).
    """

    task: str
    results: dict[str, tuple[bool, str]] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """Whether every check passed."""
        return all(passed for passed, _ in self.results.values())

    def lines(self) -> list[str]:
        """One line per check, for the terminal."""
        return [f"{'ok  ' if passed else 'FAIL'} {self.task}: {name}: {said}" for name, (passed, said) in self.results.items()]  # fmt: skip


class _Probe(CommandAgent):
    """A `command:` probe of the checks: it calls no model, so a task's MCP servers and skills,
    which only a model would use, are nothing to it (a task giving them is checked as is)."""

    takes_mcp_servers = True
    takes_skills = True


def _said(rollout: Rollout) -> str:
    reason = rollout.error or "; ".join(f"{k or 'verifier'}: {v}" for k, v in rollout.score_errors.items())
    return f"reward {rollout.reward}" + (f" ({reason})" if reason else "")


class _LeakProbe(Rubric):
    """Scores nothing: hashes the files of the sandbox a do-nothing agent left (the image)."""

    def __init__(self) -> None:
        super().__init__(name="image_files")
        self.found: dict[str, list[str]] = {}

    async def forward(self, rollout: Rollout) -> float:
        sandbox = sandbox_of(rollout, "the image-leak probe")
        # One line per file of the image: more than exec's default keeps for a large image.
        result = await sandbox.exec(_HASH_IMAGE, timeout=120, max_output=256 << 20)
        for line in result.stdout.splitlines():
            digest, _, path = line.partition("  ")
            self.found.setdefault(digest, []).append(path)
        return 0.0


def _secrets(folder: Path) -> dict[str, str]:
    """sha256 -> relative path of every tests/ and solution/ file worth looking for (read
    through `task_folder_files`: inside the task, regular files only)."""
    found = {}
    parts = ["tests", "solution"]
    steps = folder / STEPS_DIR
    if steps.is_dir():  # a multi-step task's steps' tests/ and solution/ too
        parts += [
            f"{STEPS_DIR}/{step.name}/{part}"
            for step in sorted(steps.iterdir())
            for part in ("tests", "solution")
        ]
    for part in parts:
        for path, data in task_folder_files(folder, part) if (folder / part).is_dir() else []:
            if len(data) >= MIN_LEAK_BYTES:
                found[hashlib.sha256(data).hexdigest()] = path
    return found


async def _score(env: HarborEnvironment, agent: Any) -> list[Rollout]:
    results = await env.aevaluate("scripted:harbor", agent=agent, progress=False)
    return list(results.rollouts)


async def acheck_harbor_tasks(path: str | Path) -> list[HarborTaskCheck]:
    """Check Harbor tasks, in sandboxes of their images, as `rubric check TASK_DIR` does.

    Per task: its solution scores 1, doing nothing scores 0, no file of tests/ or solution/
    is readable in the agent's image, and test.sh writes its own reward (a planted one is
    not taken).

    Args:
        path: A task folder, or a folder of tasks.

    Returns:
        One check per task, in folder order; a task that cannot be loaded fails its `task` check.
    """
    env = HarborEnvironment(path)
    named = {task.path: name for name, task in env.tasks.items()}  # its [task] name, else its folder's
    checks = {
        named.get(folder, folder.name): HarborTaskCheck(named.get(folder, folder.name))
        for folder in task_folders(path)
    }
    for name, error in env.broken.items():
        checks[name].results["task"] = (False, error)
    if not env.tasks:
        return list(checks.values())
    for rollout in await _score(env, "oracle"):
        if rollout.example_id in env.tasks and env.tasks[str(rollout.example_id)].has_solution:
            checks[str(rollout.example_id)].results["oracle"] = (rollout.reward == 1.0, _said(rollout))
    for rollout in await _score(env, _Probe("true")):
        if rollout.example_id in env.tasks:
            checks[str(rollout.example_id)].results["do-nothing"] = (rollout.reward == 0.0, _said(rollout))
    for name, task in env.tasks.items():  # one task at a time: the probe holds one image's files
        probe = _LeakProbe()
        await _score(HarborEnvironment(task.path, rubric=probe), _Probe("true"))
        leaks = [
            f"{secret} at {', '.join(probe.found[digest][:3])}"
            for digest, secret in _secrets(task.path).items()
            if digest in probe.found
        ]
        checks[name].results["image-leak"] = (
            not leaks,
            "; ".join(leaks) + " (readable by the agent)"
            if leaks
            else "no tests/ or solution/ file in the image",
        )
    planted = HarborEnvironment(path, rubric=HarborVerifier(empty_first=False))
    for rollout in await _score(planted, _Probe(_PLANT)):
        name = str(rollout.example_id)
        if name in env.tasks:
            passed = rollout.reward != 1.0
            said = "test.sh writes its own reward" if passed else "scores 1 with a planted reward.txt of 1 and the task undone: test.sh must write its own reward on every path"  # fmt: skip
            checks[name].results["planted-reward"] = (passed, said)
    return list(checks.values())


def check_harbor_tasks(path: str | Path) -> list[HarborTaskCheck]:
    """`acheck_harbor_tasks`, synchronously (works inside a running event loop too).

    Args:
        path: A task folder, or a folder of tasks.

    Returns:
        One check per task (see `acheck_harbor_tasks`).
    """
    return run_sync(acheck_harbor_tasks(path))
