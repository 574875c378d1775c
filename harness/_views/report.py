"""The static HTML report of a run (`rubric view DIR --html`) and of two runs compared.

One self-contained file: CSS and JS inline, data embedded as JSON, no network, opens from
file://. Rollout panels are rendered here by harness._views.html (the notebook's renderer) and
embedded gzip-compressed (transcripts repeat themselves, so they shrink about tenfold); the
page draws the table at once, inflates the panels in the background with the browser's
`DecompressionStream`, and inserts a panel only when it is opened, so a 20,000-rollout report
opens in a browser in a few seconds.
"""

from __future__ import annotations

import base64
import gzip
import json
import math
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from importlib.resources import files
from pathlib import Path
from typing import Any

from harness._core.run.dirs import slug
from harness._core.run.storage import run_title, section, write_atomic
from harness._core.tree import TreeNode
from harness._core.types import Rollout
from harness._results.compare import FLIP_THRESHOLD, Comparison, compare, node_paths
from harness._results.eval_results import EvalResults
from harness._views.compare_html import node_table_html
from harness._views.html import (
    STYLE,
    esc,
    groups_html,
    histogram_svg,
    json_script,
    rollout_body_html,
    summary_html,
    tree_from_metadata,
    with_scored_paths,
)


def _asset(name: str) -> str:
    return files("harness._views").joinpath(name).read_text(encoding="utf-8")


#: A node score cell of a node that did not run on the rollout (a component its task lacks, a
#: chain stopped before it): not NaN, which is reserved for unscored.
NOT_RUN = "not run"


def _num(value: float | None) -> float | None:
    """JSON has no NaN: unscored is null."""
    return None if value is None or math.isnan(value) else round(value, 6)


def _header_html(results: EvalResults, label: str = "") -> str:
    meta = results.metadata
    env, model = section(meta, "env"), section(meta, "model")
    version = section(meta, "environment_package").get("version") or env.get("version")
    sampling = model.get("sampling")
    facts = [
        ("environment", f"{env.get('name', '?')}" + (f" {version}" if version else "")),
        ("model", model.get("model", "?")),
        (
            "sampling",
            ", ".join(f"{k}={v}" for k, v in (sampling if isinstance(sampling, Mapping) else {}).items())
            or "-",
        ),
        ("date", meta.get("started_at") or "-"),
        ("status", meta.get("status") or "-"),
    ]
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in facts)
    title = (f"{label}: " if label else "") + run_title(meta)
    return f'<div class="head">{esc(title)}</div><table class="facts">{rows}</table>'


def _nodes_of(results: EvalResults) -> list[TreeNode] | None:
    return tree_from_metadata(results.metadata)


def _packed(panels: Sequence[str]) -> str:
    """The panels as one JSON list, gzip-compressed and base64-encoded for the JSON block."""
    raw = json.dumps(list(panels), separators=(",", ":"), ensure_ascii=False).encode("utf-8")
    return base64.b64encode(gzip.compress(raw, compresslevel=6, mtime=0)).decode("ascii")


def _page(title: str, body: str, data: Mapping[str, Any]) -> str:
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title>{STYLE}<style>{_asset('report.css')}</style></head>"
        f'<body><div class="rv report">{body}<footer class="muted">generated {generated} by rubric</footer></div>'
        f"{json_script('report-data', data)}<script>{_asset('report.js')}</script></body></html>\n"
    )


def _row(i: int, r: Rollout, paths: Sequence[str]) -> list[Any]:
    return [
        i,
        str(r.example_id),
        r.rollout_index,
        _num(r.reward),
        r.stop_reason or "",
        r.error or "",
        r.turns,
        r.usage.prompt_tokens + r.usage.completion_tokens,
        [_num(r.scores.get(p, math.nan)) if p in r.scores or p in r.score_errors else NOT_RUN for p in paths],
    ]


