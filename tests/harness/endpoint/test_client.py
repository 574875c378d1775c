"""harness.Client against the scripted endpoint over loopback, through each transport: the
lean aiohttp one and the real openai SDK (every test runs with both)."""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import json
import logging
import socket
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from harness import Client, Completion, EndpointError, Message, ScriptedEndpoint, ToolCall, Usage, run_sync
from harness._endpoint.client import TRANSPORTS
from harness._endpoint.connect import open_client
from harness._endpoint.retry import parse_retry_after
from harness.scripted._endpoint import ScriptedHTTPError

pytestmark = pytest.mark.timeout(30)


@pytest.fixture(autouse=True, params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    """The transport this run of the module's tests uses (`fast_retry` passes it)."""
    return str(request.param)


@pytest.fixture
def fast_retry(transport: str) -> dict[str, Any]:
    """The conftest's near-instant retry backoff, plus this run's transport."""
    return {"backoff_base": 0.005, "backoff_max": 0.02, "transport": transport}


Endpoints = Callable[..., ScriptedEndpoint]  # the conftest fixture factory
Fast = dict[str, Any]  # Client keywords: fast retries and the transport under test

USER = [{"role": "user", "content": "what is two plus two"}]
KEY = "sk-test-SECRET-0123456789abcdef"


def echo(messages: list[dict], tools: list[dict] | None) -> Any:
    return f"echo {messages[-1]['content']}"


async def test_completion_maps_message_usage_and_counters(
    scripted_endpoint: Endpoints, fast_retry: Fast
) -> None:
    endpoint = scripted_endpoint(lambda m, t: "four is the answer")
    async with Client("my-model", base_url=endpoint.base_url, **fast_retry) as client:
        first = await client.complete(USER)
        second = await client.complete(USER)
    assert isinstance(first, Completion)
    assert first.message == Message(role="assistant", content="four is the answer")
    assert first.finish_reason == "stop"
    assert first.model == "my-model" and first.id
    assert first.usage == Usage(prompt_tokens=5, completion_tokens=4)
    assert client.usage == first.usage + second.usage == Usage(prompt_tokens=10, completion_tokens=8)
    assert (client.requests, client.retries, client.failures) == (2, 0, 0)


async def test_messages_may_be_models_or_dicts_and_reach_the_server_as_sent(
    scripted_endpoint: Endpoints,
    fast_retry: Fast,
) -> None:
    endpoint = scripted_endpoint(echo, record=True)
    call = ToolCall(id="c1", function={"name": "add", "arguments": '{"a": 1}'})
    messages = [
        Message(role="system", content="be brief"),
        {"role": "user", "content": "add"},
        Message(role="assistant", tool_calls=[call]),
        {"role": "tool", "tool_call_id": "c1", "content": "1"},
        Message(role="user", content="thanks"),
    ]
    async with Client("m", base_url=endpoint.base_url, **fast_retry) as client:
        reply = await client.complete(messages)
    assert reply.message.content == "echo thanks"
    sent = endpoint.stats.bodies[0]["messages"]
    assert sent[0] == {"role": "system", "content": "be brief"}
    assert sent[2] == {
        "role": "assistant",
        "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}
        ],
    }
    assert sent[3] == {"role": "tool", "tool_call_id": "c1", "content": "1"}


async def test_tool_calls_preserved_and_malformed_arguments_kept_raw(
    scripted_endpoint: Endpoints,
    fast_retry: Fast,
) -> None:
    policy = lambda m, t: {"tool_calls": [{"id": "x1", "name": "add", "arguments": {"a": 1, "b": 2}}]}  # noqa: E731
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    endpoint = scripted_endpoint(policy, fail_first=["malformed"], record=True)
    async with Client("m", base_url=endpoint.base_url, **fast_retry) as client:
        broken = await client.complete(USER, tools=tools)
        good = await client.complete(USER, tools=tools)
    assert endpoint.stats.bodies[0]["tools"] == tools
    assert broken.finish_reason == "tool_calls"
    assert broken.message.tool_calls[0].name == "add"
    with pytest.raises(json.JSONDecodeError):
        json.loads(broken.message.tool_calls[0].arguments)
    assert broken.message.tool_calls[0].arguments.startswith('{"a": 1')
    assert good.message.tool_calls[0].id == "x1"
    assert json.loads(good.message.tool_calls[0].arguments) == {"a": 1, "b": 2}


