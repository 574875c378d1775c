"""Verifiers environments in our harness: parity with Verifiers' own scoring, tools, `vf:NAME`, bad input."""

from __future__ import annotations

import asyncio
import json
import math
import os
import re
import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import verifiers.v1 as vf
from verifiers.v1.graph import MessageNode
from verifiers.v1.state import State
from verifiers.v1.trace import AgentInfo, TraceTask

import envs
from harness import ConfigError, ConfigTypeError, EnvironmentNotFoundError, Message, Rollout, ScriptedEndpoint
from tests.helpers.processes import run

pytestmark = [pytest.mark.interop, pytest.mark.slow]

PACKAGES = Path(__file__).parent / "vf_packages"


@pytest.fixture(autouse=True)
def _packages_on_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Verifiers finds an environment package by importing it: put the test packages on the path."""
    monkeypatch.syspath_prepend(str(PACKAGES))


def _subprocess_env() -> dict[str, str]:
    return {"PYTHONPATH": os.pathsep.join([str(PACKAGES), os.environ.get("PYTHONPATH", "")])}


def verifiers_tasks(name: str, **config: Any) -> dict[str, Any]:
    """The environment's tasks by idx, as Verifiers' own loader builds them."""
    env = vf.load_environment(vf.resolve_env_config({"taskset": {"id": name, **config}}))
    return {str(task.data.idx): task for task in env.taskset}


def _vf_message(message: dict[str, Any]) -> Any:
    role, content = message["role"], message.get("content") or ""
    if role == "system":
        return vf.SystemMessage(content=content)
    if role == "user":
        return vf.UserMessage(content=content)
    if role == "tool":
        return vf.ToolMessage(tool_call_id=message["tool_call_id"], content=content, name=message.get("name"))
    calls = [
        vf.ToolCall(id=c["id"], name=c["function"]["name"], arguments=c["function"]["arguments"])
        for c in message.get("tool_calls") or []
    ]
    return vf.AssistantMessage(content=message.get("content"), tool_calls=calls or None)


def verifiers_scores(task: Any, prompt: list[dict[str, Any]], completion: list[dict[str, Any]]) -> Any:
    """Score one conversation with Verifiers' own `Task.score`; its Trace is built here, by hand."""
    messages = [*prompt, *completion]
    nodes = [
        MessageNode(
            parent=i - 1 if i else None,
            message=_vf_message(m),
            sampled=i >= len(prompt) and m["role"] == "assistant",
        )
        for i, m in enumerate(messages)
    ]
    trace = vf.Trace(
        task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
        agent=AgentInfo(config=vf.AgentConfig()),
        nodes=nodes,
        state=State(),
    )
    asyncio.run(task.score(trace))
    return trace


def assert_same_scores(trace: Any, rollout: Rollout, rewards: dict[str, list[str]]) -> None:
    """Reward, each reward node (keyed scores summed) and each metric node agree with Verifiers."""
    assert rollout.reward == pytest.approx(trace.reward, abs=1e-12)
    for node, keys in rewards.items():
        assert rollout.scores[node] == pytest.approx(sum(trace.rewards[k].score for k in keys), abs=1e-12)
    for name, value in trace.metrics.items():
        assert rollout.scores[name] == pytest.approx(value, abs=1e-12)


def scored(env: envs.Environment, row: dict[str, Any], completion: list[dict[str, Any]]) -> Rollout:
    """A rollout of `row` as the harness starts it, with `completion` as the model's reply, scored by `env`."""
    rollout = asyncio.run(env.setup_rollout(row))
    rollout.completion = [Message.model_validate(m) for m in completion]
    asyncio.run(env.score(rollout))
    return rollout


ARITH_REWARDS = {"correct": ["correct"], "concise": ["concise"], "shouting": ["upper", "bang"]}
REPLIES = ["3", "5", "42!", "THREE", "three", "FIVE!", "7.0"]


