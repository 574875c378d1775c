"""What the scripted endpoint answers: OpenAI chat completions from a policy, plus faults.

Kept apart from the HTTP plumbing (`scripted_http`) and the thread/process lifecycle
(`scripted`) so each can be read on its own. Faults are drawn from one seeded RNG with one
draw per request, so a given seed and request order always produce the same faults.
"""

from __future__ import annotations

import asyncio
import copy
import inspect
import json
import random
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from harness._core.aio import maybe_await
from harness.scripted._http import DROP, Request, Response
from harness.scripted._tokens import ASSISTANT_HEADER, add_token_ids, assistant_text, prompt_ids

Policy = Callable[..., Any]
"""`policy(messages, tools[, request_body]) -> str | dict` (sync or async)."""

FAULT_WORDS = ("drop", "hang", "malformed")
#: What training needs of an endpoint that the scripted endpoint can be told to get wrong, for
#: `rubric doctor`'s tests: tool calls come back as text; no token ids; prompt ids that re-render
#: the history (the prefix property breaks); `/tokenize` disagrees with the prompt ids; no
#: logprobs; no streaming; no model version (`system_fingerprint`); one request at a time.
BREAKABLE = ("tool_calls", "token_ids", "prefix", "template", "logprobs", "stream", "model_version", "concurrency")  # fmt: skip


