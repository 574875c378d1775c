"""How a chat-completions request reaches the endpoint: the lean aiohttp transport, or the SDK.

`Client` builds the request body and reads the answer as plain JSON; a transport only moves
bytes. Two kinds exist:
- `AiohttpTransport` (the default): one `aiohttp.ClientSession` per event loop, a keep-alive
  pool as large as the concurrency limit, the body encoded with `json.dumps` and the answer
  decoded with `json.loads`. No SDK objects are built, which is where the SDK spends most of
  a completion's CPU (see benchmarks/bench_harness.py).
- `SDKTransport`: the same request through `openai.AsyncOpenAI` (`transport="openai"`, or a
  client the user configured, e.g. for Azure): its HTTP stack, headers and auth, with the raw
  answer decoded as the same JSON (the SDK's response objects are never built).

Both raise the same three errors, so the retry policy (`harness._endpoint.retry`) and the error text
never depend on which one ran: `HTTPStatusError` (an HTTP answer of 400 or above, with the
server's body and headers), `TransportConnectionError` (no answer: refused, reset, dropped)
and `TransportTimeout`.
"""

from __future__ import annotations

import functools
import inspect
import io
import json
from collections.abc import Mapping
from typing import Any, Protocol

import aiohttp

#: An answer larger than this is refused (a runaway or hostile server), not read into memory.
MAX_BODY_BYTES = 64 * 1024 * 1024
#: Request bodies larger than this are sent in chunks (aiohttp's own threshold for a warning).
LARGE_REQUEST_BYTES = 1024 * 1024


class TransportError(Exception):
    """A request that got no usable HTTP answer, or an answer of 400 or above."""


class HTTPStatusError(TransportError):
    """The endpoint answered with an error status; `body` is its parsed JSON (or text)."""

    def __init__(self, status: int, body: object, headers: Mapping[str, str]) -> None:
        self.status_code = status
        self.body = body
        self.headers = headers
        super().__init__(f"HTTP {status}")


class TransportConnectionError(TransportError):
    """No answer: the connection was refused, reset or closed before a response."""


class TransportTimeout(TransportError):
    """No whole answer within the client's timeout."""


class Transport(Protocol):
    """Sends one chat-completions request body and returns the endpoint's JSON answer."""

    name: str

    async def chat(self, body: dict[str, Any]) -> Any: ...

    async def aclose(self) -> None: ...


def error_body(raw: bytes) -> object:
    """An error answer's body: OpenAI-style `{"error": {...}}` unwrapped, else the JSON or text."""
    try:
        body = json.loads(raw)
    except ValueError:
        return raw[:2000].decode("utf-8", "replace")
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return body["error"]
    return body


class AiohttpTransport:
    """POSTs JSON to `{base_url}/chat/completions` over one aiohttp session (one event loop)."""

    name = "aiohttp"

    def __init__(
        self,
        base_url: str,
        api_key: str,
        headers: Mapping[str, str],
        *,
        max_connections: int,
        timeout: float,
        max_body_bytes: int = MAX_BODY_BYTES,
    ) -> None:
        self._url = f"{base_url}/chat/completions"
        self._max_body_bytes = max_body_bytes
        connector = aiohttp.TCPConnector(limit=max_connections, limit_per_host=max_connections)
        self._session = aiohttp.ClientSession(
            connector=connector,
            headers={
                "Authorization": f"Bearer {api_key}",
                "Content-Type": "application/json",
                "Accept": "application/json",
                **headers,
            },
            # Per socket read/connect; Client puts a deadline on the whole request.
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=timeout, sock_read=timeout),
        )

    async def chat(self, body: dict[str, Any]) -> Any:
        data = json.dumps(body, ensure_ascii=False).encode("utf-8")
        # aiohttp writes bytes in one go and warns past 1 MiB; a BytesIO goes out in chunks,
        # yielding to the loop between them (a long conversation, an agent's big request).
        payload: bytes | io.BytesIO = data if len(data) <= LARGE_REQUEST_BYTES else io.BytesIO(data)
        try:
            async with self._session.post(self._url, data=payload) as response:
                raw = await _read_capped(response, self._max_body_bytes)
                status, headers = response.status, response.headers
        except aiohttp.ServerTimeoutError as exc:
            raise TransportTimeout(str(exc)) from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise TransportConnectionError(f"{type(exc).__name__}: {exc}") from exc
        if status >= 400:
            raise HTTPStatusError(status, error_body(raw), {k.lower(): v for k, v in headers.items()})
        return json.loads(raw)  # ValueError (bad JSON, bad UTF-8): the Client names it

    async def aclose(self) -> None:
        await self._session.close()


async def _read_capped(response: aiohttp.ClientResponse, limit: int) -> bytes:
    """The whole body, refused (ValueError) as soon as it exceeds `limit` bytes."""
    if response.content_length is not None:
        if response.content_length > limit:
            raise _too_big(response.content_length, limit)
        return await response.read()
    chunks, size = [], 0
    async for chunk in response.content.iter_any():
        size += len(chunk)
        if size > limit:
            raise _too_big(size, limit)
        chunks.append(chunk)
    return b"".join(chunks)


def _too_big(size: int, limit: int) -> ValueError:
    return ValueError(f"the answer is {size:,} bytes, more than the {limit:,}-byte limit")


class SDKTransport:
    """The request through an `openai.AsyncOpenAI` client, its answer as the same JSON.

    `owned` says whether closing the transport closes the SDK client (False for a client the
    user passed in: it is theirs).
    """

    name = "openai"

    def __init__(self, sdk: Any, *, owned: bool, max_body_bytes: int = MAX_BODY_BYTES) -> None:
        import openai  # deferred: the SDK is heavy and the default transport never needs it

        self._openai = openai
        self._sdk = sdk
        self._owned = owned
        self._max_body_bytes = max_body_bytes

    async def chat(self, body: dict[str, Any]) -> Any:
        arguments = dict(body)
        known = _create_parameters()
        extra = {k: arguments.pop(k) for k in list(arguments) if k not in known}
        if extra:
            arguments["extra_body"] = extra
        openai = self._openai
        try:
            # The raw answer: the SDK's HTTP stack, retries off, but not its response objects.
            raw = await self._sdk.chat.completions.with_raw_response.create(**arguments)
        except openai.APITimeoutError as exc:
            raise TransportTimeout(str(exc)) from exc
        except openai.APIConnectionError as exc:
            cause = exc.__cause__ or exc.__context__ or exc
            raise TransportConnectionError(f"{type(cause).__name__}: {cause}") from exc
        except openai.APIStatusError as exc:
            body = exc.body if exc.body is not None else exc.message
            headers = {k.lower(): v for k, v in exc.response.headers.items()}
            raise HTTPStatusError(exc.status_code, body, headers) from exc
        content = raw.content
        if len(content) > self._max_body_bytes:
            raise _too_big(len(content), self._max_body_bytes)
        return json.loads(content)  # ValueError (bad JSON, bad UTF-8): the Client names it

    async def aclose(self) -> None:
        if self._owned:
            await self._sdk.close()


@functools.cache
def _create_parameters() -> frozenset[str]:
    """Keyword arguments `chat.completions.create` accepts in the installed SDK version."""
    from openai.resources.chat.completions import AsyncCompletions  # deferred as in __init__

    return frozenset(inspect.signature(AsyncCompletions.create).parameters) - {"self"}


__all__ = [
    "MAX_BODY_BYTES",
    "AiohttpTransport",
    "HTTPStatusError",
    "SDKTransport",
    "Transport",
    "TransportConnectionError",
    "TransportError",
    "TransportTimeout",
]
