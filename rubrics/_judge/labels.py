"""Human labels for a judge: read from JSONL or dicts, and read on the judge's scale.

A row is a rollout (a dict that validates into `harness._core.types.Rollout`) with its human `label`.
Labels are binary (True/False, 1/0), categorical (text, or a few numbers that are the judge's own
choice values) or continuous (numbers on `label_range`); `LabelScale` turns a label into a
target on [0, 1] and a judge score into a verdict in the label's terms. Bad labels fail here,
before any judge call, naming the row.
"""

from __future__ import annotations

import itertools
import json
import math
import stat
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TypeVar

from pydantic import ValidationError

from harness._core.errors import ConfigError
from harness._core.types import Rollout, as_messages
from rubrics._judge.llm import LLMJudge

Kind = Literal["auto", "binary", "categorical", "continuous"]
KINDS: tuple[str, ...] = ("auto", "binary", "categorical", "continuous")
DEFAULT_THRESHOLD = 0.5
CONTINUOUS_BINS = 5
# A run's rollout copied into a label row loses how the run scored it: the judge scores afresh.
_SCORING = {"reward", "scores", "score_errors", "score_details", "turn_scores", "judge_usage"}


#: The longest line, and the largest file, a labels file may have: read with these bounds, so
#: a huge or endless file is refused early instead of filling memory.
MAX_LINE_BYTES = 16 * 2**20
MAX_FILE_BYTES = 256 * 2**20
_MESSAGE_FIELDS = ("prompt", "completion")
_T = TypeVar("_T")


def read_labels(
    labels: str | Path | Iterable[Mapping[str, Any]],
    *,
    run: Mapping[tuple[str, int], Rollout] | None = None,
) -> list[tuple[Rollout, Any]]:
    """Labelled rollouts from a JSONL file (one rollout dict with a `label` per line) or dicts.

    Each problem is one line naming the row (and field): a row that is not an object, has no
    `label` or `completion`, or holds a field of the wrong type; a line that is not JSON,
    nests too deeply or is longer than `MAX_LINE_BYTES`; a file larger than `MAX_FILE_BYTES`,
    or a path that is not a file.

    Args:
        labels: The file, or the rows as dicts.
        run: A run's rollouts by (example id, rollout index): a row that names one of them
            (`example_id`, and `rollout_index`, default 0) starts from that rollout's fields,
            so `{"example_id": "7", "label": 1}` is a whole labelled rollout.

    Returns:
        (rollout, label) per row, in file order.

    Raises:
        ConfigError: the labels cannot be used, saying why and where (with `run`: a row that
            names no rollout of the run).
    """
    where = str(labels) if isinstance(labels, (str, Path)) else "labels"
    if isinstance(labels, (str, Path)):
        rows = list(_file_rows(Path(labels)))
    else:
        rows = list(enumerate(labels, 1))
    out = [_labelled(_from_run(row, number, where, run), number, where) for number, row in rows]
    if not out:
        raise ConfigError(f"{where} holds no labelled rows")
    return out


def _file_rows(path: Path) -> Iterator[tuple[int, Any]]:
    """The JSON value of each non-blank line of `path`, read with `MAX_LINE_BYTES` and
    `MAX_FILE_BYTES` as bounds."""
    _check_file(path)
    total = 0
    try:
        with path.open("rb") as handle:
            for number in itertools.count(1):
                line = handle.readline(MAX_LINE_BYTES + 1)
                if not line:
                    return
                total += len(line)
                if len(line) > MAX_LINE_BYTES:
                    raise ConfigError(
                        f"{path} line {number} is longer than {MAX_LINE_BYTES // 2**20} MiB; a labelled row "
                        "is one rollout: shorten it"
                    )
                if total > MAX_FILE_BYTES:
                    raise ConfigError(
                        f"{path} is larger than {MAX_FILE_BYTES // 2**20} MiB; split it and calibrate on a part"
                    )
                if line.strip():
                    yield number, _json_line(line, number, path)
    except OSError as exc:
        raise ConfigError(f"cannot read labels file {path}: {exc.strerror or exc}") from None


