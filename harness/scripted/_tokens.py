"""Token ids and logprobs for the scripted endpoint: a deterministic toy tokenizer, no model needed.

Asked the vLLM way (`return_token_ids: true` in the body, `logprobs: true`), the scripted
endpoint answers with `prompt_token_ids` (top level), `token_ids` per choice and per-token
logprobs, like vLLM. Messages render through one fixed, prefix-preserving chat template
(`<|im_start|>role\\n ... <|im_end|>\\n`), text is one token per UTF-8 byte, and a token's
logprob is a fixed function of its id, so tests can check an export token by token.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

IM_START, IM_END = 0, 1
_OFFSET = 2  # byte b is token b + 2
SPECIAL_TEXT = {IM_START: "<|im_start|>", IM_END: "<|im_end|>"}


def encode(text: str) -> list[int]:
    """Text as token ids: one per UTF-8 byte."""
    return [b + _OFFSET for b in text.encode("utf-8")]


def decode(ids: Sequence[int]) -> str:
    """Token ids back to text (special tokens as their markers)."""
    out: list[str] = []
    chunk = bytearray()
    for i in ids:
        if i in SPECIAL_TEXT:
            out.append(chunk.decode("utf-8", errors="replace") + SPECIAL_TEXT[i])
            chunk = bytearray()
        else:
            chunk.append(i - _OFFSET)
    out.append(chunk.decode("utf-8", errors="replace"))
    return "".join(out)


def logprob(token_id: int) -> float:
    """The deterministic logprob the scripted endpoint reports for a token."""
    return -(1 + token_id % 7) / 8


def _body(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        content = "".join(str(p.get("text", "")) for p in content if isinstance(p, Mapping))
    text = content or ""
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        text += f"\n<tool_call>{json.dumps({'name': function.get('name'), 'arguments': function.get('arguments')})}</tool_call>"
    return text


def assistant_text(message: Mapping[str, Any]) -> str:
    """An assistant message as the text the model generated (tool calls as `<tool_call>` lines)."""
    return _body(message)


def message_ids(message: Mapping[str, Any]) -> list[int]:
    """One message as it sits in a conversation: start, role, body, end, newline."""
    return [IM_START, *encode(f"{message.get('role')}\n"), *encode(_body(message)), IM_END, *encode("\n")]


#: What the prompt ends with: the header of the turn the model writes.
ASSISTANT_HEADER = [IM_START, *encode("assistant\n")]


def prompt_ids(messages: Sequence[Mapping[str, Any]], *, faithful: bool = True) -> list[int]:
    """The conversation, then the assistant header the model continues from. Not `faithful`:
    earlier assistant turns re-rendered without their end token, as a template that rewrites
    history does (what breaks the prefix property across turns)."""
    ids: list[int] = []
    for message in messages:
        rendered = message_ids(message)
        if not faithful and message.get("role") == "assistant":
            rendered.remove(IM_END)
        ids += rendered
    return [*ids, *ASSISTANT_HEADER]


def completion_ids(message: Mapping[str, Any]) -> list[int]:
    """What the model generated for `message`: its body and the end-of-turn token."""
    return [*encode(_body(message)), IM_END]


def add_token_ids(response: dict[str, Any], body: Mapping[str, Any], *, faithful: bool = True) -> None:
    """Put vLLM-style token ids / logprobs on a response for a request that asked for them
    (`faithful`: see `prompt_ids`)."""
    if body.get("return_token_ids"):
        messages = [m for m in body["messages"] if isinstance(m, Mapping)]
        response["prompt_token_ids"] = prompt_ids(messages, faithful=faithful)
    for choice in response["choices"]:
        ids = completion_ids(choice["message"])
        if body.get("return_token_ids"):
            choice["token_ids"] = ids
        if body.get("logprobs"):
            choice["logprobs"] = {
                "content": [
                    {"token": decode([i]), "logprob": logprob(i), "bytes": None, "top_logprobs": []}
                    for i in ids
                ]
            }


__all__ = [
    "ASSISTANT_HEADER",
    "add_token_ids",
    "assistant_text",
    "completion_ids",
    "decode",
    "encode",
    "logprob",
    "message_ids",
    "prompt_ids",
]
