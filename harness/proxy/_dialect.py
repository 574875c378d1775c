"""What every wire dialect shares: the translated call, the refusal, and the drop policy.

A dialect module (`chat`, `responses`, `anthropic`) reads an agent's request into a `Call`
(OpenAI chat messages and function tools, plus the sampling arguments the upstream Chat
Completions endpoint takes) and writes the upstream's answer back in its own shape, whole
or as its own server-sent events. What a dialect cannot express upstream is a `Refusal`
(a 4xx the agent reads), unless the proxy's policy is to drop it; every drop is named in
`Call.dropped` and so recorded on the turn.

Two kinds of request content are told apart:
- hints: fields that steer the provider's own machinery (prompt caching, storage, metadata,
  thinking budgets, context management). A Chat Completions endpoint has no such machinery,
  so they are always left out, and named in `Call.dropped`.
- content: anything that changes what the model sees or may do (a tool that is not a
  function, an input item or content block with no Chat Completions form). Refused unless
  the policy is `untranslatable="drop"`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from harness._core.types import Message

Untranslatable = Literal["error", "drop"]
#: What the proxy does with request content it cannot translate, unless told otherwise.
DEFAULT_UNTRANSLATABLE: Untranslatable = "error"


class Refusal(Exception):
    """A request the proxy will not forward: answered with `status` in the agent's dialect."""

    def __init__(self, status: int, message: str, kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind


@dataclass
class Call:
    """One agent request in Chat Completions terms, ready for the upstream client."""

    messages: list[Message]
    tools: list[dict[str, Any]] | None = None
    params: dict[str, Any] = field(default_factory=dict)
    stream: bool = False
    model: str | None = None
    dropped: list[str] = field(default_factory=list)
    # Dialect-specific settings the reply needs (e.g. Chat's `include_usage`).
    options: dict[str, Any] = field(default_factory=dict)
    # Responses: the earlier response of the same session this call continues; the server
    # puts that response's conversation before `messages` (after their instructions).
    previous_response_id: str | None = None


class Translator:
    """Collects what a request drops, and refuses what it may not drop, per the policy."""

    def __init__(self, dialect: str, policy: Untranslatable) -> None:
        self.dialect = dialect
        self.policy = policy
        self.dropped: list[str] = []

    def hint(self, name: str) -> None:
        """Leave out a provider hint (always allowed; recorded once)."""
        if name not in self.dropped:
            self.dropped.append(name)

    def untranslatable(self, name: str, why: str) -> None:
        """Refuse content with no Chat Completions form, or drop it when the policy says so."""
        if self.policy == "drop":
            self.hint(name)
            return
        raise Refusal(
            400,
            f"{self.dialect}: {name} cannot be translated to the Chat Completions endpoint "
            f"this proxy serves ({why}); remove it (the proxy can drop such content when "
            f"started with untranslatable='drop')",
        )


@dataclass
class Reply:
    """The upstream's answer, as a dialect writes it back: the assistant message, why it
    stopped (Chat Completions' finish_reason), token counts, and the names the agent sees."""

    message: Message
    finish_reason: str | None
    prompt_tokens: int
    completion_tokens: int
    id: str
    model: str
    created: int


def require(condition: bool, message: str) -> None:
    """Refuse a malformed request with a 400 naming what is wrong."""
    if not condition:
        raise Refusal(400, message)


def string(value: object, where: str) -> str:
    """`value` if it is a non-empty string, else a 400 naming `where`."""
    if not isinstance(value, str) or not value:
        raise Refusal(400, f"{where} is required: a non-empty string")
    return value


def array(value: object, where: str) -> list[Any]:
    """`value` if it is a list, else a 400 naming `where`."""
    if not isinstance(value, list):
        raise Refusal(400, f"{where} must be a list")
    return value


def obj(value: object, where: str) -> Mapping[str, Any]:
    """`value` if it is a JSON object, else a 400 naming `where`."""
    if not isinstance(value, Mapping):
        raise Refusal(400, f"{where} must be an object, got {type(value).__name__}")
    return value


def json_arguments(value: object) -> str:
    """Tool-call arguments as the JSON text Chat Completions carries."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False)


def arguments_object(text: str) -> dict[str, Any] | None:
    """Tool-call arguments as an object, or None when the model's text is not a JSON object."""
    try:
        value = json.loads(text) if text.strip() else {}
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def function_tool(name: object, description: object, parameters: object, where: str) -> dict[str, Any]:
    """A Chat Completions function tool, checked."""
    require(isinstance(name, str) and bool(name), f"{where}: a tool needs a non-empty 'name'")
    function: dict[str, Any] = {"name": name}
    if isinstance(description, str):
        function["description"] = description
    if parameters is not None:
        require(
            isinstance(parameters, Mapping), f"{where}: tool {name!r} parameters must be a JSON Schema object"
        )
        function["parameters"] = parameters
    return {"type": "function", "function": function}


def sse(event: str | None, data: object) -> bytes:
    """One server-sent event (`event:` line only when named)."""
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {payload}\n\n".encode()


__all__ = [
    "DEFAULT_UNTRANSLATABLE",
    "Call",
    "Refusal",
    "Reply",
    "Translator",
    "Untranslatable",
    "arguments_object",
    "array",
    "function_tool",
    "json_arguments",
    "obj",
    "require",
    "sse",
    "string",
]