async def test_sampling_merges_and_unknown_params_pass_through(
    scripted_endpoint: Endpoints, fast_retry: Fast
) -> None:
    endpoint = scripted_endpoint(lambda m, t: "a b c", record=True)
    sampling = {"temperature": 0.7, "max_tokens": 50, "top_k": 20}
    async with Client("m", base_url=endpoint.base_url, sampling=sampling, **fast_retry) as client:
        reply = await client.complete(
            USER, temperature=0.1, max_tokens=None, n=2, response_format={"type": "json_object"}
        )
    body = endpoint.stats.bodies[0]
    assert body["temperature"] == 0.1 and body["top_k"] == 20 and "max_tokens" not in body
    assert body["response_format"] == {"type": "json_object"} and body["n"] == 2
    assert len(reply.choices) == 2 and reply.usage.completion_tokens == 6
    assert client.sampling == sampling


async def test_429_retry_after_is_honoured(scripted_endpoint: Endpoints, fast_retry: Fast) -> None:
    endpoint = scripted_endpoint(echo, fail_first=[429], retry_after=0.6)
    async with Client("m", base_url=endpoint.base_url, **fast_retry) as client:
        started = time.perf_counter()
        reply = await client.complete(USER)
        elapsed = time.perf_counter() - started
    assert reply.message.content.startswith("echo")
    assert elapsed >= 0.55  # backoff alone would be ~0.01s
    assert client.retries == 1 and client.requests == 2
    assert endpoint.stats.responses == {429: 1, 200: 1}


async def test_retry_after_is_capped(scripted_endpoint: Endpoints, fast_retry: Fast) -> None:
    endpoint = scripted_endpoint(echo, fail_first=[429], retry_after=60)
    async with Client("m", base_url=endpoint.base_url, retry_after_max=0.1, **fast_retry) as client:
        started = time.perf_counter()
        await client.complete(USER)
    assert time.perf_counter() - started < 5


async def test_500_is_retried_then_succeeds(scripted_endpoint: Endpoints, fast_retry: Fast) -> None:
    endpoint = scripted_endpoint(echo, fail_first=[500, 502])
    async with Client("m", base_url=endpoint.base_url, **fast_retry) as client:
        reply = await client.complete(USER)
    assert reply.message.content == "echo what is two plus two"
    assert client.retries == 2
    assert endpoint.stats.responses == {500: 1, 502: 1, 200: 1}


async def test_permanent_500_gives_endpoint_error_after_max_retries_plus_one(
    scripted_endpoint: Endpoints,
    fast_retry: Fast,
) -> None:
    endpoint = scripted_endpoint(echo, rate_500=1.0)
    async with Client("m", base_url=endpoint.base_url, max_retries=3, **fast_retry) as client:
        with pytest.raises(EndpointError) as info:
            await client.complete(USER)
    error = info.value
    assert error.status == 500 and error.attempts == 4
    assert "HTTP 500" in str(error) and "scripted failure" in str(error) and "after 4 attempts" in str(error)
    assert endpoint.stats.requests == 4
    assert client.failures == 1 and client.retries == 3


async def test_hang_longer_than_timeout_is_retried(scripted_endpoint: Endpoints, fast_retry: Fast) -> None:
    endpoint = scripted_endpoint(echo, fail_first=["hang"], hang_seconds=20)
    async with Client("m", base_url=endpoint.base_url, timeout=0.3, **fast_retry) as client:
        started = time.perf_counter()
        reply = await client.complete(USER)
    assert reply.message.content.startswith("echo")
    assert time.perf_counter() - started < 5
    assert client.retries == 1


async def test_permanent_hang_ends_in_timeout_error(scripted_endpoint: Endpoints, fast_retry: Fast) -> None:
    endpoint = scripted_endpoint(echo, rate_hang=1.0, hang_seconds=20)
    async with Client("m", base_url=endpoint.base_url, timeout=0.2, max_retries=1, **fast_retry) as client:
        with pytest.raises(EndpointError, match="no answer within the 0.2s timeout after 2 attempts") as info:
            await client.complete(USER)
    assert info.value.status is None


async def test_dropped_connection_is_retried(scripted_endpoint: Endpoints, fast_retry: Fast) -> None:
    endpoint = scripted_endpoint(echo, fail_first=["drop", "drop"])
    async with Client("m", base_url=endpoint.base_url, **fast_retry) as client:
        reply = await client.complete(USER)
    assert reply.message.content.startswith("echo")
    assert client.retries == 2 and endpoint.stats.dropped == 2


