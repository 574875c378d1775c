"""Split a run by example (`shard=` / `--shard i/N`) and merge the shards' directories back.

A shard is a deterministic slice of the run's plan: example number p (after `num_examples`
and `seed` chose and ordered the examples) belongs to shard `p % N`, with every rollout of
that example, so pass@k is computed over whole examples and the shards are equally long
however the examples are ordered. Nothing coordinates the shards: a Slurm array, several
machines, or one laptop running them one after another all produce the same slices.

Each shard records in `metadata.json` which slice it ran (`arguments.shard`) and what it was
a slice of (`shard`: the plan's size and digest, its own example ids), so that
`merge_results` can check, with no access to the environment, that the pieces belong to one
run and cover it exactly once. The merged directory is an ordinary run directory: `rubric
view`, `rubric score` and `--resume` (to fill what is missing) accept it.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from harness._core.errors import ConfigError, ResultsError
from harness._core.run.options import Shard
from harness._core.run.storage import (
    METADATA_FILE,
    RESULTS_FILE,
    ResultsWriter,
    iter_rollouts,
    prepare_directory,
    read_metadata,
    write_json_atomic,
)
from harness._core.run.summary import summarize
from harness._core.types import Rollout

T = TypeVar("T")

# Run arguments that may differ between the shards of one run: they change how fast a shard
# ran, not what it produced (the shard itself is what differs by design).
FREE_ARGUMENTS = frozenset({"concurrency", "progress", "workers", "executor", "ray_address", "shard"})
# Client settings that decide the answers (endpoint address, retries and timeouts do not).
MODEL_IDENTITY = ("model", "sampling")
_SHOWN = 8  # how many missing/duplicated keys a message lists before "and N more"


def plan_digest(example_ids: Sequence[str]) -> str:
    """A fingerprint of a run's plan (its example ids in order), equal for every shard of it."""
    return hashlib.sha256(json.dumps(list(example_ids)).encode()).hexdigest()


def shard_metadata(shard: Shard, example_ids: Sequence[str]) -> dict[str, Any]:
    """What a shard records about the whole plan it is a slice of (`metadata["shard"]`)."""
    return {
        "index": shard.index,
        "count": shard.count,
        "examples_total": len(example_ids),
        "plan_digest": plan_digest(example_ids),
        "example_ids": shard.select(example_ids),
    }


# ---------------------------------------------------------------------------------------------
# merge


@dataclass
class MergeReport:
    """What `merge_results` found and wrote.

    Attributes:
        output_dir: the merged run directory.
        num_rollouts: how many rollouts were written.
        shards: the shard of each input directory, in the order given ("i/N").
        missing_shards: shard indexes of the run that were not given.
        missing: (example_id, rollout_index) pairs the given shards planned but never finished.
        status: "completed" when every pair of the run is there, else "incomplete" (fill the
            gaps with `--resume OUTPUT_DIR`, without `--shard`).
    """

    output_dir: Path
    num_rollouts: int
    shards: list[str]
    missing_shards: list[int] = field(default_factory=list)
    missing: list[tuple[str, int]] = field(default_factory=list)
    status: str = "completed"


@dataclass
class _Piece:
    directory: Path
    metadata: dict[str, Any]
    shard: Shard
    info: dict[str, Any]
    rollouts: list[Rollout]


def _listing(items: Sequence[Any]) -> str:
    shown = ", ".join(str(i) for i in items[:_SHOWN])
    return shown + (f" and {len(items) - _SHOWN} more" if len(items) > _SHOWN else "")


def _read_piece(directory: Path) -> _Piece:
    metadata = read_metadata(directory) if directory.is_dir() else None
    if metadata is None:
        raise ResultsError(
            f"{directory} is not a run directory (no {METADATA_FILE}); pass directories written by "
            f"`rubric eval --shard i/N`"
        )
    info = metadata.get("shard")
    shard_text = (metadata.get("arguments") or {}).get("shard")
    if not isinstance(info, Mapping) or not shard_text:
        raise ResultsError(
            f"{directory} was not run with --shard (its metadata has no shard); merge only the "
            f"directories of one sharded run"
        )
    results = directory / RESULTS_FILE
    rollouts = list(iter_rollouts(results)) if results.exists() else []
    return _Piece(directory, metadata, Shard.parse(str(shard_text)), dict(info), rollouts)


def _differences(before: Mapping[str, Any], now: Mapping[str, Any], prefix: str) -> list[str]:
    absent = object()
    out = []
    for key in sorted(set(before) | set(now)):
        old, new = before.get(key, absent), now.get(key, absent)
        if old != new:
            show = lambda v: "(absent)" if v is absent else json.dumps(v, default=str)[:80]  # noqa: E731
            out.append(f"{prefix}{key} {show(old)} vs {show(new)}")
    return out


def _identity(metadata: Mapping[str, Any]) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    model = metadata.get("model") or {}
    arguments = {k: v for k, v in (metadata.get("arguments") or {}).items() if k not in FREE_ARGUMENTS}
    return dict(metadata.get("env") or {}), {k: model.get(k) for k in MODEL_IDENTITY}, arguments


def _mismatches(pieces: list[_Piece]) -> list[str]:
    """Every way a shard differs from the first one (environment, model, arguments, plan)."""
    first = pieces[0]
    env0, model0, args0 = _identity(first.metadata)
    problems = []
    for piece in pieces[1:]:
        env, model, args = _identity(piece.metadata)
        diffs = _differences(env0, env, "env.") + _differences(model0, model, "model.")
        diffs += _differences(args0, args, "arguments.")
        if piece.shard.count != first.shard.count:
            diffs.append(f"shard count {first.shard.count} vs {piece.shard.count}")
        elif piece.info.get("plan_digest") != first.info.get("plan_digest"):
            diffs.append("planned examples differ (another dataset or dataset version)")
        if diffs:
            problems.append(f"{piece.directory} differs from {first.directory}: {'; '.join(diffs)}")
    return problems


