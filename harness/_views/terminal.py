"""Rich renderings of single rollouts: the whole conversation and every node's score.

Used by `rubric view` so a user can see *why* a rollout scored what it scored. Every string
that came from a model, tool, judge or dataset goes through `harness._core.text.safe_text`: control
characters escaped, never read as rich markup.
"""

from __future__ import annotations

import json
import math
import shlex
from collections.abc import Sequence

from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from harness._core.content import block_text, tool_content
from harness._core.display import fmt, unscored
from harness._core.run.summary import skip_reason
from harness._core.text import safe_text
from harness._core.tree import place_paths
from harness._core.types import Message, Rollout
from harness._results.compare import FLIP_THRESHOLD, Comparison, compare
from harness._results.eval_results import EvalResults
from harness._views.compare_html import interval_text, needed_text, paired_note
from harness._views.evidence import agent_parts, detail_parts, facts_line
from harness.proxy._provenance import FORGED, FORGED_NOTE

_ROLE_STYLE = {"system": "dim", "user": "cyan", "assistant": "green", "tool": "magenta"}


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
    forged = message.get(FORGED) is True  # the capture proxy never gave this assistant turn
    if forged:
        title += f" - {FORGED_NOTE}"
    return Panel(
        Group(*parts) if parts else Text("(empty)", style="dim"),
        title=safe_text(title),
        title_align="left",
        border_style="red" if forged else _ROLE_STYLE.get(message.role, "white"),
    )


def node_order(rollout: Rollout, order: Sequence[str] | None = None) -> list[str]:
    """The node paths of `rollout` (below the reward) in tree order: `order` (the run's), then
    each other path it scored (such as a Harbor verifier's reward.json components) under its
    nearest parent, after that parent's other descendants."""
    return place_paths(order or [], [*rollout.scores, *rollout.score_errors])


def score_table(rollout: Rollout, order: Sequence[str] | None = None) -> Table:
    """Every rubric node's score in tree order (`order`: the run's node paths; else the order
    they were scored in), indented by depth, with the reason a node is unscored or skipped."""
    table = Table(title="scores", show_header=True, header_style="bold")
    table.add_column("node")
    table.add_column("score", justify="right")
    table.add_column("why / detail", overflow="fold")
    # The root node has no path: its reason, if any, is stored under "".
    table.add_row(Text("reward", style="bold"), fmt(rollout.reward), _why(rollout, ""))
    paths = node_order(rollout, order)
    for path in paths:
        depth = path.count(".") + 1
        if path not in rollout.scores and path not in rollout.score_errors:  # a chain stopped first
            reason = skip_reason(rollout.scores, path, paths)
            table.add_row(safe_text("  " * depth + path.rsplit(".", 1)[-1]), "-", Text(reason, style="dim"))
            continue
        score = rollout.scores.get(path, math.nan)
        table.add_row(safe_text("  " * depth + path.rsplit(".", 1)[-1]), fmt(score), _why(rollout, path))
    return table


def _why(rollout: Rollout, path: str) -> Text:
    """Why node `path` ("" the reward) is unscored, or else what its judge replied."""
    score = rollout.scores.get(path, math.nan) if path else rollout.reward
    reason = rollout.score_errors.get(path)
    if reason is not None or math.isnan(score):
        return safe_text(unscored(reason))
    detail = rollout.score_details.get(path) or {}
    said = [f"judge: {str(detail['reply'])[:200]}"] if "reply" in detail else []
    facts, blocks = detail_parts(detail)
    if facts:
        said.append(facts_line(facts))
    if blocks:
        said.append("(" + ", ".join(name for name, _ in blocks) + " below)")
    return safe_text(" · ".join(said))


