"""Set up once per group, fork per rollout: an environment's `setup_sandbox` runs once per
example with `-r > 1`, and every rollout starts from a fork of the set-up sandbox."""

from __future__ import annotations

import asyncio
import os
import textwrap
from pathlib import Path

import pytest

from envs import load_environment
from envs.agents import AgentRun
from harness import Client, EvalResults, ScriptedEndpoint, aevaluate
from harness.runtimes import list_sandboxes
from harness.scripted import ShellScript

pytestmark = [pytest.mark.timeout(180), pytest.mark.agents, pytest.mark.slow]

# The setup step writes the seed file the agent copies (so a rollout scores 1 only in a sandbox
# that was set up) and appends a line to a host file outside the sandbox (the count of setups).
ENV_FILE = textwrap.dedent(
    """
    import asyncio
    import os
    from pathlib import Path

    from envs import Environment
    from envs.agents import file_contains


    class SetUpTask(Environment):
        def __init__(self, counter, n, fail, hang):
            rows = [{"prompt": f"task {i}: copy seed.txt to hello.txt"} for i in range(n)]
            super().__init__(rows, file_contains("hello.txt", "hi"), name="set-up-task", max_turns=8)
            self.counter, self.fail, self.hang = Path(counter), fail, hang

        async def setup_sandbox(self, sandbox, rollout):
            with self.counter.open("a") as file:
                # who set it up, and who owns the sandbox: the worker process running the rollout
                file.write(f"{rollout.example_id} {os.getpid()} {sandbox.state.owner}\\n")
            await sandbox.write("seed.txt", "hi")
            if self.hang:
                await asyncio.sleep(60)
            if self.fail:
                raise RuntimeError("the repository cannot be cloned")


    def load_environment(counter: str, n: int = 2, fail: bool = False, hang: bool = False):
        return SetUpTask(counter, n, fail, hang)
    """
)
SOLVE = ShellScript(["cp seed.txt hello.txt && rm seed.txt"], "copied")


def _env_file(tmp_path: Path) -> str:
    path = tmp_path / "set_up_task.py"
    path.write_text(ENV_FILE)
    return str(path)


def _setups(counter: Path) -> list[str]:
    """The examples set up, one entry per setup."""
    return sorted(line.split()[0] for line in _lines(counter))


def _lines(counter: Path) -> list[str]:
    return counter.read_text().splitlines() if counter.exists() else []


def _ours(run_or_owner: str) -> list[dict[str, str]]:
    """The bwrap sandboxes of a run id or an owner pid still on this machine."""
    return [s for s in list_sandboxes(docker=False) if run_or_owner in (s["run"], s["owner"])]


def _run_id(run: AgentRun) -> str:
    """The run id the run's bwrap sandboxes carry."""
    return run.sandboxes.runtime_for("bwrap").run_id


async def _run_groups(tmp_path: Path, workers: int) -> tuple[Path, EvalResults]:
    counter = tmp_path / "setups.txt"
    env = load_environment(_env_file(tmp_path), counter=str(counter), n=2)
    run = AgentRun("bash", runtime="bwrap")
    with ScriptedEndpoint(SOLVE) as endpoint:
        client = Client("served", base_url=endpoint.base_url)
        results = await aevaluate(
            env,
            client,
            rollouts_per_example=4,
            concurrency=4,
            workers=workers,
            progress=False,
            episodes=run,
        )
    assert [r.error for r in results.rollouts] == [None] * 8
    # Every rollout found the seed (a fork of the set-up sandbox) and removed it in its own copy
    # only: the other rollouts of its group still found it.
    assert [r.reward for r in results.rollouts] == [1.0] * 8
    assert run.sandboxes.templates == 0  # templates closed
    return counter, results


async def test_setup_runs_once_per_example_and_each_rollout_gets_a_fork(tmp_path: Path) -> None:
    counter, _ = await _run_groups(tmp_path, 1)
    assert _setups(counter) == ["0", "1"]  # once per example, not once per rollout
    assert {tuple(line.split()[1:]) for line in _lines(counter)} == {(str(os.getpid()),) * 2}
    assert not _ours(str(os.getpid()))


def _check_workers_own_their_sandboxes(counter: Path) -> None:
    """Each worker sets up the examples it was handed, at most once each, in sandboxes it owns
    (not the driver): its rollouts' sandboxes go with it, and none is left after the run."""
    seen = _setups(counter)
    assert set(seen) == {"0", "1"} and len(seen) <= 4, seen
    owners = set()
    for line in _lines(counter):
        _, pid, owner = line.split()
        assert pid == owner != str(os.getpid()), line
        owners.add(owner)
    for owner in owners:
        assert not _ours(owner)


