"""Every request to a foreign OpenEnv server under one total deadline and one size cap.

A server we did not write may answer slowly on purpose (one byte every few seconds keeps a
per-read timeout happy forever) or without end, so each request here (an HTTP `GET /schema`
or `/health`, a session's connect, reset, step or close) is bounded as a whole: the deadline
covers connecting, sending and reading every byte, and an answer or message larger than
`MAX_RESPONSE_BYTES` is refused rather than read into memory.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import aiohttp

from harness._core.aio import run_sync
from harness._core.errors import RubricError

T = TypeVar("T")

REQUEST_TIMEOUT = 10.0
"""Seconds one HTTP request to a server (`/schema`, `/health`) may take, all of it."""
MAX_RESPONSE_BYTES = 32 * 2**20
"""The largest HTTP answer or WebSocket message (an observation) read from a server."""


class RequestFailed(RubricError):
    """A request to an OpenEnv server got no whole answer: refused, over its deadline, or too large."""


class ResponseTooLarge(RequestFailed):
    """An answer larger than `MAX_RESPONSE_BYTES`."""


@dataclass(frozen=True)
class HTTPAnswer:
    """An HTTP answer: its status and its whole body."""

    status: int
    body: bytes


async def aget(url: str, *, timeout: float = REQUEST_TIMEOUT) -> HTTPAnswer:
    """`GET url`, all of it within `timeout` seconds and `MAX_RESPONSE_BYTES`.

    Raises:
        RequestFailed: Nothing answers, the answer is not whole within the deadline, or it is too large.
    """
    try:
        async with asyncio.timeout(timeout):
            async with aiohttp.ClientSession() as session, session.get(url) as response:
                return HTTPAnswer(response.status, await _body(response))
    except TimeoutError:
        raise RequestFailed(f"no whole answer within {timeout:g}s") from None
    except aiohttp.ClientError as exc:
        raise RequestFailed(str(exc) or type(exc).__name__) from None


def get(url: str, *, timeout: float = REQUEST_TIMEOUT) -> HTTPAnswer:
    """`aget`, from synchronous code (also inside a running event loop)."""
    return run_sync(aget(url, timeout=timeout))


async def _body(response: aiohttp.ClientResponse) -> bytes:
    cap = MAX_RESPONSE_BYTES
    if (response.content_length or 0) > cap:
        raise ResponseTooLarge(f"the answer is {response.content_length:,} bytes, more than the {cap:,} read")
    body = bytearray()
    async for chunk in response.content.iter_any():
        body += chunk
        if len(body) > cap:
            raise ResponseTooLarge(f"the answer is more than the {cap:,} bytes read")
    return bytes(body)


def session_client(client_class: Callable[..., Any], base_url: str, *, timeout: float) -> Any:
    """OpenEnv's client for one session (`GenericEnvClient`), its messages capped at `MAX_RESPONSE_BYTES`."""
    return client_class(
        base_url=base_url,
        connect_timeout_s=min(REQUEST_TIMEOUT, timeout),
        message_timeout_s=timeout,
        max_message_size_mb=MAX_RESPONSE_BYTES / 2**20,
    )


async def exchange(request: Callable[[], Awaitable[T]], *, timeout: float) -> T:
    """One session request (connect, reset, step, close) with `timeout` seconds for all of it.

    Raises:
        TimeoutError: The request did not finish in time.
    """
    async with asyncio.timeout(timeout):
        return await request()


__all__ = [
    "MAX_RESPONSE_BYTES",
    "REQUEST_TIMEOUT",
    "HTTPAnswer",
    "RequestFailed",
    "ResponseTooLarge",
    "aget",
    "exchange",
    "get",
    "session_client",
]
