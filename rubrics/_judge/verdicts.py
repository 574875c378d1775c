"""Turn a judge model's free-text reply into a score, or say exactly why it cannot.

Judges reason before they conclude, format inconsistently and sometimes hedge. Each parser
here prefers an explicit, labelled verdict ("Score: 7/10", "GRADE: C", a JSON `score`),
falls back to the last candidate, and raises `VerdictError` with a short human reason
("judge reply had no score") instead of guessing, so unscored rollouts can be counted
and explained.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any, Literal, get_args

from harness._core.errors import ScoringError
from rubrics.parsers import strip_think

ParseMode = Literal["number", "choice", "json"]
Reduce = Literal["mean", "median", "majority"]
PARSE_MODES: tuple[ParseMode, ...] = get_args(ParseMode)
REDUCTIONS: tuple[Reduce, ...] = get_args(Reduce)


class VerdictError(ScoringError, ValueError):
    """A judge reply that yields no score; `reason` is short enough for a summary line."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


_SIGNED = r"[+\-\u2212]?(?:\d+(?:\.\d+)?|\.\d+)"
_EXPR = rf"(?P<num>{_SIGNED})(?:\s*(?:/|\bout\s+of\b)\s*(?P<den>\d+(?:\.\d+)?))?"
_NUMBER_LABEL = re.compile(
    r"(?i)\b(?:score|rating|verdict|grade|points?)\b[\s*_]*(?:[:=]|\bis\b|\bof\b)[\s*_\[(\"'`]*" + _EXPR
)
_BARE = re.compile(r"(?<![\w.])" + _EXPR)
_CHOICE_LABEL = (
    r"(?i)\b(?:grade|verdict|answer|choice|label|rating|score|decision|classification|judge?ment)\b"
    r"[\s*_]*[:=][\s*_\[(\"'`]*"
)


def _to_float(text: str) -> float:
    return float(text.replace("\u2212", "-"))


def _expr_value(match: re.Match[str], score_range: tuple[float, float]) -> float:
    """A matched score on the declared scale; "a/b" or "a out of b" is a fraction of b,
    which equals `a` itself when b is the top of the declared range."""
    value = _to_float(match.group("num"))
    denominator = match.group("den")
    if denominator is None:
        return value
    den = float(denominator)
    if den == 0:
        raise VerdictError(f"judge score {match.group(0).strip()!r} divides by zero")
    if math.isclose(den, score_range[1]):
        return value
    return value / den * score_range[1]


def _clean(reply: str | None) -> str:
    if reply is None or not reply.strip():
        raise VerdictError("judge reply was empty")
    text = strip_think(reply)
    if not text:
        raise VerdictError("judge reply had only reasoning (<think>) and no verdict")
    return text


def parse_number(
    reply: str | None,
    *,
    pattern: str | re.Pattern[str] | None = None,
    score_range: tuple[float, float] = (0.0, 1.0),
) -> float:
    """The judge's number on its declared scale: a labelled "Score: 8/10" if present, else
    the last number. With `pattern`, its first group (last match) is the number."""
    text = _clean(reply)
    if pattern is not None:
        matches = list(re.finditer(pattern, text))
        if not matches:
            raise VerdictError("judge reply did not match the score pattern")
        group = matches[-1].group(1)
        full = _BARE.fullmatch(group.strip()) if group else None
        if full is None:
            raise VerdictError(f"judge score {group!r} (from the pattern) is not a number")
        return _expr_value(full, score_range)
    labelled = list(_NUMBER_LABEL.finditer(text))
    if labelled:
        return _expr_value(labelled[-1], score_range)
    bare = list(_BARE.finditer(text))
    if not bare:
        raise VerdictError("judge reply had no score")
    return _expr_value(bare[-1], score_range)


def _lookup(found: str, choices: Mapping[str, float]) -> str | None:
    """The choice `found` names: exact first, then case-insensitively if that is unambiguous."""
    if found in choices:
        return found
    folded = [label for label in choices if label.casefold() == found.casefold()]
    return folded[0] if len(folded) == 1 else None


def _normalise(line: str) -> str:
    return line.strip().strip("*_`'\"[]()<>{}").rstrip(".!:").strip()


