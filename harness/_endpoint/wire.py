"""The OpenAI chat-completions wire format: what a request may carry, what an answer becomes,
and what an endpoint's error means.

Kept apart from `Client` (which sends, retries and counts) so the format can be read, and
tested, on its own: answers are parsed leniently where servers differ (null members, vLLM's
token ids and logprobs, custom tool calls) and strictly where a mistake would be silent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from http import HTTPStatus
from typing import Any

from pydantic import BaseModel, Field

from harness._core.errors import ConfigError
from harness._core.types import Message, TurnTokens, Usage
from harness._endpoint.retry import MalformedResponseError
from harness._endpoint.transport import HTTPStatusError, TransportConnectionError, TransportTimeout

PLACEHOLDER_KEY = "sk-no-key-required"
#: The key sent to a local server when no key variable is set, and to the scripted endpoint.
LOCAL_KEY = "EMPTY"
SCRIPTED_KEY = "scripted"
#: Keys the harness supplies where none is needed: no secrets, so errors keep the words they spell.
PLACEHOLDER_KEYS = frozenset({PLACEHOLDER_KEY, LOCAL_KEY, SCRIPTED_KEY})
#: Statuses that no retry and no other request of the run can fix.
REFUSED_STATUSES = frozenset({401, 403, 404})
#: Statuses a server gives a request it cannot parse or will not take as sent (an unknown
#: sampling key, a model it does not serve: `transformers serve` answers 422 and 400). One
#: such answer may be about one request (a prompt too long for the context); this many in a
#: row before any success means every request of the run is rejected alike.
REJECTED_STATUSES = frozenset({400, 422})
REJECTED_STREAK = 4
# How OpenAI-compatible servers (OpenAI, vLLM, llama.cpp, SGLang, TGI...) word a 400 for a
# prompt that no longer fits the context window. Such a rollout ran out of room, which is
# a "length" stop, not an infrastructure error.
CONTEXT_TOO_LONG = re.compile(
    r"context[ _-]?(length|window)|maximum context|max_model_len|prompt is too long|input is too long"
    r"|too many (input )?tokens|exceeds? the (model'?s? )?(maximum|max)|reduce the length",
    re.IGNORECASE,
)


HINTS = {
    401: "check the API key (api_key= or OPENAI_API_KEY)",
    403: "the key is not allowed to use this model or endpoint",
    404: "check the model name and base_url (it usually ends in /v1)",
    400: "the endpoint rejected the request: check the model name and the sampling keys (-S/sampling=)",
    422: "the endpoint rejected the request: remove the sampling keys it does not support (-S/sampling=)",
}


class Choice(BaseModel):
    """One generated alternative (`n > 1` gives several), with its token ids when the endpoint sent them."""

    message: Message
    finish_reason: str | None = None
    token_ids: list[int] | None = None
    logprobs: list[float] | None = None


class Completion(BaseModel):
    """What `Client.complete` returns: the choices, their token usage, and the endpoint's ids.

    Attributes:
        choices: The generated choices (one per `n`).
        usage: The tokens the request used.
        model: The model name the endpoint reported.
        id: The endpoint's id for the completion.
        prompt_token_ids: The prompt's token ids, when the endpoint returned them.
        system_fingerprint: The endpoint's `system_fingerprint` (its serving configuration).
    """

    choices: list[Choice]
    usage: Usage = Field(default_factory=Usage)
    model: str | None = None
    id: str | None = None
    prompt_token_ids: list[int] | None = None
    system_fingerprint: str | None = None

    @property
    def served_by(self) -> str | None:
        """The model version that answered: the reported `model`, `@system_fingerprint` added
        when the endpoint sent one (an asynchronous trainer tells stale samples by it)."""
        if self.model is None:
            return self.system_fingerprint
        return f"{self.model}@{self.system_fingerprint}" if self.system_fingerprint else self.model

    def turn_tokens(self, turn: int) -> TurnTokens | None:
        """The first choice's token record for assistant turn `turn`, if the endpoint gave ids."""
        choice = self.choices[0]
        if self.prompt_token_ids is None or choice.token_ids is None:
            return None
        logprobs = (
            choice.logprobs
            if choice.logprobs is not None and len(choice.logprobs) == len(choice.token_ids)
            else None
        )
        return TurnTokens(
            turn=turn,
            prompt_token_ids=self.prompt_token_ids,
            completion_token_ids=choice.token_ids,
            logprobs=logprobs,
        )

    @property
    def message(self) -> Message:
        return self.choices[0].message

    @property
    def finish_reason(self) -> str | None:
        return self.choices[0].finish_reason


def without_nulls(data: Mapping[str, Any]) -> dict[str, Any]:
    """A JSON object without its null members, one level down too (servers send `"x": null`
    for fields they leave out, which the message model reads as absent)."""
    return {k: without_nulls(v) if isinstance(v, Mapping) else v for k, v in data.items() if v is not None}


