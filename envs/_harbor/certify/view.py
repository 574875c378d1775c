"""How certificates look: a rich table for the terminal and a self-contained HTML page.

Task names, evidence and verifier output come from the task folder and the agent: the terminal
gets them through `harness._core.text` (control characters escaped, never rich markup), HTML
through `harness._core.display.esc`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from envs._harbor.certify.certificate import Certificate, HackOutcome
from harness._core.display import STYLE, esc
from harness._core.text import escape_control

_VERDICT_STYLES = {"certified": "green", "hackable": "bold red", "broken": "bold yellow"}
#: How a beaten probe's task is fixed, by vector (the guide's hardening hints, one line each).
HINTS = {
    "reward-planting": "write the reward on every path of test.sh, and score in a runner that empties /logs/verifier first",
    "shadowing": "run tools by absolute path from where the agent cannot write, and keep agent code out of the test process (run it in a subprocess; `pytest -c /dev/null --rootdir /tests`)",
    "trusted-files": "compute expected values inside the tests; never read a pass flag, log line or expected value from a path the agent controls",
    "weak-checks": "check content, not existence: compare outputs with values the tests compute",
    "leaked-answers": "keep solution/ and tests/ out of the image (no COPY of them, no git history, no env vars)",
    "llm-hacker": "read what it tried (evidence.tried) and close that hole; or verify in a separate environment",
}  # fmt: skip


def _reward(value: float | None) -> str:
    return "n/a" if value is None else f"{value:g}"


def _run(run: dict[str, object] | None) -> str:
    return "-" if run is None else _reward(run.get("reward"))  # type: ignore[arg-type]


def _first_line(probe: HackOutcome) -> str:
    said = str(probe.evidence.get("agent", "")).strip().splitlines()
    return said[0] if said else str(probe.evidence.get("reason", ""))[:200]


def certificates_table(certificates: Sequence[Certificate]) -> RenderableType:
    """One row per task (verdict, digest, oracle, do-nothing, the probes that beat it), then
    one line of evidence and how to fix it per beaten probe."""
    table = Table(title="task certificates")
    for column in ("task", "verdict", "digest", "oracle", "do-nothing", "beaten by"):
        table.add_column(column, no_wrap=column != "beaten by")
    lines: list[RenderableType] = [table]
    for c in certificates:
        beaten = ", ".join(p.name for p in c.beaten_by) or "-"
        verdict = Text(c.verdict + (" (cached)" if c.cached else ""), style=_VERDICT_STYLES[c.verdict])
        table.add_row(escape_control(c.task), verdict, c.digest[:19], _run(c.oracle), _run(c.nop), beaten)
        for probe in c.beaten_by:
            line = Text(
                f"{c.task}: {probe.name} ({probe.vector}) reward {_reward(probe.reward)}: ", style="red"
            )
            line.append(escape_control(_first_line(probe)))
            line.append(f"\n  fix: {HINTS.get(probe.vector, '')}", style="dim")
            lines.append(line)
        if c.verdict == "broken":
            said = "; ".join(f"{k}: {r.get('said')}" for k, r in (("oracle", c.oracle), ("do-nothing", c.nop)) if r and r.get("said"))  # fmt: skip
            lines.append(Text(f"{escape_control(c.task)}: broken: {escape_control(said or 'oracle or do-nothing scored wrong')}", style="yellow"))  # fmt: skip
    counts = {v: sum(c.verdict == v for c in certificates) for v in _VERDICT_STYLES}
    lines.append(Text(", ".join(f"{n} {v}" for v, n in counts.items())))
    return Group(*lines)


def _fix_html(probe: HackOutcome) -> str:
    return f"<p class=warn>fix: {esc(HINTS.get(probe.vector, ''))}</p>" if probe.beat else ""


def _probe_rows(c: Certificate) -> str:
    return "".join(
        f"<tr><td>{esc(p.name)}</td><td class='muted'>{esc(p.vector)}</td><td class='num'>{_reward(p.reward)}</td>"
        f"<td class='{'bad' if p.beat else 'good'}'>{'beaten' if p.beat else 'held'}</td>"
        f"<td><pre>{esc(str(p.evidence.get('agent', '')))}</pre><pre class='muted'>{esc(str(p.evidence.get('verifier', '')))}</pre>"
        f"{esc(str(p.evidence.get('reason', '')))}{_fix_html(p)}</td></tr>"
        for p in c.probes
    )  # fmt: skip


def certificates_html(certificates: Sequence[Certificate]) -> str:
    """The certificates as a self-contained HTML page (no scripts, no network; every string escaped)."""
    sections = "".join(
        f"<div class='head'>{esc(c.task)}: <span class='{'good' if c.verdict == 'certified' else 'bad'}'>{esc(c.verdict)}</span></div>"
        f"<p class='muted'>{esc(c.digest)} · oracle {_run(c.oracle)} · do-nothing {_run(c.nop)} · rubric {esc(c.rubric_version)}</p>"
        f"<table><tr><th>probe</th><th>vector</th><th class='num'>reward</th><th>outcome</th><th>evidence</th></tr>{_probe_rows(c)}</table>"
        for c in certificates
    )  # fmt: skip
    return (
        "<!doctype html><html><head><meta charset='utf-8'><title>task certificates</title></head>"
        f"<body>{STYLE}<div class='rv'>{sections}</div></body></html>"
    )


def write_certificates_html(certificates: Sequence[Certificate], path: str | Path) -> Path:
    """Write `certificates_html` to `path` (parent folders made); returns the path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(certificates_html(certificates), encoding="utf-8")
    return out


__all__ = ["HINTS", "certificates_html", "certificates_table", "write_certificates_html"]
