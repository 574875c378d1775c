"""`CaptureProxy`: the aiohttp server sandboxed agents call instead of a model provider.

One server per run, listening on Unix sockets (what a sandbox reaches: one listener per
sandbox, added with `alisten_unix` and removed with `aclose_unix` when the sandbox goes) and
optionally on 127.0.0.1. Each rollout opens a `ProxySession` with its own secret key, and
may bind it to its sandbox's listener (a key that arrives on another listener is refused, so a
key that leaks from one sandbox is no use in another) and give it its own upstream client and
sampling (the run's by default). A request carries the key as `Authorization: Bearer KEY`
(OpenAI clients) or `x-api-key: KEY` (Anthropic clients), and a request with no key or another
run's is refused with 401. A closed session is forgotten by the server (its record stays with
whoever holds it), so a run of thousands of rollouts keeps only the sessions in flight. A call
then goes:

    authenticate -> read the dialect's request -> check the model name and the budgets
    -> forward to the run's Chat Completions endpoint (`harness.Client`: its transport,
       retries and token ids) under the run's concurrency limit -> record the turn
    -> answer in the agent's dialect, whole or as its server-sent events

Dialects by path (a `/v1` prefix and a query string such as Claude Code's `?beta=true` are
accepted): `/chat/completions` (OpenAI Chat Completions), `/responses` (OpenAI Responses),
`/messages` (Anthropic Messages); `GET /models` lists the served model. The upstream is
always asked for a whole answer; a streaming agent gets it as its dialect's events.

Rules:
- Model names: the served model (`client.model`) and the names in `model_aliases` are
  accepted and all mean the served model (`"*"` accepts any name); any other name is refused
  with 404, as providers answer an unknown model.
- Sampling: the run's `sampling` (or the session's) overrides what the agent asks for, key by key.
- Budgets (`ProxyBudgets`: model calls, tokens, wall clock) are taken as a call arrives, before
  its body is read (`harness.proxy._session` says what counts): the call that finds one spent
  is refused with 400 naming it, and the session stops with that reason (`max_turns`,
  `max_tokens`, `timeout`); a call still arriving or waiting on the engine when the clock runs
  out ends the same way.
- Request bodies over `ProxyBudgets.max_request_bytes` (32 MiB by default) are refused with 413
  (`request_too_large`) by their declared length or as they arrive, never held whole. A call
  that fails keeps its size, its first KiB and why, not its messages.
- History: an assistant turn in the conversation that this proxy never gave in the session
  (compared as `harness.proxy._provenance` says) is marked on the record, `"forged": true`,
  and the call served; `forged_history="refuse"` refuses such a call with 400.
- Untranslatable content (a non-function tool, an input item with no Chat Completions form):
  400 by default; with `untranslatable="drop"` it is left out. Either way it is on the turn.
- Malformed JSON, an unknown path, an unsupported field: 4xx to the agent, recorded.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
import uuid
from collections.abc import Callable, Collection, Mapping
from contextlib import nullcontext
from dataclasses import dataclass
from types import TracebackType
from typing import Any

from aiohttp import web

from harness._core.aio import run_sync
from harness._core.errors import ConfigError, EndpointError
from harness._core.types import FunctionCall, Message, ModelCall, ToolCall
from harness._endpoint.client import Client, Completion, check_sampling, is_context_length_error
from harness._endpoint.wire import REJECTED_STATUSES
from harness.proxy import _anthropic as anthropic
from harness.proxy import _chat as chat
from harness.proxy import _responses as responses
from harness.proxy._dialect import DEFAULT_UNTRANSLATABLE, Call, Refusal, Reply, Untranslatable
from harness.proxy._provenance import DEFAULT_FORGED_HISTORY, ForgedHistory, describe, mark_forged
from harness.proxy._session import ProxyBudgets, ProxySession, new_sessions_name

SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
#: How much of a failed call's body its record keeps.
HEAD_BYTES = 1024


@dataclass(frozen=True)
class _Route:
    """Where a session's calls go and where they may come from."""

    session: ProxySession
    client: Client
    sampling: dict[str, Any]
    listener: str | None  # the Unix socket its calls must arrive on (None: any)


