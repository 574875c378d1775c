"""The capture proxy's Anthropic Messages dialect (Claude Code's), driven by the anthropic SDK and raw aiohttp."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import anthropic
import pytest

from tests.harness.proxy.conftest import ADD_ARGUMENTS, unix_socket_http

pytestmark = pytest.mark.timeout(60)
Start = Callable[..., Any]
ADD = {
    "name": "add",
    "description": "Add two integers.",
    "input_schema": {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    },
}


async def _claude_like_loop(sdk: anthropic.AsyncAnthropic, *, stream: bool) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": "add 2 and 3"}]}]
    system = [{"type": "text", "text": "You add numbers."}]
    for _ in range(2):
        arguments: dict[str, Any] = {
            "model": "served-model",
            "max_tokens": 100,
            "system": system,
            "messages": messages,
            "tools": [ADD],
        }
        if stream:
            async with sdk.messages.stream(**arguments) as events:
                kinds = [event.type async for event in events]
                reply = await events.get_final_message()
            assert (
                kinds[0] == "message_start" and "content_block_start" in kinds and kinds[-1] == "message_stop"
            )
        else:
            reply = await sdk.messages.create(**arguments)
        assert reply.usage.input_tokens > 0 and reply.usage.output_tokens > 0
        content = [block.model_dump(exclude_none=True) for block in reply.content]
        messages.append({"role": "assistant", "content": content})
        results = [
            {
                "type": "tool_result",
                "tool_use_id": block["id"],
                "content": str(block["input"]["a"] + block["input"]["b"]),
            }
            for block in content
            if block["type"] == "tool_use"
        ]
        if results:
            messages.append({"role": "user", "content": [*results, {"type": "text", "text": "go on"}]})
        if reply.stop_reason == "end_turn":
            break
    return messages


@pytest.mark.parametrize("stream", [False, True])
async def test_a_messages_agent_loop_is_translated_and_recorded(start_proxy: Start, stream: bool) -> None:
    proxy = await start_proxy()
    session = proxy.open_session()
    async with anthropic.AsyncAnthropic(base_url=proxy.base_url, api_key=session.key, max_retries=0) as sdk:
        messages = await _claude_like_loop(sdk, stream=stream)

    first_reply = messages[1]["content"]
    assert [b["type"] for b in first_reply] == ["text", "tool_use"] and first_reply[1][
        "input"
    ] == ADD_ARGUMENTS
    assert messages[-1]["content"] == [{"type": "text", "text": "the answer is 5"}]
    first, second = session.turns
    assert first.dialect == "messages" and first.stream is stream and first.finish_reason == "tool_calls"
    assert first.messages[0].role == "system" and first.messages[0].text == "You add numbers."
    assert first.tools[0]["function"]["parameters"] == ADD["input_schema"]
    assert first.params == {"max_tokens": 100}
    # The tool_use block is an assistant tool call; the tool_result a tool message before the user's text.
    assert [m.role for m in second.messages] == ["system", "user", "assistant", "tool", "user"]
    assistant, tool, user = second.messages[2:]
    assert assistant.content == "let me compute" and assistant.tool_calls is not None
    assert assistant.tool_calls[0].id == first_reply[1]["id"]
    assert json.loads(assistant.tool_calls[0].arguments) == ADD_ARGUMENTS
    assert (tool.tool_call_id, tool.content, user.content) == (first_reply[1]["id"], "5", "go on")
    assert second.skew is not None and second.skew.extends and second.skew.exact


# What Claude Code 2.1 sends (shared/FACTS.md), on the path it uses.
CLAUDE_CODE_BODY = {
    "model": "served-model",
    "max_tokens": 32000,
    "stream": True,
    "system": [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}],
    "messages": [{"role": "user", "content": "hi"}],
    "tools": [ADD, {"type": "web_search_20250305", "name": "web_search"}],
    "thinking": {"type": "enabled", "budget_tokens": 1000},
    "context_management": {"edits": []},
    "output_config": {"effort": "high"},
    "metadata": {"user_id": "u"},
    "temperature": 1,
}


async def _post(
    proxy: Any, headers: dict[str, str], body: Any, path: str = "/v1/messages?beta=true"
) -> tuple[int, bytes]:
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{proxy.base_url}{path}", json=body, headers=headers) as response:
            return response.status, await response.read()


async def test_claude_code_shaped_requests_over_raw_http(start_proxy: Start) -> None:
    proxy = await start_proxy()
    session = proxy.open_session()
    headers = {"x-api-key": session.key, "anthropic-version": "2023-06-01"}
    status, raw = await _post(proxy, headers, CLAUDE_CODE_BODY)
    error = json.loads(raw)
    assert status == 400 and error["type"] == "error" and error["error"]["type"] == "invalid_request_error"
    assert "tools[1] (web_search_20250305 'web_search') cannot be translated" in error["error"]["message"]

    proxy.untranslatable = "drop"
    status, raw = await _post(proxy, headers, CLAUDE_CODE_BODY)
    assert status == 200
    events = [line.split(": ", 1)[1] for line in raw.decode().splitlines() if line.startswith("event: ")]
    assert events == [
        "message_start", "ping",
        "content_block_start", "content_block_delta", "content_block_stop",
        "content_block_start", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop",
    ]  # fmt: skip
    data = [json.loads(line[6:]) for line in raw.decode().splitlines() if line.startswith("data: ")]
    assert data[-2]["delta"]["stop_reason"] == "tool_use"
    assert json.loads(data[6]["delta"]["partial_json"]) == ADD_ARGUMENTS
    turn = session.turns[-1]
    assert turn.dropped == [
        "cache_control", "thinking", "context_management", "metadata",
        "tools[1] (web_search_20250305 'web_search')", "output_config.effort",
    ]  # fmt: skip
    assert turn.params == {"max_tokens": 32000, "temperature": 1}
    # An Anthropic client with a wrong key gets an Anthropic-shaped 401.
    status, raw = await _post(proxy, {"x-api-key": "wrong"}, CLAUDE_CODE_BODY, "/v1/messages/count_tokens")
    assert status == 401 and json.loads(raw)["error"]["type"] == "authentication_error"
    status, raw = await _post(proxy, headers, CLAUDE_CODE_BODY, "/v1/messages/count_tokens")
    assert status == 404 and json.loads(raw)["error"]["type"] == "not_found_error"


@pytest.mark.parametrize(
    ("body", "says"),
    [
        ({"messages": [{"role": "user", "content": "x"}]}, "max_tokens: field required"),
        ({"max_tokens": 5, "messages": [{"role": "tool", "content": "x"}]}, "messages[0].role"),
        ({"max_tokens": 5, "messages": [{"role": "user", "content": [{"type": "document"}]}]}, "messages[0].content[0] of type 'document'"),
        ({"max_tokens": 5, "messages": [{"role": "user", "content": "x"}], "frobnicate": 1}, "frobnicate: extra inputs"),
    ],
)  # fmt: skip
async def test_bad_messages_requests_are_named(start_proxy: Start, body: dict[str, Any], says: str) -> None:
    proxy = await start_proxy()
    session = proxy.open_session()
    status, raw = await _post(proxy, {"x-api-key": session.key}, body)
    assert status == 400 and says in json.loads(raw)["error"]["message"]
    assert session.turns[0].status == 400


async def test_system_turns_inside_the_conversation_are_system_messages(start_proxy: Start) -> None:
    """Claude Code 2.1 sends reminders as `system` turns among the messages (a 400 before)."""
    proxy = await start_proxy()
    session = proxy.open_session()
    body = {"max_tokens": 5, "messages": [{"role": "user", "content": "x"}, {"role": "system", "content": [{"type": "text", "text": "remember"}]}]}  # fmt: skip
    status, _ = await _post(proxy, {"x-api-key": session.key}, body)
    assert status == 200
    assert [(m.role, m.text) for m in session.turns[0].messages] == [("user", "x"), ("system", "remember")]


async def test_tool_errors_images_and_stop_reasons_translate(start_proxy: Start) -> None:
    seen: list[list[dict[str, Any]]] = []

    def policy(messages: list[dict[str, Any]], tools: Any) -> Any:
        seen.append(messages)
        return {"content": "one two three", "reasoning_content": "thinking hard"}

    proxy = await start_proxy(policy)
    session = proxy.open_session()
    messages = [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": [{"type": "thinking", "thinking": "plan", "signature": "s"}, {"type": "tool_use", "id": "t1", "name": "add", "input": {}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "t1", "is_error": True, "content": [{"type": "text", "text": "boom"}]},
            {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"}},
            {"type": "text", "text": "see"},
        ]},
    ]  # fmt: skip
    async with anthropic.AsyncAnthropic(base_url=proxy.base_url, api_key=session.key, max_retries=0) as sdk:
        reply = await sdk.messages.create(
            model="served-model", max_tokens=2, messages=messages, stop_sequences=["END"]
        )
    assert reply.stop_reason == "max_tokens"
    assert [b.type for b in reply.content] == ["thinking", "text"] and reply.content[1].text == "one two"
    sent = seen[0]
    assert (
        sent[1]["reasoning_content"] == "plan" and sent[1]["tool_calls"][0]["function"]["arguments"] == "{}"
    )
    assert sent[2] == {"role": "tool", "tool_call_id": "t1", "content": "Error: boom"}
    assert sent[3]["content"] == [
        {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}},
        {"type": "text", "text": "see"},
    ]
    assert session.turns[0].params == {"max_tokens": 2, "stop": ["END"]}


async def test_the_anthropic_sdk_over_a_unix_socket(start_proxy: Start, tmp_path: Path) -> None:
    socket_path = str(tmp_path / "agent.sock")
    proxy = await start_proxy(port=None, socket_path=socket_path)
    session = proxy.open_session()
    http = unix_socket_http(anthropic.DefaultAsyncHttpxClient, socket_path)
    async with anthropic.AsyncAnthropic(
        base_url="http://sandbox", api_key=session.key, http_client=http, max_retries=0
    ) as sdk:
        async with sdk.messages.stream(
            model="served-model", max_tokens=10, messages=[{"role": "user", "content": "hi"}]
        ) as events:
            reply = await events.get_final_message()
    assert reply.content[0].text == "hello from the model" and reply.stop_reason == "end_turn"  # type: ignore[union-attr]
    assert session.turns[0].ok and session.turns[0].stream
    async with anthropic.AsyncAnthropic(
        base_url="http://sandbox",
        api_key=session.key,
        http_client=unix_socket_http(anthropic.DefaultAsyncHttpxClient, socket_path),
    ) as sdk:
        listed = await sdk.models.list()
    assert [(m.id, m.type, m.display_name) for m in listed.data] == [
        ("served-model", "model", "served-model")
    ]


async def test_a_models_malformed_tool_arguments_reach_the_agent_whole(start_proxy: Start) -> None:
    proxy = await start_proxy(endpoint={"rate_malformed_tool_json": 1.0})
    session = proxy.open_session()
    async with anthropic.AsyncAnthropic(base_url=proxy.base_url, api_key=session.key, max_retries=0) as sdk:
        reply = await sdk.messages.create(
            model="served-model", max_tokens=50, messages=[{"role": "user", "content": "add"}], tools=[ADD]
        )  # type: ignore[list-item]
    tool_use = reply.content[1]
    assert tool_use.type == "tool_use" and reply.stop_reason == "tool_use"
    recorded = session.turns[0].reply.tool_calls[0].arguments  # type: ignore[union-attr,index]
    assert tool_use.input == {"invalid_json_arguments": recorded}  # the agent's tool reports it to the model
