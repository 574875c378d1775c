"""Find the data files the reference environments ship with.

In a checkout (or an editable install) the files live in the repository's `datasets/`
folder; a regular `pip install` copies them to `<prefix>/share/rubric/datasets` (see
`[tool.setuptools.data-files]` in pyproject.toml). Looking in both places means the same
code works either way, and a clear error says where we looked when neither has the file.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO_DATASETS = Path(__file__).resolve().parents[2] / "datasets"


def search_dirs() -> list[Path]:
    """The folders searched for a data file, in order."""
    return [REPO_DATASETS, Path(sys.prefix) / "share" / "rubric" / "datasets"]


def data_path(name: str) -> Path:
    """The path of the bundled data file `name` (e.g. "wordle_words.txt")."""
    for folder in search_dirs():
        candidate = folder / name
        if candidate.is_file():
            return candidate
    looked = ", ".join(str(folder) for folder in search_dirs())
    raise FileNotFoundError(
        f"data file {name!r} not found (looked in: {looked}); reinstall the package with "
        f"`pip install rubric-rl` or run from a checkout that has datasets/{name}"
    )


def read_jsonl(path: str | Path) -> list[dict[str, Any]]:
    """Rows of a JSON-lines file; a malformed line is reported with its line number."""
    rows: list[dict[str, Any]] = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as err:
                raise ValueError(f"{path}:{number}: not valid JSON ({err.msg})") from err
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{number}: expected a JSON object, got {type(row).__name__}")
            rows.append(row)
    return rows


def write_jsonl(rows: list[dict[str, Any]], path: str | Path) -> None:
    """Write rows one JSON object per line (stable key order, UTF-8) so output is reproducible."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as handle:
        for row in rows:
            handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def generator_main(
    generate: Callable[[int, int], list[dict[str, Any]]],
    *,
    description: str,
    default_n: int,
    default_out: str,
    noun: str,
    argv: list[str] | None = None,
) -> None:
    """The shared command line of the seeded data generators: --seed, --n, --out."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--n", type=int, default=default_n)
    parser.add_argument("--out", type=Path, default=Path(default_out))
    args = parser.parse_args(argv)
    write_jsonl(generate(args.n, args.seed), args.out)
    print(f"wrote {args.n} {noun} to {args.out}")


__all__ = ["REPO_DATASETS", "data_path", "generator_main", "read_jsonl", "search_dirs", "write_jsonl"]
