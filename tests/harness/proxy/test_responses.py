"""The capture proxy's OpenAI Responses dialect (Codex's), driven by the openai SDK, whole and streamed."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import aiohttp
import openai
import pytest

from harness.proxy import _responses as responses
from tests.harness.proxy.conftest import ADD_ARGUMENTS

pytestmark = pytest.mark.timeout(60)
Start = Callable[..., Any]
ADD = {
    "type": "function",
    "name": "add",
    "description": "Add two integers.",
    "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
    "strict": False,
}
# What Codex 0.169 sends beside its function tools (shared/FACTS.md).
CODEX_EXTRAS = {
    "tools": [ADD, {"type": "web_search"}, {"type": "namespace", "name": "multi_agent_v1"}],
    "store": False,
    "include": ["reasoning.encrypted_content"],
    "prompt_cache_key": "abc",
    "client_metadata": {"session": "s1"},  # measured against the real Codex 0.169 (a 400 before)
    "reasoning": {"effort": "medium"},
    "parallel_tool_calls": False,
    "tool_choice": "auto",
}


async def _codex_like_loop(sdk: openai.AsyncOpenAI, *, stream: bool) -> list[Any]:
    """Instructions as a developer item, a user item, then function_call / function_call_output items."""
    items: list[Any] = [
        {
            "type": "message",
            "role": "developer",
            "content": [{"type": "input_text", "text": "You add numbers."}],
        },
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "add 2 and 3"}]},
    ]
    for _ in range(2):
        if stream:
            async with sdk.responses.stream(
                model="served-model", input=items, tools=[ADD], parallel_tool_calls=False
            ) as events:
                seen = [event.type async for event in events]
                response = await events.get_final_response()
            assert (
                seen[:2] == ["response.created", "response.in_progress"] and seen[-1] == "response.completed"
            )
        else:
            response = await sdk.responses.create(
                model="served-model", input=items, tools=[ADD], parallel_tool_calls=False
            )
        assert (
            response.status == "completed" and response.usage is not None and response.usage.total_tokens > 0
        )
        output = [item.model_dump(exclude_none=True) for item in response.output]
        items += output
        for item in output:
            if item["type"] == "function_call":
                arguments = json.loads(item["arguments"])
                items.append(
                    {
                        "type": "function_call_output",
                        "call_id": item["call_id"],
                        "output": str(arguments["a"] + arguments["b"]),
                    }
                )
    return items


@pytest.mark.parametrize("stream", [False, True])
async def test_a_responses_agent_loop_is_translated_and_recorded(start_proxy: Start, stream: bool) -> None:
    proxy = await start_proxy()
    session = proxy.open_session()
    async with openai.AsyncOpenAI(base_url=f"{proxy.base_url}/v1", api_key=session.key, max_retries=0) as sdk:
        items = await _codex_like_loop(sdk, stream=stream)

    assert items[-1]["type"] == "message" and items[-1]["content"][0]["text"] == "the answer is 5"
    first, second = session.turns
    assert first.dialect == "responses" and first.stream is stream
    assert [m.role for m in first.messages] == ["developer", "user"] and first.messages[
        0
    ].content == "You add numbers."
    assert first.tools == [
        {
            "type": "function",
            "function": {"name": "add", "description": "Add two integers.", "parameters": ADD["parameters"]},
        }
    ]
    assert first.params == {"parallel_tool_calls": False}
    # The model's text and its call come back as one assistant turn, the output as a tool message.
    assert [m.role for m in second.messages] == ["developer", "user", "assistant", "tool"]
    assistant, tool = second.messages[2], second.messages[3]
    assert first.reply is not None and first.reply.tool_calls is not None
    assert assistant.content == "let me compute" and assistant.tool_calls is not None
    assert assistant.tool_calls[0].id == first.reply.tool_calls[0].id
    assert json.loads(assistant.tool_calls[0].arguments) == ADD_ARGUMENTS
    assert tool.tool_call_id == assistant.tool_calls[0].id and tool.content == "5"
    assert second.skew is not None and second.skew.extends and second.skew.exact  # chained ids


async def _post(proxy: Any, key: str, body: Any) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http:
        headers = {"Authorization": f"Bearer {key}"}
        async with http.post(f"{proxy.base_url}/v1/responses", json=body, headers=headers) as response:
            return response.status, await response.json()


async def test_codex_non_function_tools_are_refused_by_default_and_dropped_on_request(
    start_proxy: Start,
) -> None:
    proxy = await start_proxy()
    session = proxy.open_session()
    body = {"model": "served-model", "input": "add 2 and 3", **CODEX_EXTRAS}
    status, answer = await _post(proxy, session.key, body)
    assert status == 400
    assert "tools[1] (web_search) cannot be translated" in answer["error"]["message"]
    assert "untranslatable='drop'" in answer["error"]["message"]
    assert session.turns[0].error == answer["error"]["message"]

    proxy.untranslatable = "drop"
    status, answer = await _post(proxy, session.key, body)
    assert status == 200 and answer["output"][-1]["type"] == "function_call"
    turn = session.turns[1]
    assert turn.dropped == [
        "store",
        "include",
        "prompt_cache_key",
        "client_metadata",
        "reasoning",
        "tools[1] (web_search)",
        "tools[2] (namespace 'multi_agent_v1')",
    ]
    assert [t["function"]["name"] for t in turn.tools] == ["add"]
    assert turn.params == {"parallel_tool_calls": False, "tool_choice": "auto"}


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"input": "x", "previous_response_id": "resp_1"}, "'resp_1' is not a response of this session"),
        ({"input": [{"type": "local_shell_call", "id": "1"}]}, "input[0] of type 'local_shell_call'"),
        ({"input": [{"type": "message", "role": "wizard", "content": "x"}]}, "input[0].role"),
        (
            {"input": [{"type": "function_call", "name": "add", "arguments": "{}"}]},
            "input[0].call_id is required",
        ),
        ({"input": "x", "frobnicate": True}, "unsupported field 'frobnicate'"),
        ({}, "'input' is required"),
    ],
)
async def test_bad_responses_requests_are_named(start_proxy: Start, body: dict[str, Any], says: str) -> None:
    proxy = await start_proxy()
    session = proxy.open_session()
    status, answer = await _post(proxy, session.key, body)
    assert status == 400 and says in answer["error"]["message"]
    assert session.turns[0].status == 400


async def test_previous_response_id_continues_a_response_of_the_session(start_proxy: Start) -> None:
    proxy = await start_proxy(lambda messages, tools: f"reply {len(messages)}")
    session, other = proxy.open_session(), proxy.open_session()
    async with openai.AsyncOpenAI(base_url=f"{proxy.base_url}/v1", api_key=session.key, max_retries=0) as sdk:
        first = await sdk.responses.create(model="served-model", input="hi", instructions="Be brief.")
        second = await sdk.responses.create(
            model="served-model", input="and again?", instructions="Be brief.", previous_response_id=first.id
        )
        async with sdk.responses.stream(
            model="served-model", input="once more", previous_response_id=second.id
        ) as events:
            third = await events.get_final_response()
    assert (first.output_text, second.output_text, third.output_text) == ("reply 2", "reply 4", "reply 5")
    sent = [(m.role, m.text) for m in session.turns[2].messages]
    assert sent == [
        ("user", "hi"),
        ("assistant", "reply 2"),
        ("user", "and again?"),
        ("assistant", "reply 4"),
        ("user", "once more"),
    ]
    assert session.turns[1].messages[0].text == "Be brief."  # instructions are each call's own
    assert session.turns[1].skew is not None and session.turns[1].skew.extends  # token ids chained
    # Another session's response ids mean nothing here.
    status, answer = await _post(proxy, other.key, {"input": "x", "previous_response_id": first.id})
    assert status == 400 and "is not a response of this session" in answer["error"]["message"]


async def test_a_length_stop_is_an_incomplete_response(start_proxy: Start) -> None:
    proxy = await start_proxy(lambda messages, tools: "one two three four five")
    session = proxy.open_session()
    async with openai.AsyncOpenAI(base_url=f"{proxy.base_url}/v1", api_key=session.key, max_retries=0) as sdk:
        response = await sdk.responses.create(model="served-model", input="count", max_output_tokens=2)
        async with sdk.responses.stream(model="served-model", input="count", max_output_tokens=2) as events:
            kinds = [event.type async for event in events]
    assert response.status == "incomplete" and response.incomplete_details is not None
    assert response.incomplete_details.reason == "max_output_tokens" and response.output_text == "one two"
    assert kinds[-1] == "response.incomplete"
    assert session.turns[0].params == {"max_tokens": 2} and session.turns[0].finish_reason == "length"


def test_reasoning_images_formats_and_tool_choice_translate() -> None:
    body = {
        "input": [
            {"role": "user", "content": [
                {"type": "input_text", "text": "what is this?"},
                {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "low"},
            ]},
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "look closely"}], "encrypted_content": "x"},
            {"type": "function_call", "call_id": "c1", "name": "zoom", "arguments": "{}"},
            {"type": "function_call_output", "call_id": "c1", "output": [{"type": "input_text", "text": "a cat"}]},
        ],
        "text": {"format": {"type": "json_schema", "name": "answer", "schema": {"type": "object"}, "strict": True}, "verbosity": "low"},
        "tool_choice": {"type": "function", "name": "zoom"},
        "max_output_tokens": 64,
    }  # fmt: skip
    call = responses.parse(body, "error")
    user, assistant, tool = call.messages
    assert user.content == [
        {"type": "text", "text": "what is this?"},
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA", "detail": "low"}},
    ]
    assert assistant.get("reasoning_content") == "look closely" and assistant.tool_calls is not None
    assert (assistant.tool_calls[0].id, tool.tool_call_id, tool.content) == ("c1", "c1", "a cat")
    assert call.params == {
        "max_tokens": 64,
        "tool_choice": {"type": "function", "function": {"name": "zoom"}},
        "response_format": {
            "type": "json_schema",
            "json_schema": {"name": "answer", "schema": {"type": "object"}, "strict": True},
        },
    }
    assert call.dropped == ["reasoning.encrypted_content", "text.verbosity"]
