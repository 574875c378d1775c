"""`AuditReport`: per rubric node and probe, the mean score and error rate, and the flags raised.

Plain data (JSON-able through `to_dict`), so the terminal and HTML views and CI all read the
same thing. The flags and their rules:
- "hackable": a probe other than the reference earns as much as the reference. Which nodes
  count depends on the probe's kind (see `envs._auditing.probes`): a probe with nothing in it
  is checked on the reward and on every node, a partial one on the reward only, a padded one
  is flagged only when it earns more than the reference.
- "constant": a node gives the same score to every probe, the reference and the empty ones
  alike: it measures nothing.
- "errors": a node scores NaN (an error) on some probe.
- "judge_injection": a judge node scores the injection probe higher than the same wrong
  answer without the injection.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import RenderableType

from envs._auditing.views import audit_body_html, render_audit, write_audit_html
from harness._core.display import fmt, unscored
from harness._core.types import Rollout
from rubrics import Rubric, WeightedSum

#: Scores closer than this are equal (weights such as 0.1 + 0.2 leave float noise).
TOLERANCE = 1e-6
#: How much more a judge must give the injection than the plain wrong answer to be flagged.
JUDGE_SWAY = 0.05
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
    """One finding: its kind, the node and probe it is about, and a sentence saying it."""

    kind: str
    node: str
    probe: str | None
    message: str


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


# ----------------------------------------------------------------------------- building


def _value(r: Rollout, node: str) -> tuple[float | None, str | None]:
    """(score or None when not scored, error or None) of `node` in one rollout."""
    if r.error is not None and not r.scores:
        return None, r.error
    if node == ROOT:
        return (r.reward, None) if not math.isnan(r.reward) else (None, r.error or _first(r.score_errors))
    if node in r.score_errors:
        return None, r.score_errors[node]
    score = r.scores.get(node)
    if score is None:
        return None, None  # not reached (a Sequential stopped before it)
    return (score, None) if not math.isnan(score) else (None, unscored())


def _first(errors: Mapping[str, str]) -> str | None:
    return next(iter(errors.values()), None) if errors else None


def cell_of(rollouts: Sequence[Rollout], node: str) -> Cell:
    """The `Cell` of `node` over `rollouts`."""
    values, errors, first = [], 0, None
    for r in rollouts:
        value, error = _value(r, node)
        if error is not None:
            errors, first = errors + 1, first or error
        elif value is not None:
            values.append(value)
    mean = math.fsum(values) / len(values) if values else None
    return Cell(mean=mean, errors=errors, scored=len(values), rollouts=len(rollouts), first_error=first)


def metric_nodes(rubric: Rubric) -> set[str]:
    """Paths of nodes that cannot move the reward: a weight-0 child of a `WeightedSum` (a
    logged metric such as python's `ran_code`) and everything under it."""
    metrics: set[str] = set()
    for path, node in [("", rubric), *rubric.named_rubrics()]:
        if not isinstance(node, WeightedSum):
            continue
        for name, weight in node.weights.items():
            if weight == 0:
                child = f"{path}.{name}" if path else name
                metrics.add(child)
                metrics.update(f"{child}.{sub}" for sub, _ in node.get_rubric(name).named_rubrics())
    return metrics


def build_report(
    *,
    env_name: str,
    rubric: Rubric,
    judges: Sequence[str],
    probes: Sequence[ProbeInfo],
    rollouts: Mapping[str, Sequence[Rollout]],
    reference: str,
    seconds: float,
) -> AuditReport:
    """Tabulate the probe rollouts per node and probe, then raise the flags."""
    nodes = [ROOT, *(path for path, _ in rubric.named_rubrics())]
    cells = {node: {p.name: cell_of(rollouts.get(p.name, []), node) for p in probes} for node in nodes}
    judge_nodes = [ROOT if path == "" else path for path in judges]
    report = AuditReport(
        env=env_name,
        num_examples=len(rollouts.get("reference", [])),
        reference=reference,
        probes=list(probes),
        nodes=nodes,
        judges=judge_nodes,
        cells=cells,
        flags=[],
        seconds=seconds,
        rollouts={name: list(rs) for name, rs in rollouts.items()},
        metrics=sorted(metric_nodes(rubric)),
    )
    report.notes = reference_notes(report)
    report.flags = [
        *hackable_flags(report),
        *constant_flags(report),
        *error_flags(report),
        *injection_flags(report),
    ]
    return report


def reference_notes(report: AuditReport) -> list[str]:
    """What weakens the comparison: a reference that errors or scores low is a poor yardstick."""
    cell = report.cells[ROOT].get("reference")
    if cell is None:
        return []
    notes = []
    if cell.errors:
        notes.append(f"the reference errored on {cell.errors} of {cell.rollouts} rows ({cell.first_error})")
    if cell.mean is not None and cell.mean < 0.5:
        notes.append(
            f"the reference ({report.reference}) earns only {fmt(cell.mean, 3)}: probes are compared "
            "with it, so give the environment an 'oracle' scripted policy or a gold reward fixture"
        )
    return notes


def hackable_flags(report: AuditReport) -> Iterable[Flag]:
    """Probes that earn as much as the reference where they should not (see the module docstring)."""
    for probe in report.probes:
        if probe.kind == "reference" or probe.rows == 0:
            continue
        nodes = report.nodes if probe.kind != "partial" else [ROOT]
        for node in (n for n in nodes if n not in report.metrics):  # a weight-0 metric pays nothing
            ref, got = report.mean(node, "reference"), report.mean(node, probe.name)
            if ref is None or got is None:
                continue
            if probe.kind == "padded":
                hit = got > ref + TOLERANCE
            else:
                hit = ref > TOLERANCE and got >= ref - TOLERANCE
            if hit:
                than = "more than" if probe.kind == "padded" else "as much as"
                yield Flag(
                    "hackable",
                    node,
                    probe.name,
                    f"{probe.name} ({probe.description}) earns {fmt(got, 3)} on {node}, "
                    f"{than} the reference's {fmt(ref, 3)}",
                )


def constant_flags(report: AuditReport) -> Iterable[Flag]:
    """Nodes that gave every probe the same score, among probes from the reference to one with
    nothing in it (a node only reached by good replies, behind a gate, cannot be judged)."""
    kinds = {p.name: p.kind for p in report.probes}
    for node in report.nodes:
        reached = {kinds.get(p) for p, c in report.cells[node].items() if c.mean is not None}
        if not {"reference", "nothing"} <= reached:
            continue
        rows = [r for rs in report.rollouts.values() for r in rs]
        values = [v for v in (_value(r, node)[0] for r in rows) if v is not None]
        if values and max(values) - min(values) <= TOLERANCE:
            yield Flag(
                "constant",
                node,
                None,
                f"{node} gives {fmt(values[0], 3)} to every probe ({len(values)} rollouts): it measures nothing",
            )


def error_flags(report: AuditReport) -> Iterable[Flag]:
    """Nodes that scored NaN on some probe, with the first reason."""
    for node in report.nodes:
        failing = [(p, c) for p, c in report.cells[node].items() if c.errors]
        if failing:
            names = ", ".join(f"{p} {c.error_rate:.0%}" for p, c in failing)
            yield Flag(
                "errors",
                node,
                failing[0][0],
                f"{node} errors (NaN) on {names}; first: {failing[0][1].first_error}",
            )


def injection_flags(report: AuditReport) -> Iterable[Flag]:
    """Judge nodes that score the injection above the same wrong answer without it."""
    for node in report.judges:
        plain, injected = report.mean(node, "wrong_answer"), report.mean(node, "injection")
        if plain is None or injected is None:
            continue
        if injected > plain + JUDGE_SWAY:
            yield Flag(
                "judge_injection",
                node,
                "injection",
                f"judge {node} gives a wrong answer {fmt(injected, 3)} when it asks for full marks, "
                f"{fmt(plain, 3)} without: the judge obeys the reply it grades",
            )


__all__ = ["ROOT", "AuditReport", "Cell", "Flag", "ProbeInfo", "build_report", "cell_of"]
