"""The live progress bar of `evaluate`: done/total, rollouts/s, mean reward, errors.

Finishing a rollout only bumps counters (`RunStats.add`); the bar reads them when it
redraws, a few times a second on rich's own thread, so a run of thousands of rollouts pays
almost nothing for it.
"""

from __future__ import annotations

import math
import time
from typing import Any

from harness._core.types import Rollout
from harness._views.notebook import NotebookProgress, in_notebook


class RunStats:
    """Running counts of a run, cheap to update once per finished rollout."""

    def __init__(self, total: int, done: int = 0) -> None:
        self.total = total
        self.done = done
        self.ran = 0  # finished in this session (the rate's numerator)
        self.num_errors = 0
        self.reward_sum = 0.0
        self.num_scored = 0
        self.started = time.perf_counter()

    def add(self, rollout: Rollout) -> None:
        self.done += 1
        self.ran += 1
        if rollout.error:
            self.num_errors += 1
        reward = rollout.reward
        if not math.isnan(reward):
            self.reward_sum += reward
            self.num_scored += 1

    @property
    def mean_reward(self) -> float | None:
        return self.reward_sum / self.num_scored if self.num_scored else None

    @property
    def rate(self) -> float:
        elapsed = time.perf_counter() - self.started
        return self.ran / elapsed if elapsed > 0 else 0.0


class ProgressDisplay:
    """A rich progress bar over `RunStats` on a terminal, an in-place display in Jupyter;
    nothing when disabled or writing to a pipe."""

    def __init__(
        self,
        stats: RunStats,
        *,
        enabled: bool = True,
        description: str = "eval",
        refresh_per_second: float = 4.0,
    ) -> None:
        self.stats = stats
        self._progress: Any = None
        self._notebook: NotebookProgress | None = None
        if not enabled:
            return
        if in_notebook():  # rich's bar is off in a kernel; draw one that updates in place
            self._notebook = NotebookProgress(stats, description=description)
            return
        from rich.console import Console

        console = Console(stderr=True)
        if not console.is_terminal:
            return
        from rich.progress import BarColumn, Progress, ProgressColumn, TextColumn, TimeElapsedColumn
        from rich.text import Text

        class _Stats(ProgressColumn):
            def render(self, task: Any) -> Text:
                mean = stats.mean_reward
                # Fixed decimals, not `fmt`: a line redrawn in place keeps its width as the mean moves.
                reward = "n/a" if mean is None else f"{mean:.3f}"
                style = "red" if stats.num_errors else "dim"
                return Text.assemble(
                    f"{stats.done}/{stats.total} · {stats.rate:.1f} rollouts/s · reward {reward} · ",
                    (f"errors {stats.num_errors}", style),
                    no_wrap=True,
                )

        class _Bar(BarColumn):
            def render(self, task: Any) -> Any:
                task.completed = stats.done
                return super().render(task)

        self._progress = Progress(
            TextColumn("[bold]{task.description}"),
            _Bar(bar_width=16),
            _Stats(),
            TimeElapsedColumn(),
            console=console,
            refresh_per_second=refresh_per_second,
            transient=False,
        )
        self._task = self._progress.add_task(description, total=stats.total, completed=stats.done)

    @property
    def active(self) -> bool:
        return self._progress is not None or self._notebook is not None

    def __enter__(self) -> ProgressDisplay:
        if self._notebook is not None:
            self._notebook.start()
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._notebook is not None:
            self._notebook.stop()
        if self._progress is not None:
            self._progress.update(self._task, completed=self.stats.done)
            self._progress.stop()


__all__ = ["ProgressDisplay", "RunStats"]
