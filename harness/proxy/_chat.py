"""The OpenAI Chat Completions dialect: the upstream's own format, passed through and recorded.

Requests keep their messages and function tools as sent; sampling arguments the upstream
takes pass on, provider hints are dropped (named on the turn), and anything else is refused.
A streamed answer is written as `chat.completion.chunk` events ending in `data: [DONE]`,
with a usage chunk when the agent asked for one (`stream_options.include_usage`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import ValidationError

from harness._core.types import Message
from harness.proxy._dialect import Call, Refusal, Reply, Translator, Untranslatable, require, sse

#: Sampling and format arguments forwarded to the upstream unchanged.
PASSED = frozenset(
    {
        "temperature", "top_p", "max_tokens", "max_completion_tokens", "stop", "seed",
        "presence_penalty", "frequency_penalty", "logit_bias", "tool_choice", "parallel_tool_calls",
        "response_format", "top_k", "min_p", "repetition_penalty", "logprobs", "top_logprobs",
        "reasoning_effort",
    }
)  # fmt: skip
#: Provider hints a Chat Completions upstream gains nothing from; dropped and recorded.
HINTS = frozenset(
    {"user", "metadata", "store", "service_tier", "prompt_cache_key", "safety_identifier", "prediction"}
)
#: What the request itself carries (read below, never forwarded as is).
OWN = frozenset({"model", "messages", "tools", "stream", "stream_options", "n", "functions", "function_call"})


def parse(body: Mapping[str, Any], policy: Untranslatable) -> Call:
    """A Chat Completions request body as a `Call`; a `Refusal` names what is wrong."""
    t = Translator("Chat Completions", policy)
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise Refusal(400, "'messages' is required: a non-empty list of message objects")
    messages = [_message(i, m) for i, m in enumerate(raw)]
    tools = _tools(body.get("tools"), t)
    require(
        body.get("n") in (None, 1), f"'n'={body.get('n')!r}: the proxy records one reply per call; send n=1"
    )
    params: dict[str, Any] = {}
    for key, value in body.items():
        if key in PASSED:
            params[key] = value
        elif key in HINTS:
            t.hint(key)
        elif key in ("functions", "function_call"):
            t.untranslatable(key, "the legacy function-calling fields; send 'tools' and 'tool_choice'")
        elif key not in OWN:
            raise Refusal(400, f"unsupported field {key!r} in a Chat Completions request; remove it")
    stream = bool(body.get("stream"))
    options = body.get("stream_options")
    include_usage = isinstance(options, Mapping) and bool(options.get("include_usage"))
    model = body.get("model")
    return Call(
        messages=messages,
        tools=tools,
        params=params,
        stream=stream,
        model=model if isinstance(model, str) else None,
        dropped=t.dropped,
        options={"include_usage": include_usage},
    )


def _message(index: int, raw: object) -> Message:
    require(isinstance(raw, Mapping), f"messages[{index}] must be an object, got {type(raw).__name__}")
    try:
        return Message.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise Refusal(400, f"messages[{index}].{where}: {first['msg']}") from None


def _tools(raw: object, t: Translator) -> list[dict[str, Any]] | None:
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise Refusal(400, "'tools' must be a list of tool objects")
    tools = []
    for index, tool in enumerate(raw):
        require(isinstance(tool, Mapping), f"tools[{index}] must be an object")
        if tool.get("type", "function") != "function":
            t.untranslatable(
                f"tools[{index}] of type {tool.get('type')!r}", "only function tools exist upstream"
            )
            continue
        function = tool.get("function")
        require(
            isinstance(function, Mapping) and isinstance(function.get("name"), str),
            f"tools[{index}].function.name is required",
        )
        tools.append(dict(tool))
    return tools or None


def _usage(reply: Reply) -> dict[str, int]:
    return {
        "prompt_tokens": reply.prompt_tokens,
        "completion_tokens": reply.completion_tokens,
        "total_tokens": reply.prompt_tokens + reply.completion_tokens,
    }


def render(reply: Reply, call: Call) -> dict[str, Any]:
    """The whole `chat.completion` object."""
    return {
        "id": reply.id,
        "object": "chat.completion",
        "created": reply.created,
        "model": reply.model,
        "choices": [
            {
                "index": 0,
                "message": reply.message.to_openai(),
                "finish_reason": reply.finish_reason,
                "logprobs": None,
            }
        ],
        "usage": _usage(reply),
    }


def render_stream(reply: Reply, call: Call) -> bytes:
    """The answer as `chat.completion.chunk` events: role and text, each tool call, the finish."""
    head = {"id": reply.id, "object": "chat.completion.chunk", "created": reply.created, "model": reply.model}
    message = reply.message

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        return sse(
            None,
            {**head, "choices": [{"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}]},
        )

    first: dict[str, Any] = {
        "role": "assistant",
        "content": message.text if message.content is not None else None,
    }
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str):
        first["reasoning_content"] = reasoning
    parts = [chunk(first)]
    for index, tool_call in enumerate(message.tool_calls or []):
        delta = {
            "index": index,
            "id": tool_call.id,
            "type": "function",
            "function": {"name": tool_call.name, "arguments": tool_call.arguments},
        }
        parts.append(chunk({"tool_calls": [delta]}))
    parts.append(chunk({}, reply.finish_reason))
    if call.options.get("include_usage"):
        parts.append(sse(None, {**head, "choices": [], "usage": _usage(reply)}))
    parts.append(b"data: [DONE]\n\n")
    return b"".join(parts)


def error(status: int, message: str, kind: str) -> dict[str, Any]:
    """An OpenAI-style error body."""
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


__all__ = ["HINTS", "PASSED", "error", "parse", "render", "render_stream"]