@dataclass(frozen=True)
class Dialect:
    """How one wire format reads a request and writes an answer or an error."""

    name: str
    parse: Callable[[Mapping[str, Any], Untranslatable], Call]
    render: Callable[[Reply, Call], dict[str, Any]]
    render_stream: Callable[[Reply, Call], bytes]
    error: Callable[[int, str, str], dict[str, Any]]


DIALECTS: dict[str, Dialect] = {
    "/chat/completions": Dialect("chat", chat.parse, chat.render, chat.render_stream, chat.error),
    "/messages": Dialect(
        "messages", anthropic.parse, anthropic.render, anthropic.render_stream, anthropic.error
    ),
    "/responses": Dialect(
        "responses", responses.parse, responses.render, responses.render_stream, responses.error
    ),
}


class CaptureProxy:
    """A model-call capture proxy for one run: agents' calls in, the run's endpoint out.

    Args:
        client: The run's upstream Chat Completions endpoint (its model is the served one).
            Ask it for token ids (`Client(..., return_token_ids=True)`) to record them. It
            stays the caller's: closing the proxy does not close it.
        sampling: Sampling arguments forced on every call, over what the agent asks.
        budgets: Each session's default limits (`open_session` may give others).
        max_concurrency: Most calls waiting on the upstream at once, across all sessions
            (None: only the client's own limit).
        model_aliases: Other model names that mean the served model ("*": any name).
        untranslatable: "error" (refuse content with no Chat Completions form) or "drop"
            (leave it out, recorded on the turn).
        forged_history: What to do with a call whose history holds an assistant turn this
            proxy never gave in the session (the agent wrote it): "mark" it on the record
            (`"forged": true` on the message, its position in `ModelCall.forged`) and serve
            the call, or "refuse" the call with 400.
    """

    def __init__(
        self,
        client: Client,
        *,
        sampling: Mapping[str, Any] | None = None,
        budgets: ProxyBudgets | None = None,
        max_concurrency: int | None = None,
        model_aliases: Collection[str] = (),
        untranslatable: Untranslatable = DEFAULT_UNTRANSLATABLE,
        forged_history: ForgedHistory = DEFAULT_FORGED_HISTORY,
    ) -> None:
        if untranslatable not in ("error", "drop"):
            raise ConfigError(f"CaptureProxy untranslatable={untranslatable!r} must be 'error' or 'drop'")
        if forged_history not in ("mark", "refuse"):
            raise ConfigError(f"CaptureProxy forged_history={forged_history!r} must be 'mark' or 'refuse'")
        if max_concurrency is not None and (
            isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or max_concurrency < 1
        ):
            raise ConfigError(
                f"CaptureProxy max_concurrency={max_concurrency!r} must be an integer >= 1 or None"
            )
        if isinstance(model_aliases, str):
            raise ConfigError(
                "CaptureProxy model_aliases takes a list of names, e.g. ['gpt-5', 'claude-sonnet']"
            )
        check_sampling(sampling or {}, "CaptureProxy sampling")
        self.client = client
        self.sampling = dict(sampling or {})
        self.budgets = budgets or ProxyBudgets()
        self.max_concurrency = max_concurrency
        self.model_aliases = frozenset(model_aliases)
        self.untranslatable: Untranslatable = untranslatable
        self.forged_history: ForgedHistory = forged_history
        self.sessions: dict[str, ProxySession] = {}
        self._by_key: dict[str, _Route] = {}
        self._semaphore: asyncio.Semaphore | None = None
        self._runner: web.AppRunner | None = None
        self._unix_sites: dict[str, web.UnixSite] = {}
        self.socket_paths: list[str] = []
        self.port: int | None = None

    def __repr__(self) -> str:
        where = [*self.socket_paths, *([f"127.0.0.1:{self.port}"] if self.port is not None else [])]
        return f"CaptureProxy(model={self.client.model!r}, listening={where}, sessions={len(self.sessions)})"

    # -- lifecycle -------------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT` when listening on loopback (agents add `/v1` themselves
        or not, per their dialect); a Unix-socket agent uses any host with the socket."""
        if self.port is None:
            raise ConfigError(
                "this CaptureProxy listens on no TCP port; start it with port=0 (any free port)"
            )
        return f"http://127.0.0.1:{self.port}"

    async def astart(
        self, *, socket_path: str | os.PathLike[str] | None = None, port: int | None = None
    ) -> CaptureProxy:
        """Start serving on a Unix socket, on 127.0.0.1:`port` (0 picks a free one), both, or
        (neither given) on nothing yet: each sandbox's socket is added with `alisten_unix`."""
        if self._runner is None:
            app = web.Application()  # bodies are read by `_receive`, under each session's cap
            app.router.add_route("*", "/{tail:.*}", self._handle)
            # Closing waits this long for calls still in flight (their agents are gone by then).
            self._runner = web.AppRunner(app, access_log=None, handle_signals=False, shutdown_timeout=5.0)
            await self._runner.setup()
            if self.max_concurrency is not None:
                self._semaphore = asyncio.Semaphore(self.max_concurrency)
        if socket_path is not None:
            await self.alisten_unix(socket_path)
        if port is not None:
            site = web.TCPSite(self._runner, "127.0.0.1", port)
            await site.start()
            server = site._server
            sockets = getattr(server, "sockets", None) or []
            self.port = sockets[0].getsockname()[1] if sockets else port
        return self

    def start(
        self, *, socket_path: str | os.PathLike[str] | None = None, port: int | None = None
    ) -> CaptureProxy:
        """`astart` from synchronous code (the server then runs on rubric's background loop)."""
        return run_sync(self.astart(socket_path=socket_path, port=port))

    async def alisten_unix(self, socket_path: str | os.PathLike[str]) -> str:
        """Also serve on another Unix socket (one per sandbox); its path."""
        if self._runner is None:
            raise ConfigError("start the CaptureProxy before adding sockets (await proxy.astart(...))")
        path = os.fspath(socket_path)
        if path in self._unix_sites:
            raise ConfigError(f"this CaptureProxy already listens on {path}")
        site = web.UnixSite(self._runner, path)
        await site.start()
        self._unix_sites[path] = site
        self.socket_paths.append(path)
        return path

    async def aclose_unix(self, socket_path: str | os.PathLike[str]) -> None:
        """Stop serving on one Unix socket (its sandbox is done) and remove its file; the
        sessions bound to it are closed. Safe to call for a socket already closed."""
        path = os.fspath(socket_path)
        site = self._unix_sites.pop(path, None)
        for route in [r for r in self._by_key.values() if r.listener == path]:
            self.close_session(route.session)
        if site is None:
            return
        await site.stop()
        self.socket_paths.remove(path)
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass

    def listen_unix(self, socket_path: str | os.PathLike[str]) -> str:
        """`alisten_unix` from synchronous code (for a proxy started with `start`)."""
        return run_sync(self.alisten_unix(socket_path))

    async def aclose(self) -> None:
        """Stop serving, remove the socket files, and end every session."""
        runner, self._runner = self._runner, None
        self._unix_sites.clear()
        if runner is not None:
            await runner.cleanup()
        for path in self.socket_paths:
            try:
                os.unlink(path)
            except FileNotFoundError:
                pass
        self.socket_paths = []
        self.port = None
        for session in self.sessions.values():
            session.stop(session.stop_reason or "closed")
        self._by_key.clear()

    def close(self) -> None:
        """`aclose` from synchronous code."""
        run_sync(self.aclose())

    async def __aenter__(self) -> CaptureProxy:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- sessions --------------------------------------------------------------------------

    def open_session(
        self,
        name: str | None = None,
        *,
        budgets: ProxyBudgets | None = None,
        client: Client | None = None,
        sampling: Mapping[str, Any] | None = None,
        socket_path: str | os.PathLike[str] | None = None,
    ) -> ProxySession:
        """A new session (one per rollout) with its own secret key; `session.key` is what the
        agent sends as its API key.

        Args:
            name: The session's name (default `s{N}`); unique among the open sessions.
            budgets: Its limits (default: the proxy's `budgets`).
            client: Its upstream endpoint (default: the proxy's `client`); its model is the
                one served to this session.
            sampling: Sampling forced on its calls (default: the proxy's `sampling`).
            socket_path: A Unix socket of this proxy (`alisten_unix`) that its calls must
                arrive on: its sandbox's. The key is refused on any other listener.

        Raises:
            ConfigError: The name is taken, the sampling is not valid, or the socket is not
                one this proxy listens on.
        """
        listener = os.fspath(socket_path) if socket_path is not None else None
        if listener is not None and listener not in self._unix_sites:
            raise ConfigError(
                f"open_session socket_path={listener!r} is not a socket this CaptureProxy listens on; "
                "add it first with alisten_unix"
            )
        if sampling is not None:
            check_sampling(sampling, "CaptureProxy session sampling")
        session = ProxySession(new_sessions_name(self.sessions, name), budgets or self.budgets)
        self.sessions[session.name] = session
        forced = self.sampling if sampling is None else dict(sampling)
        self._by_key[session.key] = _Route(session, client or self.client, forced, listener)
        return session

    def close_session(self, session: ProxySession) -> None:
        """Revoke the session's key and forget it (its record stays readable on `session`)."""
        self._by_key.pop(session.key, None)
        if self.sessions.get(session.name) is session:
            del self.sessions[session.name]
        session.stop(session.stop_reason or "closed")

    # -- one request -----------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        clock = _CPUClock()
        route = self._route_of(request)
        path = _route(request.path)
        dialect = DIALECTS.get(path)
        if route is None:
            return _json(
                401, _error_dialect(request, dialect).error(401, _UNAUTHORIZED, "authentication_error")
            )
        session = route.session
        if path == "/models" and request.method == "GET":
            return _json(200, self._models(route.client, anthropic="anthropic-version" in request.headers))
        turn = session.begin(dialect.name if dialect else "unknown")
        turn.request_bytes = request.content_length or 0
        started = time.perf_counter()
        spent = session.reserve()  # before any await: calls sent at once cannot pass a budget together
        deadline = asyncio.timeout(session.remaining_seconds())  # reading, queueing, the engine
        try:
            if spent is not None:
                raise _budget_refusal(session, spent)
            async with deadline:
                response = await self._serve(request, route, dialect, turn, clock)
        except Refusal as refusal:
            response = _refused(request, dialect, turn, refusal)
        except Exception as exc:
            if isinstance(exc, TimeoutError) and deadline.expired():  # the session's time is up
                session.stop("timeout")
                failure = _budget_refusal(session, "timeout")
            else:  # a bug here: answered and recorded, never a dropped connection
                failure = Refusal(500, f"the proxy failed: {type(exc).__name__}: {exc}", "api_error")
            response = _refused(request, dialect, turn, failure)
        turn.timing["total"] = time.perf_counter() - started
        turn.timing["proxy_cpu"] = clock.stop()
        session.finish(turn, reserved=spent is None)
        return response

    async def _serve(
        self,
        request: web.Request,
        route: _Route,
        dialect: Dialect | None,
        turn: ModelCall,
        clock: _CPUClock,
    ) -> web.Response:
        """Read the call, check its history, forward it, record the turn, answer in the dialect;
        a call that fails keeps the first KiB of its body."""
        if dialect is None or request.method != "POST":
            raise Refusal(404, _no_route(request), "not_found_error")
        session = route.session
        raw = await _receive(request, turn, session.budgets.max_request_bytes)
        head = raw[:HEAD_BYTES]
        try:
            call = self._read(raw, dialect, turn, route.client.model)
            del raw  # the call holds what it needs; not the bytes too, while the engine works
            if call.previous_response_id is not None:
                call.messages = turn.messages = _continued(session, call)
            forged = session.replies.forged(call.messages)
            if forged and self.forged_history == "refuse":
                raise _forged_refusal(call.messages, forged[0])
            reply = await self._forward(route, call, turn, clock)
            if forged:  # marked on the record only: the engine was sent what the agent sent
                turn.messages, turn.forged = mark_forged(call.messages, forged), forged
            if dialect.name == "responses":  # what a later call's previous_response_id continues
                own = call.messages[1:] if _has_instructions(call) else call.messages
                session.responses[f"resp_{reply.id}"] = [*own, reply.message]
            response = self._answer(dialect, call, reply)
        except BaseException:
            turn.request_head = _text(head)
            raise
        turn.status = response.status
        return response

    def _route_of(self, request: web.Request) -> _Route | None:
        """The session the request's key opens, if it arrived where that session may be reached."""
        key = request.headers.get("x-api-key")
        if key is None:
            auth = request.headers.get("Authorization", "")
            key = auth[7:] if auth[:7].lower() == "bearer " else None
        route = self._by_key.get(key) if key else None
        if route is not None and route.listener is not None:
            transport = request.transport
            where = transport.get_extra_info("sockname") if transport is not None else None
            if where != route.listener:  # another sandbox's socket, or loopback
                return None
        return route

    def _models(self, client: Client, *, anthropic: bool) -> dict[str, Any]:
        """The served model and its aliases, listed in the OpenAI or the Anthropic shape."""
        names = [client.model, *sorted(self.model_aliases - {"*", client.model})]
        if anthropic:
            data = [
                {"type": "model", "id": n, "display_name": n, "created_at": "1970-01-01T00:00:00Z"}
                for n in names
            ]
            return {"data": data, "has_more": False, "first_id": names[0], "last_id": names[-1]}
        return {
            "object": "list",
            "data": [{"id": n, "object": "model", "created": 0, "owned_by": "rubric"} for n in names],
        }

    def _read(self, raw: bytes, dialect: Dialect, turn: ModelCall, served: str) -> Call:
        """The request body as a Call, the model name checked against the `served` one; the
        turn notes what it asked."""
        try:
            body = json.loads(raw)
        except ValueError as exc:
            raise Refusal(400, f"the request body is not valid JSON ({exc}); send a JSON object") from None
        if not isinstance(body, dict):
            raise Refusal(400, f"the request body must be a JSON object, got {type(body).__name__}")
        call = dialect.parse(body, self.untranslatable)
        turn.model, turn.stream, turn.dropped = call.model, call.stream, call.dropped
        turn.messages, turn.tools = call.messages, call.tools or []
        if (
            call.model is not None
            and call.model != served
            and call.model not in self.model_aliases
            and "*" not in self.model_aliases
        ):
            raise Refusal(
                404,
                f"model {call.model!r} is not served here; this proxy serves {served!r}"
                + (f" (also as {sorted(self.model_aliases)})" if self.model_aliases else ""),
                "not_found_error",
            )
        return call

    async def _forward(self, route: _Route, call: Call, turn: ModelCall, clock: _CPUClock) -> Reply:
        """The upstream's answer to `call`, under the run's concurrency limit; a completion
        limit the call carries is lowered to the session's tokens left."""
        params = {**call.params, **route.sampling}
        left = route.session.tokens_left()
        if left is not None:
            for key in ("max_tokens", "max_completion_tokens"):
                asked = params.get(key)
                if isinstance(asked, int) and not isinstance(asked, bool) and asked > left:
                    params[key] = left
        turn.params = params
        clock.pause()  # the upstream's time is the transport's, measured apart
        t0 = time.perf_counter()
        try:
            async with self._semaphore or nullcontext():
                completion = await route.client.complete(call.messages, tools=call.tools, **params)
        except EndpointError as exc:
            raise _upstream_refusal(exc) from None
        finally:
            turn.timing["upstream"] = time.perf_counter() - t0
            clock.resume()
        return self._reply(completion, call, turn, route.client.model)

    def _reply(self, completion: Completion, call: Call, turn: ModelCall, served: str) -> Reply:
        message = _with_call_ids(completion.message)
        turn.reply, turn.finish_reason, turn.usage = message, completion.finish_reason, completion.usage
        turn.tokens = completion.turn_tokens(turn.index)
        turn.served_by = completion.served_by
        return Reply(
            message=message,
            finish_reason=completion.finish_reason,
            prompt_tokens=completion.usage.prompt_tokens,
            completion_tokens=completion.usage.completion_tokens,
            id=uuid.uuid4().hex,
            model=call.model or served,
            created=int(time.time()),
        )

    def _answer(self, dialect: Dialect, call: Call, reply: Reply) -> web.Response:
        if not call.stream:
            return _json(200, dialect.render(reply, call))
        # The whole answer is known (the upstream was asked for it whole), so its events go out
        # as one body: one write instead of one per event, and clients read SSE alike.
        return web.Response(status=200, body=dialect.render_stream(reply, call), headers=SSE_HEADERS)


