"""Calling tools: validation, every failure mode, injection, threads, timeouts, serialisation."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
import json
import threading
import time
from typing import Any

import pytest
from pydantic import BaseModel

from envs import Tool, ToolResult, call_tool, tool
from envs._tools.functions import serialize_result
from harness import Rollout, ToolCall


@tool
def add(a: int, b: int = 2) -> int:
    """Add two integers."""
    return a + b


@tool
async def aadd(a: int, b: int = 2) -> int:
    """Add two integers, asynchronously."""
    await asyncio.sleep(0)
    return a + b


@tool
def explode(reason: str) -> str:
    """Always fails."""
    raise RuntimeError(f"boom: {reason}")


TOOLS = {t.name: t for t in (add, aadd, explode)}


def expected_schema(t: Tool) -> str:
    return json.dumps(t.parameters, separators=(",", ":"))


@pytest.mark.parametrize("arguments", ['{"a": 1, "b": 5}', {"a": 1, "b": 5}, '{"a": "1", "b": 5}'])
async def test_sync_and_async_results(arguments: Any) -> None:
    for t in (add, aadd):
        result = await t.call(arguments)
        assert result == ToolResult(content="6", name=t.name)
        assert result.ok


@pytest.mark.parametrize("empty", ["", "   ", None, "null", "{}"])
async def test_empty_arguments_mean_no_arguments(empty: Any) -> None:
    @tool
    def ping() -> str:
        return "pong"

    assert (await ping.call(empty)).content == "pong"


async def test_unknown_tool_lists_available_tools() -> None:
    call = ToolCall(id="call_1", function={"name": "mul", "arguments": "{}"})
    result = await call_tool(TOOLS, call)
    assert result.tool_call_id == "call_1" and result.name == "mul"
    assert result.error == "unknown tool 'mul'"
    assert result.content == (
        "Error: unknown tool 'mul'. Available tools: aadd, add, explode. Call one of them by its exact name."
    )


async def test_invalid_json_explains_and_shows_schema() -> None:
    result = await call_tool(TOOLS, {"id": "c", "function": {"name": "add", "arguments": '{"a": 1,'}})
    assert result.error is not None and result.error.startswith("arguments are not valid JSON")
    assert result.content.startswith("Error: tool 'add' was not run: the arguments are not valid JSON (")
    assert result.content.endswith(f"Expected parameters (JSON Schema): {expected_schema(add)}")
    assert result.tool_call_id == "c"


async def test_non_object_json_is_rejected() -> None:
    result = await add.call("[1, 2]")
    assert result.error == "arguments are a JSON list, not an object"
    assert "must be a JSON object of named parameters, got [1, 2]" in result.content


async def test_missing_argument() -> None:
    result = await add.call('{"b": 3}')
    assert result.error == "invalid arguments: a: Field required"
    assert result.content == (
        "Error: tool 'add' was not run: invalid arguments:\n- a: Field required\n"
        f"Expected parameters (JSON Schema): {expected_schema(add)}"
    )


async def test_mistyped_and_unexpected_arguments() -> None:
    result = await add.call({"a": "seven", "c": 1})
    assert result.error == (
        'invalid arguments: a: Input should be a valid integer, unable to parse string as an integer (got "seven"); '
        "c: Extra inputs are not permitted"
    )
    assert "- a: Input should be a valid integer" in result.content
    assert "Expected parameters (JSON Schema):" in result.content


async def test_exception_inside_tool_becomes_a_message() -> None:
    for t in (explode, tool(name="aexplode")(_async_explode)):
        result = await t.call({"reason": "disk full"})
        assert result.error == "RuntimeError: boom: disk full"
        assert result.content == f"Error: tool {t.name!r} raised RuntimeError: boom: disk full"


async def _async_explode(reason: str) -> str:
    raise RuntimeError(f"boom: {reason}")


async def test_tool_raising_timeout_error_is_not_reported_as_our_timeout() -> None:
    @tool(timeout=10)
    def flaky() -> str:
        raise TimeoutError("upstream timed out")

    result = await flaky.call("")
    assert result.error == "TimeoutError: upstream timed out"


@pytest.mark.parametrize("is_async", [False, True])
async def test_timeout(is_async: bool) -> None:
    release = threading.Event()

    def slow_sync() -> str:
        release.wait(5)
        return "late"

    async def slow_async() -> str:
        await asyncio.sleep(5)
        return "late"

    t = Tool.from_function(slow_async if is_async else slow_sync, name="slow", timeout=0.2)
    started = time.perf_counter()
    result = await t.call({})
    release.set()
    assert time.perf_counter() - started < 2
    assert result.error == "timed out after 0.2 s"
    assert result.content == "Error: tool 'slow' did not finish within 0.2 seconds and was abandoned."


async def test_no_timeout_when_none() -> None:
    @tool(timeout=None)
    async def wait_a_bit() -> str:
        await asyncio.sleep(0.05)
        return "done"

    assert wait_a_bit.timeout is None
    assert (await wait_a_bit.call("")).content == "done"


async def test_state_and_rollout_are_injected() -> None:
    seen: dict[str, Any] = {}

    @tool
    def remember(key: str, value: int, state: dict, rollout: Rollout | None = None) -> str:
        state[key] = value
        seen["rollout"] = rollout
        return json.dumps(state, sort_keys=True)

    assert list(remember.parameters["properties"]) == ["key", "value"]
    state: dict[str, Any] = {"x": 1}
    result = await remember.call({"key": "y", "value": 2}, state=state)
    assert result.content == '{"x": 1, "y": 2}' and state == {"x": 1, "y": 2}
    assert seen["rollout"] is None

    rollout = Rollout(state={"z": 0})
    result = await remember.call('{"key": "w", "value": 3}', rollout=rollout)
    assert rollout.state == {"z": 0, "w": 3}  # state defaults to rollout.state
    assert seen["rollout"] is rollout


async def test_model_cannot_set_injected_parameters() -> None:
    @tool
    def peek(state: dict) -> str:
        return str(state)

    result = await peek.call({"state": {"admin": True}}, state={})
    assert result.error == "invalid arguments: state: Extra inputs are not permitted"


async def test_sync_tool_runs_off_the_event_loop() -> None:
    loop_thread = threading.get_ident()
    gate = threading.Event()

    @tool
    def blocking() -> bool:
        # Blocks its thread until the event loop (still free) sets the gate.
        assert gate.wait(5), "event loop was blocked by a sync tool"
        return threading.get_ident() != loop_thread

    task = asyncio.create_task(blocking.call(""))
    await asyncio.sleep(0.01)
    assert not task.done()
    gate.set()
    result = await task
    assert result == ToolResult(content="true", name="blocking")


async def test_parallel_calls_run_concurrently() -> None:
    @tool
    def nap(seconds: float) -> str:
        time.sleep(seconds)
        return "ok"

    started = time.perf_counter()
    results = await asyncio.gather(*(nap.call({"seconds": 0.2}) for _ in range(8)))
    assert [r.content for r in results] == ["ok"] * 8
    assert time.perf_counter() - started < 1.0


def test_decorated_function_is_still_callable() -> None:
    assert add(1, 2) == 3
    assert add(a=4) == 6
    assert asyncio.run(aadd(1)) == 3
    assert add.__name__ == "add" and add.__doc__ == "Add two integers."
    assert isinstance(add, Tool) and add.fn(1) == 3


def test_decorator_forms() -> None:
    def f(x: int) -> int:
        return x

    assert tool(f).name == "f"
    assert tool()(f).name == "f"
    named = tool(name="g", timeout=3, description="G.")(f)
    assert (named.name, named.timeout, named.description) == ("g", 3.0, "G.")
    rebuilt = Tool.from_function(named, strict=True)
    assert rebuilt.strict and rebuilt.fn is f and rebuilt.name == "f"


def test_repr() -> None:
    assert repr(add) == "Tool(name='add', parameters=(a, b), timeout=60.0, strict=False)"


async def test_positional_only_parameters() -> None:
    def power(base: int, /, exp: int = 2) -> int:
        return base**exp

    assert (await Tool.from_function(power).call({"base": 3})).content == "9"


class Unit(enum.Enum):
    C = "celsius"
    F = "fahrenheit"


class Reading(BaseModel):
    value: float
    unit: Unit


async def test_arguments_are_converted_to_declared_types() -> None:
    received: list[Any] = []

    @tool
    def record(reading: Reading, tags: set[str], when: tuple[int, int]) -> None:
        received.extend([reading, tags, when])

    result = await record.call(
        {"reading": {"value": 1, "unit": "celsius"}, "tags": ["a", "a"], "when": [1, 2]}
    )
    assert result == ToolResult(content="", name="record")
    assert received == [Reading(value=1.0, unit=Unit.C), {"a"}, (1, 2)]


async def test_malformed_tool_call_dict() -> None:
    result = await call_tool(TOOLS, {"id": "x", "function": {"arguments": "{}"}})
    assert result.error is not None and result.error.startswith("malformed tool call")
    assert result.tool_call_id == "x"
    assert "function.name: Field required" in result.content


async def test_result_to_message() -> None:
    result = await call_tool(TOOLS, ToolCall(id="c9", function={"name": "add", "arguments": {"a": 1}}))
    message = result.to_message()
    assert message.to_openai() == {"role": "tool", "content": "3", "tool_call_id": "c9"}


@dataclasses.dataclass
class Hit:
    id: int
    score: float


class Page(BaseModel):
    title: str
    words: int


class Mood(enum.Enum):
    HAPPY = "happy"


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("plain", "plain"),
        (None, ""),
        (b"bytes \xff", "bytes \ufffd"),
        (3, "3"),
        (2.5, "2.5"),
        (True, "true"),
        ({"a": [1, None]}, '{"a":[1,null]}'),
        ([1, "x"], '[1,"x"]'),
        ((1, 2), "[1,2]"),
        ({"k": "é"}, '{"k":"é"}'),
        (Page(title="t", words=2), '{"title":"t","words":2}'),
        (Hit(1, 0.5), '{"id":1,"score":0.5}'),
        ([Hit(2, 1.0)], '[{"id":2,"score":1.0}]'),
        (Mood.HAPPY, '"happy"'),
        ({"obj": object}, '{"obj":"<class \'object\'>"}'),
    ],
)
def test_serialisation(value: Any, text: str) -> None:
    assert serialize_result(value) == text


async def test_serialisation_through_call() -> None:
    @tool
    def pages() -> list[Page]:
        return [Page(title="a", words=1)]

    assert (await pages.call("")).content == '[{"title":"a","words":1}]'


def test_validate_raises_value_error_for_direct_use() -> None:
    assert add.validate('{"a": 1}') == {"a": 1, "b": 2}
    with pytest.raises(ValueError, match="tool 'add': invalid arguments"):
        add.validate({})


async def test_injected_parameter_keeps_its_default_when_not_given() -> None:
    @tool
    def counter(state: dict | None = None, rollout: object = "no rollout") -> str:
        return f"{state} / {rollout}"

    assert (await counter.call("")).content == "None / no rollout"
    assert (await counter.call("", state={"n": 1})).content == "{'n': 1} / no rollout"


async def test_unserialisable_result_is_reported() -> None:
    class Loud:
        def __str__(self) -> str:
            raise RuntimeError("no text")

    @tool
    def weird() -> object:
        return Loud()

    result = await weird.call("")
    assert result.error == "result not serialisable: RuntimeError: no text"
    assert result.content == "Error: tool 'weird' ran but its result could not be turned into text."
