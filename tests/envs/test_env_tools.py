"""ToolEnv.respond: concurrent tool calls, tool messages, recorded tool errors, schemas."""

from __future__ import annotations

import asyncio
import json
import time

import pytest

from envs import Environment, Tool, ToolEnv, tool
from harness import Message, Rollout

ROWS = [{"question": "What is the weather in Paris and Rome?", "answer": "sunny"}]


def exact(response: str, answer: str) -> float:
    return float(response.strip() == answer)


async def weather(city: str) -> str:
    """Look up the weather.

    Args:
        city: the city name
    """
    await asyncio.sleep(0.1)
    return f"sunny in {city}"


async def slow_echo(text: str) -> str:
    """Echo text after a pause."""
    await asyncio.sleep(0.1)
    return text


def count_calls(state: dict) -> int:
    """Count how often this tool was called in the rollout."""
    state["calls"] = state.get("calls", 0) + 1
    return state["calls"]


def call(id: str, name: str, arguments: dict | str) -> dict:
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": id, "type": "function", "function": {"name": name, "arguments": args}}


def assistant(rollout: Rollout, *calls: dict, content: str | None = None) -> None:
    rollout.completion.append(Message(role="assistant", content=content, tool_calls=list(calls) or None))
    rollout.turns += 1


async def test_two_tool_calls_run_concurrently() -> None:
    env = ToolEnv(ROWS, exact, tools=[weather, slow_echo])
    rollout = await env.setup_rollout(env.get_dataset()[0])
    assistant(rollout, call("c1", "weather", {"city": "Paris"}), call("c2", "slow_echo", {"text": "hi"}))
    started = time.perf_counter()
    messages = await env.respond(rollout)
    elapsed = time.perf_counter() - started
    assert elapsed < 0.18, f"two 100 ms tools took {elapsed:.3f}s: not concurrent"
    assert [(m.role, m.tool_call_id, m.name, m.content) for m in messages] == [
        ("tool", "c1", "weather", "sunny in Paris"),
        ("tool", "c2", "slow_echo", "hi"),
    ]


async def test_tool_errors_become_messages_and_are_recorded_in_state() -> None:
    env = ToolEnv(ROWS, exact, tools=[weather])
    rollout = await env.setup_rollout(env.get_dataset()[0])
    assistant(rollout, call("a", "wether", {"city": "Paris"}), call("b", "weather", "{not json"))
    messages = await env.respond(rollout)
    assert [m.tool_call_id for m in messages] == ["a", "b"]
    assert "weather" in messages[0].content  # the unknown-tool reply lists what exists
    errors = rollout.state["tool_errors"]
    assert [(e["tool"], e["tool_call_id"], e["turn"]) for e in errors] == [
        ("wether", "a", 1),
        ("weather", "b", 1),
    ]
    assert all(e["error"] for e in errors)


async def test_tools_get_the_rollout_state() -> None:
    env = ToolEnv(ROWS, exact, tools=[count_calls])
    rollout = await env.setup_rollout(env.get_dataset()[0])
    assistant(rollout, call("1", "count_calls", {}), call("2", "count_calls", {}))
    messages = await env.respond(rollout)
    assert sorted(m.content for m in messages) == ["1", "2"]
    assert rollout.state["calls"] == 2
    other = await env.setup_rollout(env.get_dataset()[0])
    assert "calls" not in other.state


async def test_answer_without_tool_calls_ends_tool_env() -> None:
    env = ToolEnv(ROWS, exact, tools=[weather])
    rollout = await env.setup_rollout(env.get_dataset()[0])
    assistant(rollout, content="sunny")
    assert await env.respond(rollout) is None


def test_tool_schemas_and_tool_objects() -> None:
    renamed = tool(name="echo")(slow_echo)
    env = ToolEnv(ROWS, exact, tools=[weather, renamed])
    names = [s["function"]["name"] for s in env.tool_schemas]
    assert names == ["weather", "echo"]
    assert env.tool_schemas[0]["function"]["parameters"]["properties"]["city"]["type"] == "string"
    assert isinstance(env.tools[1], Tool)
    assert Environment(ROWS, exact).tool_schemas == []
    assert env.config()["tools"] == ["weather", "echo"]


def test_duplicate_tool_names_listed() -> None:
    with pytest.raises(ValueError, match="duplicate tool name") as err:
        ToolEnv(ROWS, exact, tools=[weather, tool(name="weather")(slow_echo)])
    assert "weather, weather" in str(err.value)


def test_tool_that_is_not_callable() -> None:
    with pytest.raises(TypeError, match=r"tools\[1\] is a str"):
        ToolEnv(ROWS, exact, tools=[weather, "slow_echo"])
    with pytest.raises(TypeError, match="list of functions"):
        ToolEnv(ROWS, exact, tools=weather)