def message_from_json(message: object) -> Message:
    if not isinstance(message, Mapping):
        raise TypeError(f"is not an object (got {type(message).__name__})")
    data = {k: v for k, v in message.items() if v is not None}
    calls = []
    raw_calls = data.get("tool_calls")
    for call in raw_calls if isinstance(raw_calls, list) else []:  # else validation names it
        if isinstance(call, Mapping):
            call = without_nulls(call)
            if "function" not in call and isinstance(call.get("custom"), dict):  # custom tools: text input
                custom = call.pop("custom")
                call["function"] = {"name": custom.get("name", ""), "arguments": custom.get("input", "")}
        calls.append(call)
    if calls:
        data["tool_calls"] = calls
    data.setdefault("role", "assistant")
    return Message.model_validate(data)


#: Request arguments the harness sets itself, or that would break every rollout, with why.
HARNESS_OWNED = {
    "messages": "the harness sends each rollout's conversation",
    "model": "the model is -m/--model (Client(model=...))",
    "tools": "tools come from the environment",
    "functions": "tools come from the environment",
    "stream": "the harness reads whole responses",
    "stream_options": "the harness reads whole responses",
    "n": "one rollout is one completion; use -r/--rollouts-per-example for several",
}


def check_sampling(sampling: Mapping[str, Any], where: str = "sampling") -> None:
    """Reject sampling arguments the harness owns (`HARNESS_OWNED`), naming the reason.

    Raises:
        ConfigError: A key such as `stream`, `messages`, `model`, `tools` or `n` is present.
    """
    for key in sampling:
        if key in HARNESS_OWNED and not (key == "n" and sampling[key] == 1):
            raise ConfigError(f"{where} may not set {key!r}: {HARNESS_OWNED[key]}; remove it")


def int_list(value: Any) -> list[int] | None:
    """Token ids as vLLM sends them (a list of ints), else None."""
    if isinstance(value, list) and all(isinstance(v, int) and not isinstance(v, bool) for v in value):
        return value
    return None


def logprobs_of(value: Any) -> list[float] | None:
    """The sampled tokens' logprobs from an OpenAI `logprobs` object (`content[i].logprob`)."""
    content = value.get("content") if isinstance(value, dict) else None
    if not content or not isinstance(content, list):
        return None
    try:
        return [float(item["logprob"]) for item in content]
    except (KeyError, TypeError, ValueError):
        return None


def token_count(value: Any) -> int:
    """A token count from `usage`; absent, null or not a whole number counts as 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def text_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def check_params(params: Mapping[str, Any], where: str) -> None:
    for name in ("messages", "stream"):
        if params.get(name) not in (None, False):
            raise ValueError(
                f"{where} got {name}={params[name]!r}: the Client sets messages itself and does "
                "not stream; remove it"
            )


def error_text(exc: BaseException | None, timeout: float | None = None) -> str:
    """What went wrong, in the endpoint's own words where it gave any."""
    if exc is None:
        return "unknown failure"
    if isinstance(exc, MalformedResponseError):
        return str(exc)
    if isinstance(exc, TransportTimeout):
        return f"no answer within the {timeout:g}s timeout" if timeout else "request timed out"
    if isinstance(exc, TransportConnectionError):
        return f"connection failed ({exc})"
    if isinstance(exc, HTTPStatusError):
        return f"HTTP {exc.status_code}: {body_message(exc.body) or status_phrase(exc.status_code)}"
    return f"{type(exc).__name__}: {exc}"


def status_phrase(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "error"


def is_context_length_error(exc: BaseException) -> bool:
    """True for an endpoint 400 saying the conversation is longer than the model's context."""
    return getattr(exc, "status", None) == 400 and bool(CONTEXT_TOO_LONG.search(str(exc)))


def body_message(body: object) -> str:
    """The server's own words in an error body: OpenAI's and vLLM's `message` (the SDK has
    already unwrapped `error`), FastAPI's `detail` (`transformers serve`; a list of validation
    errors when a field has the wrong type), or the text of a non-JSON body."""
    if isinstance(body, str):
        return body
    if not isinstance(body, Mapping):
        return ""
    for key in ("message", "detail"):
        value = body.get(key)
        if isinstance(value, str) and value:
            return value
        if isinstance(value, list) and value:
            return "; ".join(str(v.get("msg", v)) if isinstance(v, Mapping) else str(v) for v in value)
    return ""


__all__ = [
    "CONTEXT_TOO_LONG",
    "HARNESS_OWNED",
    "HINTS",
    "LOCAL_KEY",
    "PLACEHOLDER_KEY",
    "PLACEHOLDER_KEYS",
    "REFUSED_STATUSES",
    "REJECTED_STATUSES",
    "REJECTED_STREAK",
    "SCRIPTED_KEY",
    "Choice",
    "Completion",
    "body_message",
    "check_params",
    "check_sampling",
    "error_text",
    "int_list",
    "is_context_length_error",
    "logprobs_of",
    "message_from_json",
    "status_phrase",
    "text_or_none",
    "token_count",
    "without_nulls",
]
