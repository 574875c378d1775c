"""The OpenAI Responses dialect (Codex's), to and from Chat Completions.

Request: `instructions` becomes a leading system message; `input` (a string, or items) becomes
chat messages: `message` items keep their role (`developer` too) with their text and image
parts; a run of `function_call` items (after an assistant `message`, if any) becomes one
assistant message with tool calls; `function_call_output` a tool message; a `reasoning` item
the next assistant message's `reasoning_content`. Function tools become chat function tools;
`tool_choice`, `max_output_tokens`, `temperature`, `top_p`, `parallel_tool_calls` and
`text.format` (JSON schema) map to their chat forms. Tools that are not functions (Codex's
`web_search`, `namespace`, custom tools, ...) and items with no chat form are untranslatable;
`previous_response_id` continues a response of the same session: the server puts that
response's conversation (its input and output, not its instructions) before the new input.

Answer: a `response` object whose `output` holds a `reasoning` item (when the engine gave
reasoning text), a `message` item with one `output_text` part, and a `function_call` item per
tool call; `status` is `incomplete` (reason `max_output_tokens` or `content_filter`) when the
engine stopped for length or a filter. Streamed, as the API's own events, each with its
`sequence_number`: `response.created`, `response.in_progress`, then per item
`response.output_item.added`, its parts and deltas, `response.output_item.done`, and last
`response.completed` (or `response.incomplete`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from harness._core.types import FunctionCall, Message, Role, ToolCall
from harness.proxy._dialect import (
    Call,
    Refusal,
    Reply,
    Translator,
    Untranslatable,
    array,
    function_tool,
    obj,
    require,
    sse,
    string,
)

PASSED = {"temperature": "temperature", "top_p": "top_p", "max_output_tokens": "max_tokens", "parallel_tool_calls": "parallel_tool_calls", "top_logprobs": "top_logprobs"}  # fmt: skip
HINTS = frozenset(
    {
        "store", "include", "prompt_cache_key", "reasoning", "metadata", "service_tier", "user",
        "safety_identifier", "truncation", "stream_options", "prompt_cache_retention",
        "client_metadata",  # Codex 0.169 sends its own ids here
    }
)  # fmt: skip
OWN = frozenset({"model", "input", "instructions", "tools", "tool_choice", "stream", "text"})
ROLES: dict[object, Role] = {
    "user": "user",
    "assistant": "assistant",
    "system": "system",
    "developer": "developer",
}
TEXT_PARTS = frozenset({"input_text", "output_text", "text", "summary_text", "reasoning_text"})


def parse(body: Mapping[str, Any], policy: Untranslatable) -> Call:
    """A Responses request body as a `Call`; a `Refusal` names what is wrong."""
    t = Translator("Responses", policy)
    previous = body.get("previous_response_id")
    require(previous is None or isinstance(previous, str), "'previous_response_id' must be a string")
    if body.get("background"):
        raise Refusal(400, "background=true: this proxy answers in the request; leave it out")
    messages: list[Message] = []
    instructions = body.get("instructions")
    if instructions is not None:
        require(isinstance(instructions, str), "'instructions' must be a string")
        messages.append(Message(role="system", content=instructions))
    messages += _input(body.get("input"), t)
    require(bool(messages), "'input' is required: a string or a list of input items")
    params: dict[str, Any] = {}
    for key, value in body.items():
        if key in PASSED:
            params[PASSED[key]] = value
        elif key in HINTS:
            t.hint(key)
        elif key not in OWN and key not in ("previous_response_id", "background"):
            raise Refusal(400, f"unsupported field {key!r} in a Responses request; remove it")
    tools = _tools(body.get("tools"), t)
    if body.get("tool_choice") is not None:
        params["tool_choice"] = _tool_choice(body["tool_choice"])
    _text_format(body.get("text"), params, t)
    model = body.get("model")
    return Call(
        messages=messages,
        tools=tools,
        params=params,
        stream=bool(body.get("stream")),
        model=model if isinstance(model, str) else None,
        dropped=t.dropped,
        options={"request": {k: body[k] for k in ("instructions", "tool_choice", "tools") if k in body}},
        previous_response_id=previous,
    )


def _input(raw: object, t: Translator) -> list[Message]:
    if isinstance(raw, str):
        return [Message(role="user", content=raw)]
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise Refusal(400, "'input' must be a string or a list of input items")
    messages: list[Message] = []
    reasoning: str | None = None
    for index, item in enumerate(raw):
        where = f"input[{index}]"
        require(isinstance(item, Mapping), f"{where} must be an object")
        kind = item.get("type", "message")
        if kind == "message":
            message = _message(item, where, t)
            if message.role == "assistant" and reasoning is not None:
                message = message.model_copy(update={"reasoning_content": reasoning})
                reasoning = None
            messages.append(message)
        elif kind == "function_call":
            call = _function_call(item, where)
            last = messages[-1] if messages else None
            if last is not None and last.role == "assistant":  # one assistant turn: its text, then its calls
                messages[-1] = last.model_copy(update={"tool_calls": [*(last.tool_calls or []), call]})
            else:
                extra = {"reasoning_content": reasoning} if reasoning is not None else {}
                messages.append(Message(role="assistant", content=None, tool_calls=[call], **extra))
                reasoning = None
        elif kind == "function_call_output":
            call_id = item.get("call_id")
            require(isinstance(call_id, str) and bool(call_id), f"{where}.call_id is required")
            messages.append(
                Message(role="tool", tool_call_id=call_id, content=_output_text(item.get("output"), where, t))
            )
        elif kind == "reasoning":
            reasoning = _reasoning_text(item) or reasoning
            if item.get("encrypted_content"):
                t.hint("reasoning.encrypted_content")
        else:
            t.untranslatable(
                f"{where} of type {kind!r}", "Chat Completions has messages, tool calls and tool outputs only"
            )
    return messages


def _message(item: Mapping[str, Any], where: str, t: Translator) -> Message:
    role = item.get("role")
    if role not in ROLES:
        raise Refusal(400, f"{where}.role must be user, assistant, system or developer, got {role!r}")
    role = ROLES[role]
    content = item.get("content")
    if isinstance(content, str):
        return Message(role=role, content=content)
    parts: list[dict[str, Any]] = []
    for index, part in enumerate(array(content, f"{where}.content")):
        here = f"{where}.content[{index}]"
        require(isinstance(part, Mapping), f"{here} must be an object")
        kind = part.get("type")
        if kind in TEXT_PARTS:
            require(isinstance(part.get("text"), str), f"{here}.text must be a string")
            parts.append({"type": "text", "text": part["text"]})
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            image: dict[str, Any] = {"url": part["image_url"]}
            if part.get("detail") in ("low", "high", "auto"):
                image["detail"] = part["detail"]
            parts.append({"type": "image_url", "image_url": image})
        elif kind == "refusal" and isinstance(part.get("refusal"), str):
            parts.append({"type": "text", "text": part["refusal"]})
        else:
            t.untranslatable(
                f"{here} of type {kind!r}", "only text and image URLs have a Chat Completions form"
            )
    if role == "assistant" or all(p["type"] == "text" for p in parts):
        return Message(role=role, content="".join(p.get("text", "") for p in parts))
    return Message(role=role, content=parts)


def _function_call(item: Mapping[str, Any], where: str) -> ToolCall:
    name, call_id = string(item.get("name"), f"{where}.name"), string(item.get("call_id"), f"{where}.call_id")
    arguments = item.get("arguments", "")
    require(isinstance(arguments, str), f"{where}.arguments must be a JSON string")
    return ToolCall(id=call_id, function=FunctionCall(name=name, arguments=arguments))


def _output_text(output: object, where: str, t: Translator) -> str:
    if isinstance(output, str):
        return output
    texts = []
    for index, part in enumerate(array(output, f"{where}.output")):
        if isinstance(part, Mapping) and part.get("type") in TEXT_PARTS and isinstance(part.get("text"), str):
            texts.append(part["text"])
        else:
            kind = part.get("type") if isinstance(part, Mapping) else type(part).__name__
            t.untranslatable(f"{where}.output[{index}] of type {kind!r}", "a tool message holds text only")
    return "".join(texts)


def _reasoning_text(item: Mapping[str, Any]) -> str | None:
    texts = [
        p["text"]
        for key in ("content", "summary")
        for p in item.get(key) or []
        if isinstance(p, Mapping) and isinstance(p.get("text"), str)
    ]
    return "\n".join(texts) if texts else None


def _tools(raw: object, t: Translator) -> list[dict[str, Any]] | None:
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise Refusal(400, "'tools' must be a list of tool objects")
    tools = []
    for index, tool in enumerate(raw):
        require(isinstance(tool, Mapping), f"tools[{index}] must be an object")
        if tool.get("type") != "function":
            name = f" {tool['name']!r}" if isinstance(tool.get("name"), str) else ""
            t.untranslatable(
                f"tools[{index}] ({tool.get('type')}{name})", "only function tools exist upstream"
            )
            continue
        tools.append(
            function_tool(
                tool.get("name"), tool.get("description"), tool.get("parameters"), f"tools[{index}]"
            )
        )
    return tools or None


def _tool_choice(choice: object) -> object:
    if choice in ("auto", "none", "required"):
        return choice
    if (
        isinstance(choice, Mapping)
        and choice.get("type") == "function"
        and isinstance(choice.get("name"), str)
    ):
        return {"type": "function", "function": {"name": choice["name"]}}
    raise Refusal(
        400, f"tool_choice={choice!r}: use 'auto', 'none', 'required' or {{'type': 'function', 'name': ...}}"
    )


def _text_format(text: object, params: dict[str, Any], t: Translator) -> None:
    if text is None:
        return
    for key, value in obj(text, "'text'").items():
        if key == "format" and isinstance(value, Mapping):
            kind = value.get("type")
            if kind == "json_schema":
                schema = {k: value[k] for k in ("name", "schema", "strict", "description") if k in value}
                params["response_format"] = {"type": "json_schema", "json_schema": schema}
            elif kind == "json_object":
                params["response_format"] = {"type": "json_object"}
            elif kind != "text":
                raise Refusal(
                    400,
                    f"text.format of type {kind!r} is not supported; use text, json_object or json_schema",
                )
        else:
            t.hint(f"text.{key}")


# -- the answer ---------------------------------------------------------------------------


def _status(reply: Reply) -> tuple[str, dict[str, str] | None]:
    if reply.finish_reason == "length":
        return "incomplete", {"reason": "max_output_tokens"}
    if reply.finish_reason == "content_filter":
        return "incomplete", {"reason": "content_filter"}
    return "completed", None


def _items(reply: Reply) -> list[dict[str, Any]]:
    """The output items: reasoning, the message, then one function call per tool call."""
    message, items = reply.message, []
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        items.append(
            {
                "type": "reasoning",
                "id": f"rs_{reply.id}",
                "summary": [],
                "content": [{"type": "reasoning_text", "text": reasoning}],
            }
        )
    if message.text or not message.tool_calls:
        part = {"type": "output_text", "text": message.text, "annotations": [], "logprobs": []}
        items.append(
            {
                "type": "message",
                "id": f"msg_{reply.id}",
                "status": "completed",
                "role": "assistant",
                "content": [part],
            }
        )
    for index, call in enumerate(message.tool_calls or []):
        items.append(
            {
                "type": "function_call",
                "id": f"fc_{reply.id}_{index}",
                "call_id": call.id,
                "name": call.name,
                "arguments": call.arguments,
                "status": "completed",
            }
        )
    return items


def _response(
    reply: Reply, call: Call, output: list[dict[str, Any]], status: str, incomplete: dict[str, str] | None
) -> dict[str, Any]:
    request = call.options.get("request", {})
    return {
        "id": f"resp_{reply.id}",
        "object": "response",
        "created_at": reply.created,
        "status": status,
        "error": None,
        "incomplete_details": incomplete,
        "instructions": request.get("instructions"),
        "model": reply.model,
        "output": output,
        "parallel_tool_calls": call.params.get("parallel_tool_calls", True),
        "tool_choice": request.get("tool_choice", "auto"),
        "tools": request.get("tools", []),
        "temperature": call.params.get("temperature"),
        "top_p": call.params.get("top_p"),
        "max_output_tokens": call.params.get("max_tokens"),
        "text": {"format": {"type": "text"}},
        "metadata": {},
        "usage": {
            "input_tokens": reply.prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": reply.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": reply.prompt_tokens + reply.completion_tokens,
        },
    }


def render(reply: Reply, call: Call) -> dict[str, Any]:
    """The whole `response` object."""
    status, incomplete = _status(reply)
    return _response(reply, call, _items(reply), status, incomplete)


def render_stream(reply: Reply, call: Call) -> bytes:
    """The answer as the Responses API's server-sent events."""
    events: list[bytes] = []

    def emit(kind: str, **data: Any) -> None:
        events.append(sse(kind, {"type": kind, "sequence_number": len(events), **data}))

    status, incomplete = _status(reply)
    opening = _response(reply, call, [], "in_progress", None)
    opening["usage"] = None
    emit("response.created", response=opening)
    emit("response.in_progress", response=opening)
    items = _items(reply)
    for index, item in enumerate(items):
        emit("response.output_item.added", output_index=index, item=_opened(item))
        _item_events(emit, index, item)
        emit("response.output_item.done", output_index=index, item=item)
    final = "response.incomplete" if status == "incomplete" else "response.completed"
    emit(final, response=_response(reply, call, items, status, incomplete))
    return b"".join(events)


