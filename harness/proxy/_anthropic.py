"""The Anthropic Messages dialect (Claude Code's), to and from Chat Completions.

Request: `system` (a string or text blocks) becomes a leading system message; each message's
blocks become chat messages: `text` and base64/URL `image` blocks the content, an assistant's
`tool_use` blocks its tool calls (input as JSON text) and its `thinking` block its
`reasoning_content`; a user turn's `tool_result` blocks become tool messages, placed before
the rest of that turn (Chat Completions wants results right after the calls). A result with
`is_error` reads "Error: ..." (Chat Completions has no error flag). Custom tools
(`input_schema`) become function tools; server tools (`web_search_...`, `bash_...`,
`text_editor_...`) are untranslatable. `tool_choice` (`auto`, `any`, `tool`, `none`,
`disable_parallel_tool_use`), `max_tokens`, `stop_sequences`, `temperature`, `top_p` and
`top_k` map to their chat forms; `thinking`, `metadata`, `context_management`,
`cache_control` and other provider hints are dropped and named on the turn.

Answer: a `message` with a `thinking` block (when the engine gave reasoning text, with an
empty signature), a `text` block, and a `tool_use` block per tool call; `stop_reason` is
`end_turn`, `max_tokens`, `tool_use` or `refusal` (from the chat finish reason `stop`,
`length`, `tool_calls`, `content_filter`). Streamed as the API's own events:
`message_start`, `ping`, per block `content_block_start`, one delta (`text_delta`,
`thinking_delta` then `signature_delta`, `input_json_delta`), `content_block_stop`, then
`message_delta` (stop reason, output tokens) and `message_stop`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from harness._core.types import FunctionCall, Message, ToolCall
from harness.proxy._dialect import (
    Call,
    Refusal,
    Reply,
    Translator,
    Untranslatable,
    arguments_object,
    array,
    function_tool,
    json_arguments,
    obj,
    require,
    sse,
    string,
)

PASSED = {"max_tokens": "max_tokens", "stop_sequences": "stop", "temperature": "temperature", "top_p": "top_p", "top_k": "top_k"}  # fmt: skip
HINTS = frozenset(
    {"metadata", "thinking", "context_management", "service_tier", "container", "betas", "anthropic_version"}
)
OWN = frozenset({"model", "messages", "system", "tools", "tool_choice", "stream", "output_config"})
STOP_REASONS = {
    "stop": "end_turn",
    "length": "max_tokens",
    "tool_calls": "tool_use",
    "content_filter": "refusal",
}
#: Status -> Anthropic error type, for errors the proxy gives.
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error", 404: "not_found_error", 413: "request_too_large", 429: "rate_limit_error"}  # fmt: skip


def parse(body: Mapping[str, Any], policy: Untranslatable) -> Call:
    """A Messages request body as a `Call`; a `Refusal` names what is wrong."""
    t = Translator("Anthropic Messages", policy)
    messages = _system(body.get("system"), t)
    raw = body.get("messages")
    if not isinstance(raw, list) or not raw:
        raise Refusal(400, "messages: field required: a non-empty list of messages")
    for index, message in enumerate(raw):
        messages += _message(obj(message, f"messages[{index}]"), f"messages[{index}]", t)
    require(
        isinstance(body.get("max_tokens"), int) and not isinstance(body.get("max_tokens"), bool),
        "max_tokens: field required: an integer",
    )
    params: dict[str, Any] = {}
    for key, value in body.items():
        if key in PASSED:
            params[PASSED[key]] = value
        elif key in HINTS:
            t.hint(key)
        elif key not in OWN:
            raise Refusal(
                400, f"{key}: extra inputs are not permitted (unsupported field in a Messages request)"
            )
    tools = _tools(body.get("tools"), t)
    _tool_choice(body.get("tool_choice"), params)
    _output_config(body.get("output_config"), params, t)
    model = body.get("model")
    return Call(
        messages=messages,
        tools=tools,
        params=params,
        stream=bool(body.get("stream")),
        model=model if isinstance(model, str) else None,
        dropped=t.dropped,
    )


def _system(system: object, t: Translator) -> list[Message]:
    if system is None:
        return []
    if isinstance(system, str):
        return [Message(role="system", content=system)]
    texts = []
    for index, block in enumerate(array(system, "system")):
        block = obj(block, f"system[{index}]")
        require(block.get("type") == "text", f"system[{index}]: only text blocks may form the system prompt")
        texts.append({"type": "text", "text": string(block.get("text"), f"system[{index}].text")})
        if "cache_control" in block:
            t.hint("cache_control")
    return [Message(role="system", content=texts)]


def _message(message: Mapping[str, Any], where: str, t: Translator) -> list[Message]:
    role = message.get("role")
    require(
        role in ("user", "assistant", "system"),
        f"{where}.role must be 'user', 'assistant' or 'system', got {role!r}",
    )
    content = message.get("content")
    if role == "system":  # Claude Code 2.1 sends reminders as system turns inside the conversation
        return _system(content, t)
    if isinstance(content, str):
        return [Message(role="user" if role == "user" else "assistant", content=content)]
    blocks = [obj(b, f"{where}.content[{i}]") for i, b in enumerate(array(content, f"{where}.content"))]
    if role == "assistant":
        return [_assistant(blocks, where, t)]
    return _user(blocks, where, t)


def _assistant(blocks: list[Mapping[str, Any]], where: str, t: Translator) -> Message:
    texts, calls, thinking = [], [], []
    for index, block in enumerate(blocks):
        here, kind = f"{where}.content[{index}]", block.get("type")
        _note_cache(block, t)
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str):
                raise Refusal(400, f"{here}.text must be a string")
            texts.append(text)
        elif kind == "tool_use":
            name, call_id = string(block.get("name"), f"{here}.name"), string(block.get("id"), f"{here}.id")
            arguments = json_arguments(obj(block.get("input", {}), f"{here}.input"))
            calls.append(ToolCall(id=call_id, function=FunctionCall(name=name, arguments=arguments)))
        elif kind == "thinking":
            thinking.append(str(block.get("thinking", "")))
        elif kind == "redacted_thinking":
            t.hint("redacted_thinking")  # opaque to any model but the provider's
        else:
            t.untranslatable(
                f"{here} of type {kind!r}", "an assistant turn holds text, tool calls and thinking"
            )
    extra = {"reasoning_content": "\n".join(thinking)} if thinking else {}
    return Message(
        role="assistant",
        content="".join(texts) if texts or not calls else None,
        tool_calls=calls or None,
        **extra,
    )


def _user(blocks: list[Mapping[str, Any]], where: str, t: Translator) -> list[Message]:
    results: list[Message] = []
    parts: list[dict[str, Any]] = []
    for index, block in enumerate(blocks):
        here, kind = f"{where}.content[{index}]", block.get("type")
        _note_cache(block, t)
        if kind == "tool_result":
            call_id = string(block.get("tool_use_id"), f"{here}.tool_use_id")
            text = _result_text(block.get("content", ""), here, t)
            results.append(
                Message(
                    role="tool",
                    tool_call_id=call_id,
                    content=f"Error: {text}" if block.get("is_error") else text,
                )
            )
        elif kind == "text":
            parts.append({"type": "text", "text": str(block.get("text", ""))})
        elif kind == "image":
            parts.append(_image(block, here, t))
        else:
            t.untranslatable(f"{here} of type {kind!r}", "a user turn holds text, images and tool results")
    if not parts:
        return results
    if all(p["type"] == "text" for p in parts):
        return [*results, Message(role="user", content="".join(p["text"] for p in parts))]
    return [*results, Message(role="user", content=parts)]


def _result_text(content: object, where: str, t: Translator) -> str:
    if isinstance(content, str):
        return content
    texts = []
    for index, block in enumerate(array(content, f"{where}.content")):
        block = obj(block, f"{where}.content[{index}]")
        if block.get("type") == "text":
            texts.append(str(block.get("text", "")))
        else:
            t.untranslatable(
                f"{where}.content[{index}] of type {block.get('type')!r}", "a tool message holds text only"
            )
    return "".join(texts)


def _image(block: Mapping[str, Any], where: str, t: Translator) -> dict[str, Any]:
    source = obj(block.get("source"), f"{where}.source")
    if source.get("type") == "base64":
        url = f"data:{source.get('media_type')};base64,{source.get('data')}"
    elif source.get("type") == "url":
        url = string(source.get("url"), f"{where}.source.url")
    else:
        raise Refusal(400, f"{where}.source of type {source.get('type')!r}: send a base64 or url image")
    return {"type": "image_url", "image_url": {"url": url}}


def _note_cache(block: Mapping[str, Any], t: Translator) -> None:
    if "cache_control" in block:
        t.hint("cache_control")


def _tools(raw: object, t: Translator) -> list[dict[str, Any]] | None:
    if raw is None:
        return None
    tools = []
    for index, tool in enumerate(array(raw, "tools")):
        tool = obj(tool, f"tools[{index}]")
        _note_cache(tool, t)
        if tool.get("type", "custom") != "custom" or "input_schema" not in tool:
            t.untranslatable(
                f"tools[{index}] ({tool.get('type')} {tool.get('name')!r})",
                "only custom tools with an input_schema exist upstream",
            )
            continue
        tools.append(
            function_tool(
                tool.get("name"), tool.get("description"), tool.get("input_schema"), f"tools[{index}]"
            )
        )
    return tools or None


def _tool_choice(choice: object, params: dict[str, Any]) -> None:
    if choice is None:
        return
    choice = obj(choice, "tool_choice")
    kind = choice.get("type")
    if kind == "auto":
        params["tool_choice"] = "auto"
    elif kind == "any":
        params["tool_choice"] = "required"
    elif kind == "none":
        params["tool_choice"] = "none"
    elif kind == "tool":
        params["tool_choice"] = {
            "type": "function",
            "function": {"name": string(choice.get("name"), "tool_choice.name")},
        }
    else:
        raise Refusal(400, f"tool_choice.type {kind!r}: use auto, any, tool or none")
    if choice.get("disable_parallel_tool_use"):
        params["parallel_tool_calls"] = False


def _output_config(config: object, params: dict[str, Any], t: Translator) -> None:
    if config is None:
        return
    for key, value in obj(config, "output_config").items():
        if key == "format" and isinstance(value, Mapping) and value.get("type") == "json_schema":
            params["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": "output", "schema": value.get("schema", {})},
            }
        else:
            t.hint(f"output_config.{key}")


# -- the answer ---------------------------------------------------------------------------


def _blocks(reply: Reply) -> list[dict[str, Any]]:
    message = reply.message
    blocks: list[dict[str, Any]] = []
    reasoning = message.get("reasoning_content")
    if isinstance(reasoning, str) and reasoning:
        blocks.append({"type": "thinking", "thinking": reasoning, "signature": ""})
    if message.text or not message.tool_calls:
        blocks.append({"type": "text", "text": message.text})
    for call in message.tool_calls or []:
        arguments = arguments_object(call.arguments)
        # A model's arguments that are not a JSON object are passed on whole, so the agent's
        # tool reports the mistake to the model rather than running with nothing.
        payload: dict[str, Any] = (
            arguments if arguments is not None else {"invalid_json_arguments": call.arguments}
        )
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": payload})
    return blocks


def _usage(reply: Reply) -> dict[str, Any]:
    return {
        "input_tokens": reply.prompt_tokens,
        "output_tokens": reply.completion_tokens,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 0,
    }


def _stop_reason(reply: Reply) -> str:
    return STOP_REASONS.get(reply.finish_reason or "stop", "end_turn")


def render(reply: Reply, call: Call) -> dict[str, Any]:
    """The whole `message` object."""
    return {
        "id": f"msg_{reply.id}",
        "type": "message",
        "role": "assistant",
        "model": reply.model,
        "content": _blocks(reply),
        "stop_reason": _stop_reason(reply),
        "stop_sequence": None,
        "usage": _usage(reply),
    }


def render_stream(reply: Reply, call: Call) -> bytes:
    """The answer as the Messages API's server-sent events."""
    events: list[bytes] = []

    def emit(kind: str, **data: Any) -> None:
        events.append(sse(kind, {"type": kind, **data}))

    start = {**render(reply, call), "content": [], "stop_reason": None}
    start["usage"] = {**_usage(reply), "output_tokens": 0}
    emit("message_start", message=start)
    emit("ping")
    for index, block in enumerate(_blocks(reply)):
        kind = block["type"]
        if kind == "text":
            emit("content_block_start", index=index, content_block={"type": "text", "text": ""})
            emit("content_block_delta", index=index, delta={"type": "text_delta", "text": block["text"]})
        elif kind == "thinking":
            emit(
                "content_block_start",
                index=index,
                content_block={"type": "thinking", "thinking": "", "signature": ""},
            )
            emit(
                "content_block_delta",
                index=index,
                delta={"type": "thinking_delta", "thinking": block["thinking"]},
            )
            emit("content_block_delta", index=index, delta={"type": "signature_delta", "signature": ""})
        else:
            emit("content_block_start", index=index, content_block={**block, "input": {}})
            partial = json_arguments(block["input"])
            emit(
                "content_block_delta",
                index=index,
                delta={"type": "input_json_delta", "partial_json": partial},
            )
        emit("content_block_stop", index=index)
    emit(
        "message_delta",
        delta={"stop_reason": _stop_reason(reply), "stop_sequence": None},
        usage={"output_tokens": reply.completion_tokens},
    )
    emit("message_stop")
    return b"".join(events)


def error(status: int, message: str, kind: str) -> dict[str, Any]:
    """An Anthropic-style error body."""
    if kind not in ERROR_TYPES.values() and kind != "api_error":
        kind = ERROR_TYPES.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


__all__ = ["HINTS", "PASSED", "STOP_REASONS", "error", "parse", "render", "render_stream"]
