"""The client against endpoints that misbehave at the byte level: a slow drip, bad 200 bodies
(every test runs with both transports)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from harness import Client, EndpointError
from harness._endpoint.client import TRANSPORTS
from tests.helpers.endpoints import raw_server


@pytest.fixture(params=TRANSPORTS)
def transport(request: pytest.FixtureRequest) -> str:
    """Each test runs with each transport."""
    return str(request.param)


Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], "asyncio.Future[None] | object"]


def _client(url: str, transport: str, **kwargs: Any) -> Client:
    return Client(
        "m",
        base_url=url,
        api_key="sk-test",
        backoff_base=0.01,
        backoff_max=0.02,
        transport=transport,
        **kwargs,
    )


@pytest.mark.slow  # waits out a timeout
async def test_timeout_is_a_deadline_for_the_whole_request(transport: str) -> None:
    async with raw_server(drip=0.2) as (url, hits):
        client = _client(url, transport, timeout=1.0, max_retries=1)
        started = time.monotonic()
        with pytest.raises(EndpointError, match="no answer within the 1s timeout") as caught:
            await client.complete([{"role": "user", "content": "hi"}])
        elapsed = time.monotonic() - started
        await client.aclose()
    # The full body takes 60 s to drip; two 1 s deadlines (plus start-up on a busy machine) do not.
    assert elapsed < 7.0, f"a dripping server held the request for {elapsed:.1f}s"
    assert len(hits) == 2 and caught.value.attempts == 2  # timed out, retried once, timed out


@pytest.mark.parametrize(
    ("body", "problem"),
    [
        (b'{"choices": [{"message": {"role": "assis', "not valid JSON"),
        (b'{"choices": [{"message": {"role": "assistant", "content": "\xff\xfe"}}]}', "not valid UTF-8"),
    ],
)
async def test_a_bad_200_body_is_retried_then_named(body: bytes, problem: str, transport: str) -> None:
    async with raw_server(body) as (url, hits):
        client = _client(url, transport, max_retries=2)
        with pytest.raises(EndpointError) as caught:
            await client.complete([{"role": "user", "content": "hi"}])
        await client.aclose()
    message = str(caught.value)
    assert len(hits) == 3 and "after 3 attempts" in message  # retried like a transient fault
    assert url in message and "HTTP 200" in message and problem in message
    assert "JSONDecodeError" not in message and "sk-test" not in message


@pytest.mark.parametrize(
    ("body", "field"),
    [
        (b'{"choices": [{"message": null, "finish_reason": "stop"}]}', "choices[0].message"),
        (b'{"choices": [{"message": {"role": "assistant", "content": 5}}]}', "choices[0].message.content"),
        (
            b'{"choices": [{"message": {"role": "assistant", "tool_calls": "x"}}]}',
            "choices[0].message.tool_calls",
        ),
    ],
)
async def test_null_or_mistyped_message_fields_are_named(body: bytes, field: str, transport: str) -> None:
    async with raw_server(body) as (url, _):
        client = _client(url, transport, max_retries=0)
        with pytest.raises(EndpointError) as caught:
            await client.complete([{"role": "user", "content": "hi"}])
        await client.aclose()
    assert field in str(caught.value) and url in str(caught.value)
