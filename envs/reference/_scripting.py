"""Helpers for the reference environments' scripted policies ("oracle", "noisy").

A scripted policy sees only what a model would see: the messages the client sent. To answer
like an oracle it finds which dataset row the conversation is about by the row's text in the
first user message, the way a grader with the answer key would. The noisy policies draw their
mistakes from a random generator seeded by that text, so a run is reproducible and each
question's behaviour does not depend on which others ran or in what order.
"""

from __future__ import annotations

import hashlib
import random
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from harness._core.errors import ConfigError


def message_text(message: Mapping[str, Any]) -> str:
    """The text of an OpenAI-shaped message dict (string or list-of-parts content)."""
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "".join(str(part.get("text", "")) for part in content if isinstance(part, Mapping))


def first_user_text(messages: Sequence[Mapping[str, Any]]) -> str:
    """The text of the first user message: where the task is stated."""
    for message in messages:
        if message.get("role") == "user":
            return message_text(message)
    raise LookupError("the conversation has no user message, so the scripted policy cannot tell the task")


def seeded_rng(*parts: object) -> random.Random:
    """A generator seeded by a stable hash of `parts` (Python's `hash()` changes per process)."""
    digest = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).digest()
    return random.Random(int.from_bytes(digest[:8], "big"))


class RowLookup:
    """Find the dataset row whose `key` column appears in the conversation's first user turn."""

    def __init__(self, rows: Iterable[Mapping[str, Any]], key: str = "question") -> None:
        self.key = key
        self._rows: dict[str, Mapping[str, Any]] = {}
        for row in rows:
            if key not in row:
                raise KeyError(f"row {dict(row)!r} has no {key!r} column to look it up by")
            self._rows[str(row[key]).strip()] = row
        if not self._rows:
            raise ConfigError("RowLookup needs at least one row")

    def __len__(self) -> int:
        return len(self._rows)

    def find(self, messages: Sequence[Mapping[str, Any]]) -> Mapping[str, Any]:
        """The row the conversation is about; LookupError if it is about none of them."""
        text = first_user_text(messages).strip()
        row = self._rows.get(text)
        if row is not None:
            return row
        # The prompt template may wrap the question: fall back to the longest contained key.
        matches = [key for key in self._rows if key and key in text]
        if not matches:
            raise LookupError(f"no dataset row's {self.key!r} occurs in the user message {text[:80]!r}...")
        return self._rows[max(matches, key=len)]


class Attempts:
    """Which attempt at a question a conversation is, for noisy policies that vary per attempt
    as a sampled model does (so `-r K` shows pass@k rising).

    A conversation with no assistant message yet is a new attempt: the k-th that starts with
    its question. A later turn is recognised by its first move, which `first_move(attempt)`
    gives again (a policy is a pure function of question, attempt and turn). Thread-safe; a
    policy holding one serves a `fresh()` copy per endpoint, so every run counts from zero.
    """

    def __init__(self) -> None:
        self._counts: dict[str, int] = {}
        self._lock = threading.Lock()

    def start(self, question: str) -> int:
        """A new attempt at `question`: 0, then 1, 2, ..."""
        with self._lock:
            attempt = self._counts.get(question, 0)
            self._counts[question] = attempt + 1
            return attempt

    def of(
        self,
        question: str,
        messages: Sequence[Mapping[str, Any]],
        first_move: Callable[[int], str],
        move_of: Callable[[Mapping[str, Any]], str],
    ) -> int:
        """The attempt this conversation is (a new one when it has no reply yet)."""
        replies = [m for m in messages if m.get("role") == "assistant"]
        if not replies:
            return self.start(question)
        seen = move_of(replies[0])
        with self._lock:
            started = self._counts.get(question, 0)
        return next((a for a in range(started) if first_move(a) == seen), 0)


def attempt_seed(*parts: object, attempt: int) -> random.Random:
    """`seeded_rng(*parts)` for the first attempt (as before attempts were counted), and a
    generator of its own for each later one."""
    return seeded_rng(*parts, *([attempt] if attempt else []))


__all__ = ["Attempts", "RowLookup", "attempt_seed", "first_user_text", "message_text", "seeded_rng"]