async def test_400_is_not_retried_and_says_what_the_server_said(
    scripted_endpoint: Endpoints, fast_retry: Fast
) -> None:
    def policy(messages: list[dict], tools: list[dict] | None) -> Any:
        raise ScriptedHTTPError(400, "prompt is 9000 tokens, limit is 8192")

    endpoint = scripted_endpoint(policy)
    async with Client("m", base_url=endpoint.base_url, **fast_retry) as client:
        with pytest.raises(EndpointError) as info:
            await client.complete(USER)
    assert info.value.status == 400 and info.value.attempts == 1
    assert "HTTP 400: prompt is 9000 tokens, limit is 8192" in str(info.value)
    assert "attempt" not in str(info.value)
    assert endpoint.stats.requests == 1 and client.retries == 0


async def test_404_error_carries_a_hint(scripted_endpoint: Endpoints, fast_retry: Fast) -> None:
    def policy(messages: list[dict], tools: list[dict] | None) -> Any:
        raise ScriptedHTTPError(404, "model 'nope' not found")

    endpoint = scripted_endpoint(policy)
    async with Client("nope", base_url=endpoint.base_url, **fast_retry) as client:
        with pytest.raises(EndpointError, match="model 'nope' not found.*check the model name"):
            await client.complete(USER)


async def test_key_never_in_errors_repr_config_or_logs(
    scripted_endpoint: Endpoints,
    fast_retry: Fast,
    caplog: pytest.LogCaptureFixture,
) -> None:
    # a server that echoes the key back in its error text
    def policy(messages: list[dict], tools: list[dict] | None) -> Any:
        raise ScriptedHTTPError(503 if "retry" in messages[-1]["content"] else 401, f"invalid key {KEY}")

    endpoint = scripted_endpoint(policy)
    client = Client("m", base_url=endpoint.base_url, api_key=KEY, max_retries=1, **fast_retry)
    with caplog.at_level(logging.DEBUG, logger="harness._endpoint.client"):
        for content in ("retry", "auth"):
            with pytest.raises(EndpointError) as info:
                await client.complete([{"role": "user", "content": content}])
            assert KEY not in str(info.value) and KEY not in repr(info.value)
            assert "invalid key ***" in str(info.value)
            assert info.value.__cause__ is None
    assert "check the API key" in str(info.value)
    assert caplog.records and all(KEY not in r.getMessage() for r in caplog.records)
    assert KEY not in repr(client) and KEY not in json.dumps(client.config())
    assert KEY not in repr(vars(client))
    await client.aclose()


def test_only_real_keys_are_masked_in_errors(scripted_endpoint: Endpoints, fast_retry: Fast) -> None:
    """The scripted endpoint's key is the word "scripted": masking it hid the model's name as
    "***:call" (issue 33). Keys the harness supplies where none is needed are no secrets."""

    def policy(messages: list[dict], tools: list[dict] | None) -> Any:
        raise ScriptedHTTPError(413, "request body too large for scripted:call (key EMPTY)")

    endpoint = scripted_endpoint(policy)
    with contextlib.ExitStack() as stack:
        env = SimpleNamespace(scripted_policies={"call": policy})
        scripted = open_client(stack, "scripted:call", env=env, max_retries=0, **fast_retry)
        with pytest.raises(EndpointError) as info:
            run_sync(scripted.complete(USER))
        scripted.close()
    assert "scripted:call" in str(info.value) and "***" not in str(info.value)
    for key in ("EMPTY", "sk-no-key-required"):  # a local server's and the placeholder
        client = Client("scripted:call", base_url=endpoint.base_url, api_key=key, max_retries=0, **fast_retry)
        with pytest.raises(EndpointError) as info:
            run_sync(client.complete(USER))
        client.close()
        assert "for scripted:call (key EMPTY)" in str(info.value)
    client = Client("m", base_url=endpoint.base_url, api_key="scripted:call", max_retries=0, **fast_retry)
    with pytest.raises(EndpointError) as info:  # a real key that happens to read so is still masked
        run_sync(client.complete(USER))
    client.close()
    assert "too large for *** (key EMPTY)" in str(info.value)


