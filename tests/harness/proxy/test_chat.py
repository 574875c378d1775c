"""The capture proxy's Chat Completions dialect, recording, keys and bad input, driven by the openai SDK."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import openai
import pytest

from harness import Rollout, training_samples
from harness._results.exports import token_rows
from harness.scripted._tokens import completion_ids, prompt_ids
from tests.harness.proxy.conftest import ADD_ARGUMENTS, unix_socket_http

pytestmark = pytest.mark.timeout(60)
Start = Callable[..., Any]
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
            },
        },
    }
]


async def _agent_loop(sdk: openai.AsyncOpenAI, *, stream: bool) -> list[dict[str, Any]]:
    """A two-call agent: ask, run the tool call the model makes, send the result back."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You add numbers."},
        {"role": "user", "content": "add 2 and 3"},
    ]
    for _ in range(2):
        if stream:
            content, calls = "", {}
            events = await sdk.chat.completions.create(
                model="served-model",
                messages=messages,
                tools=TOOLS,
                stream=True,
                stream_options={"include_usage": True},
            )
            async for chunk in events:
                for choice in chunk.choices:
                    content += choice.delta.content or ""
                    for delta in choice.delta.tool_calls or []:
                        calls[delta.index] = {
                            "id": delta.id,
                            "type": "function",
                            "function": {"name": delta.function.name, "arguments": delta.function.arguments},
                        }
                if chunk.usage is not None:
                    assert chunk.usage.total_tokens > 0
            message: dict[str, Any] = {"role": "assistant", "content": content}
            if calls:
                message["tool_calls"] = [calls[i] for i in sorted(calls)]
        else:
            reply = await sdk.chat.completions.create(model="served-model", messages=messages, tools=TOOLS)
            message = reply.choices[0].message.model_dump(exclude_none=True)
        messages.append(message)
        for call in message.get("tool_calls") or []:
            arguments = json.loads(call["function"]["arguments"])
            messages.append(
                {"role": "tool", "tool_call_id": call["id"], "content": str(arguments["a"] + arguments["b"])}
            )
    return messages


@pytest.mark.parametrize("stream", [False, True])
async def test_an_sdk_agent_loop_is_recorded_turn_by_turn_with_chained_token_ids(
    start_proxy: Start, stream: bool
) -> None:
    proxy = await start_proxy()
    session = proxy.open_session()
    async with openai.AsyncOpenAI(base_url=f"{proxy.base_url}/v1", api_key=session.key, max_retries=0) as sdk:
        messages = await _agent_loop(sdk, stream=stream)

    assert messages[-1]["content"] == "the answer is 5"
    first, second = session.turns
    assert [t.status for t in session.turns] == [200, 200] and first.stream is stream
    assert [m.role for m in first.messages] == ["system", "user"]
    assert first.reply is not None and first.reply.tool_calls and first.finish_reason == "tool_calls"
    assert json.loads(first.reply.tool_calls[0].arguments) == ADD_ARGUMENTS
    # The agent's own tool call and its output come back as an assistant tool call and a tool message.
    assert [m.role for m in second.messages] == ["system", "user", "assistant", "tool"]
    assert second.messages[2].tool_calls[0].id == first.reply.tool_calls[0].id
    assert (
        second.messages[3].tool_call_id == first.reply.tool_calls[0].id and second.messages[3].content == "5"
    )
    assert second.reply is not None and second.reply.content == "the answer is 5"
    assert (
        second.usage.prompt_tokens > 0
        and session.usage.total_tokens == first.usage.total_tokens + second.usage.total_tokens
    )
    # Token ids: the second prompt is the first prompt and its sampled completion, then the tool message.
    assert first.tokens is not None and second.tokens is not None
    wire = [m.to_openai() for m in second.messages]
    assert second.tokens.prompt_token_ids == prompt_ids(wire)
    chained = first.tokens.prompt_token_ids + first.tokens.completion_token_ids
    assert second.tokens.prompt_token_ids[: len(chained)] == chained
    assert (
        second.skew is not None
        and second.skew.extends
        and second.skew.exact
        and second.skew.length_delta == 0
    )
    assert second.tokens.completion_token_ids == completion_ids({"content": "the answer is 5"})
    assert first.timing["upstream"] > 0 and 0 < first.timing["proxy_cpu"] < first.timing["total"]


