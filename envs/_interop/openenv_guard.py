"""Who may drive `rubric serve`, and for how long: ASGI wrappers around OpenEnv's app.

A browser lets any web page open a WebSocket to 127.0.0.1, and a DNS-rebinding page can even
send it requests addressed to its own name, so a server that runs code (the `python`
environment) must not answer them. As `rubric mcp --port` does through the MCP SDK's transport
security, every HTTP request and WebSocket is checked before OpenEnv sees it:
- **Host** must name this machine (127.0.0.1, localhost, [::1], or the address bound), else
  421; a server bound to every interface (0.0.0.0) is open to the network by choice, so any
  Host is accepted there.
- **Origin**, when a browser sends one, must be this server's own (http://, a loopback name,
  its port) or one given with `--allow-origin`, else 403; those given also receive CORS headers,
  so a page there can read the answers. Clients other than browsers send no Origin.

`IdleSessions` closes a WebSocket session whose client sent nothing for `idle_timeout` seconds
while the server waited for it (close code 1001, with the reason): its rollout is released and
its slot freed, so idle clients cannot hold every `--max-sessions` slot.
"""

from __future__ import annotations

import asyncio
import ipaddress
import urllib.parse
from collections.abc import Awaitable, Callable, MutableMapping, Sequence
from typing import Any

from harness._core.errors import ConfigError

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

WILDCARD_BINDS = ("0.0.0.0", "::", "")
IDLE_TIMEOUT = 300.0
"""Seconds a session's client may stay silent before the server closes the session."""
IDLE_CLOSE_CODE = 1001  # "going away"


def check_origin(origin: str) -> str:
    """An `--allow-origin` value as browsers send it (scheme://host[:port], lowercase), or ConfigError."""
    parts = urllib.parse.urlsplit(origin.strip().lower())
    try:
        port = parts.port
    except ValueError:
        port = -1
    if (
        parts.scheme not in ("http", "https")
        or not parts.hostname
        or parts.path not in ("", "/")
        or port == -1
    ):
        raise ConfigError(
            f"--allow-origin {origin!r} is not a web origin; give scheme://host[:port] as a browser sends it, "
            "e.g. http://127.0.0.1:3000 (no path, no wildcard)"
        )
    if parts.query or parts.fragment or parts.username or parts.password:
        raise ConfigError(f"--allow-origin {origin!r} has more than scheme://host[:port]; drop the rest")
    return f"{parts.scheme}://{parts.netloc}"


def _split_host(value: str) -> tuple[str, int | None]:
    """The name and port of a Host header or origin netloc ("[::1]:8000" -> ("::1", 8000))."""
    parts = urllib.parse.urlsplit(f"//{value}")
    try:
        return (parts.hostname or "", parts.port)
    except ValueError:
        return ("", None)


def _is_loopback(name: str) -> bool:
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class OriginGuard:
    """Answers 421 to a request whose Host does not name this machine and 403 to one from a
    browser page of a foreign origin, before the wrapped app sees either (HTTP and WebSocket)."""

    def __init__(self, app: ASGIApp, *, bind: str, allow_origins: Sequence[str] = ()) -> None:
        self.app = app
        self.allow_origins = frozenset(allow_origins)
        self.any_host = bind in WILDCARD_BINDS
        self.bind = bind.strip("[]").lower()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        host, origin = headers.get("host", ""), headers.get("origin")
        if not self._host_allowed(host):
            text = (
                f"Invalid Host header {host!r}: this server answers requests addressed to this machine "
                "(127.0.0.1, localhost); a web page that renamed it (DNS rebinding) may not drive it"
            )
            await _deny(scope, receive, send, 421, text)
        elif origin is not None and not self._origin_allowed(origin, host):
            text = (
                f"Invalid Origin header {origin!r}: web pages from other origins may not drive this server; "
                f"start it with --allow-origin {origin} to allow that page"
            )
            await _deny(scope, receive, send, 403, text)
        else:
            await self.app(scope, receive, send)

    def _host_allowed(self, host: str) -> bool:
        name, _ = _split_host(host)
        return self.any_host or _is_loopback(name) or (bool(name) and name == self.bind)

    def _origin_allowed(self, origin: str, host: str) -> bool:
        """This server's own origin (http, the port the request was sent to, the name it was sent to
        or a loopback name), or one allowed."""
        if origin.lower().rstrip("/") in self.allow_origins:
            return True
        parts = urllib.parse.urlsplit(origin.lower())
        name, port = _split_host(parts.netloc)
        host_name, host_port = _split_host(host.lower())
        if parts.scheme != "http" or not name or (port or 80) != (host_port or 80):
            return False
        return name == host_name or _is_loopback(name) or name == self.bind


async def _deny(scope: Scope, receive: Receive, send: Send, status: int, text: str) -> None:
    """Refuse a request with `status` and `text`; a WebSocket before its handshake completes
    (with that status where the server supports denial responses, else 403)."""
    if scope["type"] == "websocket" and "websocket.http.response" not in scope.get("extensions", {}):
        await send({"type": "websocket.close", "code": 1008, "reason": text[:120]})
        return
    body = text.encode()
    prefix = "websocket." if scope["type"] == "websocket" else ""
    headers = [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"x-content-type-options", b"nosniff"),  # the text quotes the request's headers
        (b"content-length", str(len(body)).encode()),
    ]
    await send({"type": f"{prefix}http.response.start", "status": status, "headers": headers})
    await send({"type": f"{prefix}http.response.body", "body": body})


class IdleSessions:
    """Closes a WebSocket whose client has sent nothing for `timeout` seconds while the server
    waited for it (time spent answering a request never counts)."""

    def __init__(self, app: ASGIApp, *, timeout: float) -> None:
        self.app = app
        self.timeout = timeout

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "websocket":
            await self.app(scope, receive, send)
            return
        accepted = idle = False
        reason = f"session idle for more than {self.timeout:g}s; open a new session"

        async def timed_receive() -> Message:
            nonlocal idle
            if not accepted or idle:
                return await receive()
            try:
                return await asyncio.wait_for(receive(), self.timeout)
            except TimeoutError:
                idle = True  # the app ends the session as if the client had left, and closes
                return {"type": "websocket.disconnect", "code": IDLE_CLOSE_CODE, "reason": reason}

        async def watched_send(message: Message) -> None:
            nonlocal accepted
            if message["type"] == "websocket.accept":
                accepted = True
            elif message["type"] == "websocket.close" and idle:
                message = {**message, "code": IDLE_CLOSE_CODE, "reason": reason}
            await send(message)

        await self.app(scope, timed_receive, watched_send)


def check_idle_timeout(value: object, spelled: str = "idle_timeout") -> float:
    """`idle_timeout` as seconds, or ConfigError naming the setting as the caller `spelled` it."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 86400:
        raise ConfigError(f"{spelled} must be a positive number of seconds up to 86400, got {value!r}")
    return float(value)


__all__ = [
    "IDLE_CLOSE_CODE",
    "IDLE_TIMEOUT",
    "IdleSessions",
    "OriginGuard",
    "check_idle_timeout",
    "check_origin",
]
