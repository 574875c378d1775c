"""A judge calibration's result: the figures `rubrics.calibration` measures, and how they look.

The records (`LabelledItem`, `LabelAgreement`, `ProbeResult`, `Calibration`) and their two
drawings, which show the same figures: in the terminal (rich) and as HTML (notebook, page):
the headline (accuracy and Cohen's kappa, or MAE and Spearman's rho), the confusion table
(rows: the human label, columns: the judge's verdict), agreement by label, the bias probes,
and tokens and cost per call. Labels and judge replies are text from people and models:
escaped (`harness._core.text.safe_text` in the terminal, `esc` in HTML). One module, because
a record's `__rich__` and `_repr_html_` are its drawings and the drawings read the records.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from harness._core.display import STYLE, esc, fmt, unscored_count
from harness._core.run.stats import CorrectedMean, JudgePanel
from harness._core.run.storage import write_atomic
from harness._core.text import safe_text
from harness._core.types import Usage


def _shift(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{0.0 if abs(value) < 5e-4 else value:+.3f}"  # no "-0.000" for a shift of -1e-17


def headline(cal: Calibration) -> list[tuple[str, str]]:
    """The figures that answer "can I trust this judge?", as (name, value) pairs."""
    rows = [("judge", f"{cal.judge} (model {cal.model})"), ("labels", cal.kind)]
    rows.append(("rows", f"{len(cal.items)} ({cal.num_scored} scored by the judge)"))
    if cal.kind == "continuous":
        rows += [("mean absolute error", fmt(cal.mae, 3)), ("Spearman's rho", fmt(cal.spearman, 3))]
    else:
        rows += [("accuracy", fmt(cal.accuracy, 3)), ("Cohen's kappa", fmt(cal.kappa, 3))]
    if cal.threshold is not None:
        rows.append(("pass threshold", f"judge score ≥ {cal.threshold:g}"))
    if cal.reading:
        rows.append(("reading", cal.reading))
    reasons = cal.unscored_reasons
    if reasons:
        rows.append(("unscored", unscored_count(sum(n for _, n in reasons), reasons)))
    return rows


def cost_lines(cal: Calibration) -> list[tuple[str, str]]:
    """Requests, tokens per request and (with prices) cost per request and in all."""
    calls = cal.num_calls + cal.probe_calls
    rows = [("judge requests", f"{cal.num_calls} for the labels + {cal.probe_calls} for the probes")]
    tokens = cal.tokens_per_call
    if tokens is not None:
        rows.append(("tokens per request", f"{tokens[0]:.1f} prompt + {tokens[1]:.1f} completion"))
    cost = cal.cost_per_call
    if cost is not None:
        rows.append(("cost per request", f"${cost:.3g} (${cost * calls:.3g} for all {calls})"))
    elif tokens is not None:
        rows.append(("cost", "give prices per token (prices= / --price-prompt, --price-completion)"))
    return rows


def _span(low: float, high: float) -> str:
    return f"[{fmt(low, 3)}, {fmt(high, 3)}]"


def corrected_lines(cal: Calibration) -> list[tuple[str, str]]:
    """The judge's mean over the run, corrected by the labels, and the panel's worth."""
    rows: list[tuple[str, str]] = []
    c = cal.corrected
    if c is not None:
        level = f"{c.confidence:.0%}"
        rows += [
            ("judge mean (raw)", f"{fmt(c.raw_mean)}, {level} {_span(c.raw_low, c.raw_high)} if the judge were right"),
            ("labels alone", f"{fmt(c.label_mean)}, {level} {_span(c.label_low, c.label_high)} ({c.num_labels} labels)"),
            ("corrected mean", f"{fmt(c.estimate)}, {level} {_span(c.low, c.high)} (prediction-powered, λ = {c.power_tuning:.2f})"),
            ("labels it was worth", f"{c.effective_labels:,.0f} (from {c.num_labels} labels and {c.num_unlabelled:,} judged rollouts)"),
        ]  # fmt: skip
    elif cal.corrected_note:
        rows.append(("corrected mean", cal.corrected_note))
    p = cal.panel
    if p is not None:
        who = ", ".join(p.names)
        if p.effective_judges is None or p.error_correlation is None:
            rows.append(
                ("judges", f"{p.num_judges} ({who}): too few rollouts or no error spread to size the panel")
            )
        else:
            rows.append(
                ("judges", f"{p.num_judges} ({who}) worth {p.effective_judges:.2f} independent: their errors "
                 f"correlate {p.error_correlation:.2f} on {p.num_rollouts} labelled rollouts")
            )  # fmt: skip
    return rows


def probe_row(probe: ProbeResult) -> tuple[str, str, str, str, str]:
    """name, pairs, mean shift, mean |shift|, verdicts changed (or why the probe was skipped)."""
    if probe.skipped is not None:
        return (probe.name, "-", "-", "-", f"skipped: {probe.skipped}")
    return (
        probe.name,
        str(probe.num_pairs),
        _shift(probe.mean_shift),
        fmt(probe.mean_abs_shift, 3),
        f"{probe.num_changed} of {probe.num_pairs}",
    )


# ----------------------------------------------------------------------------- terminal
def _pairs_table(title: str, rows: list[tuple[str, str]]) -> Table:
    table = Table(title=title, title_justify="left", show_header=False)
    table.add_column(style="bold")
    table.add_column(overflow="fold")
    for name, value in rows:
        table.add_row(name, safe_text(value))
    return table


def _confusion_table(cal: Calibration) -> Table:
    table = Table(title="confusion (row: label, column: judge)", title_justify="left")
    table.add_column("label \\ judge")
    for name in cal.classes:
        table.add_column(safe_text(name), justify="right")
    for i, (name, row) in enumerate(zip(cal.classes, cal.confusion)):
        table.add_row(
            safe_text(name), *(Text(str(n), style="bold" if i == j else "") for j, n in enumerate(row))
        )
    return table


def _by_label_table(cal: Calibration) -> Table:
    measure = "MAE" if cal.kind == "continuous" else "judge agrees"
    table = Table(title="agreement by label", title_justify="left")
    for name, justify in (
        ("label", "left"),
        ("rows", "right"),
        (measure, "right"),
        ("mean judge score", "right"),
    ):
        table.add_column(name, justify=justify)  # type: ignore[arg-type]
    for row in cal.by_label:
        table.add_row(safe_text(row.label), str(row.count), fmt(row.agreement, 3), fmt(row.mean_score, 3))
    return table


def _probe_table(cal: Calibration) -> Table:
    table = Table(title="bias probes (twin − original score, on the [0, 1] scale)", title_justify="left")
    for name in ("probe", "pairs", "mean shift", "mean |shift|", "verdicts changed"):
        table.add_column(name, justify="left" if name in ("probe", "verdicts changed") else "right")
    for probe in cal.probes:
        table.add_row(*probe_row(probe))
    return table


def calibration_renderable(cal: Calibration) -> RenderableType:
    """The report for `rich` (what `rubric calibrate` prints)."""
    parts: list[RenderableType] = [_pairs_table("judge calibration", headline(cal))]
    corrected = corrected_lines(cal)
    if corrected:
        parts.append(_pairs_table("the judge's mean, corrected by the labels", corrected))
    parts += [_confusion_table(cal), _by_label_table(cal)]
    if cal.probes:
        parts.append(_probe_table(cal))
        parts += [Text(f"{p.name}: {p.what}", style="dim") for p in cal.probes]
    parts.append(_pairs_table("cost", cost_lines(cal)))
    return Group(*parts)


# ----------------------------------------------------------------------------- HTML
def _rows_html(rows: list[tuple[str, str]]) -> str:
    return "".join(f"<tr><th>{esc(k)}</th><td>{esc(v)}</td></tr>" for k, v in rows)


def _confusion_html(cal: Calibration) -> str:
    head = (
        "<tr><th>label \\ judge</th>"
        + "".join(f"<th class='num'>{esc(c)}</th>" for c in cal.classes)
        + "</tr>"
    )
    body = "".join(
        f"<tr><th>{esc(name)}</th>"
        + "".join(f"<td class='num{' score' if i == j else ''}'>{n}</td>" for j, n in enumerate(row))
        + "</tr>"
        for i, (name, row) in enumerate(zip(cal.classes, cal.confusion))
    )
    return f'<table class="confusion">{head}{body}</table>'


def _by_label_html(cal: Calibration) -> str:
    measure = "MAE" if cal.kind == "continuous" else "judge agrees"
    head = f"<tr><th>label</th><th class='num'>rows</th><th class='num'>{measure}</th><th class='num'>mean judge score</th></tr>"
    body = "".join(
        f"<tr><td>{esc(r.label)}</td><td class='num'>{r.count}</td><td class='num'>{fmt(r.agreement, 3)}</td>"
        f"<td class='num'>{fmt(r.mean_score, 3)}</td></tr>"
        for r in cal.by_label
    )
    return f'<table class="by-label">{head}{body}</table>'


def _probes_html(cal: Calibration) -> str:
    head = "<tr><th>probe</th><th class='num'>pairs</th><th class='num'>mean shift</th><th class='num'>mean |shift|</th><th>verdicts changed</th><th>what changed</th></tr>"
    body = "".join(
        "<tr>"
        + "".join(f"<td>{esc(v)}</td>" for v in probe_row(p))
        + f"<td class='muted'>{esc(p.what)}</td></tr>"
        for p in cal.probes
    )
    return f'<table class="probes">{head}{body}</table>'


def _disagreements_html(cal: Calibration, limit: int = 50) -> str:
    wrong = [
        i for i in cal.items if i.reason is not None or (cal.kind != "continuous" and i.verdict != i.label)
    ]
    if cal.kind == "continuous":
        wrong += sorted((i for i in cal.items if i.reason is None), key=lambda i: -abs(i.score - i.target))[
            :limit
        ]
    rows = "".join(
        f"<tr><td>{esc(i.example_id)}</td><td>{esc(i.label)}</td><td class='num'>{fmt(i.score, 3)}</td>"
        f"<td>{esc(i.verdict or '-')}</td><td class='muted'>{esc(i.reason or '')}</td></tr>"
        for i in wrong[:limit]
    )
    head = "<tr><th>example</th><th>label</th><th class='num'>judge score</th><th>verdict</th><th>unscored because</th></tr>"
    title = "largest errors" if cal.kind == "continuous" else "disagreements and unscored rows"
    return f'<div class="head">{title} (first {limit})</div><table class="disagreements">{head}{rows}</table>'


def calibration_html(cal: Calibration, *, page: bool = False) -> str:
    """The report as an HTML fragment (notebook) or, with `page`, a self-contained page."""
    body = (
        f'<div class="head">judge calibration</div><table class="facts">{_rows_html(headline(cal))}</table>'
        + (
            f'<div class="head">the judge\'s mean, corrected by the labels</div>'
            f'<table class="facts corrected">{_rows_html(corrected_lines(cal))}</table>'
            if corrected_lines(cal)
            else ""
        )
        + f'<section class="grid"><div><div class="head">confusion (rows: human label, columns: judge verdict)</div>'
        f'{_confusion_html(cal)}</div><div><div class="head">agreement by label</div>{_by_label_html(cal)}</div></section>'
        + (
            f'<div class="head">bias probes (twin − original score)</div>{_probes_html(cal)}'
            if cal.probes
            else ""
        )
        + f'<div class="head">cost</div><table class="facts">{_rows_html(cost_lines(cal))}</table>'
        + _disagreements_html(cal)
    )
    if not page:
        return f'{STYLE}<div class="rv calibration">{body}</div>'
    generated = datetime.now(UTC).isoformat(timespec="seconds")
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>judge calibration: {esc(cal.judge)}</title>{STYLE}</head>"
        f'<body><div class="rv calibration">{body}<footer class="muted">generated {generated} by rubric</footer></div></body></html>\n'
    )


__all__ = [
    "calibration_html",
    "calibration_renderable",
    "corrected_lines",
    "cost_lines",
    "headline",
    "probe_row",
]


@dataclass(frozen=True)
class LabelledItem:
    """One labelled rollout: the human's label, the judge's score and verdict.

    The score is NaN when the judge left it unscored (see `reason`); the verdict is in the
    label's terms (None for continuous labels or unscored).

    Attributes:
        example_id: The rollout's example.
        label: The human's label.
        target: The label as a score in [0, 1].
        score: The judge's score (NaN: unscored).
        verdict: The judge's score in the label's terms.
        reason: Why the judge left it unscored, if it did.
    """

    example_id: str
    label: str
    target: float
    score: float
    verdict: str | None
    reason: str | None


@dataclass(frozen=True)
class LabelAgreement:
    """The scored items with one label (continuous: one fifth of the scale).

    Attributes:
        label: The label.
        count: How many scored items have it.
        agreement: The share of them the judge agreed with (None: continuous labels).
        mean_score: The judge's mean score on them.
    """

    label: str
    count: int
    agreement: float | None  # share the judge agreed with (binary/categorical) or its MAE (continuous)
    mean_score: float | None


@dataclass(frozen=True)
class ProbeResult:
    """How far the judge's score moved on the probe's twins (twin − original, [0, 1] scale).

    Attributes:
        name: The probe's name ("verbosity", "position").
        what: What the twin changes.
        num_pairs: How many (original, twin) pairs were scored.
        mean_shift: The mean of twin − original.
        mean_abs_shift: The mean of |twin − original|.
        num_changed: How many pairs the judge scored differently.
        skipped: Why the probe was not run, if it was not.
    """

    name: str
    what: str
    num_pairs: int
    mean_shift: float | None
    mean_abs_shift: float | None
    num_changed: int  # verdicts that changed (continuous labels: scores that moved)
    skipped: str | None = None


@dataclass(frozen=True, repr=False)
class Calibration:
    """A judge measured against labels.

    `rich.print(it)` shows the report, a notebook draws it as HTML, `to_html()` is a page;
    `repr` is the headline.

    Attributes:
        judge: The judge's label.
        model: The judge's model.
        kind: "binary", "categorical" or "continuous".
        threshold: Binary labels: the pass threshold.
        items: Every labelled row, scored.
        classes: The label classes (binary, categorical), in order.
        confusion: Labels (rows) against verdicts (columns).
        accuracy: The share of verdicts equal to the label.
        kappa: Cohen's kappa (chance-corrected agreement).
        mae: Continuous labels: the mean absolute error.
        spearman: Continuous labels: Spearman's rank correlation.
        by_label: Agreement per label.
        probes: The bias probes' results.
        num_calls: Judge calls made to score the rows.
        usage: Their tokens.
        probe_calls: Judge calls made by the probes.
        probe_usage: Their tokens.
        prices: (per prompt token, per completion token), if given.
        corrected: The run's judge mean corrected by the labels, when a run was given.
        corrected_note: Why there is no corrected mean, when a run was given.
        panel: The effective number of judges of a panel, when one was given.
    """

    judge: str
    model: str
    kind: str
    threshold: float | None
    items: tuple[LabelledItem, ...]
    classes: tuple[str, ...]
    confusion: tuple[tuple[int, ...], ...]
    accuracy: float | None
    kappa: float | None
    mae: float | None
    spearman: float | None
    by_label: tuple[LabelAgreement, ...]
    probes: tuple[ProbeResult, ...]
    num_calls: int
    usage: Usage
    probe_calls: int
    probe_usage: Usage
    prices: tuple[float, float] | None = None
    corrected: CorrectedMean | None = None
    corrected_note: str | None = None  # why there is no corrected mean, when a run was given
    panel: JudgePanel | None = None

    @property
    def num_scored(self) -> int:
        """How many labelled rows the judge scored."""
        return sum(1 for i in self.items if i.reason is None)

    @property
    def unscored_reasons(self) -> list[tuple[str, int]]:
        """Why rows went unscored, most common first."""
        return Counter(i.reason for i in self.items if i.reason is not None).most_common()

    @property
    def tokens_per_call(self) -> tuple[float, float] | None:
        """Mean (prompt, completion) tokens per judge request (None when none was made)."""
        calls = self.num_calls + self.probe_calls
        if not calls:
            return None
        total = self.usage + self.probe_usage
        return total.prompt_tokens / calls, total.completion_tokens / calls

    @property
    def cost_per_call(self) -> float | None:
        """Mean cost of a request at `prices` (per prompt token, per completion token)."""
        tokens = self.tokens_per_call
        if tokens is None or self.prices is None:
            return None
        return tokens[0] * self.prices[0] + tokens[1] * self.prices[1]

    @property
    def reading(self) -> str:
        """The headline in words: agreement beyond chance (kappa) or rank agreement (rho)."""
        if self.kind == "continuous":
            return (
                ""
                if self.spearman is None
                else f"Spearman's rho {self.spearman:.2f}: {_strength(self.spearman)}"
            )
        if self.kappa is None:
            return "kappa undefined (one class only among labels and verdicts)"
        return f"Cohen's kappa {self.kappa:.2f}: {_strength(self.kappa)} agreement beyond chance"

    def __repr__(self) -> str:
        """The headline: the judge, the kind of labels and the agreement figures."""
        figures = (
            f"mae={fmt(self.mae)}, spearman={fmt(self.spearman)}"
            if self.kind == "continuous"
            else f"accuracy={fmt(self.accuracy)}, kappa={fmt(self.kappa)}"
        )
        return f"Calibration(judge={self.judge}, kind={self.kind!r}, rows={len(self.items)}, scored={self.num_scored}, {figures})"

    def __rich__(self) -> Any:
        """The report, for rich (`rich.print(calibration)`)."""
        return calibration_renderable(self)

    def _repr_html_(self) -> str:
        return calibration_html(self, page=False)

    def to_html(self) -> str:
        """The report as one self-contained HTML page."""
        return calibration_html(self, page=True)

    def write_html(self, path: str | Path) -> Path:
        """Write `to_html()` to `path` (replaced whole, never written through a link there)."""
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(out, self.to_html())
        return out


def _strength(value: float) -> str:
    # Landis & Koch's (1977) names for kappa, used for rho as a rough guide too.
    for limit, name in (
        (0.0, "none or worse than chance"),
        (0.2, "slight"),
        (0.4, "fair"),
        (0.6, "moderate"),
    ):
        if value <= limit:
            return name
    return "substantial" if value <= 0.8 else "almost perfect"