def _duplicated_shards(pieces: list[_Piece]) -> list[str]:
    seen: dict[int, Path] = {}
    problems = []
    for piece in pieces:
        if piece.shard.index in seen:
            problems.append(
                f"shard {piece.shard} given twice ({seen[piece.shard.index]} and {piece.directory})"
            )
        seen.setdefault(piece.shard.index, piece.directory)
    return problems


def _collect(pieces: list[_Piece], rollouts_per_example: int) -> tuple[dict, list[str], list]:
    """Rollouts by plan position, the problems found (foreign or duplicated), and missing pairs."""
    by_key: dict[tuple[str, int], tuple[int, Rollout, Path]] = {}
    duplicated: list[str] = []
    foreign: list[str] = []
    missing: list[tuple[str, int]] = []
    for piece in pieces:
        ids = [str(i) for i in piece.info.get("example_ids") or []]
        position = {key: piece.shard.index + k * piece.shard.count for k, key in enumerate(ids)}
        for r in piece.rollouts:
            example, index = r.key
            if example not in position or not 0 <= index < rollouts_per_example:
                foreign.append(f"{r.key} in {piece.directory}")
            elif r.key in by_key:
                duplicated.append(f"{r.key} in {by_key[r.key][2]} and {piece.directory}")
            else:
                by_key[r.key] = (position[example] * rollouts_per_example + index, r, piece.directory)
        missing += [(e, i) for e in ids for i in range(rollouts_per_example) if (e, i) not in by_key]
    problems = []
    if foreign:
        problems.append(f"rollouts outside their shard's plan: {_listing(foreign)}")
    if duplicated:
        problems.append(f"duplicated rollouts (example_id, rollout_index): {_listing(duplicated)}")
    return by_key, problems, missing


def _merged_metadata(pieces: list[_Piece], status: str, rollouts: list[Rollout], rpe: int) -> dict[str, Any]:
    first = pieces[0].metadata
    arguments = {k: v for k, v in (first.get("arguments") or {}).items() if k != "shard"}
    started = [p.metadata.get("started_at") for p in pieces if p.metadata.get("started_at")]
    finished = [p.metadata.get("finished_at") for p in pieces if p.metadata.get("finished_at")]
    summary = summarize(rollouts, max_k=rpe)
    return {
        **{k: v for k, v in first.items() if k not in ("shard", "sessions")},
        "status": status,
        "arguments": arguments,
        # The whole plan's order (each shard recorded only its own), for `load_results`.
        "example_ids": list(dict.fromkeys(str(r.example_id) for r in rollouts)),
        "started_at": min(filter(None, started), default=None),
        "finished_at": max(filter(None, finished), default=None),
        "sessions": [s for p in pieces for s in p.metadata.get("sessions") or []],
        "merged_from": [
            {
                "directory": str(p.directory),
                "shard": str(p.shard),
                "rollouts": len(p.rollouts),
                "status": p.metadata.get("status"),
                "wall_seconds": (p.metadata.get("summary") or {}).get("wall_seconds"),
                "versions": p.metadata.get("versions"),
            }
            for p in pieces
        ],
        "summary": summary.model_dump(mode="json"),
    }


def merge_results(output_dir: str | Path, directories: Sequence[str | Path]) -> MergeReport:
    """Merge the directories of a sharded run into one run directory at `output_dir`.

    Checks that every shard ran the same environment, model (name and sampling), arguments
    and plan, and that no (example_id, rollout_index) appears twice or outside its shard; any
    of these raises `ResultsError` naming each problem, and nothing is written. Shards or
    rollouts that are missing do not stop the merge: they are listed in the report, the
    merged run's status is "incomplete", and `rubric eval ... --resume OUTPUT_DIR` (the
    original command without `--shard`) runs exactly what is missing.

    Args:
        output_dir: a new (or empty) directory for the merged run.
        directories: the shards' run directories, in any order.

    Returns:
        A `MergeReport`; the merged directory holds `results.jsonl` in plan order and
        `metadata.json` with a summary recomputed over all the rollouts.
    """
    if not directories:
        raise ConfigError("merge needs at least one shard directory")
    pieces = [_read_piece(Path(d)) for d in directories]
    rpe = int((pieces[0].metadata.get("arguments") or {}).get("rollouts_per_example") or 1)
    problems = _mismatches(pieces) + _duplicated_shards(pieces)
    by_key, found, missing = _collect(pieces, rpe)
    problems += found
    if problems:
        raise ResultsError("cannot merge: " + " | ".join(problems))
    count = pieces[0].shard.count
    missing_shards = sorted(set(range(count)) - {p.shard.index for p in pieces})
    status = "completed" if not missing and not missing_shards else "incomplete"
    rollouts = [r for _, r, _ in sorted(by_key.values(), key=lambda item: item[0])]

    out = Path(output_dir)
    if out.resolve() in {p.directory.resolve() for p in pieces}:
        raise ConfigError(f"merge output {out} is one of the shards; choose a new directory")
    prepare_directory(out, resume=False)
    writer = ResultsWriter(out / RESULTS_FILE)
    try:
        for r in rollouts:
            writer.write(r)
    finally:
        writer.close()
    write_json_atomic(out / METADATA_FILE, _merged_metadata(pieces, status, rollouts, rpe))
    return MergeReport(
        output_dir=out,
        num_rollouts=len(rollouts),
        shards=[str(p.shard) for p in pieces],
        missing_shards=missing_shards,
        missing=missing,
        status=status,
    )


__all__ = ["MergeReport", "Shard", "merge_results", "plan_digest", "shard_metadata"]
