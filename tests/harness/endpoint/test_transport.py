"""The transports behind harness.Client: the same request and the same answer whichever runs.

tests/harness/endpoint/test_client.py and test_client_faults.py run every client and fault test with
both named transports; this module covers what only differs between them: the choice itself,
a user's own `openai.AsyncOpenAI`, the request bodies on the wire, and the size cap.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import openai
import pytest

from harness import Client, Completion, ConfigError, ConfigTypeError, EndpointError, ScriptedEndpoint
from harness._endpoint.client import TRANSPORTS
from tests.helpers.endpoints import raw_server

pytestmark = pytest.mark.timeout(60)
Endpoints = Callable[..., ScriptedEndpoint]
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
MESSAGES = [{"role": "user", "content": "add 2 and 3"}]


def tool_then_answer(messages: list[dict[str, Any]], tools: Any) -> Any:
    if messages[-1]["role"] == "user":
        return {"tool_calls": [{"id": "call_1", "name": "add", "arguments": '{"a": 2, "b": 3}'}]}
    return f"the sum is {messages[-1]['content']}"


async def _conversation(client: Client) -> list[Completion]:
    """A tool call, its result, and the answer: what a two-turn rollout sends."""
    first = await client.complete(MESSAGES, tools=TOOLS, top_k=5, extra_body={"min_p": 0.1})
    call = first.message.tool_calls[0]  # type: ignore[index]
    history = [*MESSAGES, first.message, {"role": "tool", "tool_call_id": call.id, "content": "5"}]
    second = await client.complete(history, tools=TOOLS, temperature=0.5)
    return [first, second]


def _comparable(completion: Completion) -> dict[str, Any]:
    return completion.model_dump(exclude={"id"})  # the endpoint makes a fresh id per answer


async def test_every_transport_sends_the_same_bodies_and_reads_the_same_answers(
    scripted_endpoint: Endpoints,
) -> None:
    endpoint = scripted_endpoint(tool_then_answer, record=True)
    outcomes, bodies = {}, {}
    own = openai.AsyncOpenAI(base_url=endpoint.base_url, api_key="sk-own", max_retries=0)
    for name in (*TRANSPORTS, "own"):
        before = len(endpoint.stats.bodies)
        chosen: Any = own if name == "own" else name
        async with Client(
            "m", base_url=endpoint.base_url, api_key="sk-x", return_token_ids=True, transport=chosen
        ) as client:
            outcomes[name] = [_comparable(c) for c in await _conversation(client)]
            assert client.successes == 2 and client.usage.prompt_tokens > 0
        bodies[name] = endpoint.stats.bodies[before:]
    await own.close()
    assert outcomes["aiohttp"] == outcomes["openai"] == outcomes["own"]
    assert bodies["aiohttp"] == bodies["openai"] == bodies["own"]
    first = bodies["aiohttp"][0]
    # Extra sampling keys and extra_body land in the body itself, as vLLM reads them.
    assert first["top_k"] == 5 and first["min_p"] == 0.1 and "extra_body" not in first
    assert first["return_token_ids"] is True and first["tools"] == TOOLS
    answer = outcomes["aiohttp"][1]
    assert answer["choices"][0]["message"]["content"] == "the sum is 5"
    assert answer["choices"][0]["token_ids"] and answer["prompt_token_ids"]


async def test_a_users_own_sdk_client_is_used_and_left_open(scripted_endpoint: Endpoints) -> None:
    endpoint = scripted_endpoint(tool_then_answer)
    own = openai.AsyncOpenAI(base_url=endpoint.base_url, api_key="sk-own", max_retries=0)
    client = Client("m", base_url="http://127.0.0.1:9/unused", transport=own)
    reply = await client.complete(MESSAGES)
    await client.aclose()
    assert reply.message.tool_calls and endpoint.stats.requests == 1  # its base_url, not ours
    assert not own.is_closed()  # theirs to close
    assert client.replica_kwargs()["transport"] == "openai"  # other processes build an SDK client
    await own.close()


async def test_errors_name_the_endpoint_alike_with_either_transport(scripted_endpoint: Endpoints) -> None:
    endpoint = scripted_endpoint(tool_then_answer, fail_first=[401, 401])
    texts = []
    for name in TRANSPORTS:
        async with Client("m", base_url=endpoint.base_url, api_key="sk-secret-123", transport=name) as client:
            with pytest.raises(EndpointError) as caught:
                await client.complete(MESSAGES)
        assert client.refused is caught.value and caught.value.status == 401
        texts.append(str(caught.value))
    assert texts[0] == texts[1] and "HTTP 401" in texts[0] and "check the API key" in texts[0]
    assert "sk-secret-123" not in texts[0]


@pytest.mark.parametrize("name", TRANSPORTS)
async def test_an_oversized_answer_is_refused_not_read(name: str) -> None:
    body = b'{"choices": [{"message": {"role": "assistant", "content": "' + b"x" * 5000 + b'"}}]}'
    async with raw_server(body) as (url, hits):
        client = Client(
            "m", base_url=url, api_key="sk-test", max_retries=1, backoff_base=0.01, transport=name
        )
        client.max_response_bytes = 1000
        with pytest.raises(EndpointError, match="HTTP 200 with a body .*more than the 1,000-byte limit"):
            await client.complete(MESSAGES)
        await client.aclose()
    assert len(hits) == 2  # retried once, like any malformed answer


@pytest.mark.parametrize(
    ("transport", "error", "words"),
    [
        ("httpx", ConfigError, "is not one of 'aiohttp', 'openai'"),
        (42, ConfigTypeError, "must be 'aiohttp', 'openai' or an openai.AsyncOpenAI client, got int"),
    ],
)
def test_a_bad_transport_is_named_at_construction(transport: Any, error: type, words: str) -> None:
    with pytest.raises(error, match=words):
        Client("m", base_url="http://127.0.0.1:9/v1", transport=transport)


async def test_pools_close_with_the_client_and_reopen_on_a_new_loop(scripted_endpoint: Endpoints) -> None:
    endpoint = scripted_endpoint(tool_then_answer)
    client = Client("m", base_url=endpoint.base_url)
    await client.complete(MESSAGES)
    first = client._transport
    await client.aclose()
    assert client._transport is None and first is not None and first._session.closed  # type: ignore[attr-defined]

    def elsewhere() -> Completion:
        async def go() -> Completion:
            async with client:
                return await client.complete(MESSAGES)

        return asyncio.run(go())

    reply = await asyncio.to_thread(elsewhere)  # another thread, another loop: its own pool
    assert reply.message.tool_calls and client._transport is None
