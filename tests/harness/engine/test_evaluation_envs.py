"""evaluate with the real environments (envs.SingleTurnEnv / ToolEnv / MultiTurnEnv) and
real rubric trees, over loopback, including the synchronous `env.evaluate` face."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envs import MultiTurnEnv, SingleTurnEnv, ToolEnv, stop
from harness import Client, Rollout, aevaluate, load_results
from rubrics import WeightedSum
from tests.helpers.endpoints import serve
from tests.helpers.fakes import bisect_policy, sum_policy

ROWS = [{"question": f"What is {i}+{i + 1}?", "answer": str(2 * i + 1)} for i in range(6)]


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first addend
        b: the second addend
    """
    return a + b


def correct(response: str, answer: str) -> float:
    return float(response.strip() == answer)


def brief(response: str) -> float:
    return 1.0 if len(response) <= 1 else 0.0


class Guessing(MultiTurnEnv):
    """The environment says higher/lower until the model names the number."""

    def env_response(self, rollout: Rollout) -> str:
        guess, target = int(rollout.response), int(rollout.answer)
        return "correct" if guess == target else ("higher" if guess < target else "lower")

    @stop
    def solved(self, rollout: Rollout) -> bool:
        return rollout.completion[-1].content == "correct"


async def test_tool_env_with_a_rubric_tree(tmp_path: Path) -> None:
    env = ToolEnv(ROWS, WeightedSum({"correct": correct, "brief": brief}, weights=[0.5, 0.5]), tools=[add])
    async with serve(sum_policy) as (endpoint, client):
        results = await aevaluate(env, client, rollouts_per_example=2, output_dir=tmp_path, progress=False)
        assert endpoint.stats.requests == 24
    s = results.summary
    assert s.num_rollouts == 12 and s.stop_reasons == {"completed": 12} and s.num_errors == 0
    assert s.node_means["correct"] == 1.0
    assert s.node_means["brief"] == 5 / 6  # answers 1, 3, 5, 7, 9 are one character; 11 is not
    assert s.mean_reward == pytest.approx(0.5 + 0.5 * 5 / 6) and s.pass_at_k[1] == pytest.approx(5 / 6)
    assert all(r.tool_calls[0].name == "add" and r.completion[1].role == "tool" for r in results.rollouts)
    meta = json.loads((tmp_path / "metadata.json").read_text())
    assert meta["env"]["class"] == "ToolEnv" and meta["env"]["tools"] == ["add"]
    assert len(load_results(tmp_path)) == 12


async def test_single_turn_env() -> None:
    env = SingleTurnEnv(ROWS, correct)
    async with serve(sum_policy, record=True) as (endpoint, client):
        results = await aevaluate(env, client, num_examples=4, progress=False)
        assert "tools" not in endpoint.stats.bodies[0]
    assert [r.key for r in results.rollouts] == [(str(i), 0) for i in range(4)]
    assert results.summary.mean_reward == 1.0


async def test_multi_turn_env_with_stop_condition_and_max_turns() -> None:
    rows = [{"question": "Guess my number (0-15).", "answer": str(a)} for a in (7, 13, 0)]
    async with serve(bisect_policy) as (_, client):
        solved = await aevaluate(Guessing(rows, lambda state: 1.0), client, progress=False)
        capped = await aevaluate(Guessing(rows, lambda state: 1.0, max_turns=2), client, progress=False)
    assert solved.summary.stop_reasons == {"solved": 3}
    assert [r.turns for r in solved.rollouts] == [1, 3, 4]
    assert capped.summary.stop_reasons == {"solved": 1, "max_turns": 2}


def test_sync_env_evaluate_streams_and_resumes(tmp_path: Path) -> None:
    env = SingleTurnEnv(ROWS, correct)
    from harness import ScriptedEndpoint

    with ScriptedEndpoint(sum_policy) as endpoint:
        client = Client("scripted", base_url=endpoint.base_url, max_retries=0)
        first = env.evaluate(client, num_examples=3, output_dir=tmp_path, progress=False)
        again = env.evaluate(client, num_examples=3, output_dir=tmp_path, resume=True, progress=False)
        requests = endpoint.stats.requests
    assert len(first.rollouts) == 3 and len(again.rollouts) == 3 and requests == 3
    assert first.summary.mean_reward == 1.0


async def test_sync_env_evaluate_inside_a_running_loop_with_a_model_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # What a notebook does: a sync call while an event loop is running in this thread, with
    # the endpoint taken from OPENAI_BASE_URL / OPENAI_API_KEY.
    from harness import ScriptedEndpoint

    env = ToolEnv(ROWS, correct, tools=[add], name="adder")
    with ScriptedEndpoint(sum_policy) as endpoint:
        monkeypatch.setenv("OPENAI_BASE_URL", endpoint.base_url)
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-secret")
        results = env.evaluate("scripted", num_examples=4, concurrency=128, progress=False)
        requests = endpoint.stats.requests
    assert len(results.rollouts) == 4 and results.summary.mean_reward == 1.0
    assert requests == 8  # two turns each: tool call, then answer
    assert results.metadata["model"]["max_concurrency"] == 128
    assert "sk-test-not-secret" not in json.dumps(results.metadata)