def parse_choice(
    reply: str | None, choices: Mapping[str, float], *, pattern: str | re.Pattern[str] | None = None
) -> float:
    """The score of the label the judge chose ("GRADE: C" -> choices["C"]).

    Order of evidence: the last labelled verdict ("grade:", "verdict:", "answer:" ...), a
    reply (or final line) that is just a label, then a single multi-letter label named in
    free text. A reply naming several labels with no clear final one is a failure.
    """
    text = _clean(reply)
    listed = ", ".join(choices)
    if pattern is not None:
        matches = list(re.finditer(pattern, text))
        if not matches:
            raise VerdictError("judge reply did not match the choice pattern")
        label = _lookup(_normalise(matches[-1].group(1) or ""), choices)
        if label is None:
            raise VerdictError(f"judge chose {matches[-1].group(1)!r}, not one of {listed}")
        return float(choices[label])
    alternatives = "|".join(re.escape(c) for c in sorted(choices, key=len, reverse=True))
    labelled = list(re.finditer(_CHOICE_LABEL + rf"({alternatives})(?!\w)", text))
    if labelled:
        last = labelled[-1]
        rest = text[last.end() :].split("\n", 1)[0]
        other = re.match(rf"\s*(?:/|\bor\b|\band\b|,|\|)\s*({alternatives})(?!\w)", rest, re.IGNORECASE)
        if other:
            raise VerdictError(
                f"judge reply named several labels ({last.group(1)}, {other.group(1)}) without a clear final verdict"
            )
        label = _lookup(last.group(1), choices)
        if label is not None:
            return float(choices[label])
    lines = [line for line in text.splitlines() if line.strip()]
    for candidate in (text, lines[-1] if lines else ""):
        label = _lookup(_normalise(candidate), choices)
        if label is not None:
            return float(choices[label])
    named = {
        label for label in choices if len(label) > 1 and re.search(rf"(?<!\w){re.escape(label)}(?!\w)", text)
    }
    if len(named) == 1:
        return float(choices[named.pop()])
    if len(named) > 1:
        raise VerdictError(
            f"judge reply named several labels ({', '.join(sorted(named))}) without a clear final verdict"
        )
    raise VerdictError(f"judge reply had no label among {listed}")


def _json_objects(text: str) -> list[dict[str, Any]]:
    """JSON objects in the reply: fenced ```json blocks first, else the whole text, else
    every balanced {...} that decodes. Later objects come last."""
    fenced = re.findall(r"```(?:json|JSON)?\s*\n?(.*?)```", text, re.DOTALL)
    objects: list[dict[str, Any]] = []
    for block in fenced:
        try:
            value = json.loads(block)
        except json.JSONDecodeError:
            continue
        if isinstance(value, dict):
            objects.append(value)
    if objects:
        return objects
    with contextlib.suppress(json.JSONDecodeError):
        value = json.loads(text)
        if isinstance(value, dict):
            return [value]
    decoder = json.JSONDecoder()
    position = text.find("{")
    while position >= 0:
        try:
            value, end = decoder.raw_decode(text, position)
        except json.JSONDecodeError:
            position = text.find("{", position + 1)
            continue
        if isinstance(value, dict):
            objects.append(value)
        position = text.find("{", end)
    return objects


def parse_json(
    reply: str | None,
    *,
    key: str = "score",
    choices: Mapping[str, float] | None = None,
    score_range: tuple[float, float] = (0.0, 1.0),
) -> float:
    """The `key` field of the judge's JSON object (the last one that has it).

    Numbers are taken as they are, booleans as 1/0, strings as a number ("7/10") or, with
    `choices`, as a label.
    """
    text = _clean(reply)
    objects = _json_objects(text)
    if not objects:
        raise VerdictError("judge reply had no JSON object")
    for obj in reversed(objects):
        field = key if key in obj else next((k for k in obj if k.casefold() == key.casefold()), None)
        if field is not None:
            return _json_value(obj[field], key, choices, score_range)
    keys = ", ".join(sorted({k for obj in objects for k in obj})) or "none"
    raise VerdictError(f"judge JSON had no {key!r} field (keys: {keys})")


def _json_value(
    value: Any, key: str, choices: Mapping[str, float] | None, score_range: tuple[float, float]
) -> float:
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        if choices:
            label = _lookup(_normalise(value), choices)
            if label is not None:
                return float(choices[label])
        lowered = value.strip().casefold()
        if lowered in ("true", "yes"):
            return 1.0
        if lowered in ("false", "no"):
            return 0.0
        match = _BARE.fullmatch(value.strip())
        if match is not None:
            return _expr_value(match, score_range)
    raise VerdictError(f"judge JSON field {key!r} is {value!r}, not a score")


def rescale(value: float, score_range: tuple[float, float]) -> float:
    """Map `value` from `score_range` to [0, 1]; a value outside the range is a failure
    (the judge misunderstood the scale), not something to clamp silently."""
    low, high = score_range
    if math.isnan(value):
        raise VerdictError("judge score is NaN")
    tolerance = 1e-9 * max(1.0, abs(high - low))
    if value < low - tolerance or value > high + tolerance:
        raise VerdictError(f"judge score {value:g} is outside score_range ({low:g}, {high:g})")
    return (value - low) / (high - low)


def reduce_scores(values: Sequence[float], how: Reduce) -> float:
    """Combine several samples' scores; `majority` breaks ties toward the lower score."""
    if not values:
        raise VerdictError("no judge sample could be scored")
    if how == "mean":
        return statistics.fmean(values)
    if how == "median":
        return float(statistics.median(values))
    if how == "majority":
        counts = Counter(values)
        best = max(counts.values())
        return min(value for value, count in counts.items() if count == best)
    raise ValueError(f"unknown reduce {how!r}; use one of {REDUCTIONS}")