class _CPUClock:
    """This thread's CPU time over the proxy's own steps, paused while awaiting the upstream
    (other requests run on the loop meanwhile; their CPU is theirs)."""

    __slots__ = ("mark", "spent")

    def __init__(self) -> None:
        self.spent = 0.0
        self.mark: float | None = time.thread_time()

    def pause(self) -> None:
        if self.mark is not None:
            self.spent += time.thread_time() - self.mark
            self.mark = None

    def resume(self) -> None:
        self.mark = time.thread_time()

    def stop(self) -> float:
        self.pause()
        return self.spent


_UNAUTHORIZED = (
    "no valid proxy key: send the session's key as the API key (Authorization: Bearer KEY or x-api-key: KEY)"
)


def _route(path: str) -> str:
    path = path.rstrip("/")
    return path[3:] if path.startswith("/v1/") else path


def _no_route(request: web.Request) -> str:
    return (
        f"no route {request.method} {request.path}; this proxy serves POST /v1/chat/completions "
        "(OpenAI Chat Completions), POST /v1/responses (OpenAI Responses), POST /v1/messages "
        "(Anthropic Messages) and GET /v1/models"
    )


def _error_dialect(request: web.Request, dialect: Dialect | None) -> Dialect:
    """The dialect to answer an error in: the path's, else Anthropic's for an Anthropic-style key header."""
    if dialect is not None:
        return dialect
    fallback = DIALECTS.get("/messages") if "x-api-key" in request.headers else None
    return fallback or DIALECTS["/chat/completions"]


