"""What the command line prints about runs: a finished run, its workers, a merge, a re-score.

Kept with the other views so `cli.py` only declares commands; every string that came from a
run folder goes through `harness._core.text` (control characters escaped, never rich markup).
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from harness._core.display import fmt
from harness._core.summary import Summary
from harness._core.text import escape_control
from harness._results.eval_results import EvalResults
from harness._results.sharding import MergeReport

#: How many missing (example, rollout) pairs a merge report names before "and N more".
SHOWN_MISSING = 8


def workers_line(metadata: dict[str, Any]) -> str | None:
    """One line on the workers of the run's last session: rollouts and peak memory of each."""
    report = (metadata.get("sessions") or [{}])[-1].get("workers")
    if not report:
        return None
    each = ", ".join(
        f"#{w['index']} {w.get('rollouts', '?')} rollouts {w.get('peak_rss_mib', '?')} MB"
        if not w.get("lost")
        else f"#{w['index']} lost"
        for w in report["workers"]
    )
    lost = f"; {len(report['lost'])} died, {report['requeued']} rollout(s) re-run" if report["lost"] else ""
    return f"{report['executor']} workers: {each}; driver peak {report['driver_peak_rss_mib']} MB{lost}"


def print_run(console: Console, results: EvalResults, output_dir: Path) -> None:
    """A finished `rubric eval`: the summary, the workers, where the results are, what errored."""
    console.print(results)
    line = workers_line(results.metadata)
    if line:
        console.print(line, soft_wrap=True)
    console.print(f"Results written to [bold]{output_dir}[/bold]", soft_wrap=True)
    errors = results.summary.num_errors
    if errors:
        console.print(
            f"[yellow]{errors} rollout(s) ended with an error; see them with "
            f"`rubric view {output_dir} --errors`[/yellow]",
            soft_wrap=True,
        )


def too_many_errors(
    summary: Summary, fail_on_error: float | None, spelled: str = "--fail-on-error"
) -> str | None:
    """Why a run fails by its errors, or None when it does not. As Inspect's `fail_on_error`:
    more than `fail_on_error` of its rollouts errored, a share when below 1 (0: any error) and
    a count from 1 up; None (not given): every rollout errored. `spelled` names the setting."""
    errors, rollouts = summary.num_errors, summary.num_rollouts
    if fail_on_error is None:
        too_many, allowed = rollouts > 0 and errors == rollouts, "every rollout"
    elif fail_on_error == 0:
        too_many, allowed = errors > 0, f"{spelled}: any error"
    else:
        limit = fail_on_error * rollouts if fail_on_error < 1 else fail_on_error
        too_many, allowed = errors > limit, f"more than {spelled} {fail_on_error:g}"
    return f"{errors} of {rollouts} rollouts errored ({allowed})" if too_many else None


def print_rescored(console: Console, old: EvalResults, new: EvalResults, out: Path) -> None:
    """A finished `rubric score`: the new summary and how the mean reward moved."""
    console.print(new)
    before, after = old.summary.mean_reward, new.summary.mean_reward
    console.print(
        f"mean reward {fmt(before)} -> {fmt(after)}; re-scored rollouts written to [bold]{out}[/bold]",
        soft_wrap=True,
    )


def print_merge(console: Console, report: MergeReport, merged: EvalResults) -> None:
    """A finished `rubric merge`: the merged summary, and what is missing when it is incomplete."""
    console.print(merged)
    console.print(
        f"merged {len(report.shards)} shard(s) ({', '.join(report.shards)}): {report.num_rollouts} rollouts "
        f"written to [bold]{report.output_dir}[/bold]",
        soft_wrap=True,
    )
    if report.status == "completed":
        return
    gaps = []
    if report.missing_shards:
        gaps.append(f"shard(s) {', '.join(map(str, report.missing_shards))} not given")
    if report.missing:
        shown = ", ".join(f"{e}:{i}" for e, i in report.missing[:SHOWN_MISSING])
        more = (
            f" and {len(report.missing) - SHOWN_MISSING} more" if len(report.missing) > SHOWN_MISSING else ""
        )
        gaps.append(f"{len(report.missing)} rollout(s) missing ({shown}{more})")
    console.print(
        f"[yellow]incomplete: {'; '.join(gaps)}; run the original command without --shard and with "
        f"--resume {report.output_dir} to fill the gaps[/yellow]",
        soft_wrap=True,
    )


def resume_hint(run_dir: Path, flags: Sequence[str] = ()) -> str:
    """The command that continues an interrupted run (`flags`: what it must be told again)."""
    return escape_control(
        f"continue with: {shlex.join(['rubric', 'eval', '--resume', str(run_dir), *flags])}"
    )


__all__ = [
    "print_merge",
    "print_rescored",
    "print_run",
    "resume_hint",
    "too_many_errors",
    "workers_line",
]