async def test_concurrency_limit_is_reached_not_exceeded(
    scripted_endpoint: Endpoints, fast_retry: Fast
) -> None:
    endpoint = scripted_endpoint(echo, latency=0.2)
    async with Client("m", base_url=endpoint.base_url, max_concurrency=16, **fast_retry) as client:
        started = time.perf_counter()
        replies = await asyncio.gather(*[client.complete(USER) for _ in range(32)])
        elapsed = time.perf_counter() - started
    assert len(replies) == 32
    assert endpoint.stats.max_in_flight == 16
    assert 0.4 <= elapsed < 3.0  # two waves of 16


async def test_environment_variables_supply_url_and_key(
    scripted_endpoint: Endpoints,
    fast_retry: Fast,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    endpoint = scripted_endpoint(echo)
    monkeypatch.setenv("OPENAI_BASE_URL", endpoint.base_url)
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    async with Client("m", **fast_retry) as client:
        assert client.base_url == endpoint.base_url
        assert (await client.complete(USER)).message.content.startswith("echo")
        assert KEY not in repr(client)


async def test_unreachable_endpoint_is_a_connection_error(fast_retry: Fast) -> None:
    with socket.socket() as probe:  # a port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    async with Client("m", base_url=f"http://127.0.0.1:{port}/v1", max_retries=1, **fast_retry) as client:
        with pytest.raises(EndpointError, match="connection failed.*after 2 attempts") as info:
            await client.complete(USER)
    assert info.value.status is None


async def test_reusable_after_aclose(scripted_endpoint: Endpoints, fast_retry: Fast) -> None:
    endpoint = scripted_endpoint(echo)
    client = Client("m", base_url=endpoint.base_url, **fast_retry)
    await client.complete(USER)
    await client.aclose()
    await client.complete(USER)
    await client.aclose()
    assert client.requests == 2


def test_same_client_works_from_sync_code_and_another_loop(
    scripted_endpoint: Endpoints, fast_retry: Fast
) -> None:
    endpoint = scripted_endpoint(echo)
    client = Client("m", base_url=endpoint.base_url, **fast_retry)
    assert run_sync(client.complete(USER)).message.content.startswith("echo")

    async def once() -> str:
        async with client:  # a pool belongs to its loop: close it before asyncio.run ends the loop
            return (await client.complete(USER)).message.content

    assert asyncio.run(once()).startswith("echo")
    assert client.requests == 2


@pytest.mark.parametrize(
    "kwargs, error, fragment",
    [
        ({"model": ""}, ValueError, "model"),
        ({"max_concurrency": 0}, ValueError, "max_concurrency"),
        ({"max_retries": -1}, ValueError, "max_retries"),
        ({"timeout": 0}, ValueError, "timeout"),
        ({"sampling": ["temperature"]}, TypeError, "sampling"),
        ({"sampling": {"stream": True}}, ValueError, "stream"),
        ({"headers": {"X-A": 1}}, TypeError, "headers"),
    ],
)
def test_bad_construction_is_rejected_early(
    kwargs: dict[str, Any], error: type[Exception], fragment: str
) -> None:
    kwargs = {"model": "m", **kwargs}
    with pytest.raises(error, match=fragment):
        Client(**kwargs)


async def test_bad_messages_argument_is_rejected() -> None:
    client = Client("m", base_url="http://127.0.0.1:9/v1")
    with pytest.raises(TypeError, match="list of messages"):
        await client.complete("hello")  # type: ignore[arg-type]


def test_config_describes_the_client_without_secrets() -> None:
    client = Client(
        "m",
        base_url="http://127.0.0.1:9/v1/",
        api_key=KEY,
        max_retries=2,
        timeout=5,
        sampling={"temperature": 0.5},
        headers={"X-Org": "secret-org"},
    )
    assert client.config() == {
        "model": "m",
        "base_url": "http://127.0.0.1:9/v1",
        "sampling": {"temperature": 0.5},
        "max_retries": 2,
        "timeout": 5.0,
        "max_concurrency": 64,
        "headers": ["X-Org"],
        "transport": client.transport,  # the parametrized default: aiohttp or openai
        "return_token_ids": False,  # recorded, so a resumed run asks for ids as it did
    }


def test_parse_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after": "0.5"}) == 0.5
    assert parse_retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    now = time.time()
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert 28 <= parse_retry_after({"retry-after": date}, now=now) <= 31
    assert parse_retry_after({"retry-after": email.utils.formatdate(now - 30, usegmt=True)}, now=now) == 0.0
    assert parse_retry_after({"retry-after": "soon"}) is None
    assert parse_retry_after({}) is None and parse_retry_after(None) is None