async def test_a_rewritten_history_keeps_the_engines_ids_and_records_the_skew(start_proxy: Start) -> None:
    proxy = await start_proxy()
    session = proxy.open_session()
    async with openai.AsyncOpenAI(base_url=f"{proxy.base_url}/v1", api_key=session.key, max_retries=0) as sdk:
        await sdk.chat.completions.create(model="served-model", messages=[{"role": "user", "content": "one"}])
        # The agent summarises its history instead of sending it back.
        await sdk.chat.completions.create(
            model="served-model", messages=[{"role": "user", "content": "summary: one"}]
        )
    first, second = session.turns
    assert second.skew is not None and not second.skew.extends and not second.skew.exact
    assert second.tokens is not None
    assert second.tokens.prompt_token_ids == prompt_ids([{"role": "user", "content": "summary: one"}])
    assert second.skew.common_prefix < len(first.tokens.prompt_token_ids)  # type: ignore[union-attr]


async def test_over_a_unix_socket(start_proxy: Start, tmp_path: Path) -> None:
    socket_path = str(tmp_path / "proxy.sock")
    proxy = await start_proxy(socket_path=socket_path, port=None)
    session = proxy.open_session()
    http = unix_socket_http(openai.DefaultAsyncHttpxClient, socket_path)
    async with openai.AsyncOpenAI(
        base_url="http://sandbox/v1", api_key=session.key, http_client=http, max_retries=0
    ) as sdk:
        reply = await sdk.chat.completions.create(
            model="served-model", messages=[{"role": "user", "content": "hi"}]
        )
    assert reply.choices[0].message.content == "hello from the model"
    assert len(session.turns) == 1 and session.turns[0].reply is not None
    await proxy.aclose()
    assert not Path(socket_path).exists()  # the socket file goes with the proxy


async def test_keys_are_per_session(start_proxy: Start) -> None:
    proxy = await start_proxy()
    mine, other = proxy.open_session(), proxy.open_session()
    proxy.close_session(other)
    for key in (other.key, "not-a-key", None):
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        async with aiohttp.ClientSession() as http:
            async with http.post(
                f"{proxy.base_url}/v1/chat/completions", json={"messages": []}, headers=headers
            ) as r:
                assert r.status == 401
                assert "proxy key" in (await r.json())["error"]["message"]
    assert mine.turns == [] and other.turns == []
    assert "rubric-" not in repr(mine) and mine.key not in repr(proxy)


async def _post(proxy: Any, key: str, path: str, data: bytes | str) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as http:
        async with http.post(
            f"{proxy.base_url}{path}", data=data, headers={"Authorization": f"Bearer {key}"}
        ) as r:
            return r.status, await r.json()


@pytest.mark.parametrize(
    ("path", "data", "status", "says"),
    [
        ("/v1/chat/completions", b"{not json", 400, "not valid JSON"),
        ("/v1/chat/completions", b"[1, 2]", 400, "JSON object"),
        ("/v1/completions", b"{}", 404, "no route POST /v1/completions"),
        ("/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": "x"}], "frobnicate": 1}), 400, "unsupported field 'frobnicate'"),
        ("/v1/chat/completions", json.dumps({"messages": [{"role": "wizard", "content": "x"}]}), 400, "messages[0].role"),
        ("/v1/chat/completions", json.dumps({"messages": [{"role": "user", "content": "x"}], "n": 3}), 400, "n=1"),
        ("/v1/chat/completions", json.dumps({"model": "gpt-9", "messages": [{"role": "user", "content": "x"}]}), 404, "'gpt-9' is not served here"),
    ],
)  # fmt: skip
async def test_bad_input_is_a_clear_4xx_recorded_on_the_session(
    start_proxy: Start, path: str, data: bytes | str, status: int, says: str
) -> None:
    proxy = await start_proxy()
    session = proxy.open_session()
    got, body = await _post(proxy, session.key, path, data)
    assert got == status and says in body["error"]["message"]
    (turn,) = session.turns
    assert turn.status == status and turn.error is not None and says in turn.error and turn.reply is None
    assert proxy.client.requests == 0  # nothing reached the engine


