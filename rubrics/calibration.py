"""Can I trust this judge as a reward? An `LLMJudge` measured against human labels.

`calibrate(judge, labels)` scores every labelled rollout with the judge and compares its
verdicts with the labels:

- binary labels (True/False, 1/0): the judge's verdict is "pass" when its score (in [0, 1])
  reaches `threshold`; accuracy, Cohen's kappa, the 2×2 confusion table, agreement by label.
- categorical labels (e.g. "C"/"P"/"I", or a few numbers): each category has a score (the
  judge's own `choices`, rescaled to [0, 1], unless `categories=` says otherwise); the verdict
  is the category nearest the judge's score; accuracy, kappa, confusion, agreement by label.
- continuous labels (numbers on `label_range`, by default the judge's `score_range`, rescaled
  to [0, 1]): mean absolute error, Spearman's rho, and a confusion table of fifths.

Then two bias probes (`rubrics._judge.probes`: padding the response, swapping response and
reference) and what the judge costs: tokens per call from its recorded usage, and money per
call when `prices` are given. A label row the judge could not score is counted with its reason
and left out of the figures, never scored as 0.

Given the run the labels were drawn from (`run=`, the rollouts of a results folder, and the
judge's `path` in the run's rubric), the judge's mean over the run is corrected by the labels
(prediction-powered inference, `harness._core.run.stats.prediction_powered_mean`): its raw mean,
the corrected mean with its interval, and how many labels the judge was worth. The labelled
rollouts must be a random sample of the run for the correction to hold. With several judges in
the run (`panel=` their paths) or one judge asked `samples > 1` times, the correlation of their
errors says how many independent judges they are worth (`effective_judges`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness._core.aio import run_sync
from harness._core.defaults import DEFAULT_CONCURRENCY
from harness._core.errors import ConfigError
from harness._core.run.stats import CorrectedMean, JudgePanel, effective_judges, prediction_powered_mean
from harness._core.types import Rollout, Usage
from rubrics._judge import agreement
from rubrics._judge.calibration_result import Calibration, LabelAgreement, LabelledItem, ProbeResult
from rubrics._judge.labels import (
    CONTINUOUS_BINS,
    DEFAULT_THRESHOLD,
    Kind,
    LabelScale,
    fifth,
    label_scale,
    label_text,
    read_labels,
)
from rubrics._judge.llm import LLMJudge
from rubrics._judge.probes import padded, position_applies, swapped
from rubrics._tree.module import Rubric


# ----------------------------------------------------------------------------- scoring
@dataclass
class _Pass:
    """One scoring pass over rollouts: scores (NaN when unscored), reasons, requests, tokens."""

    scores: list[float]
    reasons: list[str | None]
    calls: int
    usage: Usage
    samples: list[list[float]] = field(default_factory=list)  # each row's per-sample scores


async def _score(judge: LLMJudge, rollouts: Sequence[Rollout], concurrency: int) -> _Pass:
    batch = await judge.ascore_batch(rollouts, concurrency=concurrency)
    result = _Pass([], [], 0, Usage())
    for r in batch.rollouts:
        reason = r.score_errors.get("")  # also set when the judge declares on_error=<value>
        result.scores.append(math.nan if reason is not None else r.reward)
        result.reasons.append(reason)
        detail = r.score_details.get("", {})
        result.samples.append([math.nan if v is None else float(v) for v in detail.get("scores", [])])
        result.calls += int("usage" in detail and not detail.get("cached"))
        result.usage = result.usage + r.judge_usage
    return result


def _items(rows: Sequence[tuple[Rollout, Any]], scale: LabelScale, scored: _Pass) -> tuple[LabelledItem, ...]:
    items = []
    for number, ((rollout, label), score, reason) in enumerate(zip(rows, scored.scores, scored.reasons), 1):
        verdict = scale.verdict(score)
        items.append(
            LabelledItem(
                str(rollout.example_id),
                label_text(label),
                scale.target(label, number),
                score,
                verdict,
                reason,
            )
        )
    return tuple(items)


def _truth(scale: LabelScale, item: LabelledItem) -> str:
    return fifth(item.target) if scale.kind == "continuous" else item.label


def _classes(scale: LabelScale) -> tuple[str, ...]:
    if scale.kind == "binary":
        return ("1", "0")
    if scale.kind == "categorical":
        return tuple(scale.categories)
    return tuple(fifth((i + 0.5) / CONTINUOUS_BINS) for i in reversed(range(CONTINUOUS_BINS)))


def _by_label(
    scale: LabelScale, scored: Sequence[LabelledItem], classes: Sequence[str]
) -> tuple[LabelAgreement, ...]:
    rows = []
    for name in classes:
        group = [i for i in scored if _truth(scale, i) == name]
        if not group:
            continue
        if scale.kind == "continuous":
            agree = agreement.mean_abs_error([i.target for i in group], [i.score for i in group])
        else:
            agree = sum(i.verdict == name for i in group) / len(group)
        rows.append(LabelAgreement(name, len(group), agree, math.fsum(i.score for i in group) / len(group)))
    return tuple(rows)


async def _probe(
    name: str,
    what: str,
    judge: LLMJudge,
    rows: Sequence[Rollout],
    base: Sequence[LabelledItem],
    scale: LabelScale,
    concurrency: int,
) -> tuple[ProbeResult, _Pass]:
    kept = [(r, item) for r, item in zip(rows, base) if item.reason is None]
    twins = [padded(r) if name == "verbosity" else swapped(r) for r, _ in kept]
    scored = await _score(judge, twins, concurrency) if twins else _Pass([], [], 0, Usage())
    pairs = [(item, s) for (_, item), s in zip(kept, scored.scores) if not math.isnan(s)]
    shifts = [s - item.score for item, s in pairs]
    if scale.kind == "continuous":
        changed = sum(abs(d) > 1e-9 for d in shifts)
    else:
        changed = sum(scale.verdict(s) != item.verdict for item, s in pairs)
    mean = math.fsum(shifts) / len(shifts) if shifts else None
    mean_abs = math.fsum(abs(d) for d in shifts) / len(shifts) if shifts else None
    return ProbeResult(name, what, len(pairs), mean, mean_abs, changed), scored


async def _probes(
    judge: LLMJudge,
    rows: Sequence[Rollout],
    base: Sequence[LabelledItem],
    scale: LabelScale,
    concurrency: int,
) -> tuple[list[ProbeResult], int, Usage]:
    results, calls, usage = [], 0, Usage()
    verbosity = "the response followed by a paragraph of content-free filler"
    position = "the response and the reference answer trade places in the judge's prompt"
    # The names the judge's prompt template uses (a sibling module of the judge reads its
    # compiled template: the position probe needs to know whether both texts are shown).
    fields = frozenset(judge._template.variables)
    for name, what in (("verbosity", verbosity), ("position", position)):
        skipped = position_applies(fields) if name == "position" else None
        if skipped is not None:
            results.append(ProbeResult(name, what, 0, None, None, 0, skipped))
            continue
        result, scored = await _probe(name, what, judge, rows, base, scale, concurrency)
        results.append(result)
        calls, usage = calls + scored.calls, usage + scored.usage
    return results, calls, usage


# ----------------------------------------------------------------------------- entry points
def find_judge(rubric: Rubric, node: str | None = None) -> LLMJudge:
    """The LLMJudge at dotted `node` of `rubric` (the only one in the tree when `node` is None).

    Args:
        rubric: The tree to look in.
        node: The judge's dotted path (None: the tree's only judge).

    Returns:
        The judge.

    Raises:
        ConfigError: no such node, the node is no LLMJudge, or several judges and no `node`;
            the message lists the tree's judges.
    """
    judges = [(p, n) for p, n in [("", rubric), *rubric.named_rubrics()] if isinstance(n, LLMJudge)]
    listed = ", ".join(repr(p or "(the root)") for p, _ in judges) or "none"
    if node is None:
        if len(judges) == 1:
            return judges[0][1]
        problem = "has no LLMJudge" if not judges else "has several judges"
        raise ConfigError(f"the rubric {problem} (judges: {listed}); pick one with node= (--node PATH)")
    try:
        found = rubric.get_rubric(node)
    except KeyError:
        raise ConfigError(f"the rubric has no node {node!r}; its judges: {listed}") from None
    if not isinstance(found, LLMJudge):
        raise ConfigError(
            f"node {node!r} is a {type(found).__name__}, not an LLMJudge; the rubric's judges: {listed}"
        )
    return found


def _figures(scale: LabelScale, items: Sequence[LabelledItem]) -> dict[str, Any]:
    scored = [i for i in items if i.reason is None]
    classes = _classes(scale)
    truth = [_truth(scale, i) for i in scored]
    verdicts = [str(i.verdict) for i in scored]
    figures: dict[str, Any] = {
        "classes": classes,
        "confusion": agreement.confusion(truth, verdicts, classes),
        "by_label": _by_label(scale, scored, classes),
        "accuracy": None, "kappa": None, "mae": None, "spearman": None,
    }  # fmt: skip
    if scale.kind == "continuous":
        targets, scores = [i.target for i in scored], [i.score for i in scored]
        figures.update(
            mae=agreement.mean_abs_error(targets, scores), spearman=agreement.spearman_rho(targets, scores)
        )
    else:
        figures.update(
            accuracy=agreement.accuracy(truth, verdicts), kappa=agreement.cohen_kappa(truth, verdicts)
        )
    return figures


async def acalibrate(
    judge: LLMJudge,
    labels: str | Path | Iterable[Mapping[str, Any]],
    *,
    kind: Kind = "auto",
    threshold: float = DEFAULT_THRESHOLD,
    categories: Mapping[str, float] | None = None,
    label_range: tuple[float, float] | None = None,
    probes: bool = True,
    prices: tuple[float, float] | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    run: Sequence[Rollout] | None = None,
    path: str = "",
    panel: Sequence[str] = (),
) -> Calibration:
    """Measure `judge` against human labels (see the module docstring for every figure).

    Args:
        judge: The judge to measure (its endpoint, prompt and parsing as they are).
        labels: A JSONL file, or dicts: a rollout (`prompt`, `completion`, `answer`, ...) and
            its human `label` per row.
        kind: "binary", "categorical", "continuous", or "auto" (from the labels).
        threshold: Binary labels: the judge says "pass" when its score reaches this.
        categories: Categorical labels: each label's score in [0, 1] (default: the judge's choices).
        label_range: Continuous labels: their scale (default: the judge's `score_range`).
        probes: Run the verbosity and position probes (one more judge call per row each).
        prices: (per prompt token, per completion token), to report the cost per call.
        concurrency: Most rows scored at once.
        run: The rollouts of the run the labels were drawn from (a random sample of them): the
            judge's mean over the run is corrected by the labels. Label rows then name the
            rollout they label (`example_id`, `rollout_index`) and take its fields from the run.
        path: The judge's dotted path in the run's rubric ("" when it is the whole rubric).
        panel: Paths of the run's judge nodes that score the same thing (this one included):
            their error correlation gives the effective number of judges.

    Returns:
        The `Calibration`: print it, show it in a notebook, or write `to_html()`.

    Raises:
        ConfigError: a bad label or row, or a row that names no rollout of `run`.
    """
    by_key = None if run is None else {(str(r.example_id), r.rollout_index): r for r in run}
    rows = read_labels(labels, run=by_key)
    scale = label_scale(judge, [label for _, label in rows], kind, threshold, categories, label_range)
    rollouts = [r for r, _ in rows]
    for number, (_, label) in enumerate(rows, 1):
        scale.target(label, number)  # a bad label fails before any judge call
    scored = await _score(judge, rollouts, concurrency)
    items = _items(rows, scale, scored)
    found, probe_calls, probe_usage = (
        await _probes(judge, rollouts, items, scale, concurrency) if probes else ([], 0, Usage())
    )
    corrected, note = _corrected(by_key, rows, items, path) if by_key is not None else (None, None)
    return Calibration(
        judge=judge.label, model=judge.model, kind=scale.kind,
        threshold=threshold if scale.kind == "binary" else None, items=items, **_figures(scale, items),
        probes=tuple(found), num_calls=scored.calls, usage=scored.usage, probe_calls=probe_calls,
        probe_usage=probe_usage, prices=prices, corrected=corrected, corrected_note=note,
        panel=_panel(by_key, rows, items, panel, scored),
    )  # fmt: skip


def _node_score(rollout: Rollout, path: str) -> float:
    return rollout.reward if not path else rollout.scores.get(path, math.nan)


def _labelled(rows: Sequence[tuple[Rollout, Any]]) -> list[tuple[str, int]]:
    return [(str(r.example_id), r.rollout_index) for r, _ in rows]


def _corrected(
    run: Mapping[tuple[str, int], Rollout],
    rows: Sequence[tuple[Rollout, Any]],
    items: Sequence[LabelledItem],
    path: str,
) -> tuple[CorrectedMean | None, str | None]:
    """The judge's mean over the run corrected by the labels, or why there is none.

    From the run's own scores of node `path` (the same judge calls that made the run's mean).
    """
    keys = _labelled(rows)
    pairs = [
        (item.target, _node_score(run[k], path))
        for k, item in zip(keys, items)
        if math.isfinite(_node_score(run[k], path))
    ]
    chosen = set(keys)
    others = [s for k, r in run.items() if k not in chosen and math.isfinite(s := _node_score(r, path))]
    where = f"node {path!r}" if path else "the reward"
    if len(pairs) < 2 or not others:
        return None, (
            f"no corrected mean: it needs at least 2 labelled rollouts the run scored at {where} "
            f"and 1 unlabelled one (found {len(pairs)} and {len(others)})"
        )
    labels, predictions = zip(*pairs)
    return prediction_powered_mean(labels, predictions, others), None


def _panel(
    run: Mapping[tuple[str, int], Rollout] | None,
    rows: Sequence[tuple[Rollout, Any]],
    items: Sequence[LabelledItem],
    panel: Sequence[str],
    scored: _Pass,
) -> JudgePanel | None:
    """Several judges of the run (`panel`), or the judge's own samples, as a panel."""
    errors: dict[str, list[float]] = {}
    if run is not None and len(panel) > 1:
        keys = _labelled(rows)
        for path in panel:
            errors[path or "(root)"] = [_node_score(run[k], path) - i.target for k, i in zip(keys, items)]
    elif scored.samples and min(len(s) for s in scored.samples) > 1:
        width = min(len(s) for s in scored.samples)
        for j in range(width):
            errors[f"sample {j + 1}"] = [s[j] - i.target for s, i in zip(scored.samples, items)]
    return effective_judges(errors) if errors else None