def _evidence(rollout: Rollout, paths: Sequence[str]) -> list[RenderableType]:
    """A panel per long text a node recorded (a check's output, a file's content, test.sh's
    output), in tree order."""
    panels: list[RenderableType] = []
    for path in ["", *paths]:
        _, blocks = detail_parts(rollout.score_details.get(path) or {})
        for name, text in blocks:
            title = f"{path or 'reward'} · {name}"
            panels.append(
                Panel(safe_text(text), title=safe_text(title), title_align="left", border_style="blue")
            )
    return panels


def _agent_panel(rollout: Rollout) -> RenderableType | None:
    """What the agent program did: its command, exit code, time, stdout and stderr."""
    found = agent_parts(rollout.state)
    if found is None:
        return None
    head, facts, blocks = found
    lines = [Text(facts, style="dim")] if facts else []
    body = Group(*lines, *(Group(Text(name, style="bold"), safe_text(text)) for name, text in blocks))
    return Panel(body, title=safe_text(head), title_align="left", border_style="yellow")


def render_rollout(rollout: Rollout, order: Sequence[str] | None = None) -> RenderableType:
    """Header line, the conversation, then the score table."""
    header = Text.assemble(
        ("example ", "bold"),
        safe_text(rollout.example_id),
        ("  rollout ", "bold"),
        str(rollout.rollout_index),
        ("  reward ", "bold"),
        fmt(rollout.reward),
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
    for head, blocks in tool_content(rollout.state):  # what tools returned beyond text (MCP)
        body = Group(*(safe_text(block_text(b)) for b in blocks)) if blocks else Text("(empty)", style="dim")
        parts.append(
            Panel(body, title=safe_text(f"tool content · {head}"), title_align="left", border_style="magenta")
        )
    agent = _agent_panel(rollout)
    if agent is not None:
        parts.append(agent)
    table = score_table(rollout, order)
    parts.append(table)
    parts.extend(_evidence(rollout, node_order(rollout, order)))
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


def _delta_text(delta: float | None) -> Text:
    if delta is None:
        return Text("-", style="dim")
    return Text(f"{delta:+.4g}", style="green" if delta > 0 else "red" if delta < 0 else "")


def comparison_table(comparison: Comparison) -> Table:
    """Each node's mean (± standard error) in run A and run B, and B − A, in tree order."""
    table = Table(title="node means (scored rollouts)", title_justify="left", header_style="bold")
    for name, justify in (("node", "left"), ("A", "right"), ("B", "right"), ("B − A", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for node in comparison.nodes:
        label = (
            "reward" if not node.path else "  " * (node.path.count(".") + 1) + node.path.rsplit(".", 1)[-1]
        )
        table.add_row(
            safe_text(label, style="bold" if not node.path else ""),
            fmt(node.mean_a, stderr=node.stderr_a),
            fmt(node.mean_b, stderr=node.stderr_b),
            _delta_text(node.delta),
        )
    return table


def paired_table(comparison: Comparison) -> RenderableType:
    """Can I trust this difference? Each node's paired B − A over the shared examples, its
    interval and the examples a paired test needs to detect it (see `paired_note`)."""
    note = Text(paired_note(comparison), style="dim")
    if not comparison.differences or comparison.num_shared < 2:
        return note
    first = comparison.differences[0]
    table = Table(
        title=f"paired B − A ({first.num_pairs} examples in both runs)",
        title_justify="left",
        header_style="bold",
    )
    headers = ("node", "pairs", "B − A", f"{first.confidence:.0%} CI", "SD", f"n ({first.power:.0%} power)")
    for name in headers:
        table.add_column(name, justify="left" if name == "node" else "right", no_wrap=True)
    for diff in comparison.differences:
        label = (
            "reward" if not diff.path else "  " * (diff.path.count(".") + 1) + diff.path.rsplit(".", 1)[-1]
        )
        table.add_row(
            safe_text(label, style="bold" if not diff.path else ""),
            str(diff.num_pairs),
            _delta_text(diff.mean),
            interval_text(diff) + (" ✓" if diff.excludes_zero else "  "),
            "-" if diff.sd is None else f"{diff.sd:.3g}",
            needed_text(diff),
        )
    return Group(table, note)


def flipped_table(comparison: Comparison, *, limit: int = 20) -> Table:
    """The examples where a node crossed `FLIP_THRESHOLD`, largest reward change first."""
    flips = comparison.flipped
    shown = f"{min(limit, len(flips))} of {len(flips)}" if len(flips) > limit else str(len(flips))
    table = Table(
        title=f"examples that flipped ({shown} of {len(comparison.examples)}; threshold {FLIP_THRESHOLD})",
        title_justify="left",
        header_style="bold",
    )
    for name, justify in (("example", "left"), ("reward A", "right"), ("B", "right"), ("B − A", "right")):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    table.add_column("nodes that flipped (A → B)", overflow="fold")
    for example in flips[:limit]:
        nodes = ", ".join(f"{c.path} {fmt(c.a)} → {fmt(c.b)}" for c in example.changes if c.flipped)
        table.add_row(
            safe_text(example.example),
            fmt(example.reward_a),
            fmt(example.reward_b),
            _delta_text(example.delta),
            safe_text(nodes or "-"),
        )
    return table


def render_comparison(comparison: Comparison, *, limit: int = 20) -> RenderableType:
    """Run A against run B in the terminal: what the HTML comparison page shows, without
    the transcripts (those are one `rubric view DIR --rollout EXAMPLE` away)."""
    a, b = comparison.a, comparison.b
    header = Text.assemble(
        ("A ", "bold"),
        safe_text(f"{a.title} ({len(a)} rollouts)"),
        ("   B ", "bold"),
        safe_text(f"{b.title} ({len(b)} rollouts)"),
    )
    return Group(
        header, comparison_table(comparison), paired_table(comparison), flipped_table(comparison, limit=limit)
    )


def show_run(
    console: Console,
    results: EvalResults,
    other: EvalResults | None = None,
    *,
    names: tuple[str, str | None] = ("A", None),
    rollout: str | None = None,
    worst: int | None = None,
    best: int | None = None,
    errors: bool = False,
    note: str | None = None,
) -> None:
    """Print a run in the terminal as `rubric view` does, or two runs compared.

    Every string from the run is printed escaped (never as rich markup).

    Args:
        console: The rich console to print to.
        results: The run.
        other: A second run to compare with: then the comparison is printed instead.
        names: How the two runs were named (for the command that shows them side by side).
        rollout: Show this rollout whole: an example id, or EXAMPLE:ROLLOUT_INDEX.
        worst: Show the N rollouts with the lowest reward.
        best: Show the N rollouts with the highest reward.
        errors: Show the rollouts that errored or have unscored nodes.
        note: A line printed under the summary (such as where the environment came from).

    Raises:
        KeyError: `rollout` names no rollout of the run (the message says which exist).
    """
    if other is not None:
        console.print(render_comparison(compare(results, other)))
        a, b = (shlex.quote(str(n)) for n in names)
        console.print(f"transcripts side by side: rubric view {a} {b} --html")
        return
    console.print(results)
    if results.incomplete:
        console.print(
            f"{len(results.incomplete)} episodes were in flight when the run stopped: their "
            f"{results.num_incomplete_calls} finished model calls are kept in calls.jsonl (marked "
            "incomplete, never scored); --resume plays those rollouts again"
        )
    if note:
        console.print(safe_text(note))
    chosen = select_rollouts(
        list(results.rollouts), rollout_id=rollout, worst=worst, best=best, errors=errors
    )
    order = list(results.summary.node_means)  # tree order, as the summary lists the nodes
    for one in chosen:
        console.rule()
        console.print(render_rollout(one, order))


__all__ = [
    "comparison_table",
    "flipped_table",
    "paired_table",
    "render_comparison",
    "render_message",
    "render_rollout",
    "score_table",
    "select_rollouts",
    "show_run",
]
