"""`HarborVerifier`: a Harbor task's own tests as a node of the rubric tree.

After the agent has finished, in the rollout's sandbox: end every process in it and refuse a
sandbox whose verifier files the agent changed (`envs._harbor.trust`: the score is NaN with
the reason), empty /tests and /logs/verifier (so nothing the agent planted counts), upload a
checked copy of the task's tests/ only now, run test.sh with the image's bash (by its absolute
path) under `[verifier].timeout_sec`, with `[verifier] env` (read from task.toml and filled from
the host's environment only now: no agent process, and no record, ever holds it) as
`[verifier] user` (root by default), end what it started, then read (the harness itself)
/logs/verifier/reward.txt (one number) or reward.json (`reward` plus named components, each
recorded as a node score under this one). A verifier that times out, writes no reward or an
unparseable one leaves the node NaN with the reason (never 0); test.sh exiting non-zero after
writing a reward still counts the reward.

Before the tests, `[[verifier.collect]]` commands run and `artifacts` are copied out of the
agent's sandbox (kept in the score details); a separate verifier (`[verifier]
environment_mode = "separate"`) runs the tests in a fresh sandbox of its own image holding
only those artifacts (`envs._harbor.separate`). A multi-step task's steps are tested as the
episode plays them (`envs._harbor.steps`); this node then reads their results.
"""

from __future__ import annotations

import json
import math
import tempfile
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from envs._harbor.files import staged_task_folder
from envs._harbor.separate import copy_artifacts, run_collect_hooks, verifier_sandbox
from envs._harbor.task import ArtifactSection, HarborTask, VerifierSection, loaded_task, resolved_env
from envs._harbor.trust import SHELL, checked_commands, end_processes, refusal, tampered
from envs.agents import sandbox_of
from harness._core.types import Rollout
from harness.runtimes import ExecResult, Sandbox, SandboxError
from harness.runtimes._base import DEFAULT_PATH
from rubrics._tree.module import Rubric
from rubrics._tree.scoring import ScoringError, join_path

TESTS_DIR = "/tests"
LOGS_DIR = "/logs/verifier"
#: The most of test.sh's output kept in the score details.
DETAIL_OUTPUT = 2000
#: Characters of the test run's ctrf.json kept on the rollout.
DETAIL_CTRF = 20_000
#: The info key where `envs.from_harbor` puts what the verifier needs.
INFO_KEY = "harbor"
#: Where a multi-step task's step results are kept on the rollout (`rollout.state`), by step.
STEP_RESULTS = "harbor_steps"
#: The most of a reward file read (a number, or a small JSON object).
MAX_REWARD_BYTES = 1 << 20


