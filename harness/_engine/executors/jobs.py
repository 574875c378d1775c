"""A run's plan: every (example_id, rollout_index) it must produce, which are done, and the
jobs still to run, in dataset order: one rollout each, or (`Plan.groups`) the rollouts of one
example together, for a run that plays and scores each group in one place.

Kept small per rollout so a long run's driver stays flat in memory: a rollout's place is
computed from its example's position, and the jobs are a sequence computed when asked
(`Jobs`; a resumed run keeps only the remaining positions, 8 bytes each). The executors
(`scheduler.run_jobs`, and `harness._engine.evaluation.run_in_process`) read jobs by index.
"""

from __future__ import annotations

from array import array
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, overload

from harness._core.errors import ResultsError
from harness._core.types import Rollout
from harness._engine.executors.scheduler import Job


class Plan:
    """Every (example_id, rollout_index) the run must produce, which are done, which remain.

    Memory per rollout is a few bytes: positions are computed from the example's position,
    the jobs are a sequence computed on demand (`Jobs`)."""

    def __init__(self, examples: list[Mapping[str, Any]], ids: list[str], rollouts_per_example: int) -> None:
        self.examples = examples
        self.ids = ids
        self.rollouts_per_example = rollouts_per_example
        self.position = {key: position for position, key in enumerate(ids)}
        self.size = len(ids) * rollouts_per_example
        self.done: set[tuple[str, int]] = set()
        self.jobs: Jobs = Jobs(examples, rollouts_per_example, None)

    def order(self, key: tuple[str, int]) -> int | None:
        """Where rollout `key` goes in the final, ordered results (None: not in this plan)."""
        example, index = key
        position = self.position.get(example)
        if position is None or not 0 <= index < self.rollouts_per_example:
            return None
        return position * self.rollouts_per_example + index

    def skip_finished(self, previous: list[Rollout], directory: Path | None) -> None:
        """Mark the rollouts of the run being resumed as done; the rest become `jobs`."""
        for r in previous:
            if self.order(r.key) is None:
                raise ResultsError(
                    f"cannot resume {directory}: its results.jsonl holds rollout {r.key} "
                    f"(example_id, rollout_index), which this run would not produce; "
                    f"use the original settings or a new output_dir"
                )
            self.done.add(r.key)
        if self.done:
            remaining = array("q", (p for p in range(self.size) if self._key(p) not in self.done))
            self.jobs = Jobs(self.examples, self.rollouts_per_example, remaining)

    def groups(self) -> list[Job]:
        """The jobs still to run as one job per example with rollouts left: (example, its
        remaining rollout indices), in plan order (one small tuple per example)."""
        remaining = self.jobs.remaining
        per_example = self.rollouts_per_example
        grouped: dict[int, list[int]] = {}
        for position in range(self.size) if remaining is None else remaining:
            grouped.setdefault(position // per_example, []).append(position % per_example)
        return [(self.examples[example], tuple(indices)) for example, indices in grouped.items()]

    def _key(self, position: int) -> tuple[str, int]:
        return self.ids[position // self.rollouts_per_example], position % self.rollouts_per_example

    def sort(self, rollouts: list[Rollout]) -> list[Rollout]:
        """`rollouts` in dataset order, then rollout_index order."""

        def place(r: Rollout) -> int:
            found = self.order(r.key)
            return self.size if found is None else found

        rollouts.sort(key=place)
        return rollouts


class Jobs(Sequence[Job]):
    """The (example, rollout_index) pairs still to run, in plan order, computed when asked:
    all of them, or the plan positions in `remaining` (a resumed run)."""

    def __init__(
        self, examples: list[Mapping[str, Any]], per_example: int, remaining: array[int] | None
    ) -> None:
        self.examples, self.per_example, self.remaining = examples, per_example, remaining

    def __len__(self) -> int:
        return len(self.examples) * self.per_example if self.remaining is None else len(self.remaining)

    @overload
    def __getitem__(self, item: int) -> Job: ...
    @overload
    def __getitem__(self, item: slice) -> list[Job]: ...
    def __getitem__(self, item: int | slice) -> Job | list[Job]:
        if isinstance(item, slice):
            return [self[i] for i in range(*item.indices(len(self)))]
        if item < 0:
            item += len(self)
        if not 0 <= item < len(self):
            raise IndexError(item)
        position = item if self.remaining is None else self.remaining[item]
        return self.examples[position // self.per_example], (position % self.per_example,)


__all__ = ["Jobs", "Plan"]