def _refused(
    request: web.Request, dialect: Dialect | None, turn: ModelCall, refusal: Refusal
) -> web.Response:
    """The refusal recorded on the turn (its size, the start of its body and why; never its
    messages), and answered in the agent's dialect."""
    turn.status, turn.error = refusal.status, refusal.message
    turn.messages, turn.tools = [], []
    body = _error_dialect(request, dialect).error(refusal.status, refusal.message, refusal.kind)
    return _json(refusal.status, body)


def _has_instructions(call: Call) -> bool:
    """Whether a Responses call's first message came from its `instructions`."""
    return "instructions" in call.options.get("request", {})


def _continued(session: ProxySession, call: Call) -> list[Message]:
    """A Responses call's messages after the conversation of the response it continues (its
    input and output; instructions are the new call's own, as in the API)."""
    previous = call.previous_response_id
    earlier = session.responses.get(previous or "")
    if earlier is None:
        known = ", ".join(list(session.responses)[-3:]) or "none yet"
        raise Refusal(
            400,
            f"previous_response_id {previous!r} is not a response of this session (latest: {known}); "
            "continue one this proxy returned to this session, or send the whole conversation as input",
        )
    if _has_instructions(call):
        return [call.messages[0], *earlier, *call.messages[1:]]
    return [*earlier, *call.messages]


