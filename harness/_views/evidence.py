"""The evidence behind a rollout's scores, in a form both views draw: what each node recorded
in its score details (a check's command, exit code and output, a file's content, a Harbor
test.sh's output and reward.json components) and what the agent program did (its command,
exit code, time, stdout and stderr, from `rollout.state["agent"]`).

Each record becomes one line of short facts (`exit_code 0 · seconds 0.18`) and named blocks
for the long or multi-line texts, so neither view prints raw JSON. The judge's own entries
(prompt, replies, token use) are drawn by the views themselves.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from harness._core.display import fmt

#: Score-detail keys a judge records, which the views draw on their own.
JUDGE_KEYS = frozenset({"prompt", "reply", "replies", "usage", "cached", "reason", "scores"})
#: A text longer than this, or with a line break, is a block of its own.
_INLINE_CHARS = 80
#: Agent-record keys shown as blocks, in this order, and those left out of the facts line.
_AGENT_BLOCKS = ("stdout", "stderr")
_AGENT_HIDDEN = frozenset({"name", "command", "stdout", "stderr"})


def _inline(value: Any) -> str | None:
    """`value` as a short fact, or None when it needs a block."""
    if isinstance(value, bool) or value is None:
        return str(value).lower()
    if isinstance(value, int | float):
        return fmt(value)
    if isinstance(value, Mapping) and all(isinstance(v, int | float) for v in value.values()):
        return ", ".join(f"{k}={fmt(v)}" for k, v in value.items()) or "-"
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= _INLINE_CHARS and "\n" not in text else None


def _block(value: Any) -> str:
    if isinstance(value, str):
        return value.rstrip("\n")
    return json.dumps(value, ensure_ascii=False, indent=1, default=str)


def detail_parts(detail: Mapping[str, Any]) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """A node's score details (the judge's entries left out) as (facts, blocks): each a list of
    (name, text); facts are short, blocks long or multi-line (an output, a file's content)."""
    facts, blocks = [], []
    for key, value in detail.items():
        if key in JUDGE_KEYS:
            continue
        short = _inline(value)
        if short is None:
            blocks.append((key, _block(value)))
        else:
            facts.append((key, short))
    return facts, blocks


def facts_line(facts: list[tuple[str, str]]) -> str:
    """`exit_code 0 · seconds 0.18`."""
    return " · ".join(f"{key} {value}" for key, value in facts)


def agent_parts(state: Mapping[str, Any]) -> tuple[str, str, list[tuple[str, str]]] | None:
    """The agent program's record (`state["agent"]`) as (head, facts, blocks): the head names
    the agent, its exit code and time; the facts line has the rest of its short entries (bytes
    of output, budgets); the blocks are its command, stdout and stderr (an empty one said so).
    None when no agent played the rollout."""
    record = state.get("agent")
    if not isinstance(record, Mapping):
        return None
    code, seconds = record.get("exit_code"), record.get("seconds")
    said = "timed out" if record.get("timed_out") else "no exit code" if code is None else f"exit {code}"
    head = f"agent {record.get('name', '?')} · {said}"
    if isinstance(seconds, int | float):
        head += f" · {fmt(seconds)} s"
    shown = _AGENT_HIDDEN | {"exit_code", "timed_out", "seconds"}
    facts = [
        (k, v) for k, v in ((k, _inline(v)) for k, v in record.items() if k not in shown) if v is not None
    ]
    blocks = [("command", str(record.get("command", "")))]
    for stream in _AGENT_BLOCKS:
        text = record.get(stream)
        blocks.append((stream, text.rstrip("\n") if isinstance(text, str) and text else "(empty)"))
    return head, facts_line(facts), blocks


__all__ = ["JUDGE_KEYS", "agent_parts", "detail_parts", "facts_line"]
