"""Which assistant turns of an agent's history the proxy gave: replies compared as agents send them back.

An agent sends its whole conversation on every call, and the assistant turns in it should be
replies this session's proxy gave. One that is not (the agent wrote it itself) would pass
into the rollout's completion as if the model had said it. So each reply the proxy gives is
remembered as its parts, each in a form agents do not change when they send history back:
- its text and its reasoning text, with runs of whitespace made one space and the ends
  trimmed (Claude Code strips a final space; clients rewrap);
- each tool call: its name and its arguments as parsed JSON (spacing, key order, `1` or `1.0`
  aside); arguments that are not a JSON object in the form the Anthropic dialect gives them to
  its agent (`{"invalid_json_arguments": TEXT}`), so such a call matches when it comes back.
Tool-call ids are not compared (names the agent uses, not what the model said), and a part
left out is no claim: agents drop reasoning, and may split one reply's calls over messages.
An assistant message of the history is a reply the proxy gave when each of its parts is a
part of a reply given in this session; otherwise it is marked (`"forged": true` on the
recorded message, its position in `ModelCall.forged`), or refused with
`forged_history="refuse"`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Literal

from harness._core.types import Message
from harness.proxy._dialect import arguments_object

ForgedHistory = Literal["mark", "refuse"]
#: What the proxy does with a history claiming an assistant turn it never gave, unless told otherwise.
DEFAULT_FORGED_HISTORY: ForgedHistory = "mark"
#: The key set on a recorded message that claims an assistant turn the proxy never gave.
FORGED = "forged"
#: How the views label such a message.
FORGED_NOTE = "forged: not a reply this rollout's model gave"


class Replies:
    """The parts of every reply one session's proxy gave, to check an agent's history against.

    A history sent back as given is checked by set lookups on the replies' own strings. Other
    forms are compared by digests (memory stays small beside the replies themselves): of each
    reply part normalised, computed only once a history differs from the replies as given, and
    of each differing part of a history that matched once normalised (it was the proxy's), so
    a history sent again alike needs no normalising.
    """

    __slots__ = ("_digests", "_given", "_normalised", "_unnormalised")

    def __init__(self) -> None:
        self._given: set[tuple[str, str]] = set()  # (kind, what the model said), as given
        self._digests: set[bytes] = set()  # normalised parts, and forms learned from histories
        self._unnormalised: list[tuple[str, str]] = []  # given parts not normalised yet
        # A history's parts that matched no reply: their normalised digest, by their own, so
        # an invented turn sent again is not normalised again (a later reply may still match it).
        self._normalised: dict[bytes, bytes] = {}

    def add(self, reply: Message) -> None:
        """Remember a reply the proxy gave."""
        parts = _parts(reply)
        self._given.update(parts)
        self._unnormalised += parts

    def forged(self, messages: Sequence[Message]) -> list[int]:
        """Positions of the assistant messages that are not replies this proxy gave."""
        return [i for i, m in enumerate(messages) if m.role == "assistant" and not self._gave(m)]

    def _gave(self, message: Message) -> bool:
        learned = []
        for part in _parts(message):
            if part in self._given:
                continue
            kind, value = part
            sent = _digest(kind, value)
            if sent in self._digests:
                continue
            if self._unnormalised:  # the first history that differs: normalise what was given
                self._digests.update(_normal_digest(k, v) for k, v in self._unnormalised)
                self._unnormalised.clear()
            normal = self._normalised.get(sent)
            if normal is None:
                normal = _normal_digest(kind, value)
            if normal not in self._digests:
                self._normalised[sent] = normal
                return False
            learned.append(sent)
        self._digests.update(learned)
        return True


def mark_forged(messages: Sequence[Message], positions: Sequence[int]) -> list[Message]:
    """The messages, those at `positions` copied with `"forged": true`."""
    marked = list(messages)
    for i in positions:
        marked[i] = marked[i].model_copy(update={FORGED: True})
    return marked


def describe(message: Message) -> str:
    """A short view of a message for an error: the start of its text, or its tool calls."""
    text = " ".join(message.text.split())
    if text:
        return repr(text[:60] + ("..." if len(text) > 60 else ""))
    names = ", ".join(c.name for c in message.tool_calls or [])
    return f"calling {names}" if names else "empty"


def _parts(message: Message) -> list[tuple[str, str]]:
    """An assistant message's parts as (kind, what was said): text, reasoning, each tool call."""
    parts: list[tuple[str, str]] = []
    text = message.text
    if text and not text.isspace():
        parts.append(("text", text))
    reasoning = (message.model_extra or {}).get("reasoning_content")  # a provider's extra field
    if isinstance(reasoning, str) and reasoning and not reasoning.isspace():
        parts.append(("reasoning", reasoning))
    for call in message.tool_calls or []:
        parts.append((f"call {call.name}", call.arguments))
    return parts


def _normal(kind: str, value: str) -> str:
    """A part as agents do not change it: whitespace runs as one space, or arguments as JSON."""
    if not kind.startswith("call "):
        return " ".join(value.split())
    parsed = arguments_object(value)
    if parsed is None:  # what the Anthropic dialect hands its agent for such arguments
        parsed = {"invalid_json_arguments": value}
    return json.dumps(_integral(parsed), sort_keys=True, ensure_ascii=False, separators=(",", ":"))


def _normal_digest(kind: str, value: str) -> bytes:
    return _digest(f"normal {kind}", _normal(kind, value))


def _digest(kind: str, value: str) -> bytes:
    data = f"{len(kind)}:{kind}{value}".encode(errors="surrogatepass")  # the length: no two splits alike
    return hashlib.blake2b(data, digest_size=16).digest()


def _integral(value: object) -> object:
    """JSON with whole floats as integers (a JavaScript agent writes 1.0 back as 1)."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: _integral(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral(v) for v in value]
    return value


__all__ = [
    "DEFAULT_FORGED_HISTORY",
    "FORGED",
    "FORGED_NOTE",
    "ForgedHistory",
    "Replies",
    "describe",
    "mark_forged",
]