async def test_hints_are_dropped_and_named_and_non_function_tools_refused_or_dropped(
    start_proxy: Start,
) -> None:
    proxy = await start_proxy()
    session = proxy.open_session()
    body = {
        "model": "served-model",
        "messages": [{"role": "user", "content": "x"}],
        "tools": [*TOOLS, {"type": "custom", "custom": {"name": "patch"}}],
        "store": False,
        "user": "me",
    }
    status, answer = await _post(proxy, session.key, "/v1/chat/completions", json.dumps(body))
    assert status == 400 and "tools[1] of type 'custom'" in answer["error"]["message"]
    proxy.untranslatable = "drop"
    status, answer = await _post(proxy, session.key, "/v1/chat/completions", json.dumps(body))
    assert status == 200
    turn = session.turns[-1]
    assert turn.dropped == ["tools[1] of type 'custom'", "store", "user"]
    assert [t["function"]["name"] for t in turn.tools] == ["add"]


async def test_side_calls_are_samples_of_their_own_so_the_token_export_joins_the_main_line(
    start_proxy: Start,
) -> None:
    proxy = await start_proxy()
    session = proxy.open_session()
    async with openai.AsyncOpenAI(base_url=f"{proxy.base_url}/v1", api_key=session.key, max_retries=0) as sdk:
        messages: list[dict[str, Any]] = [{"role": "user", "content": "add 2 and 3"}]
        reply = await sdk.chat.completions.create(model="served-model", messages=messages, tools=TOOLS)
        # A side call between the main line's turns, as Claude Code asks for a title.
        await sdk.chat.completions.create(
            model="served-model", messages=[{"role": "user", "content": "a title?"}]
        )
        call = reply.choices[0].message.tool_calls[0]  # type: ignore[index]
        messages += [
            reply.choices[0].message.model_dump(exclude_none=True),
            {"role": "tool", "tool_call_id": call.id, "content": "5"},
        ]
        await sdk.chat.completions.create(model="served-model", messages=messages, tools=TOOLS)
    rollout = Rollout(example_id=1, reward=1.0)
    session.record_into(rollout)
    assert [s.calls for s in training_samples(rollout)] == [[0, 2], [1]] and rollout.turns == 3
    row, side = token_rows(rollout)  # the training export: a row per sample, the model's tokens masked in
    assert (row["calls"], side["calls"], row["num_samples"]) == ([0, 2], [1], 2)
    assert [c["index"] for c in row["model_calls"]] == [0, 2]
    final = session.turns[2].tokens
    assert final is not None
    assert row["prompt_ids"] + row["completion_ids"] == final.prompt_token_ids + final.completion_token_ids
    assert sum(row["env_mask"]) == len(session.turns[0].tokens.completion_token_ids) + len(
        final.completion_token_ids
    )  # type: ignore[union-attr]


async def test_overlapping_calls_of_one_session_are_recorded_in_the_order_made(start_proxy: Start) -> None:
    async def policy(messages: list[dict[str, Any]], tools: Any) -> str:
        if messages[-1]["content"] == "slow":
            await asyncio.sleep(0.3)
        return f"re: {messages[-1]['content']}"

    proxy = await start_proxy(policy)
    session = proxy.open_session()
    async with openai.AsyncOpenAI(base_url=f"{proxy.base_url}/v1", api_key=session.key, max_retries=0) as sdk:

        async def ask(text: str, delay: float) -> None:
            await asyncio.sleep(delay)
            await sdk.chat.completions.create(
                model="served-model", messages=[{"role": "user", "content": text}]
            )

        await asyncio.gather(ask("slow", 0.0), ask("fast", 0.1))
    assert [(t.index, t.messages[0].content, t.status) for t in session.turns] == [
        (0, "slow", 200),
        (1, "fast", 200),
    ]
    assert session.turns[0].reply.content == "re: slow"  # type: ignore[union-attr]
    assert [t.tokens.turn for t in session.turns] == [0, 1]  # type: ignore[union-attr]