async def test_workers_own_the_sandboxes_of_their_rollouts(tmp_path: Path) -> None:
    counter, results = await _run_groups(tmp_path, 2)
    _check_workers_own_their_sandboxes(counter)
    assert results.metadata["sessions"][-1]["workers"]["executor"] == "local"


async def test_one_rollout_per_example_sets_up_in_its_own_sandbox(tmp_path: Path) -> None:
    counter = tmp_path / "setups.txt"
    env = load_environment(_env_file(tmp_path), counter=str(counter), n=2)
    with ScriptedEndpoint(SOLVE) as endpoint:
        client = Client("served", base_url=endpoint.base_url)
        results = await aevaluate(env, client, progress=False, episodes=AgentRun("bash"))
    assert [r.reward for r in results.rollouts] == [1.0, 1.0]
    assert _setups(counter) == ["0", "1"]


async def test_a_failed_setup_fails_its_group_once_and_leaves_nothing(tmp_path: Path) -> None:
    counter = tmp_path / "setups.txt"
    env = load_environment(_env_file(tmp_path), counter=str(counter), n=1, fail=True)
    run = AgentRun("bash")
    with ScriptedEndpoint(SOLVE) as endpoint:
        client = Client("served", base_url=endpoint.base_url)
        results = await aevaluate(env, client, rollouts_per_example=4, progress=False, episodes=run)
    errors = [r.error or "" for r in results.rollouts]
    assert len(errors) == 4 and all("the repository cannot be cloned" in e for e in errors), errors
    assert _setups(counter) == ["0"]  # not retried by each rollout of the group
    assert run.sandboxes.templates == 0
    assert not _ours(_run_id(run))


async def test_a_run_cancelled_during_setup_leaves_no_template_or_fork(tmp_path: Path) -> None:
    counter = tmp_path / "setups.txt"
    env = load_environment(_env_file(tmp_path), counter=str(counter), n=2, hang=True)
    agent_run = AgentRun("bash")
    with ScriptedEndpoint(SOLVE) as endpoint:
        run = asyncio.create_task(
            aevaluate(
                env,
                Client("served", base_url=endpoint.base_url),
                rollouts_per_example=4,
                concurrency=8,
                progress=False,
                episodes=agent_run,
            )
        )
        while len(_lines(counter)) < 2:  # both examples' templates are being set up
            await asyncio.sleep(0.05)
        assert len(_ours(_run_id(agent_run))) == 2
        run.cancel()
        with pytest.raises(asyncio.CancelledError):
            await run
    assert agent_run.sandboxes.templates == 0
    assert not _ours(_run_id(agent_run))


# The setup step makes a folder outside /tmp and the working directory; the agent writes into it.
OUTSIDE_ENV_FILE = textwrap.dedent(
    """
    from envs import Environment
    from envs.agents import file_contains


    class OutsideTask(Environment):
        def __init__(self):
            rows = [{"prompt": "write hi to /app/out/hello.txt"}]
            super().__init__(rows, file_contains("/app/out/hello.txt", "hi"), name="outside-task", max_turns=8)

        async def setup_sandbox(self, sandbox, rollout):
            made = await sandbox.exec("mkdir -p /app/out")
            assert made.ok, made


    def load_environment():
        return OutsideTask()
    """
)


async def test_setup_writes_outside_tmp_and_workdir_score_the_same_whatever_the_group_size(
    tmp_path: Path,
) -> None:
    """`-r 1` sets up the rollout's own sandbox, `-r 4` forks a set-up one: a folder the setup
    made outside /tmp and the working directory is in every fork, so the scores agree (47.4)."""
    path = tmp_path / "outside_task.py"
    path.write_text(OUTSIDE_ENV_FILE)
    script = ShellScript(["printf hi > /app/out/hello.txt"], "written")
    rewards = {}
    for group in (1, 4):
        with ScriptedEndpoint(script) as endpoint:
            results = await aevaluate(
                load_environment(str(path)),
                Client("served", base_url=endpoint.base_url),
                rollouts_per_example=group,
                concurrency=4,
                progress=False,
                episodes=AgentRun("bash", runtime="bwrap"),
            )
        assert [r.error for r in results.rollouts] == [None] * group
        rewards[group] = {r.reward for r in results.rollouts}
    assert rewards == {1: {1.0}, 4: {1.0}}