class ScriptedHTTPError(Exception):
    """Raise from a policy to make the endpoint answer with this HTTP status and message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Faults:
    """Fault-injection knobs; validated up front so a typo fails at construction."""

    latency: float | tuple[float, float] = 0.0
    rate_429: float = 0.0
    rate_500: float = 0.0
    retry_after: float = 0.0
    rate_hang: float = 0.0
    hang_seconds: float = 30.0
    rate_malformed_tool_json: float = 0.0
    rate_drop: float = 0.0
    fail_first: int | Sequence[int | str] = ()
    broken: Sequence[str] = ()

    def __post_init__(self) -> None:
        unknown = sorted(set(self.broken) - set(BREAKABLE))
        if isinstance(self.broken, str) or unknown:
            raise ValueError(
                f"ScriptedEndpoint broken={self.broken!r}: give a list of properties from {', '.join(BREAKABLE)}"
            )
        for name in ("rate_429", "rate_500", "rate_hang", "rate_malformed_tool_json", "rate_drop"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
                raise ValueError(f"ScriptedEndpoint {name}={value!r}: a rate must be a number in [0, 1]")
        total = self.rate_drop + self.rate_hang + self.rate_429 + self.rate_500
        if total > 1.0 + 1e-9:
            raise ValueError(
                f"ScriptedEndpoint rate_drop + rate_hang + rate_429 + rate_500 = {total:g} > 1; "
                "they are exclusive outcomes of one request, lower them"
            )
        low, high = self.latency if isinstance(self.latency, tuple) else (self.latency, self.latency)
        if not 0.0 <= low <= high:
            raise ValueError(
                f"ScriptedEndpoint latency={self.latency!r}: give seconds >= 0 or a (low, high) range"
            )
        for name in ("retry_after", "hang_seconds"):
            if getattr(self, name) < 0:
                raise ValueError(f"ScriptedEndpoint {name}={getattr(self, name)!r} must be >= 0 seconds")
        if isinstance(self.fail_first, (bool, str)) or not isinstance(self.fail_first, (int, Sequence)):
            raise ValueError(
                "ScriptedEndpoint fail_first: give a count of 500s or a list of statuses/'drop'/'hang'"
            )
        if isinstance(self.fail_first, int):
            if self.fail_first < 0:
                raise ValueError(f"ScriptedEndpoint fail_first={self.fail_first} must be >= 0")
        else:
            for item in self.fail_first:
                if isinstance(item, str) and item in FAULT_WORDS:
                    continue
                if isinstance(item, int) and not isinstance(item, bool) and 400 <= item <= 599:
                    continue
                raise ValueError(
                    f"ScriptedEndpoint fail_first item {item!r}: use an HTTP status 400-599 "
                    f"or one of {', '.join(FAULT_WORDS)}"
                )

    def script(self) -> deque[int | str]:
        return deque([500] * self.fail_first if isinstance(self.fail_first, int) else list(self.fail_first))


@dataclass
class EndpointStats:
    """Counters for chat-completion requests; `bodies` only fills when recording is on."""

    requests: int = 0
    responses: dict[int, int] = field(default_factory=dict)
    dropped: int = 0
    hung: int = 0
    malformed: int = 0
    in_flight: int = 0
    max_in_flight: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    bodies: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> EndpointStats:
        data = dict(data)
        data["responses"] = {int(k): v for k, v in data.get("responses", {}).items()}
        return cls(**data)


def _policy_wants_body(policy: Policy) -> bool:
    try:
        params = list(inspect.signature(policy).parameters.values())
    except (TypeError, ValueError):
        return False
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return True
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    return len(positional) >= 3


def count_tokens(value: Any) -> int:
    """Whitespace token count of a message content (string or list of text parts)."""
    if value is None:
        return 0
    if isinstance(value, str):
        return len(value.split())
    if isinstance(value, list):
        return sum(len(str(p.get("text", "")).split()) for p in value if isinstance(p, dict))
    return len(str(value).split())


def _message_tokens(message: Mapping[str, Any]) -> int:
    calls = message.get("tool_calls") or []
    return count_tokens(message.get("content")) + sum(
        count_tokens((c.get("function") or {}).get("arguments")) for c in calls if isinstance(c, dict)
    )


def _error(status: int, message: str, kind: str = "scripted_error") -> Response:
    return Response(status, {"error": {"message": message, "type": kind, "code": status}})


class ScriptedApp:
    """Turns requests into responses; one instance per running server."""

    def __init__(self, policy: Policy, *, model: str, faults: Faults, seed: int, record: bool) -> None:
        if not callable(policy):
            raise TypeError(
                f"ScriptedEndpoint policy must be callable (messages, tools) -> str | dict, "
                f"got {type(policy).__name__}"
            )
        self.policy = policy
        self.model = model
        self.faults = faults
        self.seed = seed
        self.record = record
        self._wants_body = _policy_wants_body(policy)
        self._serial: asyncio.Lock | None = None
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        """Zero the stats and restart the fault script and RNG (same seed, same faults)."""
        with self._lock:
            self._stats = EndpointStats()
            self._rng = random.Random(self.seed)
            self._script = self.faults.script()
            self._counter = 0

    def stats(self) -> EndpointStats:
        """A consistent copy of the counters, safe to read from another thread."""
        with self._lock:
            return EndpointStats.from_dict(copy.deepcopy(self._stats.to_dict()))

    async def handle(self, request: Request) -> Response:
        path = request.path.rstrip("/")
        if path in ("/v1/chat/completions", "/chat/completions"):
            if request.method != "POST":
                return _error(405, f"{request.method} not allowed on {request.path}; use POST")
            return await self._chat(request)
        if path in ("/v1/models", "/models") and request.method == "GET":
            return Response(
                200,
                {
                    "object": "list",
                    "data": [
                        {"id": self.model, "object": "model", "created": 0, "owned_by": "rubric-scripted"}
                    ],
                },
            )
        if path in ("/tokenize", "/v1/tokenize") and request.method == "POST":
            return self._tokenize(request)
        if path == "/_scripted/stats" and request.method == "GET":
            return Response(200, self.stats().to_dict())
        if path == "/_scripted/reset" and request.method == "POST":
            self.reset()
            return Response(200, {"ok": True})
        return _error(
            404,
            f"no route {request.method} {request.path}; this scripted endpoint serves "
            "POST /v1/chat/completions, POST /tokenize and GET /v1/models",
            "not_found",
        )

    def _tokenize(self, request: Request) -> Response:
        """vLLM's `POST /tokenize` for chat messages: the prompt's ids under the chat template
        (with `template` broken: without the assistant header the prompt ids end with)."""
        try:
            body = request.json()
            messages = [m for m in body["messages"] if isinstance(m, Mapping)]
        except (ValueError, KeyError, TypeError):
            return _error(400, "send {'model': ..., 'messages': [...]}", "invalid_request_error")
        tokens = prompt_ids(messages)
        if "template" in self.faults.broken:
            tokens = tokens[: -len(ASSISTANT_HEADER)]
        return Response(200, {"tokens": tokens, "count": len(tokens), "max_model_len": 1 << 20})

    async def _chat(self, request: Request) -> Response:
        if "concurrency" in self.faults.broken:  # one request at a time: the rest queue
            if self._serial is None:
                self._serial = asyncio.Lock()
            async with self._serial:
                return await self._counted_chat(request)
        return await self._counted_chat(request)

    async def _counted_chat(self, request: Request) -> Response:
        with self._lock:
            stats = self._stats
            stats.requests += 1
            stats.in_flight += 1
            stats.max_in_flight = max(stats.max_in_flight, stats.in_flight)
            self._counter += 1
            number = self._counter
        response = DROP
        try:
            response = await self._answer(request, number)
            return response
        except Exception as exc:  # a bug here must still answer, not kill the connection
            response = _error(500, f"scripted endpoint failed: {type(exc).__name__}: {exc}")
            return response
        finally:
            with self._lock:
                stats.in_flight -= 1
                if response is DROP or request.client_gone or request.stopped:
                    stats.dropped += 1
                else:
                    stats.responses[response.status] = stats.responses.get(response.status, 0) + 1

    def _next_fault(self) -> int | str | None:
        with self._lock:
            if self._script:
                return self._script.popleft()
            f = self.faults
            draw = self._rng.random()
            for outcome, rate in (
                ("drop", f.rate_drop),
                ("hang", f.rate_hang),
                (429, f.rate_429),
                (500, f.rate_500),
            ):
                if draw < rate:
                    return outcome
                draw -= rate
            return None

    def _latency(self) -> float:
        latency = self.faults.latency
        if isinstance(latency, tuple):
            with self._lock:
                return self._rng.uniform(*latency)
        return latency

    async def _answer(self, request: Request, number: int) -> Response:
        """Validate the body, apply this request's fault, then ask the policy for the choices."""
        body = self._read_body(request)
        if isinstance(body, Response):
            return body
        fault = self._next_fault()
        faulted = await self._apply_fault(fault, request)
        if faulted is not None:
            return faulted
        choices = await self._choices(body, number)
        if isinstance(choices, Response):
            return choices
        if fault == "malformed" or (self.faults.rate_malformed_tool_json and self._draw_malformed()):
            self._corrupt(choices)
        return self._completion(body, choices, number)

    def _read_body(self, request: Request) -> dict[str, Any] | Response:
        """The request's JSON body, or the 400 that explains what is wrong with it."""
        try:
            body = request.json()
        except (ValueError, UnicodeDecodeError) as exc:
            return _error(400, f"request body is not valid JSON: {exc}", "invalid_request_error")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(
                400, "'messages' is required and must be a list of message objects", "invalid_request_error"
            )
        if self.record:
            with self._lock:
                self._stats.bodies.append(copy.deepcopy(body))
        if body.get("stream") and "stream" in self.faults.broken:
            return _error(
                400, "this scripted endpoint does not stream; send stream=false", "invalid_request_error"
            )
        n = body.get("n") or 1
        if not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 128:
            return _error(400, f"'n' must be an integer in [1, 128], got {n!r}", "invalid_request_error")
        return body

    async def _apply_fault(self, fault: int | str | None, request: Request) -> Response | None:
        """Wait out the latency, then the fault's response (DROP, 429, 5xx), or None to answer."""
        if await request.sleep(self._latency()):
            return DROP
        if fault == "drop":
            return DROP
        if fault == "hang":
            with self._lock:
                self._stats.hung += 1
            if await request.sleep(self.faults.hang_seconds):
                return DROP
        if fault == 429:
            response = _error(429, "scripted rate limit: slow down", "rate_limit_error")
            response.headers["Retry-After"] = f"{self.faults.retry_after:g}"
            return response
        if isinstance(fault, int):
            return _error(fault, f"scripted failure: HTTP {fault}")
        return None

    async def _choices(self, body: dict[str, Any], number: int) -> list[dict[str, Any]] | Response:
        """The policy's answers (`n` of them), or the error response a policy failure becomes."""
        choices: list[dict[str, Any]] = []
        for index in range(body.get("n") or 1):
            args: tuple[Any, ...] = (body["messages"], body.get("tools"))
            if self._wants_body:
                args = (*args, body)
            try:
                output = await maybe_await(self.policy(*args))
                choices.append(self._choice(index, output, body, number))
            except ScriptedHTTPError as exc:
                return _error(exc.status, exc.message)
            except Exception as exc:
                return _error(500, f"scripted policy raised {type(exc).__name__}: {exc}")
        return choices

    def _completion(self, body: dict[str, Any], choices: list[dict[str, Any]], number: int) -> Response:
        """The chat.completion response, with whitespace token counts as usage."""
        prompt_tokens = sum(_message_tokens(m) for m in body["messages"] if isinstance(m, dict))
        completion_tokens = sum(_message_tokens(c["message"]) for c in choices)
        with self._lock:
            self._stats.prompt_tokens += prompt_tokens
            self._stats.completion_tokens += completion_tokens
        payload = {
            "id": f"chatcmpl-scripted-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model") or self.model,
            "choices": choices,
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }
        broken = self.faults.broken
        if "model_version" not in broken:
            payload["system_fingerprint"] = "scripted"
        asked = dict(body)
        if "token_ids" in broken:
            asked.pop("return_token_ids", None)
        if "logprobs" in broken:
            asked.pop("logprobs", None)
        if asked.get("return_token_ids") or asked.get("logprobs"):
            # vLLM-style ids and logprobs from a toy tokenizer
            add_token_ids(payload, asked, faithful="prefix" not in broken)
        if body.get("stream"):
            return Response(200, raw=sse_chunks(payload), content_type="text/event-stream")
        return Response(200, payload)

    def _draw_malformed(self) -> bool:
        with self._lock:
            return self._rng.random() < self.faults.rate_malformed_tool_json

    def _corrupt(self, choices: list[dict[str, Any]]) -> None:
        """Cut every tool call's arguments in half so they are no longer valid JSON."""
        hit = False
        for choice in choices:
            for call in choice["message"].get("tool_calls") or []:
                text = call["function"]["arguments"]
                call["function"]["arguments"] = text[: max(1, len(text) // 2)] + '"'
                hit = True
        if hit:
            with self._lock:
                self._stats.malformed += 1

    def _choice(self, index: int, output: Any, body: Mapping[str, Any], number: int) -> dict[str, Any]:
        message, finish_reason = _assistant_message(output, f"call_{number}_{index}")
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        content = message.get("content")
        if isinstance(limit, int) and isinstance(content, str) and len(content.split()) > limit:
            message["content"] = " ".join(content.split()[:limit])
            finish_reason = "length"
        if message.get("tool_calls") and "tool_calls" in self.faults.broken:  # unparsed, as text
            message = {"role": "assistant", "content": assistant_text(message)}
        if finish_reason is None:
            finish_reason = "tool_calls" if message.get("tool_calls") else "stop"
        return {"index": index, "message": message, "finish_reason": finish_reason, "logprobs": None}


def _assistant_message(output: Any, id_prefix: str) -> tuple[dict[str, Any], str | None]:
    """Normalise a policy's return value into an OpenAI assistant message (+ finish_reason)."""
    if hasattr(output, "to_openai"):
        output = output.to_openai()
    if isinstance(output, str):
        return {"role": "assistant", "content": output}, None
    if not isinstance(output, Mapping):
        raise TypeError(f"policy returned {type(output).__name__}; return a str or an assistant message dict")
    message = dict(output)
    finish_reason = message.pop("finish_reason", None)
    message["role"] = "assistant"
    calls = message.get("tool_calls")
    if calls:
        message["tool_calls"] = [_tool_call(call, f"{id_prefix}_{i}") for i, call in enumerate(calls)]
        message.setdefault("content", None)
    else:
        message.pop("tool_calls", None)
        message.setdefault("content", "")
    return message, finish_reason


def _tool_call(call: Any, default_id: str) -> dict[str, Any]:
    if hasattr(call, "model_dump"):
        call = call.model_dump()
    if not isinstance(call, Mapping):
        raise TypeError(
            f"tool call {call!r} must be a dict like {{'function': {{'name': ..., 'arguments': ...}}}}"
        )
    function = dict(call.get("function") or {k: call[k] for k in ("name", "arguments") if k in call})
    if not function.get("name"):
        raise TypeError(f"tool call {dict(call)!r} has no function name")
    arguments = function.get("arguments", "{}")
    function["arguments"] = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {"id": call.get("id") or default_id, "type": call.get("type", "function"), "function": function}


def sse_chunks(completion: Mapping[str, Any]) -> bytes:
    """A chat completion as OpenAI's server-sent events: per choice a role chunk, a content (or
    tool calls) chunk and a finish chunk, then `data: [DONE]` (the whole stream in one body)."""
    base = {k: completion[k] for k in ("id", "created", "model") if k in completion}
    base["object"] = "chat.completion.chunk"
    if "system_fingerprint" in completion:
        base["system_fingerprint"] = completion["system_fingerprint"]
    events: list[dict[str, Any]] = []
    for choice in completion["choices"]:
        message, index = choice["message"], choice["index"]
        delta: dict[str, Any] = {"content": message.get("content") or ""}
        if message.get("tool_calls"):
            delta = {"tool_calls": [{"index": i, **call} for i, call in enumerate(message["tool_calls"])]}
        events += [
            {**base, "choices": [{"index": index, "delta": {"role": "assistant"}, "finish_reason": None}]},
            {**base, "choices": [{"index": index, "delta": delta, "finish_reason": None}]},
            {**base, "choices": [{"index": index, "delta": {}, "finish_reason": choice["finish_reason"]}]},
        ]
    lines = [f"data: {json.dumps(event, separators=(',', ':'))}\n\n" for event in events]
    return ("".join(lines) + "data: [DONE]\n\n").encode()