async def _receive(request: web.Request, turn: ModelCall, limit: int | None) -> bytes:
    """The request body, refused with 413 as soon as it is known to pass `limit` bytes (by its
    declared length, unread; or as it arrives); the turn notes its size and its first KiB."""
    declared = request.content_length
    if limit is not None and declared is not None and declared > limit:
        raise _too_large(f"{declared:,} bytes", limit)
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_any():
        size += len(chunk)
        chunks.append(chunk)
        if limit is not None and size > limit:
            turn.request_bytes = size
            turn.request_head = _text(chunks[0])  # a socket read: a KiB unless the sender dribbles
            raise _too_large(f"more than {limit:,} bytes", limit)
    if size != turn.request_bytes:
        turn.request_bytes = size
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def _text(head: bytes) -> str:
    """Up to a KiB of a body's start as the record keeps it: text, a character cut in two left out."""
    return head[:HEAD_BYTES].decode("utf-8", "ignore")


def _too_large(size: str, limit: int) -> Refusal:
    return Refusal(
        413,
        f"the request body ({size}) is over this proxy's limit of {limit:,} bytes (max_request_bytes); "
        "send a shorter conversation (leave out old tool output or images)",
        "request_too_large",
    )


def _forged_refusal(messages: list[Message], position: int) -> Refusal:
    return Refusal(
        400,
        f"message {position} of the conversation is an assistant turn this proxy never answered in "
        f"this session ({describe(messages[position])}); send back the replies as they were given "
        "(this proxy refuses invented assistant turns: forged_history='refuse')",
    )