def _check_file(path: Path) -> None:
    """Refuse a path that is missing, not readable, or not a file (a FIFO is read, bounded)."""
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        raise ConfigError(
            f"labels file {path} does not exist; give a JSONL file of rollouts with a 'label'"
        ) from None
    except OSError as exc:
        raise ConfigError(f"cannot read labels file {path}: {exc.strerror or exc}") from None
    kind = (
        "a directory" if stat.S_ISDIR(mode)
        else "a character device" if stat.S_ISCHR(mode)
        else "a block device" if stat.S_ISBLK(mode)
        else "a socket" if stat.S_ISSOCK(mode)
        else None
    )  # fmt: skip
    if kind is not None:
        raise ConfigError(
            f"labels file {path} is {kind}, not a file; give a JSONL file of rollouts with a 'label'"
        )
    if stat.S_ISREG(mode) and path.stat().st_size > MAX_FILE_BYTES:
        raise ConfigError(
            f"{path} is larger than {MAX_FILE_BYTES // 2**20} MiB; split it and calibrate on a part"
        )


def _json_line(line: bytes, number: int, path: Path) -> Any:
    try:
        return json.loads(line)
    except UnicodeDecodeError:
        raise ConfigError(f"{path} line {number} is not UTF-8 text; one JSON object per line") from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path} line {number} is not JSON ({exc.msg}); one object per line") from None
    except RecursionError:
        raise ConfigError(
            f"{path} line {number} nests too deeply to read (past Python's recursion limit)"
        ) from None


def _from_run(row: Any, number: int, where: str, run: Mapping[tuple[str, int], Rollout] | None) -> Any:
    """With a run: the row over the fields of the run's rollout it names."""
    if run is None or not isinstance(row, Mapping):
        return row
    if "example_id" not in row:
        raise ConfigError(
            f"{where} row {number} has no 'example_id': labels for a run name the rollout "
            'they label ({"example_id": ..., "rollout_index": 0, "label": ...})'
        )
    try:
        key = (str(row["example_id"]), int(row.get("rollout_index", 0)))
    except (TypeError, ValueError):
        raise ConfigError(
            f"{where} row {number}: 'rollout_index' is {_shown(row.get('rollout_index'))}; give a whole number"
        ) from None
    if key not in run:
        some = ", ".join(f"{e!r} rollout {i}" for e, i in list(run)[:3])
        raise ConfigError(
            f"{where} row {number} labels example {key[0]!r} rollout {key[1]}, which the run "
            f"does not have (it has {len(run)} rollouts, e.g. {some})"
        )
    return {**run[key].model_dump(exclude=_SCORING), **row}


def _labelled(row: Any, number: int, where: str) -> tuple[Rollout, Any]:
    """One row as a rollout and its label, or one line naming the row and field at fault."""
    if not isinstance(row, Mapping) or "label" not in row:
        raise ConfigError(
            f"{where} row {number} has no 'label'; each row is a rollout "
            f'({{"prompt": ..., "completion": ..., "answer": ...}}) with the human "label"'
        )
    if "completion" not in row:
        raise ConfigError(
            f"{where} row {number} has no 'completion' (the response the judge grades); "
            'give it as text or messages, "" if the response really was empty'
        )
    fields = {k: v for k, v in row.items() if k != "label"}
    fields.setdefault("example_id", number - 1)
    try:
        for name in _MESSAGE_FIELDS:  # checked alone first, so the message names the field
            value = row.get(name)
            if value is not None and not isinstance(value, (str, Mapping, list)):
                raise ConfigError(
                    f"{where} row {number}: {name!r} is {type(value).__name__} {_shown(value)}; "
                    "give text or a list of messages"
                )
            _validated(f"{where} row {number}: {name!r}", as_messages, value)
        return _validated(f"{where} row {number}", Rollout.model_validate, fields), row["label"]
    except RecursionError:
        raise ConfigError(
            f"{where} row {number} nests too deeply to read (past Python's recursion limit)"
        ) from None


def _validated(where: str, validate: Callable[[Any], _T], value: Any) -> _T:
    """`validate(value)`, its first complaint one line saying `where`."""
    try:
        return validate(value)
    except ValidationError as exc:
        error = exc.errors()[0]
        field = ".".join(str(part) for part in error["loc"])
        raise ConfigError(f"{where}: {field + ': ' if field else ''}{error['msg']}") from None
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"{where}: {exc}") from None


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _is_binary(label: Any) -> bool:
    return isinstance(label, bool) or (isinstance(label, (int, float)) and label in (0, 1))


def _number(label: Any, number: int) -> float:
    if isinstance(label, bool) or not isinstance(label, (int, float)) or math.isnan(label):
        raise ConfigError(f"label of row {number} is {label!r}; continuous labels are numbers")
    return float(label)