def _opened(item: dict[str, Any]) -> dict[str, Any]:
    """An item as `output_item.added` shows it: in progress, its content still empty."""
    if item["type"] == "message":
        return {**item, "status": "in_progress", "content": []}
    if item["type"] == "function_call":
        return {**item, "status": "in_progress", "arguments": ""}
    return {**item, "content": []}


def _item_events(emit: Callable[..., None], index: int, item: dict[str, Any]) -> None:
    item_id = item["id"]
    if item["type"] == "message":
        part = item["content"][0]
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        emit("response.content_part.added", **where, part={**part, "text": ""})
        emit("response.output_text.delta", **where, delta=part["text"], logprobs=[])
        emit("response.output_text.done", **where, text=part["text"], logprobs=[])
        emit("response.content_part.done", **where, part=part)
    elif item["type"] == "function_call":
        where = {"item_id": item_id, "output_index": index}
        emit("response.function_call_arguments.delta", **where, delta=item["arguments"])
        emit("response.function_call_arguments.done", **where, name=item["name"], arguments=item["arguments"])
    elif item["type"] == "reasoning":
        text = item["content"][0]["text"]
        where = {"item_id": item_id, "output_index": index, "content_index": 0}
        emit("response.reasoning_text.delta", **where, delta=text)
        emit("response.reasoning_text.done", **where, text=text)


def error(status: int, message: str, kind: str) -> dict[str, Any]:
    """An OpenAI-style error body (the Responses API uses Chat Completions' shape)."""
    return {"error": {"message": message, "type": kind, "param": None, "code": None}}


__all__ = ["HINTS", "PASSED", "error", "parse", "render", "render_stream"]