def calibrate(
    judge: LLMJudge,
    labels: str | Path | Iterable[Mapping[str, Any]],
    *,
    kind: Kind = "auto",
    threshold: float = DEFAULT_THRESHOLD,
    categories: Mapping[str, float] | None = None,
    label_range: tuple[float, float] | None = None,
    probes: bool = True,
    prices: tuple[float, float] | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    run: Sequence[Rollout] | None = None,
    path: str = "",
    panel: Sequence[str] = (),
) -> Calibration:
    """`acalibrate` from synchronous code (a script, or a notebook cell inside a running loop).

    Args:
        judge: The judge to measure (its endpoint, prompt and parsing as they are).
        labels: A JSONL file, or dicts: a rollout and its human `label` per row.
        kind: "binary", "categorical", "continuous", or "auto" (from the labels).
        threshold: Binary labels: the judge says "pass" when its score reaches this.
        categories: Categorical labels: each label's score in [0, 1] (default: the judge's choices).
        label_range: Continuous labels: their scale (default: the judge's `score_range`).
        probes: Run the verbosity and position probes (one more judge call per row each).
        prices: (per prompt token, per completion token), to report the cost per call.
        concurrency: Most rows scored at once.
        run: The rollouts of the run the labels were drawn from: the judge's mean over the
            run is corrected by the labels.
        path: The judge's dotted path in the run's rubric ("" when it is the whole rubric).
        panel: Paths of the run's judge nodes that score the same thing (this one included).

    Returns:
        The `Calibration` (see `acalibrate`).
    """
    return run_sync(
        acalibrate(
            judge, labels, kind=kind, threshold=threshold, categories=categories, label_range=label_range,
            probes=probes, prices=prices, concurrency=concurrency, run=run, path=path, panel=panel,
        )
    )  # fmt: skip


__all__ = [
    "Calibration",
    "LabelAgreement",
    "LabelledItem",
    "ProbeResult",
    "acalibrate",
    "calibrate",
    "find_judge",
]
