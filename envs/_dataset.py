"""Turn whatever the user holds into one normalised `datasets.Dataset`.

Accepted: a `datasets.Dataset`, a `DatasetDict` (pick with `split=`), a list of row dicts, or a
path to a .jsonl/.json/.csv/.parquet file. Normalising means every row ends up with the
standard columns (`example_id`, `answer`, `info`, `task`, plus `prompt` and/or `question`),
so the rest of the environment never has to ask "is this column there?". Every problem is
reported here, at construction, with the columns that *are* available, because a mistyped
column name found halfway through an evaluation wastes the whole run.

`datasets` is imported inside the functions: it is slow to import and `rubric --help` should
not pay for it.
"""

from __future__ import annotations

import contextlib
import json
import os
import uuid
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from harness._core.errors import ConfigError, ConfigTypeError
from harness._core.hf_import import hf_import
from harness._core.types import as_messages

if TYPE_CHECKING:  # pragma: no cover
    from datasets import Dataset

#: Columns with a meaning of their own; every other column is carried into a rollout's `info`.
STANDARD_COLUMNS = ("example_id", "prompt", "answer", "info", "task")
FILE_FORMATS = {".jsonl": "json", ".json": "json", ".csv": "csv", ".parquet": "parquet"}
#: How many rows are inspected to learn the keys of a dict `info` column.
INFO_SAMPLE_ROWS = 100


def name_list(columns: Iterable[str]) -> str:
    """A sorted, comma-separated column list for error messages ("none" when empty)."""
    names = sorted(set(columns))
    return ", ".join(names) if names else "none"


def load_source(source: Any, *, split: str | None = None, what: str = "dataset") -> Dataset:
    """Return `source` as a `datasets.Dataset`; `what` names the argument in error messages."""
    with hf_import():
        import datasets

    if isinstance(source, datasets.DatasetDict):
        return _pick_split(source, split, what)
    if split is not None:
        raise ConfigError(
            f"split={split!r} picks a split of a DatasetDict, but {what} is a {type(source).__name__}; drop split="
        )
    if isinstance(source, datasets.Dataset):
        return source
    if isinstance(source, (str, os.PathLike)):
        return _load_file(Path(source), what)
    if isinstance(source, Sequence) and not isinstance(source, (bytes, bytearray)):
        return _from_rows(source, what)
    raise ConfigTypeError(
        f"{what} must be a datasets.Dataset, a datasets.DatasetDict, a list of row dicts or a path "
        f"to a {'/'.join(sorted(FILE_FORMATS))} file; got {type(source).__name__}"
    )


def _pick_split(source: Any, split: str | None, what: str) -> Dataset:
    splits = list(source.keys())
    if split is not None:
        if split not in source:
            raise KeyError(f"{what} has no split {split!r}; available splits: {name_list(splits)}")
        return source[split]
    if len(splits) == 1:
        return source[splits[0]]
    raise ConfigError(
        f"{what} is a DatasetDict with several splits ({name_list(splits)}); "
        f'say which one with split="{splits[0]}" or pass {what}["{splits[0]}"]'
    )


def _load_file(path: Path, what: str) -> Dataset:
    with hf_import():
        from datasets import Dataset

    suffix = path.suffix.lower()
    if suffix not in FILE_FORMATS:
        raise ConfigError(
            f"{what} path {str(path)!r} has an unsupported extension {suffix or '(none)'!r}; "
            f"supported: {', '.join(FILE_FORMATS)}"
        )
    if not path.is_file():
        raise FileNotFoundError(f"{what} file not found: {str(path)!r}")
    if FILE_FORMATS[suffix] == "json":
        # Read JSON with the standard library so that each row keeps exactly its own `info`
        # keys (Arrow's JSON reader would merge them) and errors carry a line number.
        return _from_rows(_read_json_rows(path), f"{what} file {str(path)!r}")
    loader = Dataset.from_csv if FILE_FORMATS[suffix] == "csv" else Dataset.from_parquet
    try:
        loaded = loader(str(path))
    except Exception as exc:  # the datasets library raises many types; name the file either way
        raise ConfigError(f"could not read {what} file {str(path)!r}: {type(exc).__name__}: {exc}") from exc
    return loaded


def _read_json_rows(path: Path) -> list[Any]:
    """Rows of a JSON array file or a JSON-lines file (detected from the first character)."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line_number = data[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"{str(path)!r} is not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line_number}); "
            "save it as UTF-8 (e.g. iconv -f latin1 -t utf-8)"
        ) from None
    if text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{str(path)!r} is not valid JSON (line {exc.lineno}: {exc.msg})") from exc
        return list(rows)
    rows = []
    for number, line in enumerate(text.splitlines(), start=1):
        if line.strip():
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as exc:
                raise ConfigError(f"{str(path)!r} line {number} is not valid JSON ({exc.msg})") from exc
    return rows


def _from_rows(rows: Sequence[Any], what: str) -> Dataset:
    with hf_import():
        from datasets import Dataset

    if not rows:
        raise ConfigError(f"{what} is empty; an environment needs at least one example")
    for index, row in enumerate(rows):
        if not isinstance(row, Mapping):
            raise ConfigTypeError(
                f"{what}[{index}] is a {type(row).__name__}; every row must be a dict of column -> value"
            )
    # `info` goes in as JSON text: Arrow would give every row the union of all rows' keys.
    # `normalise` parses it back and keeps a dict column when that loses nothing.
    records = [
        {**row, "info": json.dumps(row["info"], default=str)}
        if isinstance(row.get("info"), Mapping)
        else dict(row)
        for row in rows
    ]
    try:
        return Dataset.from_list(records)
    except Exception as exc:  # pyarrow cannot store a column whose rows disagree on type
        raise ConfigError(
            f"could not build a dataset from {what}: {type(exc).__name__}: {exc}; "
            "make each column hold the same type in every row"
        ) from exc


def check_prompts(ds: Dataset, what: str = "dataset") -> None:
    """Every row's `prompt` must be text or valid chat messages; the first bad row is named."""
    if "prompt" not in ds.column_names:
        return
    for index, prompt in enumerate(_column(ds, "prompt")):
        if prompt is None:
            continue
        try:
            as_messages(prompt)
        except (TypeError, ValueError) as exc:
            errors = getattr(exc, "errors", None)
            first = errors()[0] if callable(errors) else None
            reason = (
                f"{'.'.join(map(str, first['loc']))}: {first['msg']} (got {str(first.get('input'))[:40]!r})"
                if first
                else str(exc)
            )
            raise ConfigError(
                f"{what} row {index} has a prompt that is not valid chat messages ({reason})"
            ) from None