# ---------------------------------------------------------------------------- group judges
# RankJudge and PairwiseJudge (rubrics._judge.rank) label a group's members A, B, C, ...


_RANKING_LINE = re.compile(r"RANKING\s*[:=]\s*(.+)", re.IGNORECASE)
_SCORES_LINE = re.compile(r"SCORES\s*[:=]\s*(.+)", re.IGNORECASE)
# A number is read whole, exponent included: "1e400" is 1e400 (not finite), never 1.
_LABEL_SCORE = re.compile(r"\b([A-Z])\b\s*[:=]\s*([+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?)")


def _token(text: str) -> str:
    text = re.sub(r"(?i)\bcandidate\b", "", text)
    return re.sub(r"[\s*_`\"'()\[\].]", "", text).upper()


def parse_ranking(reply: str, labels: str) -> dict[str, float]:
    """Scores by label from a ranking line ("RANKING: B > A = C"): the fraction of the other
    members ranked below, ties counting half. Raises ScoringError saying what is wrong."""
    found = _RANKING_LINE.findall(reply or "")
    if not found:
        raise VerdictError(
            f"judge reply has no ranking (expected a line like 'RANKING: {' > '.join(labels)}'): {(reply or '')[-120:]!r}"
        )
    tiers = [[_token(t) for t in tier.split("=")] for tier in re.split(r">|,|≻", found[-1])]
    tiers = [[t for t in tier if t] for tier in tiers]
    tiers = [tier for tier in tiers if tier]
    named = [t for tier in tiers for t in tier]
    unknown = sorted(set(named) - set(labels))
    repeated = sorted({t for t in named if named.count(t) > 1})
    missing = [label for label in labels if label not in named]
    if unknown or repeated or missing:
        problems = [
            f"unknown label(s) {', '.join(unknown)}" if unknown else "",
            f"{', '.join(repeated)} named twice" if repeated else "",
            f"{', '.join(missing)} left out" if missing else "",
        ]
        raise VerdictError(
            f"judge ranking {found[-1].strip()!r} is unusable: {'; '.join(p for p in problems if p)}"
        )
    n = len(labels)
    scores: dict[str, float] = {}
    below = n
    for tier in tiers:
        below -= len(tier)
        for label in tier:
            scores[label] = (below + 0.5 * (len(tier) - 1)) / (n - 1)
    return scores


def parse_label_scores(reply: str, labels: str) -> dict[str, float]:
    """Raw scores by label from "SCORES: A=7, B=3" or a JSON object {"A": 7, ...}; a score
    that is not a finite number (1e400, NaN) is a VerdictError naming the label."""
    text = reply or ""
    line = _SCORES_LINE.findall(text)
    pairs = _LABEL_SCORE.findall(line[-1]) if line else []
    scores = {label: float(value) for label, value in pairs}
    if not line:
        match = re.search(r"\{[^{}]*\}", text)
        if match:
            try:
                obj = json.loads(match.group(0))
            except json.JSONDecodeError:
                obj = {}
            if isinstance(obj, dict):
                for key, value in obj.items():
                    if isinstance(value, (int, float)) and not isinstance(value, bool):
                        scores[_token(str(key))] = float(value)
    missing = [label for label in labels if label not in scores]
    if missing:
        raise VerdictError(
            f"judge reply gives no score for {', '.join(missing)} (expected a line like "
            f"'SCORES: {', '.join(f'{label}=7' for label in labels)}'): {text[-120:]!r}"
        )
    for label in labels:
        if not math.isfinite(scores[label]):
            raise VerdictError(
                f"judge score for {label} is not a finite number ({scores[label]}): {text[-120:]!r}"
            )
    return {label: scores[label] for label in labels}


_WINNER = re.compile(r"WINNER\s*[:=]\s*\**\s*(A|B|TIE)\b", re.IGNORECASE)


def parse_winner(reply: str) -> str:
    """ "A", "B" or "TIE" from a pairwise reply ("WINNER: B", or just "B"); ScoringError otherwise."""
    found = _WINNER.findall(reply or "")
    if found:
        return str(found[-1]).upper()
    bare = _token(reply or "")
    if bare in ("A", "B", "TIE"):
        return bare
    raise VerdictError(
        f"judge reply names no winner (expected 'WINNER: A', 'WINNER: B' or 'WINNER: TIE'): {(reply or '')[-120:]!r}"
    )


__all__ = [
    "PARSE_MODES",
    "REDUCTIONS",
    "VerdictError",
    "parse_choice",
    "parse_json",
    "parse_label_scores",
    "parse_number",
    "parse_ranking",
    "parse_winner",
    "reduce_scores",
    "rescale",
]
