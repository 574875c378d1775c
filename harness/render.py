"""Rich renderings of single rollouts: the whole conversation and every node's score.

Used by `rubric view` so a user can see *why* a rollout scored what it scored. Every string
that came from a model, tool, judge or dataset goes through `harness.text.safe_text`: control
characters escaped, never read as rich markup.
"""

from __future__ import annotations

import json
import math

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from harness.text import safe_text
from harness.types import Message, Rollout

_ROLE_STYLE = {"system": "dim", "user": "cyan", "assistant": "green", "tool": "magenta"}


def _fmt_score(value: float) -> str:
    return "NaN (unscored)" if math.isnan(value) else f"{value:.4g}"


def _pretty_arguments(arguments: str) -> str:
    try:
        return json.dumps(json.loads(arguments), ensure_ascii=False)
    except (json.JSONDecodeError, TypeError):
        return f"{arguments}  [invalid JSON]"


def render_message(message: Message) -> RenderableType:
    """One chat message as a titled panel; tool calls listed under the text."""
    parts: list[RenderableType] = []
    if message.text:
        parts.append(safe_text(message.text))
    for call in message.tool_calls or []:
        parts.append(
            safe_text(f"-> {call.name}({_pretty_arguments(call.arguments)})  [{call.id}]", style="yellow")
        )
    title = message.role if not message.tool_call_id else f"tool result [{message.tool_call_id}]"
    if message.name:
        title += f" ({message.name})"
    return Panel(
        Group(*parts) if parts else Text("(empty)", style="dim"),
        title=safe_text(title),
        title_align="left",
        border_style=_ROLE_STYLE.get(message.role, "white"),
    )


def score_table(rollout: Rollout) -> Table:
    """Every rubric node's score, indented by depth, with the reason a node is unscored."""
    table = Table(title="scores", show_header=True, header_style="bold")
    table.add_column("node")
    table.add_column("score", justify="right")
    table.add_column("why unscored / detail", overflow="fold")
    # The root node has no path: its reason, if any, is stored under "".
    table.add_row(
        Text("reward", style="bold"), _fmt_score(rollout.reward), safe_text(rollout.score_errors.get("", ""))
    )
    paths = sorted((set(rollout.scores) | set(rollout.score_errors)) - {""})
    for path in paths:
        depth = path.count(".") + 1
        score = rollout.scores.get(path, math.nan)
        note = rollout.score_errors.get(path, "")
        detail = rollout.score_details.get(path)
        if not note and detail and "reply" in detail:
            note = f"judge: {str(detail['reply'])[:200]}"
        table.add_row(safe_text("  " * depth + path.rsplit(".", 1)[-1]), _fmt_score(score), safe_text(note))
    return table


def render_rollout(rollout: Rollout) -> RenderableType:
    """Header line, the conversation, then the score table."""
    header = Text.assemble(
        ("example ", "bold"),
        safe_text(rollout.example_id),
        ("  rollout ", "bold"),
        str(rollout.rollout_index),
        ("  reward ", "bold"),
        _fmt_score(rollout.reward),
        ("  stop ", "bold"),
        safe_text(rollout.stop_reason),
        ("  turns ", "bold"),
        str(rollout.turns),
    )
    parts: list[RenderableType] = [header]
    if rollout.error:
        parts.append(safe_text(f"error: {rollout.error}", style="bold red"))
    if rollout.answer is not None:
        parts.append(safe_text(f"answer: {rollout.answer}", style="dim"))
    parts.extend(render_message(m) for m in rollout.messages)
    parts.append(score_table(rollout))
    return Group(*parts)


def _sort_key_reward(rollout: Rollout) -> tuple[int, float]:
    # Unscored rollouts sort before the worst scored ones: they are what a user must see first.
    return (0, -math.inf) if math.isnan(rollout.reward) else (1, rollout.reward)


def select_rollouts(
    rollouts: list[Rollout],
    *,
    rollout_id: str | None = None,
    worst: int | None = None,
    best: int | None = None,
    errors: bool = False,
) -> list[Rollout]:
    """Pick rollouts for display: by id ("EXAMPLE" or "EXAMPLE:INDEX"), worst/best N, or errored."""
    chosen: list[Rollout] = []
    if rollout_id is not None:
        example, _, index = rollout_id.partition(":")
        matches = [
            r
            for r in rollouts
            if str(r.example_id) == example and (not index or str(r.rollout_index) == index)
        ]
        if not matches:
            known = sorted({str(r.example_id) for r in rollouts})
            preview = ", ".join(known[:10]) + (" ..." if len(known) > 10 else "")
            raise KeyError(f"no rollout with id {rollout_id!r}; example ids in this run: {preview}")
        chosen.extend(matches)
    ordered = sorted(rollouts, key=_sort_key_reward)
    if worst:
        chosen.extend(ordered[:worst])
    if best:
        chosen.extend(reversed(ordered[-best:]))
    if errors:
        chosen.extend(r for r in rollouts if r.error or r.score_errors)
    return chosen


__all__ = ["render_message", "render_rollout", "score_table", "select_rollouts"]
