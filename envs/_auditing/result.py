"""An audit's result, `AuditReport`, and how it looks: a rich table and a self-contained HTML page.

The report is plain data (JSON-able through `to_dict`), so the terminal and HTML views and CI
all read the same thing; its `__rich__` and `_repr_html_` are the drawings below, so records
and drawings are one module.

One row per probe, one column per rubric node (the reward first), each cell the probe's mean
score on that node; a cell that a flag names is marked, errors show their rate. Every name
in a report can come from user code (node names, probe names of a custom audit, error
text), so the terminal gets it through `harness._core.text` (control characters escaped, never
rich markup) and HTML through `harness._views.html.esc`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from harness._core.display import STYLE, esc, fmt
from harness._core.text import escape_control, safe_text
from harness._core.types import Rollout

#: The marks flags leave on the cells they name.
MARKS = {"hackable": "!", "errors": "E", "constant": "=", "judge_injection": "J"}
LEGEND = (
    "marks: ! hackable  = constant  E errors (with their rate)  J judge swayed by the injection; "
    "n/a: node not reached (a gate or Sequential stopped first); -: probe not built for these rows"
)
_STYLES = {"hackable": "bold red", "errors": "yellow", "constant": "magenta", "judge_injection": "bold red"}


def _marks(report: AuditReport) -> dict[tuple[str, str | None], list[str]]:
    """(node, probe) -> the kinds of flag that name that cell (probe None: the whole column)."""
    marks: dict[tuple[str, str | None], list[str]] = {}
    for flag in report.flags:
        probe = flag.probe if flag.kind in ("hackable", "judge_injection") else None
        marks.setdefault((flag.node, probe), []).append(flag.kind)
    return marks


def _cell_text(cell: Cell | None) -> str:
    if cell is None or cell.rollouts == 0:
        return "-"
    value = fmt(cell.mean, 3)
    return f"{value} E{cell.error_rate:.0%}" if cell.errors else value


def short_names(paths: list[str]) -> list[str]:
    """Each dotted node path by its shortest ending that no other path shares ("grade.win" -> "win")."""
    names = []
    for path in paths:
        parts = path.split(".")
        for start in range(len(parts) - 1, -1, -1):
            tail = ".".join(parts[start:])
            if sum(1 for p in paths if p == tail or p.endswith("." + tail)) == 1:
                break
        names.append(tail)
    return names


def audit_table(report: AuditReport) -> Table:
    """Probes down, nodes across (by their shortest unique names): each probe's mean score
    per node, the reward first; a probe built for fewer rows than asked says how many."""
    table = Table(title=safe_text(f"audit of {report.env}: mean scores"), title_justify="left")
    table.add_column("probe", no_wrap=True)
    for name in short_names(report.nodes):
        table.add_column(safe_text(name), justify="right", overflow="fold")
    marks = _marks(report)
    for probe in report.probes:
        label = safe_text(probe.name)
        if probe.rows < probe.total:
            label.append(f" {probe.rows}/{probe.total}", style="dim")
        row: list[Text] = [label]
        for node in report.nodes:
            kinds = marks.get((node, probe.name), []) + marks.get((node, None), [])
            text = _cell_text(report.cells[node].get(probe.name))
            if kinds:
                text += " " + "".join(MARKS[k] for k in kinds)
            row.append(Text(text, style=_STYLES[kinds[0]] if kinds else ""))
        table.add_row(*row)
    return table


def _evidence_text(evidence: dict[str, Any]) -> str:
    """A flag's evidence on one line: what the probe said, then what each check read."""
    said = " ".join(str(evidence.get("agent", "")).split())
    details = json.dumps(evidence.get("details", {}), default=str)
    return f"{said or '(nothing said)'}; checks read {details}"


def render_audit(report: AuditReport) -> RenderableType:
    """The table, then one line per flag, then what the marks mean."""
    lines: list[RenderableType] = [audit_table(report)]
    lines.append(
        safe_text(
            f"{report.num_examples} rows, reference = {report.reference}, {report.seconds:.1f} s; "
            f"{len(report.flags)} flag{'s' if len(report.flags) != 1 else ''}",
            style="dim",
        )
    )
    for note in report.notes:
        lines.append(safe_text(f"note: {note}", style="yellow"))
    for flag in report.flags:
        line = Text(f"{MARKS[flag.kind]} {flag.kind}: ", style=_STYLES[flag.kind])
        line.append(escape_control(flag.message))
        lines.append(line)
        if flag.evidence:
            lines.append(safe_text(f"    evidence: {_evidence_text(flag.evidence)}", style="dim"))
    if not report.flags:
        lines.append(Text("nothing flagged", style="green"))
    lines.append(Text(LEGEND, style="dim"))
    return Group(*lines)


