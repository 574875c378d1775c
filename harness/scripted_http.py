"""A minimal HTTP/1.1 server on asyncio streams, just enough for an OpenAI-compatible API.

Why not `http.server` or a web framework: `http.server` is thread-per-connection and slow
under hundreds of concurrent keep-alive connections, and a framework would be a new
dependency. Benchmarks must measure the harness, not the server, so this speaks exactly the
subset the `openai` client uses: one request at a time per connection, keep-alive,
`Content-Length` (or chunked) request bodies, JSON responses with `Content-Length`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

MAX_HEADER_BYTES = 64 * 1024
MAX_BODY_BYTES = 64 * 1024 * 1024

REASONS = {
    200: "OK",
    400: "Bad Request",
    401: "Unauthorized",
    403: "Forbidden",
    404: "Not Found",
    405: "Method Not Allowed",
    408: "Request Timeout",
    413: "Payload Too Large",
    422: "Unprocessable Entity",
    429: "Too Many Requests",
    500: "Internal Server Error",
    502: "Bad Gateway",
    503: "Service Unavailable",
    504: "Gateway Timeout",
}


class HTTPProtocolError(Exception):
    """The peer sent something that is not HTTP/1.1 we understand; answered with a 400."""


@dataclass
class Request:
    """One parsed HTTP request."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    keep_alive: bool = True
    reader: asyncio.StreamReader | None = field(default=None, repr=False)
    client_gone: bool = False

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    async def sleep(self, seconds: float) -> bool:
        """Sleep like `asyncio.sleep`, but wake early if the client hangs up (a timed-out
        client must not pin a server task for the whole hang). True if the client left.

        Watching the socket reads ahead; fine because the openai client never pipelines.
        """
        if seconds <= 0:
            return self.client_gone
        if self.reader is None or self.client_gone:
            await asyncio.sleep(seconds)
            return self.client_gone
        watcher = asyncio.ensure_future(self.reader.read(1))
        try:
            done, _ = await asyncio.wait({watcher}, timeout=seconds)
        finally:
            if not watcher.done():
                watcher.cancel()
                # Let the cancelled read finish before anyone reads this stream again: a
                # pending read would make the next `readuntil` fail ("another coroutine is
                # already waiting for incoming data") and drop the keep-alive connection.
                await asyncio.gather(watcher, return_exceptions=True)
        if watcher in done:
            watcher.exception()  # a reset counts as gone too; mark the exception retrieved
            self.client_gone = True
        return self.client_gone


@dataclass
class Response:
    """A response to write; `DROP` (below) means close the connection without answering."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)

    def encode(self, keep_alive: bool) -> bytes:
        payload = b"" if self.body is None else json.dumps(self.body, separators=(",", ":")).encode()
        lines = [
            f"HTTP/1.1 {self.status} {REASONS.get(self.status, 'Status')}",
            "Content-Type: application/json",
            f"Content-Length: {len(payload)}",
            f"Connection: {'keep-alive' if keep_alive else 'close'}",
        ]
        lines.extend(f"{name}: {value}" for name, value in self.headers.items())
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + payload


DROP = Response(status=0)
"""Returned by a handler to drop the connection without a response (fault injection)."""

Handler = Callable[[Request], Awaitable[Response]]


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    parts: list[bytes] = []
    total = 0
    while True:
        size_line = await reader.readuntil(b"\r\n")
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError as exc:
            raise HTTPProtocolError(f"bad chunk size line {size_line!r}") from exc
        if size == 0:
            trailer = await reader.readuntil(b"\r\n")
            while trailer != b"\r\n":  # skip trailers up to the blank line
                trailer = await reader.readuntil(b"\r\n")
            return b"".join(parts)
        total += size
        if total > MAX_BODY_BYTES:
            raise HTTPProtocolError("request body too large")
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


async def read_request(reader: asyncio.StreamReader) -> Request | None:
    """Read one request; None when the client closed the connection cleanly between requests."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial.strip():
            return None
        raise HTTPProtocolError("connection closed in the middle of a request head") from exc
    except asyncio.LimitOverrunError as exc:
        raise HTTPProtocolError("request head too large") from exc
    lines = head.decode("latin-1").split("\r\n")
    try:
        method, target, version = lines[0].split(" ", 2)
    except ValueError as exc:
        raise HTTPProtocolError(f"bad request line {lines[0]!r}") from exc
    headers: dict[str, str] = {}
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep:
            raise HTTPProtocolError(f"bad header line {line!r}")
        headers[name.strip().lower()] = value.strip()
    if headers.get("transfer-encoding", "").lower() == "chunked":
        body = await _read_chunked(reader)
    else:
        try:
            length = int(headers.get("content-length", "0"))
        except ValueError as exc:
            raise HTTPProtocolError("bad Content-Length") from exc
        if length > MAX_BODY_BYTES:
            raise HTTPProtocolError("request body too large")
        body = await reader.readexactly(length) if length else b""
    connection = headers.get("connection", "").lower()
    keep_alive = connection != "close" if version.strip() == "HTTP/1.1" else connection == "keep-alive"
    return Request(
        method=method.upper(), path=target.split("?", 1)[0], headers=headers, body=body, keep_alive=keep_alive
    )


async def serve_connection(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, handler: Handler
) -> None:
    """Answer requests on one connection until the client closes it or asks us to."""
    try:
        while True:
            try:
                request = await read_request(reader)
            except HTTPProtocolError as exc:
                writer.write(
                    Response(400, {"error": {"message": str(exc), "type": "invalid_request_error"}}).encode(
                        keep_alive=False
                    )
                )
                await writer.drain()
                return
            if request is None:
                return
            request.reader = reader
            response = await handler(request)
            if response is DROP or request.client_gone:
                writer.transport.abort()
                return
            writer.write(response.encode(keep_alive=request.keep_alive))
            await writer.drain()
            if not request.keep_alive:
                return
    except (ConnectionError, asyncio.IncompleteReadError):
        return
    finally:
        if not writer.transport.is_closing():
            writer.close()
