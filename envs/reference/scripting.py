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
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from harness.errors import ConfigError


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


__all__ = ["RowLookup", "first_user_text", "message_text", "seeded_rng"]
