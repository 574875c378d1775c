"""A multi-step Harbor task's steps (`[[steps]]`, `steps/NAME/`) as the agent run plays them.

Each step, in the one sandbox of the task (`envs.agents.TaskStep`):
- before its agent: steps/NAME/workdir/ is copied into the sandbox's working folder and its
  `setup.sh`, when it has one, runs there (as root, within the step's agent time); a setup
  that fails fails the rollout with its output;
- its agent plays steps/NAME/instruction.md (within `[steps.agent] timeout_sec`, else
  `[agent]`'s);
- its tests: /tests and /logs/verifier emptied, the task's tests/ uploaded then the step's
  tests/ over it (the step's test.sh wins), test.sh run as for a one-step task
  (`run_tests`, `[steps.verifier] timeout_sec` else `[verifier]`'s); the result (reward and
  components, or why there is none) is kept in `rollout.state["harbor_steps"]`, and the
  next step runs only when the reward reaches `min_reward` (one number; or a least value per
  reward key, a key the tests did not write counting 0) and the tests gave one; /tests,
  /logs/verifier and /solution are removed before it (its agent never sees them);
- `--agent oracle` runs steps/NAME/solution/solve.sh (else the task's solution/solve.sh),
  uploaded to /solution only then.

`HarborVerifier` turns the results into the rollout's score: one node per step.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from envs._harbor.files import HarborTaskError, staged_task_folder
from envs._harbor.task import STEPS_DIR, HarborTask, StepSection
from envs._harbor.trust import SHELL
from envs._harbor.verifier import LOGS_DIR, STEP_RESULTS, TESTS_DIR, verify
from envs.agents import TaskStep
from harness._core.types import Rollout
from harness.runtimes import Sandbox, SandboxError
from rubrics._tree.scoring import ScoringError

#: Where a step's solution/ is uploaded for the oracle.
SOLUTION_DIR = "/solution"
#: The step's setup script, in its workdir/.
SETUP_SCRIPT = "setup.sh"


def reached(
    min_reward: float | Mapping[str, float] | None, reward: float, components: Mapping[str, float]
) -> bool:
    """Whether a step's reward lets the next step run: at least `min_reward`, or with a
    least value per key, each key's (`reward` the step's reward; a key not written counts 0)."""
    if min_reward is None:
        return True
    if not isinstance(min_reward, Mapping):
        return reward >= min_reward
    values = {**components, "reward": reward}
    return all(values.get(key, 0.0) >= least for key, least in min_reward.items())


def task_steps(task: HarborTask, rollout: Rollout, *, empty_first: bool = True) -> list[TaskStep]:
    """The steps of `task` for one rollout (see the module docstring).

    Args:
        task: A multi-step task.
        rollout: The rollout the steps' results are recorded on.
        empty_first: Empty /tests and /logs/verifier before each step's tests (False only
            to audit a task as a runner that does not would run it).
    """
    seen: dict[str, str] = {}  # what earlier steps' tests changed in the sandbox
    results: dict[str, Any] = rollout.state.setdefault(STEP_RESULTS, {})
    return [
        TaskStep(
            name=step.name,
            instruction=task.step_instructions[step.name],
            timeout=step.agent.timeout_sec,
            prepare=functools.partial(_prepare, task, step),
            check=functools.partial(_check, task, step, results, seen, empty_first),
            solution=_oracle(task, step),
        )
        for step in task.config.steps
    ]


async def _prepare(task: HarborTask, step: StepSection, sandbox: Sandbox) -> None:
    """Copy the step's workdir/ into the working folder and run its setup.sh there."""
    relative = f"{STEPS_DIR}/{step.name}/workdir"
    if not (task.path / relative).is_dir():
        return
    async with staged_task_folder(task.path, relative) as folder:
        await sandbox.upload(folder, sandbox.workdir)
    if not task.step_has(step.name, f"workdir/{SETUP_SCRIPT}"):
        return
    timeout = step.agent.timeout_sec or task.config.agent.timeout_sec
    done = await sandbox.exec(
        [SHELL, "-c", f"bash ./{SETUP_SCRIPT}"], cwd=sandbox.workdir, user="0", timeout=timeout
    )
    if not done.ok:
        said = (done.stderr or done.stdout).strip()[-300:]
        raise HarborTaskError(
            f"step {step.name}: {relative}/{SETUP_SCRIPT} failed"
            + (" (timed out)" if done.timed_out else f" (exit {done.exit_code})")
            + (f": {said}" if said else "")
        )


async def _check(
    task: HarborTask,
    step: StepSection,
    results: dict[str, Any],
    seen: dict[str, str],
    empty_first: bool,
    sandbox: Sandbox,
) -> bool:
    """Run the step's tests, keep the result, and say whether the next step runs."""
    tests = [
        (task.path, folder)
        for folder in ("tests", f"{STEPS_DIR}/{step.name}/tests")
        if (task.path / folder).is_dir()
    ]
    detail: dict[str, Any] = {}
    result: dict[str, Any] = {"detail": detail}
    results[step.name] = result
    try:
        reward, components = await verify(
            sandbox,
            task,
            tests,
            detail,
            [*task.config.artifacts, *step.artifacts],
            timeout=step.verifier.timeout_sec or task.config.verifier.timeout_sec,
            workdir=task.workdir or sandbox.workdir,
            empty_first=empty_first,
            seen=seen,
        )
    except (ScoringError, SandboxError) as exc:
        result["error"] = str(exc)
        return False
    result.update(reward=reward, components=components)
    # the step's tests and their files go before the next step's agent could read them
    cleared = await sandbox.exec(
        [SHELL, "-c", f"rm -rf {TESTS_DIR} {LOGS_DIR} {SOLUTION_DIR}"], user="0", timeout=60
    )
    if not cleared.ok:
        result["error"] = f"cannot remove the step's tests from the sandbox: {cleared.stderr.strip()[-300:]}"
        return False
    try:
        seen.update(await sandbox.changed_files())
    except SandboxError as exc:
        result["error"] = f"cannot tell which files the step's tests changed: {exc}"
        return False
    go_on = math.isfinite(reward) and reached(step.min_reward, reward, components)
    if not go_on:
        result["stopped"] = f"below min_reward {step.min_reward}"
    return go_on


def _oracle(task: HarborTask, step: StepSection) -> Callable[[Sandbox], Awaitable[str]] | None:
    """What the oracle runs for a step: its solution/ (with a solve.sh), else the task's own."""
    if task.step_has(step.name, "solution/solve.sh"):
        return functools.partial(_solution, task, f"{STEPS_DIR}/{step.name}/solution")
    if (task.path / "solution" / "solve.sh").is_file():
        return functools.partial(_solution, task, "solution")
    return None


async def _solution(task: HarborTask, folder: str, sandbox: Sandbox) -> str:
    """A step's solution folder uploaded to /solution (the previous step's removed) and its command."""
    cleared = await sandbox.exec([SHELL, "-c", f"rm -rf {SOLUTION_DIR}"], user="0", timeout=60)
    if not cleared.ok:
        raise HarborTaskError(f"cannot clear {SOLUTION_DIR} for {folder}: {cleared.stderr.strip()}")
    async with staged_task_folder(task.path, folder) as solution:
        await sandbox.upload(solution, SOLUTION_DIR)
    return f"bash {SOLUTION_DIR}/solve.sh"
