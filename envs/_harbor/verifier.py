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
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from envs._harbor.files import staged_task_folder
from envs._harbor.task import resolved_env, task_config
from envs._harbor.trust import SHELL, checked_commands, end_processes, refusal, tampered
from envs.agents import sandbox_of
from harness._core.types import Rollout
from harness.runtimes import Sandbox, SandboxError
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


class HarborVerifier(Rubric):
    """A Harbor task's tests/test.sh, run in the agent's sandbox after it finished.

    Its score is the task's reward; each `reward.json` component is a node score under it
    (`<this node's path>.<component>`). Use it alone (what `envs.from_harbor` does) or beside
    other nodes: `WeightedSum({"tests": HarborVerifier(), "judge": LLMJudge(...)})`.

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
        sandbox = sandbox_of(rollout, "HarborVerifier (the task's tests/test.sh)")
        bash = await self._trusted_bash(sandbox)
        emptied = f"rm -rf {TESTS_DIR} {LOGS_DIR} && " if self.empty_first else ""
        reset = await sandbox.exec(
            [SHELL, "-c", f"{emptied}mkdir -p {TESTS_DIR} {LOGS_DIR}"], timeout=60, user="0", cwd="/"
        )
        if not reset.ok:
            raise ScoringError(
                f"cannot empty {TESTS_DIR} and {LOGS_DIR} in the sandbox: {reset.stderr.strip()[-300:]}"
            )
        async with staged_task_folder(Path(task["path"]), "tests") as tests:
            await sandbox.upload(tests, TESTS_DIR)
        env, user = await self._phase(sandbox, Path(task["path"]))
        timeout = float(task.get("verifier_timeout_sec", 600.0))
        result = await sandbox.exec(
            [bash, f"{TESTS_DIR}/test.sh"],
            timeout=timeout,
            cwd=task.get("workdir") or None,
            user=user,
            env=env,
        )
        detail: dict[str, Any] = {
            "exit_code": result.exit_code,
            "output": (result.stdout + result.stderr)[-DETAIL_OUTPUT:],
            "seconds": round(result.duration, 3),
        }
        self.record_detail(rollout, detail)
        if result.timed_out:
            raise ScoringError(
                f"the verifier (tests/test.sh) ran past [verifier] timeout_sec = {timeout:g} s"
            )
        await end_processes(sandbox, "after tests/test.sh")  # what it started cannot write later
        txt = await _read_optional(sandbox, f"{LOGS_DIR}/reward.txt")
        js = await _read_optional(sandbox, f"{LOGS_DIR}/reward.json")
        ctrf = await _read_optional(sandbox, f"{LOGS_DIR}/ctrf.json")
        if ctrf is not None:  # the test run's report (CTRF), kept as the verifier wrote it
            self.record_detail(rollout, {"ctrf": ctrf[:DETAIL_CTRF]})
        try:
            reward, components = parse_reward(txt, js)
        except ScoringError as exc:
            tail = (result.stderr or result.stdout).strip().splitlines()
            said = f"; test.sh exited {result.exit_code}" + (f": {tail[-1][:200]}" if tail else "")
            raise ScoringError(f"{exc}{said}") from None
        path = self._own_scope(rollout, "forward").path
        for key, value in components.items():
            rollout.scores[join_path(path, key)] = value
        if components:
            self.record_detail(rollout, {"components": components})
        return reward

    async def _phase(self, sandbox: Sandbox, folder: Path) -> tuple[dict[str, str], str]:
        """test.sh's variables (`[verifier] env`, resolved now) and user (`[verifier] user`,
        given /tests and /logs/verifier; root when the task names none)."""
        config = task_config(folder).verifier
        env = resolved_env(config.env, "[verifier]")
        if config.user is None:
            return env, "0"
        given = await sandbox.exec(
            ["chown", "-R", config.user, TESTS_DIR, LOGS_DIR], timeout=60, user="0", cwd="/"
        )
        if not given.ok:
            raise ScoringError(
                f"cannot give {TESTS_DIR} and {LOGS_DIR} to [verifier] user {config.user!r}: {given.stderr.strip()[-300:]}"
            )
        return env, config.user

    async def _trusted_bash(self, sandbox: Sandbox) -> str:
        """End the agent's processes, refuse a sandbox whose verifier files it changed, and
        find bash (by absolute path) to run test.sh with."""
        await end_processes(sandbox, "before the verifier")
        try:
            changes = await sandbox.changed_files()
        except SandboxError as exc:
            raise ScoringError(f"cannot tell which files the agent changed: {exc}") from None
        reasons, added = tampered(changes)
        if reasons:
            raise refusal(reasons)
        shadows, found = await checked_commands(sandbox, added, ["bash"])
        if shadows:
            raise refusal(shadows)
        if "bash" not in found:
            raise ScoringError(
                f"the task's image has no bash to run tests/test.sh (looked in {DEFAULT_PATH})"
            )
        return found["bash"]