def test_rubric_matches_verifiers_scoring_on_the_same_completions() -> None:
    env = envs.load_environment("vf:vf_arith")
    tasks = verifiers_tasks("vf_arith")
    assert dict(env.rubric.weights) == {
        "concise": 0.25,
        "correct": 0.75,
        "shouting": -0.5,
        "reply_length": 0.0,
    }
    rows = list(env.get_dataset())
    assert len(rows) == 4
    for row in rows:
        for reply in REPLIES:
            completion = [{"role": "assistant", "content": reply}]
            rollout = scored(env, row, completion)
            trace = verifiers_scores(tasks[row["example_id"]], row["prompt"], completion)
            assert_same_scores(trace, rollout, ARITH_REWARDS)


def test_a_reward_that_raises_is_nan_with_its_reason_where_verifiers_fails_the_scoring() -> None:
    env = envs.load_environment("vf:vf_arith", num_tasks=1)
    row = env.get_dataset()[0]
    completion = [{"role": "assistant", "content": ""}]
    rollout = scored(env, row, completion)
    assert math.isnan(rollout.reward) and math.isnan(rollout.scores["concise"])
    assert rollout.scores["correct"] == 0.0 and rollout.scores["reply_length"] == 0.0
    assert "an empty reply has no length to judge" in rollout.score_errors["concise"]
    with pytest.raises(vf.TaskError, match="an empty reply has no length to judge"):
        verifiers_scores(verifiers_tasks("vf_arith", num_tasks=1)["0"], row["prompt"], completion)


def test_single_turn_env_maps_prompt_system_prompt_answer_and_task() -> None:
    env = envs.load_environment("vf:vf_arith", num_tasks=2)
    assert isinstance(env, envs.SingleTurnEnv) and env.name == "vf_arith" and env.max_turns == 1
    row = env.get_dataset()[1]
    assert row["prompt"] == [
        {"role": "system", "content": "Reply with the number only."},
        {"role": "user", "content": "What is 1 + 4?"},
    ]
    assert row["answer"] == "5" and row["example_id"] == "1"
    assert row["info"]["verifiers_task"]["answer"] == "5"
    assert "(shouting) weight=-0.5" in repr(env.rubric) and "(reply_length) weight=0" in repr(env.rubric)


class _ShotData(vf.TaskData):
    answer: str


class _ShotTask(vf.Task[_ShotData]):
    @vf.reward(weight=2.0)
    async def correct(self, task: _ShotData, trace: vf.Trace) -> float:
        return float(trace.last_reply == task.answer)

    @vf.reward(weight=0.5)
    async def one_turn(self, trace: vf.Trace) -> float:  # the few-shot turns are not the model's
        return float(len(trace.assistant_messages) == 1 and trace.num_turns == 1)


class _FewShot(vf.Taskset[_ShotTask, vf.TasksetConfig]):
    def load(self) -> Any:
        shots = [
            vf.UserMessage(content="What is 1 + 1?"),
            vf.AssistantMessage(
                tool_calls=[vf.ToolCall(id="c1", name="calculator_add", arguments='{"a": 1, "b": 1}')]
            ),
            vf.ToolMessage(tool_call_id="c1", content="2", name="calculator_add"),
            vf.AssistantMessage(content="2"),
        ]
        yield _ShotTask(_ShotData(prompt=[*shots, vf.UserMessage(content="What is 2 + 2?")], answer="4"))
        yield _ShotTask(_ShotData(prompt="What is 3 + 3?", system_prompt="Be brief.", answer="6"))


def test_few_shot_prompts_keep_their_turns_and_score_as_in_verifiers() -> None:
    env = envs.from_verifiers(_FewShot(vf.TasksetConfig()))
    tasks = {str(t.data.idx): t for t in _FewShot(vf.TasksetConfig())}
    rows = list(env.get_dataset())
    assert [m["role"] for m in rows[0]["prompt"]] == ["user", "assistant", "tool", "assistant", "user"]
    assert rows[0]["prompt"][1]["tool_calls"][0]["function"]["name"] == "calculator_add"
    assert [m["role"] for m in rows[1]["prompt"]] == ["system", "user"]
    for row in rows:
        for reply in ("4", "6", "2"):
            completion = [{"role": "assistant", "content": reply}]
            rollout = scored(env, row, completion)
            prompt = [{k: v for k, v in m.items() if v is not None} for m in row["prompt"]]
            trace = verifiers_scores(tasks[row["example_id"]], prompt, completion)
            assert_same_scores(trace, rollout, {"correct": ["correct"], "one_turn": ["one_turn"]})
            assert rollout.scores["one_turn"] == 1.0


