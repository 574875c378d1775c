"""harness.rollout end to end: real openai client -> scripted endpoint on 127.0.0.1."""

from __future__ import annotations

import math
from typing import Any

import pytest

from harness import rollout
from harness._core.errors import describe_error
from harness._endpoint.client import is_context_length_error
from harness.scripted._endpoint import ScriptedHTTPError
from tests.helpers.endpoints import serve
from tests.helpers.fakes import FakeEnv, MultiTurnFakeEnv, ToolFakeEnv, bisect_policy, sum_policy

EXAMPLE = {"example_id": 3, "question": "What is 3+4?", "answer": "7"}


async def test_single_turn_completes_and_is_scored() -> None:
    async with serve(sum_policy) as (endpoint, client):
        r = await rollout(FakeEnv(), client, EXAMPLE, rollout_index=2)
    assert (r.example_id, r.rollout_index) == (3, 2)
    assert r.stop_reason == "completed" and r.error is None
    assert r.turns == 1 and r.response == "7" and r.reward == 1.0
    assert r.scores == {"correct": 1.0, "correct.exact": 1.0}
    assert [m.role for m in r.messages] == ["user", "assistant"]
    assert r.usage.prompt_tokens == 3 and r.usage.completion_tokens == 1  # whitespace tokens
    assert set(r.timing) == {"generation", "env", "scoring", "total"}
    assert r.timing["total"] >= r.timing["generation"] > 0
    assert endpoint.stats.requests == 1


async def test_tool_call_then_answer() -> None:
    async with serve(sum_policy, record=True) as (endpoint, client):
        r = await rollout(ToolFakeEnv(), client, EXAMPLE)
    assert r.stop_reason == "completed" and r.error is None
    assert [m.role for m in r.completion] == ["assistant", "tool", "assistant"]
    assert r.tool_calls[0].name == "add" and r.completion[1].content == "7"
    assert r.completion[1].tool_call_id == r.tool_calls[0].id
    assert r.turns == 2 and r.reward == 1.0
    bodies = endpoint.stats.bodies
    assert len(bodies) == 2 and bodies[0]["tools"][0]["function"]["name"] == "add"
    assert [m["role"] for m in bodies[1]["messages"]] == ["user", "assistant", "tool"]
    assert r.usage.prompt_tokens == endpoint.stats.prompt_tokens


async def test_multi_turn_env_feedback_until_stop_condition() -> None:
    async with serve(bisect_policy) as (_, client):
        r = await rollout(
            MultiTurnFakeEnv(), client, {"example_id": "g", "question": "Guess.", "answer": "13"}
        )
    assert r.stop_reason == "solved" and r.reward == 1.0
    assert [m.content for m in r.completion if m.role == "user"] == ["higher", "higher", "correct"]
    assert r.turns == 3 and r.state["guesses"] == 3


async def test_max_turns() -> None:
    async with serve(lambda messages, tools: "0") as (endpoint, client):
        r = await rollout(
            MultiTurnFakeEnv(max_turns=2), client, {"example_id": "g", "question": "Guess.", "answer": "9"}
        )
    assert r.stop_reason == "max_turns" and r.turns == 2 and endpoint.stats.requests == 2
    assert r.reward == 0.0 and r.error is None


async def test_length_from_finish_reason_and_sampling_layers() -> None:
    env = FakeEnv(sampling={"max_tokens": 100, "temperature": 0.5})
    async with serve(lambda messages, tools: "one two three four", record=True) as (endpoint, client):
        r = await rollout(env, client, EXAMPLE, sampling={"max_tokens": 2})
    assert r.stop_reason == "length" and r.response == "one two"
    body = endpoint.stats.bodies[0]
    assert body["temperature"] == 0.5  # from the env
    assert body.get("max_tokens", body.get("max_completion_tokens")) == 2  # evaluate's argument wins
    assert r.reward == 0.0  # a length stop is still scored


async def test_context_too_long_400_is_a_length_stop() -> None:
    def policy(messages: list[dict[str, Any]], tools: Any) -> str:
        raise ScriptedHTTPError(
            400,
            "This model's maximum context length is 8 tokens. However, you "
            "requested 9 tokens. Please reduce the length of the messages.",
        )

    async with serve(policy) as (_, client):
        r = await rollout(FakeEnv(), client, EXAMPLE)
    assert r.stop_reason == "length" and r.error is None and r.turns == 0
    assert "maximum context length" in r.state["context_error"]


async def test_stop_condition_name_is_the_stop_reason() -> None:
    async with serve(lambda messages, tools: "STOP here") as (_, client):
        r = await rollout(FakeEnv(max_turns=3, stop_when="STOP"), client, EXAMPLE)
    assert r.stop_reason == "said_stop_word" and r.turns == 1


async def test_permanent_endpoint_failure_is_recorded_not_raised() -> None:
    async with serve(sum_policy, rate_500=1.0) as (endpoint, client):
        r = await rollout(FakeEnv(), client, EXAMPLE)
    assert r.stop_reason == "error" and r.error.startswith("EndpointError")
    assert math.isnan(r.reward) and not r.scored and r.scores == {}
    assert endpoint.stats.responses[500] >= 1


async def test_non_context_400_is_an_error() -> None:
    def policy(messages: list[dict[str, Any]], tools: Any) -> str:
        raise ScriptedHTTPError(400, "invalid value for temperature")

    async with serve(policy) as (_, client):
        r = await rollout(FakeEnv(), client, EXAMPLE)
    assert r.stop_reason == "error" and "temperature" in r.error


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (ToolFakeEnv(respond_raises=True), "ValueError: tool runner bug"),
        (FakeEnv(score_raises=True), "RuntimeError: rubric exploded"),
        (FakeEnv(setup_raises=True), "KeyError: 'question'"),
    ],
    ids=["respond", "score", "setup"],
)
async def test_env_bug_is_recorded_on_the_rollout(env: Any, expected: str) -> None:
    async with serve(sum_policy) as (_, client):
        r = await rollout(env, client, EXAMPLE, rollout_index=1)
    assert r.stop_reason == "error" and r.error == expected
    assert (str(r.example_id), r.rollout_index) == ("3", 1)
    assert math.isnan(r.reward)
    assert r.timing["total"] >= 0


def test_error_helpers() -> None:
    class Fake(Exception):
        status = 400

    assert describe_error(ValueError("bad")) == "ValueError: bad"
    assert describe_error(ValueError()) == "ValueError"
    assert is_context_length_error(Fake("context_length_exceeded: prompt is too long"))
    assert not is_context_length_error(Fake("invalid model"))
    assert not is_context_length_error(ValueError("maximum context length"))  # no status 400
