"""The agent is a run setting: an `AgentRun` plays the episodes through one proxy per run, the
environment stays the task, and the task's hooks name its sandbox."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from envs import Environment
from envs.agents import AgentRun, TaskSandbox, file_contains
from harness import Client, ResultsError, Rollout, ScriptedEndpoint, aevaluate, rollout
from tests.envs.agents.conftest import SOLVE, TASK, left_behind, task_env

pytestmark = [pytest.mark.agents, pytest.mark.slow]


def test_evaluate_with_an_agent_leaves_the_environment_as_it_was() -> None:
    env = task_env()
    before = (dict(vars(env)), env.config(), env.source)
    (played,) = env.evaluate("scripted:solve", agent="bash", progress=False).rollouts
    assert played.reward == 1.0 and len(played.model_calls) == 2
    assert (dict(vars(env)), env.config(), env.source) == before
    assert not any(isinstance(value, AgentRun) for value in vars(env).values())
    # Without an agent the environment is its own chat loop again: nothing of the agent stayed.
    (chat,) = env.evaluate("scripted:solve", progress=False).rollouts
    assert chat.model_calls == [] and math.isnan(chat.reward)
    assert "run the environment with an agent" in chat.score_errors[""]


async def test_one_proxy_serves_every_rollout_of_a_run_and_goes_with_it() -> None:
    env = task_env()
    run = AgentRun("bash")
    with ScriptedEndpoint(env.scripted_policies["solve"]) as endpoint:
        client = Client("served", base_url=endpoint.base_url)
        results = await aevaluate(
            env, client, rollouts_per_example=4, concurrency=4, progress=False, episodes=run
        )
        assert [r.reward for r in results] == [1.0] * 4, [r.error for r in results]
        assert all(len(r.model_calls) == 2 for r in results)
        assert run.proxies_started == 1 and run.proxy is None  # one for the run, closed with it
        # `harness.rollout` plays with the same run: its proxy starts again and stays up for
        # the next episode until the run is closed.
        example = env.get_dataset()[0]
        first = await rollout(env, client, example, 0, episodes=run)
        assert run.proxy is not None and run.proxy.socket_paths == [] and run.proxy.sessions == {}
        second = await rollout(env, client, example, 1, episodes=run)
        assert (first.reward, second.reward, run.proxies_started) == (1.0, 1.0, 2)
        await run.close()
        await client.aclose()
    assert run.proxy is None and left_behind() == []


class OwnSandbox(Environment):
    """A task whose rows name their sandbox: a working folder, a time limit, a runtime."""

    def __init__(self, runtime: str | None) -> None:
        super().__init__([{"prompt": TASK}], file_contains("where.txt", "/srv/task"), max_turns=4)
        self.asked_runtime = runtime

    def task_sandbox(self, rollout: Rollout) -> TaskSandbox:
        return TaskSandbox(runtime=self.asked_runtime, workdir="/srv/task", timeout=2.0)


def test_a_task_names_its_sandbox_and_the_run_settings_win() -> None:
    agent = "command:pwd > where.txt; sleep 1; echo late; sleep 60"
    env = OwnSandbox(runtime=None)
    env.scripted_policies = {"none": lambda messages, tools: "unused"}
    (r,) = env.evaluate("scripted:none", agent=agent, progress=False).rollouts
    # The task's workdir and its 2 s: the agent wrote where it started, said "late", was stopped.
    assert r.stop_reason == "timeout" and r.reward == 1.0 and r.state["agent"]["stdout"] == "late\n"
    # The run's timeout wins over the task's: stopped before it said anything.
    (r,) = env.evaluate("scripted:none", agent=AgentRun(agent, timeout=0.5), progress=False).rollouts
    assert r.stop_reason == "timeout" and r.reward == 1.0 and r.state["agent"]["stdout"] == ""
    # A task's runtime outside the grammar fails its rollout, named; the run's runtime wins over it.
    env = OwnSandbox(runtime="nope:x")
    env.scripted_policies = {"none": lambda messages, tools: "unused"}
    (r,) = env.evaluate("scripted:none", agent=agent, progress=False).rollouts
    assert math.isnan(r.reward) and "the task's runtime 'nope:x': unknown runtime" in (r.error or "")
    (r,) = env.evaluate("scripted:none", agent=agent, runtime="bwrap", progress=False).rollouts
    assert r.stop_reason == "timeout" and r.reward == 1.0
    assert left_behind() == []


def _two_tasks() -> Environment:
    rows = [{"prompt": f"{TASK} (task {i})"} for i in range(2)]
    env = Environment(rows, file_contains("hello.txt", "hi"), name="two-file-tasks", max_turns=8)
    return env


async def test_a_shard_with_an_agent_records_it_and_resumes_only_with_the_same(tmp_path: Path) -> None:
    from harness.scripted import ShellScript

    env = _two_tasks()
    with ScriptedEndpoint(ShellScript([SOLVE], "done")) as endpoint:
        client = Client("served", base_url=endpoint.base_url)
        run = AgentRun("bash", runtime="bwrap", timeout=120)
        results = await aevaluate(env, client, shard="1/2", output_dir=tmp_path, progress=False, episodes=run)
        assert [(r.example_id, r.reward) for r in results] == [(1, 1.0)]
        episodes = results.metadata["episodes"]
        assert episodes["agent"] == "bash" and episodes["runtime"] == "bwrap" and episodes["timeout"] == 120
        again = await aevaluate(
            env, client, shard="1/2", output_dir=tmp_path, resume=True, progress=False,
            episodes=AgentRun("bash", runtime="bwrap", timeout=120),
        )  # fmt: skip
        assert [r.reward for r in again] == [1.0]
        with pytest.raises(ResultsError, match=r"episodes\.timeout: was 120, now null"):
            await aevaluate(
                env, client, shard="1/2", output_dir=tmp_path, resume=True, progress=False,
                episodes=AgentRun("bash", runtime="bwrap"),
            )  # fmt: skip
        with pytest.raises(ResultsError, match=r"episodes: was .*bash.*, now the chat loop"):
            await aevaluate(env, client, shard="1/2", output_dir=tmp_path, resume=True, progress=False)
        await client.aclose()


def test_workers_get_the_agent_run_as_plain_settings_and_an_object_agent_none() -> None:
    import pickle

    from envs import load_environment
    from envs.agents import AgentRunSpec, BashAgent
    from harness import ConfigError

    run = AgentRun("bash", runtime="bwrap", sandbox={"memory_mb": 512})
    assert run.source == AgentRunSpec("bash", "bwrap", None, None, {"memory_mb": 512})
    rebuilt = pickle.loads(pickle.dumps(run.source)).load()  # what a worker does with it
    assert isinstance(rebuilt, AgentRun) and rebuilt is not run and rebuilt.config() == run.config()
    env = load_environment("tests.envs.agents.conftest:task_env")
    with pytest.raises(ConfigError, match="cannot be rebuilt .*give the agent by name, or use workers=1"):
        env.evaluate("scripted:solve", agent=AgentRun(BashAgent()), workers=2, concurrency=2, progress=False)
