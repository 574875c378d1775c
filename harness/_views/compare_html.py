"""HTML of two runs compared, node by node: for the report page and the notebook.

Each node's mean in both runs and B − A, and for runs that share examples the paired
interval of the difference (Student's t by default) and the examples a paired test would need to detect it
(computed by `harness._results.compare` / `stats`). Importing this module fills the notebook
hook of `Comparison` (`harness._core.types.register_html_view`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness._core.display import STYLE, esc, fmt, register_html_view
from harness._core.run.stats import DEFAULT_POWER, MIN_EXAMPLES, PairedDifference
from harness._core.run.storage import run_title

if TYPE_CHECKING:  # pragma: no cover
    from harness._results.compare import Comparison, NodeDelta


def _signed(value: float | None) -> str:
    return "-" if value is None else f"{value:+.4g}"


def _cls(delta: float | None) -> str:
    return "" if not delta else "good" if delta > 0 else "bad"


def interval_text(diff: PairedDifference | None) -> str:
    """ "[low, high]" of a paired difference ("-" without one)."""
    if diff is None or diff.low is None or diff.high is None:
        return "-"
    if diff.no_spread:
        return f"all {diff.low:+.3g}"
    return f"[{diff.low:+.3g}, {diff.high:+.3g}]"


def needed_text(diff: PairedDifference | None) -> str:
    """Examples needed for the observed difference: "-" if undefined, "∞" for no difference."""
    if diff is None or diff.num_pairs < 2:
        return "-"
    return "∞" if diff.examples_needed is None else f"{diff.examples_needed:,}"


def paired_note(comparison: Comparison) -> str:
    """One sentence saying what the interval and the sample size mean (plain text)."""
    first = comparison.differences[0] if comparison.differences else None
    shared = comparison.num_shared
    if first is None or shared < 2:
        return f"{shared} shared example(s): no paired interval (it needs two examples scored in both runs)"
    note = (
        f"paired over the {shared} examples in both runs (each example's rollouts averaged first): "
        f"{first.confidence:.0%} {first.method} of B − A; n = examples a paired test needs to "
        f"detect the observed B − A with {first.power:.0%} power at α = {first.alpha:g}; an "
        "interval that excludes 0 (✓) is a difference beyond sampling noise"
    )
    if shared < MIN_EXAMPLES:
        note += (
            f". Only {shared} shared examples: with fewer than {MIN_EXAMPLES}, no interval means "
            "much; compare on more examples"
        )
    if any(d.no_spread for d in comparison.differences):
        note += '. "all x": every example differs by x, so there is no spread to estimate an interval from'
    return note


def _row(node: NodeDelta, diff: PairedDifference | None) -> str:
    depth = node.path.count(".") + 1 if node.path else 0
    cells = [esc(fmt(m, stderr=e)) for m, e in ((node.mean_a, node.stderr_a), (node.mean_b, node.stderr_b))]
    mark = " ✓" if diff is not None and diff.excludes_zero else ""
    return (
        f'<tr><td style="padding-left:{4 + depth * 14}px">{esc(node.path or "reward")}</td>'
        f'<td class="num">{cells[0]}</td><td class="num">{cells[1]}</td>'
        f'<td class="num {_cls(node.delta)}">{_signed(node.delta)}</td>'
        f'<td class="num {_cls(diff.mean if diff is not None and mark else None)}">{esc(interval_text(diff))}{mark}</td>'
        f'<td class="num">{esc(needed_text(diff))}</td></tr>'
    )


def node_table_html(comparison: Comparison) -> str:
    """Each node's mean (± standard error) in A and B, B − A, its paired interval and n."""
    diffs = {d.path: d for d in comparison.differences}
    first = comparison.differences[0] if comparison.differences else None
    confidence, power = (first.confidence, first.power) if first else (0.95, DEFAULT_POWER)
    rows = "".join(_row(node, diffs.get(node.path)) for node in comparison.nodes)
    head = (
        "<tr><th>node</th><th class='num'>A</th><th class='num'>B</th><th class='num'>B − A</th>"
        f"<th class='num'>{confidence:.0%} CI (paired)</th><th class='num'>n for {power:.0%} power</th></tr>"
    )
    note = f'<div class="muted paired-note" style="max-width:640px">{esc(paired_note(comparison))}</div>'
    return f'<table class="compare-nodes">{head}{rows}</table>{note}'


def comparison_notebook_html(comparison: Comparison) -> str:
    """`Comparison._repr_html_`: the two runs' titles and the node table, self-styled."""
    a, b = comparison.a, comparison.b
    head = (
        f'<div class="head">A: {esc(run_title(a.metadata))} ({len(a)} rollouts) · '
        f"B: {esc(run_title(b.metadata))} ({len(b)} rollouts)</div>"
    )
    return f'{STYLE}<div class="rv">{head}{node_table_html(comparison)}</div>'


register_html_view("comparison", comparison_notebook_html)

__all__ = ["comparison_notebook_html", "interval_text", "needed_text", "node_table_html", "paired_note"]