def _sum_reply(messages: list[dict[str, Any]], tools: Any) -> str:
    a, b = map(int, re.findall(r"\d+", messages[-1]["content"]))
    return str(a + b) if a % 2 == 0 else f"{a + b}!"


def test_eval_vf_spec_end_to_end_with_the_cli_matches_verifiers(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with ScriptedEndpoint(_sum_reply) as endpoint:
        proc = run(
            "eval", "vf:vf_arith", "-a", '{"num_tasks": 3}', "-m", "scripted", "-b", endpoint.base_url,
            "-o", str(out), "--no-progress", cwd=tmp_path, env={**_subprocess_env(), "OPENAI_API_KEY": "local"},
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert len(lines) == 3
    tasks = verifiers_tasks("vf_arith", num_tasks=3)
    for line in lines:
        rollout = Rollout.model_validate(line)
        prompt = [m.model_dump(exclude_none=True) for m in rollout.prompt]
        completion = [m.model_dump(exclude_none=True) for m in rollout.completion]
        trace = verifiers_scores(tasks[str(rollout.example_id)], prompt, completion)
        assert_same_scores(trace, rollout, ARITH_REWARDS)
    # "3" and "7" are right; "5!" is wrong (0), concise (0.25 x 1) and shouts a bang (-0.5 x 1).
    assert sorted(r["reward"] for r in lines) == pytest.approx([-0.25, 1.0, 1.0])
    view = run("view", str(out), "--rollout", "1", cwd=tmp_path, env=_subprocess_env())
    assert view.returncode == 0, view.stderr
    for node in ("correct", "concise", "shouting", "reply_length"):
        assert node in view.stdout
    metadata = json.loads((out / "metadata.json").read_text())
    assert metadata["env"]["load_spec"] == "vf:vf_arith"
    refused = run("score", str(out), cwd=tmp_path, env=_subprocess_env())  # a results folder is data
    assert refused.returncode != 0 and "names 'vf:vf_arith', a Verifiers environment" in refused.stderr
    rescored = run(
        "score", str(out), "vf:vf_arith", "-a", '{"num_tasks": 3}', cwd=tmp_path, env=_subprocess_env()
    )
    assert rescored.returncode == 0, rescored.stderr
    (rescored_file,) = out.glob("results.rescored-*.jsonl")
    again = {r["example_id"]: r["reward"] for r in map(json.loads, rescored_file.read_text().splitlines())}
    assert again == {r["example_id"]: r["reward"] for r in lines}


def test_worker_processes_build_the_environment_from_its_vf_spec(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPATH", _subprocess_env()["PYTHONPATH"])  # the workers find vf_arith too
    env = envs.load_environment("vf:vf_arith", num_tasks=4)
    env.scripted_policies = {"sums": _sum_reply}
    results = env.evaluate("scripted:sums", workers=2, progress=False)
    assert sorted(r.reward for r in results) == pytest.approx([-0.25, -0.25, 1.0, 1.0])
    assert all(set(r.scores) == {"correct", "concise", "shouting", "reply_length"} for r in results)


def _calculator_policy(messages: list[dict[str, Any]], tools: Any) -> Any:
    last = messages[-1]
    if last["role"] == "tool":
        return last["content"]
    a, b = map(int, re.findall(r"\d+", last["content"]))
    if a == 7:  # answers without the tool: correct, but used_tool is 0
        return str(a + b)
    return {"tool_calls": [{"function": {"name": "calculator_add", "arguments": {"a": a, "b": b}}}]}


def test_tool_env_runs_verifiers_toolset_end_to_end_with_the_cli(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with ScriptedEndpoint(_calculator_policy) as endpoint:
        proc = run(
            "eval", "vf:vf_calc", "-m", "scripted", "-b", endpoint.base_url, "-o", str(out), "--no-progress",
            cwd=tmp_path, env={**_subprocess_env(), "OPENAI_API_KEY": "local"},
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    by_id = {str(r["example_id"]): Rollout.model_validate(r) for r in lines}
    assert by_id["0"].scores == {"correct": 1.0, "used_tool": 1.0}
    assert by_id["2"].scores == {"correct": 1.0, "used_tool": 0.0} and by_id["2"].reward == 0.5
    tool_message = by_id["1"].completion[1]
    assert (
        tool_message.role == "tool" and tool_message.name == "calculator_add" and tool_message.content == "42"
    )
    tasks = verifiers_tasks("vf_calc")
    for example_id, rollout in by_id.items():
        prompt = [m.model_dump(exclude_none=True) for m in rollout.prompt]
        completion = [m.model_dump(exclude_none=True) for m in rollout.completion]
        trace = verifiers_scores(tasks[example_id], prompt, completion)
        assert_same_scores(trace, rollout, {"correct": ["correct"], "used_tool": ["used_tool"]})
    view = run("view", str(out), "--rollout", "0", cwd=tmp_path, env=_subprocess_env())
    assert view.returncode == 0, view.stderr
    assert "calculator_add(" in view.stdout and "used_tool" in view.stdout and "correct" in view.stdout


def test_tool_schema_is_the_toolsets_own_under_verifiers_harness_name() -> None:
    env = envs.load_environment("vf:vf_calc")
    assert isinstance(env, envs.ToolEnv)
    (schema,) = env.tool_schemas
    assert schema["function"]["name"] == "calculator_add"
    assert schema["function"]["description"] == "Add two integers."
    assert schema["function"]["parameters"]["required"] == ["a", "b"]


def _notebook_policy(messages: list[dict[str, Any]], tools: Any) -> Any:
    last = messages[-1]
    if last["role"] == "user":
        return {"tool_calls": [{"function": {"name": "write", "arguments": {"text": "hello"}}}]}
    if last["name"] == "write":
        return {"tool_calls": [{"function": {"name": "read", "arguments": {}}}]}
    return last["content"]


def test_task_scoped_toolsets_get_a_fresh_server_per_rollout() -> None:
    env = envs.load_environment("vf:vf_notes")
    assert [t.name for t in env.tools] == ["read", "write"]  # TOOL_PREFIX = None: bare, as in Verifiers
    assert [server.per_rollout for server in env.mcp_servers] == [True]
    env.scripted_policies = {"notes": _notebook_policy}
    results = env.evaluate("scripted:notes", rollouts_per_example=2, concurrency=1, progress=False)
    # A server shared by both rollouts would read "hello\nhello" in the second one.
    assert [r.completion[-1].content for r in results] == ["hello", "hello"]
    assert [r.reward for r in results] == [1.0, 1.0]


def test_from_verifiers_takes_a_taskset_and_an_env() -> None:
    import vf_arith  # type: ignore[import-not-found]

    taskset = vf_arith.ArithTaskset(vf_arith.ArithConfig(num_tasks=2))
    env = envs.from_verifiers(taskset, name="sums")
    assert env.name == "sums" and len(env.dataset) == 2
    vf_env = vf.load_environment(vf.resolve_env_config({"taskset": {"id": "vf_arith"}}))
    assert len(envs.from_verifiers(vf_env, num_tasks=1).dataset) == 1


def test_a_package_that_is_not_installed_is_one_clear_error(tmp_path: Path) -> None:
    with pytest.raises(
        EnvironmentNotFoundError,
        match=r"no Verifiers environment package named 'vf-nowhere'.*pip install vf-nowhere",
    ):
        envs.load_environment("vf:vf-nowhere")
    proc = run("eval", "vf:vf-nowhere", "-m", "scripted:x", cwd=tmp_path, env=_subprocess_env())
    assert proc.returncode != 0 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert "no Verifiers environment package named 'vf-nowhere'" in proc.stderr


def test_a_package_that_imports_a_missing_module_says_which(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "vf_broken").mkdir()
    (tmp_path / "vf_broken" / "__init__.py").write_text("import vf_not_a_real_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(
        ConfigError, match="'vf_broken' imports 'vf_not_a_real_dependency', which is not installed"
    ):
        envs.load_environment("vf:vf_broken")


def test_arguments_go_to_the_taskset_config_first_and_a_wrong_one_lists_what_it_takes() -> None:
    # vf_arith's config declares num_tasks (default 4): 6 reaches the taskset, not a take(6) of 4 tasks.
    assert len(envs.load_environment("vf:vf_arith", num_tasks=6).dataset) == 6
    assert len(envs.load_environment("vf:vf_calc", num_tasks=2).dataset) == 2  # ours: the first 2 of 3
    with pytest.raises(
        ConfigTypeError,
        match=r"argument bogus: Extra inputs are not permitted; it takes its taskset config's num_tasks, system_prompt, task and max_turns, sampling",
    ):
        envs.load_environment("vf:vf_arith", bogus=1)
    with pytest.raises(ConfigTypeError, match="num_tasks must be a positive integer or None, got 'many'"):
        envs.load_environment("vf:vf_calc", num_tasks="many")


def test_without_verifiers_installed_the_error_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "verifiers", None)
    monkeypatch.setitem(sys.modules, "verifiers.v1", None)
    with pytest.raises(
        ConfigError,
        match=r"^Verifiers environments need the verifiers package: pip install 'rubric-rl\[verifiers\]'$",
    ):
        envs.load_environment("vf:vf_arith")


def test_something_else_than_a_verifiers_environment_is_rejected() -> None:
    with pytest.raises(ConfigTypeError, match="takes a verifiers.v1 Env or Taskset, got dict"):
        envs.from_verifiers({"dataset": []})


class _Data(vf.TaskData):
    answer: str = "1"


class _JudgedTask(vf.Task[_Data]):
    @vf.reward
    async def correct(self, trace: vf.Trace) -> float:
        return 1.0


class _SandboxTask(vf.Task[_Data]):
    @vf.reward
    async def tests_pass(self, trace: vf.Trace, runtime: vf.Runtime) -> float:
        return 1.0


class _SyncTask(vf.Task[_Data]):
    @vf.reward
    def correct(self, trace: vf.Trace) -> float:
        return 1.0


class _NoRewardTask(vf.Task[_Data]):
    @vf.metric
    async def length(self, trace: vf.Trace) -> float:
        return 1.0


class _Tasks(vf.Taskset[vf.Task, vf.TasksetConfig]):
    def __init__(self, task: vf.Task) -> None:
        super().__init__(vf.TasksetConfig())
        self.task = task

    def load(self) -> Any:
        yield self.task


@pytest.mark.parametrize(
    ("task", "message"),
    [
        (_SandboxTask(_Data(prompt="hi")), r"'tests_pass' of task _SandboxTask needs a `runtime`"),
        (_SyncTask(_Data(prompt="hi")), r"'correct' of task _SyncTask is not async"),
        (_NoRewardTask(_Data(prompt="hi")), r"_NoRewardTask declares no @vf.reward"),
        (_JudgedTask(_Data(prompt=None)), r"Verifiers task 0 has no prompt"),
    ],
)
def test_what_does_not_carry_over_fails_when_the_environment_is_built(task: Any, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        envs.from_verifiers(_Tasks(task))


def test_judges_are_rejected_with_the_replacement() -> None:
    config = vf.TaskConfig(judges=[{"id": "reference"}])
    with pytest.raises(ConfigError, match=r"plugs judges \(.*\).*rubrics.LLMJudge"):
        envs.from_verifiers(_Tasks(_JudgedTask(_Data(prompt="hi"), config)))


def test_vf_name_is_found_in_the_current_folder_as_file_specs_are(tmp_path: Path) -> None:
    shutil.copytree(PACKAGES / "vf_arith", tmp_path / "vf_arith")  # not on PYTHONPATH: only in the folder
    with ScriptedEndpoint(_sum_reply) as endpoint:
        proc = run(
            "eval", "vf:vf_arith", "-a", '{"num_tasks": 2}', "-m", "scripted", "-b", endpoint.base_url,
            "-o", "out", "--no-progress", cwd=tmp_path, env={"OPENAI_API_KEY": "local"},
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert len((tmp_path / "out" / "results.jsonl").read_text().splitlines()) == 2
