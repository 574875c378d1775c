"""Endpoints on 127.0.0.1: a free port, a deliberately broken HTTP server, and the scripted
endpoint with a real harness Client pointed at it."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from typing import Any

from harness import Client, ScriptedEndpoint


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now (another process may take it before
    the caller binds it: use it at once)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def _read_request(reader: asyncio.StreamReader) -> None:
    head = await reader.readuntil(b"\r\n\r\n")
    length = next(
        (
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        ),
        0,
    )
    await reader.readexactly(length)


def _head(length: int) -> bytes:
    return (
        b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
        + f"content-length: {length}\r\n\r\n".encode()
    )


@contextlib.asynccontextmanager
async def raw_server(
    body: bytes | None = None, *, drip: float | None = None
) -> AsyncIterator[tuple[str, list[int]]]:
    """A deliberately broken HTTP/1.1 endpoint on 127.0.0.1 (the real scripted endpoint never
    sends bytes this wrong): answers every request with `body`, or drips a valid body."""
    hits: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                await _read_request(reader)
                hits.append(1)
                if drip is None:
                    writer.write(_head(len(body or b"")) + (body or b""))
                    await writer.drain()
                    continue
                payload = (
                    b'{"choices": [{"message": {"role": "assistant", "content": "' + b"x" * 200 + b'"}}]}'
                )
                writer.write(_head(len(payload)))
                for byte in payload:
                    writer.write(bytes([byte]))
                    await writer.drain()
                    await asyncio.sleep(drip)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the client hung up, or the server is shutting down
        finally:
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1", hits
    finally:
        server.close()
        with contextlib.suppress(Exception):
            await asyncio.wait_for(server.wait_closed(), 2)


@contextlib.asynccontextmanager
async def serve(
    policy: Any,
    *,
    max_retries: int = 2,
    max_concurrency: int = 64,
    timeout: float = 20.0,
    **endpoint_kwargs: Any,
) -> AsyncIterator[tuple[Any, Any]]:
    """A scripted endpoint on 127.0.0.1 and a real harness Client (near-instant retry backoff)
    pointed at it."""
    with ScriptedEndpoint(policy, **endpoint_kwargs) as endpoint:
        async with Client(
            "scripted",
            base_url=endpoint.base_url,
            max_retries=max_retries,
            max_concurrency=max_concurrency,
            timeout=timeout,
            backoff_base=0.005,
            backoff_max=0.02,
        ) as client:
            yield endpoint, client