def _judge_categories(judge: LLMJudge) -> dict[str, float]:
    low, high = judge.score_range
    return {k: (v - low) / (high - low) for k, v in (judge.choices or {}).items()}


def detect_kind(judge: LLMJudge, labels: Sequence[Any]) -> str:
    """binary for True/False or 0/1 labels, categorical for text labels or the judge's own
    choice values, else continuous."""
    if all(_is_binary(v) for v in labels):
        return "binary"
    if any(isinstance(v, str) for v in labels):
        return "categorical"
    values = set((judge.choices or {}).values())
    return "categorical" if values and all(v in values for v in labels) else "continuous"


def _categories(
    judge: LLMJudge, labels: Sequence[Any], given: Mapping[str, float] | None
) -> dict[str, float]:
    if given is not None:
        categories = {str(k): float(v) for k, v in given.items()}
    elif all(isinstance(v, str) for v in labels):
        categories = _judge_categories(judge)
    else:  # numbers: each distinct label is a category, on the judge's scale
        low, high = judge.score_range
        categories = {label_text(v): (_number(v, i) - low) / (high - low) for i, v in enumerate(labels, 1)}
    missing = sorted({label_text(v) for v in labels} - set(categories))
    if missing:
        raise ConfigError(
            f"labels {', '.join(map(repr, missing))} have no score; the categories are "
            f"{sorted(categories) or 'none'}: give categories={{label: score in [0, 1], ...}} (--categories)"
        )
    return dict(sorted(categories.items(), key=lambda kv: -kv[1]))


def label_text(label: Any) -> str:
    if isinstance(label, bool):
        return str(int(label))
    if isinstance(label, float) and label.is_integer():
        return str(int(label))
    return str(label)


# ----------------------------------------------------------------------------- verdicts
class LabelScale:
    """How a kind of label reads a judge score: the label's target value and the verdict."""

    def __init__(
        self, kind: str, threshold: float, categories: Mapping[str, float], label_range: tuple[float, float]
    ):
        self.kind, self.threshold, self.categories, self.label_range = (
            kind,
            threshold,
            categories,
            label_range,
        )

    def target(self, label: Any, number: int) -> float:
        if self.kind == "binary":
            if not _is_binary(label):
                raise ConfigError(f"label of row {number} is {label!r}; binary labels are true/false or 1/0")
            return float(label)
        if self.kind == "categorical":
            return self.categories[label_text(label)]
        low, high = self.label_range
        value = _number(label, number)
        if not low <= value <= high:
            raise ConfigError(f"label of row {number} is {value:g}, outside label_range ({low:g}, {high:g})")
        return (value - low) / (high - low)

    def verdict(self, score: float) -> str | None:
        if math.isnan(score):
            return None
        if self.kind == "binary":
            return "1" if score >= self.threshold else "0"
        if self.kind == "categorical":
            return min(self.categories, key=lambda k: abs(self.categories[k] - score))
        return fifth(score)


def fifth(value: float) -> str:
    i = min(CONTINUOUS_BINS - 1, int(value * CONTINUOUS_BINS))
    return f"{i / CONTINUOUS_BINS:.1f}–{(i + 1) / CONTINUOUS_BINS:.1f}"


def label_scale(
    judge: LLMJudge,
    labels: Sequence[Any],
    kind: str,
    threshold: float,
    categories: Mapping[str, float] | None,
    label_range: tuple[float, float] | None,
) -> LabelScale:
    if kind not in KINDS:
        raise ConfigError(f"kind={kind!r}; use one of {', '.join(KINDS)}")
    if not 0 <= threshold <= 1:
        raise ConfigError(f"threshold={threshold} must be in [0, 1], the scale of the judge's scores")
    chosen = detect_kind(judge, labels) if kind == "auto" else kind
    low, high = label_range if label_range is not None else judge.score_range
    if not high > low:
        raise ConfigError(f"label_range=({low:g}, {high:g}) must rise, e.g. (0, 10)")
    cats = _categories(judge, labels, categories) if chosen == "categorical" else {}
    return LabelScale(chosen, threshold, cats, (low, high))


__all__ = [
    "CONTINUOUS_BINS",
    "DEFAULT_THRESHOLD",
    "KINDS",
    "MAX_FILE_BYTES",
    "MAX_LINE_BYTES",
    "Kind",
    "LabelScale",
    "detect_kind",
    "fifth",
    "label_scale",
    "label_text",
    "read_labels",
]