def _number(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ScoringError(f"the verifier wrote {where} = {value!r}, not a finite number")
    return float(value)


def parse_reward(txt: str | None, js: str | None) -> tuple[float, dict[str, float]]:
    """The reward and its components, read as Harbor reads them: reward.txt first (one number),
    then reward.json (`reward` and named components, or one named reward). With both, the
    reward is reward.txt's and reward.json's named components are kept beside it.

    Raises:
        ScoringError: neither file, or one that does not hold what Harbor specifies (NaN and
            infinities included: the rollout is then unscored with the reason, never 0).
    """
    components = _components(js) if js is not None else None
    if txt is not None:
        try:
            reward = _number(float(txt.strip()), "reward.txt")
        except ValueError:
            raise ScoringError(
                f"the verifier wrote {LOGS_DIR}/reward.txt = {txt.strip()[:100]!r}, not one number"
            ) from None
        return reward, {k: v for k, v in (components or {}).items() if k != "reward"}
    if components is not None:
        if "reward" in components:
            return components["reward"], {k: v for k, v in components.items() if k != "reward"}
        if len(components) == 1:  # Harbor's single named reward
            return next(iter(components.values())), {}
        raise ScoringError(f"{LOGS_DIR}/reward.json has no 'reward' key (keys: {sorted(components)})")
    raise ScoringError(f"the verifier wrote no reward ({LOGS_DIR}/reward.txt or reward.json)")


def _components(js: str) -> dict[str, float]:
    """reward.json's numbers by name (`reward` among them when it has one)."""
    try:
        data = json.loads(js)
    except json.JSONDecodeError as exc:
        raise ScoringError(f"the verifier wrote {LOGS_DIR}/reward.json that is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise ScoringError(f"{LOGS_DIR}/reward.json must be an object with a 'reward', got {js[:100]!r}")
    return {str(k): _number(v, f"reward.json[{k!r}]") for k, v in data.items()}


async def _read_optional(sandbox: Sandbox, path: str) -> str | None:
    """A reward file, read by the harness itself (never by a command of the sandbox's)."""
    try:
        data = await sandbox.read(path, max_bytes=MAX_REWARD_BYTES)
    except SandboxError as exc:
        if "larger than max_bytes" in str(exc):  # a reward is one number or a small object
            raise ScoringError(f"the verifier wrote {path} larger than {MAX_REWARD_BYTES} bytes") from None
        return None  # not there, or not a regular file: no reward of that kind
    return data.decode("utf-8", errors="replace")


async def run_tests(
    sandbox: Sandbox,
    tests: Sequence[tuple[Path, str]],
    detail: dict[str, Any],
    *,
    timeout: float,
    workdir: str | None,
    empty_first: bool = True,
    seen: Mapping[str, str] | None = None,
    before: Callable[[], Awaitable[None]] | None = None,
    verifier: VerifierSection | None = None,
) -> tuple[float, dict[str, float]]:
    """Run a task's tests in `sandbox` (see the module docstring): the reward and its components.

    Args:
        sandbox: Where the agent worked.
        tests: The task's folders uploaded to /tests, in order (a later one's files over an
            earlier one's: a step's tests/ over the task's), as (task folder, relative folder).
        detail: Filled with the test run's exit code, output, time and report as they are known.
        timeout: Seconds test.sh may run.
        workdir: Where test.sh runs (None: the sandbox's working directory).
        empty_first: Empty /tests and /logs/verifier first.
        seen: Files a previous test run in this sandbox changed (`Sandbox.changed_files`):
            not counted as the agent's when they are changed the same way.
        before: Run once the sandbox is trusted, before the tests are put in place (the
            `[[verifier.collect]]` commands, the artifacts copied out).
        verifier: The task's `[verifier]` (test.sh's `env` and `user`; None: root, no variables).

    Raises:
        ScoringError: the sandbox was tampered with, test.sh timed out, or wrote no reward.
    """
    bash = await _trusted_bash(sandbox, seen or {})
    if before is not None:
        await before()
    await _put_tests(sandbox, tests, empty_first=empty_first)
    env, user = await _phase(sandbox, verifier)
    result = await sandbox.exec(
        [bash, f"{TESTS_DIR}/test.sh"], timeout=timeout, cwd=workdir or None, user=user, env=env
    )
    detail.update(
        exit_code=result.exit_code,
        output=(result.stdout + result.stderr)[-DETAIL_OUTPUT:],
        seconds=round(result.duration, 3),
    )
    if result.timed_out:
        raise ScoringError(f"the verifier (tests/test.sh) ran past [verifier] timeout_sec = {timeout:g} s")
    await end_processes(sandbox, "after tests/test.sh")  # what it started cannot write later
    return await _read_reward(sandbox, result, detail)


async def _put_tests(sandbox: Sandbox, tests: Sequence[tuple[Path, str]], *, empty_first: bool) -> None:
    """/tests and /logs/verifier made (emptied first, unless told not to), then the task's
    tests/ folders uploaded to /tests in order, each from a checked copy."""
    emptied = f"rm -rf {TESTS_DIR} {LOGS_DIR} && " if empty_first else ""
    reset = await sandbox.exec(
        [SHELL, "-c", f"{emptied}mkdir -p {TESTS_DIR} {LOGS_DIR}"], timeout=60, user="0", cwd="/"
    )
    if not reset.ok:
        raise ScoringError(
            f"cannot empty {TESTS_DIR} and {LOGS_DIR} in the sandbox: {reset.stderr.strip()[-300:]}"
        )
    for root, relative in tests:
        async with staged_task_folder(root, relative) as folder:
            await sandbox.upload(folder, TESTS_DIR)


async def _read_reward(
    sandbox: Sandbox, result: ExecResult, detail: dict[str, Any]
) -> tuple[float, dict[str, float]]:
    """The reward files read by the harness (and ctrf.json kept in `detail`); a missing or bad
    reward names test.sh's exit code and last line."""
    txt = await _read_optional(sandbox, f"{LOGS_DIR}/reward.txt")
    js = await _read_optional(sandbox, f"{LOGS_DIR}/reward.json")
    ctrf = await _read_optional(sandbox, f"{LOGS_DIR}/ctrf.json")
    if ctrf is not None:  # the test run's report (CTRF), kept as the verifier wrote it
        detail["ctrf"] = ctrf[:DETAIL_CTRF]
    try:
        reward, components = parse_reward(txt, js)
    except ScoringError as exc:
        tail = (result.stderr or result.stdout).strip().splitlines()
        said = f"; test.sh exited {result.exit_code}" + (f": {tail[-1][:200]}" if tail else "")
        raise ScoringError(f"{exc}{said}") from None
    if components:
        detail["components"] = components
    return reward, components


async def verify(
    sandbox: Sandbox,
    task: HarborTask,
    tests: Sequence[tuple[Path, str]],
    detail: dict[str, Any],
    artifacts: Sequence[ArtifactSection],
    *,
    timeout: float,
    workdir: str | None,
    empty_first: bool = True,
    seen: Mapping[str, str] | None = None,
) -> tuple[float, dict[str, float]]:
    """Test what the agent left in `sandbox`: its `[[verifier.collect]]` commands run and
    `artifacts` (with /logs/artifacts) copied out and kept in `detail["artifacts"]`, then
    the tests run there (`run_tests`) or, for a separate verifier, in a fresh sandbox of the
    verifier's image that holds only the copied artifacts (`envs._harbor.separate`).

    Raises:
        ScoringError: see `run_tests`; a collect command failed; the verifier's image failed.
    """
    with tempfile.TemporaryDirectory(prefix="rubric-artifacts-") as folder:
        copied = Path(folder)

        async def collect() -> None:
            await run_collect_hooks(sandbox, task, detail)
            detail["artifacts"] = await copy_artifacts(sandbox, artifacts, copied)

        if not task.config.verifier.separate:
            return await run_tests(
                sandbox,
                tests,
                detail,
                timeout=timeout,
                workdir=workdir,
                empty_first=empty_first,
                seen=seen,
                before=collect,
                verifier=task.config.verifier,
            )
        await end_processes(sandbox, "before the verifier")  # nothing of the agent's runs on
        await collect()
        async with verifier_sandbox(task, copied, detail["artifacts"]) as own:
            return await run_tests(
                own,
                [],
                detail,
                timeout=timeout,
                workdir=None,
                empty_first=False,
                verifier=task.config.verifier,
            )


async def _phase(sandbox: Sandbox, verifier: VerifierSection | None) -> tuple[dict[str, str], str]:
    """test.sh's variables (`[verifier] env`, resolved now) and user (`[verifier] user`,
    given /tests and /logs/verifier; root when the task names none)."""
    if verifier is None:
        return {}, "0"
    env = resolved_env(verifier.env, "[verifier]")
    if verifier.user is None:
        return env, "0"
    given = await sandbox.exec(
        ["chown", "-R", verifier.user, TESTS_DIR, LOGS_DIR], timeout=60, user="0", cwd="/"
    )
    if not given.ok:
        raise ScoringError(
            f"cannot give {TESTS_DIR} and {LOGS_DIR} to [verifier] user {verifier.user!r}: {given.stderr.strip()[-300:]}"
        )
    return env, verifier.user


async def _trusted_bash(sandbox: Sandbox, seen: Mapping[str, str]) -> str:
    """End the agent's processes, refuse a sandbox whose verifier files it changed, and
    find bash (by absolute path) to run test.sh with."""
    await end_processes(sandbox, "before the verifier")
    try:
        changes = await sandbox.changed_files()
    except SandboxError as exc:
        raise ScoringError(f"cannot tell which files the agent changed: {exc}") from None
    reasons, added = tampered({path: kind for path, kind in changes.items() if seen.get(path) != kind})
    if reasons:
        raise refusal(reasons)
    shadows, found = await checked_commands(sandbox, added, ["bash"])
    if shadows:
        raise refusal(shadows)
    if "bash" not in found:
        raise ScoringError(f"the task's image has no bash to run tests/test.sh (looked in {DEFAULT_PATH})")
    return found["bash"]


class HarborVerifier(Rubric):
    """A Harbor task's tests/test.sh, run in the agent's sandbox after it finished.

    Its score is the task's reward; each `reward.json` component is a node score under it
    (`<this node's path>.<component>`). A multi-step task's steps were each tested as the
    episode played them (`envs.from_harbor`'s `task_steps` hook): each step's reward is a node
    score under this one (`<path>.steps.<step>`, NaN with the reason when its tests failed),
    and this node's score is their `mean` (a step that did not run counts 0) or the `final`
    step's, as task.toml's `multi_step_reward_strategy` says. Use it alone (what
    `envs.from_harbor` does) or beside other nodes:
    `WeightedSum({"tests": HarborVerifier(), "judge": LLMJudge(...)})`.

    Args:
        name: The node's name (default "harbor_verifier").
        empty_first: Empty /tests and /logs/verifier before the tests run (default). False
            only to audit a task as a runner that does not would run it (`rubric audit`).
    """

    def __init__(self, *, name: str | None = None, empty_first: bool = True) -> None:
        super().__init__(name=name or "harbor_verifier")
        self.empty_first = empty_first

    async def forward(self, rollout: Rollout) -> float:
        task = rollout.info.get(INFO_KEY)
        if not isinstance(task, dict) or "path" not in task:
            raise ScoringError(
                "HarborVerifier scores rollouts of a Harbor task (envs.from_harbor / rubric eval harbor:PATH); "
                "this rollout's info has no 'harbor' entry"
            )
        if task.get("steps"):
            return self._steps_reward(rollout, task)
        sandbox = sandbox_of(rollout, "HarborVerifier (the task's tests/test.sh)")
        detail: dict[str, Any] = {}
        loaded = loaded_task(Path(task["path"]))
        try:
            reward, components = await verify(
                sandbox,
                loaded,
                [(loaded.path, "tests")],
                detail,
                loaded.config.artifacts,
                timeout=float(task.get("verifier_timeout_sec", 600.0)),
                workdir=task.get("workdir"),
                empty_first=self.empty_first,
            )
        finally:
            if detail:
                self.record_detail(rollout, detail)
        path = self._own_scope(rollout, "forward").path
        for key, value in components.items():
            rollout.scores[join_path(path, key)] = value
        return reward

    def _steps_reward(self, rollout: Rollout, task: Mapping[str, Any]) -> float:
        """A multi-step task's reward from its steps' results (recorded as the episode ran)."""
        results: dict[str, Any] = rollout.state.get(STEP_RESULTS, {})
        path = join_path(self._own_scope(rollout, "forward").path, "steps")
        rewards: list[float] = []
        failed: list[str] = []
        for name in task["steps"]:
            result = results.get(name)
            if result is None:  # not played: the episode stopped before it
                rewards.append(0.0)
                continue
            if "error" in result:
                rollout.scores[join_path(path, name)] = math.nan
                failed.append(f"step {name}: {result['error']}")
                continue
            rollout.scores[join_path(path, name)] = result["reward"]
            rewards.append(result["reward"])
        self.record_detail(rollout, {"steps": results})
        if failed:
            raise ScoringError("; ".join(failed))
        if task.get("multi_step_reward_strategy") == "final":
            last = results.get(task["steps"][-1])
            return float(last["reward"]) if last is not None else 0.0
        return sum(rewards) / len(task["steps"])