def report_html(results: EvalResults) -> str:
    """One run as a self-contained HTML page: header, summary with histogram, a sortable and
    filterable rollout table, a panel per rollout (conversation and reward tree), then the
    groups of repeated examples side by side, folded."""
    nodes = _nodes_of(results)
    paths = node_paths(results)
    summary = summary_html(results.summary, nodes, results.metadata.get("status"))
    drawn = with_scored_paths(nodes or [], paths)  # each panel's tree: every node any rollout scored
    body = (
        f'<header>{_header_html(results)}</header><section class="grid"><div>{summary}</div>'
        f"<div>{histogram_svg(r.reward for r in results.rollouts)}</div></section>"
        '<section id="app"></section><section id="panel"></section>'
        f"<section>{groups_html(results.rollouts, nodes, limit=20, answers=False, folded=True)}</section>"
    )
    data = {
        "mode": "run",
        "columns": paths,
        "rows": [_row(i, r, paths) for i, r in enumerate(results.rollouts)],
        "packed": {"panels": _packed([rollout_body_html(r, drawn) for r in results.rollouts])},
    }
    return _page(run_title(results.metadata), body, data)


# ------------------------------------------------------------------------------- comparison


def _example_rows(comparison: Comparison) -> list[list[Any]]:
    rows = []
    for e in comparison.examples:
        nodes = [[c.path, _num(c.a), _num(c.b), c.flipped] for c in e.changes]
        delta = None if e.delta is None else round(e.delta, 6)
        rows.append(
            [
                e.example,
                _num(e.reward_a),
                _num(e.reward_b),
                delta,
                nodes,
                list(e.rollouts_a),
                list(e.rollouts_b),
            ]
        )
    return rows


def comparison_html(a: EvalResults, b: EvalResults) -> str:
    """Two runs of one environment side by side: each node's mean in each run with the
    difference, the examples whose reward changed most, and per example the nodes that
    flipped with both transcripts side by side."""
    nodes = _nodes_of(a) or _nodes_of(b)
    comparison = compare(a, b)
    body = (
        f'<header class="grid"><div>{_header_html(a, "A")}</div><div>{_header_html(b, "B")}</div></header>'
        f'<section class="grid"><div><div class="head">node means</div>{node_table_html(comparison)}</div>'
        f'<div><div class="head">A</div>{histogram_svg(r.reward for r in a.rollouts)}'
        f'<div class="head">B</div>{histogram_svg(r.reward for r in b.rollouts)}</div></section>'
        '<section id="app"></section><section id="panel"></section>'
    )
    data = {
        "mode": "compare",
        "flip_threshold": FLIP_THRESHOLD,
        "examples": _example_rows(comparison),
        "packed": {
            "panels_a": _packed([rollout_body_html(r, _nodes_of(a) or nodes) for r in a.rollouts]),
            "panels_b": _packed([rollout_body_html(r, _nodes_of(b) or nodes) for r in b.rollouts]),
        },
    }
    return _page(f"{run_title(a.metadata)} vs {run_title(b.metadata)}", body, data)


def report_path(source: str | Path, other: str | Path | None = None, out: str | None = None) -> Path:
    """Where `rubric view --html` writes the report of a run, or of two runs compared.

    Args:
        source: The run directory or results file.
        other: A second run compared with it, if any.
        out: The path asked for; when given, it is the answer.

    Returns:
        `out`, else DIR/report.html (FILE.html beside a results file), or
        ./compare--A--B.html for two runs.
    """
    if out:
        return Path(out)
    source = Path(source)
    if other is not None:
        return Path(f"compare--{slug(source.name)}--{slug(Path(other).name)}.html")
    return source.with_suffix(".html") if source.is_file() else source / "report.html"


def write_report(results: EvalResults, out: str | Path, *, other: EvalResults | None = None) -> Path:
    """Write `report_html(results)`, or with `other` the comparison of the two, to `out`.

    Args:
        results: The run to report on.
        out: The HTML file to write (its parent folders are created).
        other: A second run to compare `results` with, if any.

    Returns:
        The path written.
    """
    path = Path(out)
    text = report_html(results) if other is None else comparison_html(results, other)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, text)  # renamed into place: a link planted at `path` is replaced, not followed
    return path


__all__ = [
    "FLIP_THRESHOLD",
    "comparison_html",
    "report_html",
    "report_path",
    "write_report",
]