def _upstream_refusal(exc: EndpointError) -> Refusal:
    """An upstream failure as the agent should read it: a request the engine rejected (too
    long for the context, a field it will not take) is a 400 the agent can act on; anything
    else (outage, timeouts, a key or model the run got wrong) is the model's failure, 502."""
    if is_context_length_error(exc) or exc.status in REJECTED_STATUSES or exc.status == 413:
        return Refusal(400, f"the model endpoint rejected the request: {exc}")
    return Refusal(502, f"the model endpoint failed: {exc}", "api_error")


def _budget_refusal(session: ProxySession, reason: str) -> Refusal:
    b = session.budgets
    if reason == "max_turns":
        limit = f"its budget of {b.max_turns} model calls is spent"
    elif reason == "max_tokens":
        limit = f"its budget of {b.max_tokens} tokens is spent"
    elif reason == "timeout" and b.max_seconds is not None:
        limit = f"its budget of {b.max_seconds:g} seconds is spent"
    else:
        limit = "the session was ended"
    return Refusal(400, f"the episode is over ({reason}: {limit}); stop and exit")


def _with_call_ids(message: Message) -> Message:
    """The reply with an id on every tool call (agents match results to calls by id)."""
    calls = message.tool_calls
    if not calls or all(c.id for c in calls):
        return message
    fixed = [
        c
        if c.id
        else ToolCall(
            id=f"call_{uuid.uuid4().hex[:24]}", function=FunctionCall(name=c.name, arguments=c.arguments)
        )
        for c in calls
    ]
    return message.model_copy(update={"tool_calls": fixed})


def _json(status: int, body: dict[str, Any]) -> web.Response:
    return web.Response(
        status=status, body=json.dumps(body, ensure_ascii=False).encode(), content_type="application/json"
    )


__all__ = ["DIALECTS", "CaptureProxy", "Dialect"]
