"""The scripted endpoint's HTTP layer: a minimal ASGI app served by uvicorn.

`ScriptedApp` (in `scripted_app`) turns a `Request` into a `Response` and knows nothing of
HTTP framing; this module adapts it to ASGI and builds the uvicorn server that speaks
HTTP/1.1 (httptools and uvloop when they are installed, else h11 and asyncio). Two things
an ordinary app never does need care here, because fault injection is the point:

- `DROP` closes the connection without a complete answer. ASGI has no "abort", so the
  app starts a response and raises `Dropped`; uvicorn then closes the transport, and the
  client sees a connection error. The log filter below keeps those deliberate drops out of
  the server's error log.
- `Request.sleep` (latency, hangs) wakes early when the client hangs up or the server is
  stopping, so a timed-out client never pins a server task for the whole hang.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import socket
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass, field
from typing import Any

import uvicorn

MAX_BODY_BYTES = 64 * 1024 * 1024
KEEP_ALIVE_SECONDS = 300.0
"""Idle keep-alive connections stay open this long (uvicorn's default of 5 s would make a
benchmark's pool reconnect between rounds)."""

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


@dataclass
class Request:
    """One HTTP request, body read in full."""

    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    receive: Receive | None = field(default=None, repr=False)
    closing: asyncio.Event | None = field(default=None, repr=False)
    client_gone: bool = False
    stopped: bool = False
    _watcher: asyncio.Future[Message] | None = field(default=None, repr=False)

    def json(self) -> Any:
        return json.loads(self.body) if self.body else None

    async def sleep(self, seconds: float) -> bool:
        """Sleep like `asyncio.sleep`, but wake early if the client hangs up or the server
        stops. True if the request should end unanswered (the client left, or shutdown)."""
        if seconds <= 0 or self.client_gone or self.stopped:
            return self.client_gone or self.stopped
        if self.receive is None or self.closing is None:
            await asyncio.sleep(seconds)
            return False
        if self._watcher is None:  # after the body, ASGI's receive() only returns on disconnect
            self._watcher = asyncio.ensure_future(self.receive())
        stopping: asyncio.Future[Any] = asyncio.ensure_future(self.closing.wait())
        waits: set[asyncio.Future[Any]] = {self._watcher, stopping}
        try:
            await asyncio.wait(waits, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            if not stopping.done():
                stopping.cancel()
        self.client_gone = self._watcher.done()
        self.stopped = self.closing.is_set()
        return self.client_gone or self.stopped

    def finish(self) -> None:
        """Stop watching for a disconnect once the request is answered."""
        if self._watcher is not None and not self._watcher.done():
            self._watcher.cancel()


@dataclass
class Response:
    """A response to send: JSON `body`, or `raw` bytes of `content_type` (server-sent events);
    `DROP` (below) means close the connection unanswered."""

    status: int
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: bytes | None = None
    content_type: str = "application/json"

    def encode(self) -> bytes:
        if self.raw is not None:
            return self.raw
        return b"" if self.body is None else json.dumps(self.body, separators=(",", ":")).encode()


DROP = Response(status=0)
"""Returned by a handler to drop the connection without a response (fault injection)."""

Handler = Callable[[Request], Awaitable[Response]]


class Dropped(Exception):
    """Raised inside the ASGI app to make uvicorn close the connection (see the module doc)."""


class _QuietDrops(logging.Filter):
    """Drop uvicorn's error records for deliberate `Dropped` connections; keep all others."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (record.exc_info and isinstance(record.exc_info[1], Dropped))


_FILTER = _QuietDrops()


class ScriptedASGI:
    """Adapts a `Handler` to ASGI 3; `closing` is set when the server starts shutting down."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.closing = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":  # lifespan is off; websockets are not served
            return
        body = await _read_body(receive)
        if body is None:
            await _send(send, _too_large())
            return
        request = Request(
            method=scope["method"].upper(),
            path=scope["path"],
            headers={k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]},
            body=body,
            receive=receive,
            closing=self.closing,
        )
        try:
            response = await self.handler(request)
        finally:
            request.finish()
        if request.client_gone:
            return  # nobody to answer; uvicorn knows the client left and logs nothing
        if response is DROP or request.stopped:
            # Promise a body, then fail: uvicorn closes the transport mid-response.
            await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"1")]})
            raise Dropped
        await _send(send, response)


async def _read_body(receive: Receive) -> bytes | None:
    """The whole request body, or None when it exceeds MAX_BODY_BYTES."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return b"".join(parts)
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY_BYTES:
            return None
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


def _too_large() -> Response:
    message = f"request body larger than {MAX_BODY_BYTES} bytes"
    return Response(413, {"error": {"message": message, "type": "invalid_request_error", "code": 413}})


async def _send(send: Send, response: Response) -> None:
    payload = response.encode()
    headers = [
        (b"content-type", response.content_type.encode("latin-1")),
        (b"content-length", str(len(payload)).encode()),
    ]
    headers.extend(
        (name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in response.headers.items()
    )
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


class ScriptedServer(uvicorn.Server):
    """uvicorn's server, waking the app's sleeping requests as soon as shutdown begins."""

    def __init__(self, app: ScriptedASGI, *, install_signal_handlers: bool) -> None:
        config = uvicorn.Config(
            app,
            lifespan="off",
            log_config=None,
            log_level="warning",
            access_log=False,
            server_header=False,
            timeout_keep_alive=int(KEEP_ALIVE_SECONDS),
            timeout_graceful_shutdown=5,
        )
        super().__init__(config)
        self.scripted_app = app
        self.install_signals = install_signal_handlers

    def capture_signals(self) -> Any:
        """In a child process the parent's SIGTERM must simply end it; only the foreground
        `rubric endpoint` turns Ctrl-C into a graceful shutdown."""
        if self.install_signals:
            return super().capture_signals()
        return contextlib.nullcontext()

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        self.scripted_app.closing.set()
        await super().shutdown(sockets)


def listening_socket(host: str, port: int, backlog: int) -> socket.socket:
    """A bound, listening TCP socket: the port is known (and a bind error raised) before any
    server task or child process starts."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # Accepted sockets inherit this: headers and body go out as two writes, and with
        # Nagle's algorithm the second waits for a delayed ACK (~40 ms per response).
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        sock.listen(backlog)
        sock.set_inheritable(True)
    except BaseException:
        sock.close()
        raise
    return sock


def new_event_loop() -> asyncio.AbstractEventLoop:
    """uvloop's event loop when it is installed (what uvicorn itself would pick), else asyncio's."""
    try:
        import uvloop
    except ImportError:
        return asyncio.new_event_loop()
    return uvloop.new_event_loop()


logging.getLogger("uvicorn.error").addFilter(_FILTER)

__all__ = [
    "DROP",
    "Dropped",
    "Handler",
    "Request",
    "Response",
    "ScriptedASGI",
    "ScriptedServer",
    "listening_socket",
    "new_event_loop",
]