def _table_html(report: AuditReport) -> str:
    marks = _marks(report)
    head = "".join(f'<th class="num">{esc(node)}</th>' for node in report.nodes)
    rows = []
    for probe in report.probes:
        cells = []
        for node in report.nodes:
            kinds = marks.get((node, probe.name), []) + marks.get((node, None), [])
            cls = (
                "num bad" if {"hackable", "judge_injection"} & set(kinds) else "num warn" if kinds else "num"
            )
            text = _cell_text(report.cells[node].get(probe.name))
            cells.append(f'<td class="{cls}">{esc(text)} {esc("".join(MARKS[k] for k in kinds))}</td>')
        rows.append(
            f'<tr><td title="{esc(probe.description)}">{esc(probe.name)}</td><td class="muted">{esc(probe.kind)}</td>'
            f'<td class="num">{probe.rows}/{probe.total}</td>{"".join(cells)}</tr>'
        )
    return (
        f"<table><tr><th>probe</th><th>kind</th><th class='num'>rows</th>{head}</tr>{''.join(rows)}</table>"
    )


def audit_body_html(report: AuditReport) -> str:
    """The report as an HTML fragment (styled, every string escaped): `AuditReport._repr_html_`."""
    flags = "".join(
        f'<li><span class="bad">{esc(MARKS[f.kind])} {esc(f.kind)}</span>: {esc(f.message)}'
        + (f"<pre>{esc(_evidence_text(f.evidence))}</pre>" if f.evidence else "")
        + "</li>"
        for f in report.flags
    )
    probes = "".join(
        f"<tr><td>{esc(p.name)}</td><td>{esc(p.description)}</td>"
        f"<td class='muted'>{esc(p.needs) if p.rows < p.total else ''}</td></tr>"
        for p in report.probes
    )
    return (
        f'{STYLE}<div class="rv"><div class="head">{esc(f"audit of {report.env}")}</div>'
        f'<p class="muted">{report.num_examples} rows, reference: {esc(report.reference)}, '
        f"{fmt(report.seconds, 3)} s</p>{''.join(f'<p class=warn>note: {esc(n)}</p>' for n in report.notes)}"
        f"{_table_html(report)}"
        f"<div class='head'>flags</div>{f'<ul>{flags}</ul>' if flags else '<p class=good>nothing flagged</p>'}"
        f"<div class='head'>probes</div>"
        f"<table><tr><th>probe</th><th>what it sends</th><th>skipped rows lack</th></tr>{probes}</table>"
        f"<p class='muted'>{esc(LEGEND)}</p></div>"
    )


def audit_html(report: AuditReport) -> str:
    """The report as a self-contained HTML page (no scripts, no network; every string escaped)."""
    title = esc(f"audit of {report.env}")
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{title}</title></head>"
        f"<body>{audit_body_html(report)}</body></html>"
    )


