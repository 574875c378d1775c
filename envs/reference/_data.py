"""Find the data files the reference environments ship with.

In a checkout (or an editable install) the files live in the repository's `datasets/`
folder; a regular `pip install` copies them to `share/rubric/datasets` under the install
scheme's data folder (see `[tool.setuptools.data-files]` in pyproject.toml): `sys.prefix` in a
venv, but `~/.local` for `--user`, `/usr/local` for Debian's system pip, or any `--prefix`.
The distribution's own file list (its RECORD) says where they went, so every scheme is found;
a clear error says where we looked when no place has the file.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path
from typing import Any

REPO_DATASETS = Path(__file__).resolve().parents[2] / "datasets"
DISTRIBUTION = "rubric-rl"
INSTALLED_PARTS = ("share", "rubric", "datasets")


def installed_dirs() -> list[Path]:
    """The data folders the installed distribution's RECORD lists (none for an editable install)."""
    try:
        files = distribution(DISTRIBUTION).files or []
    except PackageNotFoundError:
        return []
    found = {Path(str(f.locate())).resolve().parent for f in files if f.parts[-4:-1] == INSTALLED_PARTS}
    return sorted(found)


def search_dirs() -> list[Path]:
    """The folders searched for a data file, in order: the checkout, where the installed
    distribution put its data, then this interpreter's prefix (a RECORD-less install)."""
    fallback = Path(sys.prefix).joinpath(*INSTALLED_PARTS)
    return [REPO_DATASETS, *(d for d in installed_dirs() if d != fallback), fallback]


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


__all__ = [
    "REPO_DATASETS",
    "data_path",
    "generator_main",
    "installed_dirs",
    "read_jsonl",
    "search_dirs",
    "write_jsonl",
]