def rename_columns(ds: Dataset, columns: Mapping[str, str] | None, what: str = "dataset") -> Dataset:
    """Apply `columns={"question": "problem"}`: the dataset's "problem" becomes "question"."""
    if not columns:
        return ds
    if not isinstance(columns, Mapping):
        raise ConfigTypeError(
            f"columns must be a dict of standard name -> your column name, got {type(columns).__name__}"
        )
    present = set(ds.column_names)
    for target, source in columns.items():
        if source not in present:
            raise ConfigError(
                f"columns maps {target!r} to {source!r}, but {what} has no column {source!r}; "
                f"available columns: {name_list(present)}"
            )
        if target != source and target in present and target not in columns.values():
            raise ConfigError(
                f"columns maps {source!r} to {target!r}, but {what} already has a column {target!r}; "
                f"drop or rename it first (available columns: {name_list(present)})"
            )
    return ds.rename_columns({source: target for target, source in columns.items() if source != target})


def normalise(ds: Dataset, what: str = "dataset") -> Dataset:
    """Add `example_id`, `answer`, `info`, `task` where missing and parse JSON-string `info`.

    `info` becomes a dict column when every row's info survives Arrow unchanged, otherwise it
    stays JSON text so each rollout gets exactly its own keys.

    `example_id` is the row's `id` (must be unique) or, without one, its index in the dataset
    as given: the same example keeps the same id across runs, which resume relies on.
    """
    if len(ds) == 0:
        raise ConfigError(f"{what} has no rows; an environment needs at least one example")
    if "example_id" not in ds.column_names:
        if "id" in ds.column_names:
            ds = ds.rename_column("id", "example_id")
        else:
            ds = _add_column(ds, "example_id", list(range(len(ds))))
    _check_ids(_column(ds, "example_id"), what)
    for column in ("answer", "task"):
        if column not in ds.column_names:
            ds = _add_column(ds, column, [None] * len(ds))
    if "info" not in ds.column_names:
        return _add_column(ds, "info", [{} for _ in range(len(ds))])
    raw = _column(ds, "info")
    infos = [parse_info(value, f"{what} row {i}") for i, value in enumerate(raw)]
    if isinstance(ds.features["info"], dict) and all(value is not None for value in raw):
        return ds  # already a struct column of dicts: nothing to convert
    base = ds.remove_columns("info")
    # pyarrow raises when rows' info values disagree on type; the JSON fallback covers that.
    with contextlib.suppress(Exception):
        candidate = _add_column(base, "info", infos)
        # Arrow stores dicts as one struct type: rows with different keys would gain the
        # other rows' keys as None, silently overriding a reward function's defaults.
        if _column(candidate, "info") == infos:
            return candidate
    # Keep the (validated) JSON text instead; `parse_info` turns it into a dict per rollout.
    return _add_column(base, "info", [json.dumps(info, default=str) for info in infos])


def _column(ds: Dataset, name: str) -> list[Any]:
    """A column as Python values, read through Arrow (row-by-row access is ~100x slower)."""
    return ds.with_format("arrow")[name].to_pylist()


def _add_column(ds: Dataset, name: str, values: list[Any]) -> Dataset:
    """`add_column` with a fresh fingerprint: hashing a large list with dill costs seconds."""
    return ds.add_column(name, values, new_fingerprint=uuid.uuid4().hex)


def _check_ids(ids: Sequence[Any], what: str) -> None:
    seen: set[Any] = set()
    for index, value in enumerate(ids):
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            raise ConfigError(f"{what} row {index} has id {value!r}; ids must be strings or integers")
        if value in seen:
            raise ConfigError(
                f"{what} has duplicate id {value!r} (row {index}); ids must be unique for results to resume"
            )
        seen.add(value)


def parse_info(value: Any, where: str = "row") -> dict[str, Any]:
    """`info` as a dict: None -> {}, a dict as is, a JSON object string parsed."""
    if value is None or value == "":
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError as exc:
            raise ConfigError(
                f"{where}: info is a string but not valid JSON ({exc.msg}): {value[:80]!r}"
            ) from exc
        if isinstance(parsed, dict):
            return parsed
        value = parsed
    raise ConfigError(f"{where}: info must be a dict or a JSON object string, got {type(value).__name__}")


def info_keys(ds: Dataset, limit: int = INFO_SAMPLE_ROWS) -> set[str]:
    """The keys of `info` seen in the first `limit` rows (columns a rubric leaf may ask for)."""
    if "info" not in ds.column_names:
        return set()
    keys: set[str] = set()
    for value in _column(ds.select(range(min(limit, len(ds)))), "info"):
        keys.update(parse_info(value))
    return keys


__all__ = [
    "FILE_FORMATS",
    "STANDARD_COLUMNS",
    "info_keys",
    "load_source",
    "name_list",
    "normalise",
    "parse_info",
    "rename_columns",
]