def write_audit_html(report: AuditReport, path: str | Path) -> Path:
    """Write `audit_html(report)` to `path` (parent folders created); returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(audit_html(report), encoding="utf-8")
    return out


__all__ = [
    "ROOT",
    "AuditReport",
    "Cell",
    "Flag",
    "ProbeInfo",
    "audit_body_html",
    "audit_html",
    "audit_table",
    "render_audit",
    "write_audit_html",
]


#: The reward's row in tables and JSON (node paths are dotted names; the root has none).
ROOT = "reward"


@dataclass(frozen=True)
class ProbeInfo:
    """A probe as run: `rows` of `total` rows could be built (`needs` says what the rest lacked)."""

    name: str
    description: str
    kind: str
    rows: int
    total: int
    needs: str = ""


@dataclass
class Cell:
    """One node under one probe: mean of its finite scores, and how many rollouts errored."""

    mean: float | None
    errors: int
    scored: int
    rollouts: int
    first_error: str | None = None

    @property
    def error_rate(self) -> float:
        return self.errors / self.rollouts if self.rollouts else 0.0


@dataclass(frozen=True)
class Flag:
    """One finding: its kind, the node and probe it is about, a sentence saying it, and (an
    agent probe's) evidence: what the probe said it wrote (`agent`), the scores and what each
    check read (`scores`, `details`)."""

    kind: str
    node: str
    probe: str | None
    message: str
    evidence: dict[str, Any] = field(default_factory=dict)


@dataclass
class AuditReport:
    """What `envs.audit` found: each rubric node's mean score under each probe, and the flags.

    A node is a dotted rubric path, or "reward" for the whole reward. Printed with rich, it is
    the table `rubric audit` shows; in a notebook, the HTML page.

    Attributes:
        env: The environment's name.
        num_examples: How many dataset rows were probed.
        reference: How the reference (correct) replies were made.
        probes: The probes run, with what each one sends.
        nodes: The rubric's node paths, the reward first.
        judges: The paths of the LLM judges in the rubric.
        cells: `cells[node][probe]`, the scores of one node under one probe.
        flags: The findings (hackable, constant, erroring nodes; judges swayed by injection).
        seconds: How long the audit took.
        rollouts: Every probe rollout by probe (prompt, completion, per-node scores).
        notes: What the audit could not do, one sentence each.
        metrics: Nodes that cannot move the reward (weight 0); never called hackable.
    """

    env: str
    num_examples: int
    reference: str
    probes: list[ProbeInfo]
    nodes: list[str]
    judges: list[str]
    cells: dict[str, dict[str, Cell]]
    flags: list[Flag]
    seconds: float
    rollouts: dict[str, list[Rollout]] = field(default_factory=dict, repr=False)
    notes: list[str] = field(default_factory=list)
    metrics: list[str] = field(default_factory=list)

    @property
    def flagged(self) -> bool:
        """True when anything was flagged (`rubric audit --strict` then exits 1)."""
        return bool(self.flags)

    def flags_of(self, kind: str) -> list[Flag]:
        """The flags of one kind ("hackable", "constant", "errors", "judge_injection")."""
        return [f for f in self.flags if f.kind == kind]

    def mean(self, node: str, probe: str) -> float | None:
        """Mean score of `node` ("reward" for the root) under `probe`; None when nothing scored."""
        cell = self.cells.get(node, {}).get(probe)
        return cell.mean if cell is not None else None

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-able data (no rollouts; a mean with nothing scored is null)."""
        return {
            "env": self.env,
            "num_examples": self.num_examples,
            "reference": self.reference,
            "flagged": self.flagged,
            "seconds": round(self.seconds, 3),
            "probes": [asdict(p) for p in self.probes],
            "judges": self.judges,
            "metrics": self.metrics,
            "nodes": {
                node: {
                    probe: {**asdict(cell), "error_rate": cell.error_rate}
                    for probe, cell in self.cells[node].items()
                }
                for node in self.nodes
            },
            "flags": [asdict(f) for f in self.flags],
            "notes": self.notes,
        }

    def to_json(self) -> str:
        """`to_dict` as indented JSON text."""
        return json.dumps(self.to_dict(), indent=2, allow_nan=False)

    def write_json(self, path: str | Path) -> Path:
        """Write `to_json()` to a file.

        Args:
            path: The file to write (its parent folders are created).

        Returns:
            The path written.
        """
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(self.to_json() + "\n", encoding="utf-8")
        return out

    def write_html(self, path: str | Path | None = None) -> Path:
        """Write the report as a self-contained HTML page.

        Args:
            path: The file to write (default: ./audit--ENV.html).

        Returns:
            The path written.
        """
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in self.env) or "env"
        return write_audit_html(self, path or f"audit--{safe}.html")

    def _repr_html_(self) -> str:
        return audit_body_html(self)

    def __rich__(self) -> RenderableType:
        return render_audit(self)

    def __repr__(self) -> str:
        kinds = ", ".join(sorted({f.kind for f in self.flags})) or "nothing flagged"
        return (
            f"AuditReport(env={self.env!r}, num_examples={self.num_examples}, "
            f"probes={len(self.probes)}, nodes={len(self.nodes)}, flags={len(self.flags)}: {kinds})"
        )
