"""Progress of `evaluate` inside Jupyter: one output area, updated in place.

rich's bar turns itself off in a kernel (it is not a terminal), and its Jupyter mode needs
ipywidgets. IPython's own `display(..., display_id=True)` handle needs nothing more than the
kernel: the bar is displayed once and each refresh replaces it where it stands. IPython is
imported only when a kernel is running.
"""

from __future__ import annotations

import contextvars
import html
import sys
import threading
import time
from typing import Any, Protocol


class _Stats(Protocol):
    total: int
    done: int
    num_errors: int
    started: float

    @property
    def mean_reward(self) -> float | None: ...

    @property
    def rate(self) -> float: ...


def in_notebook() -> bool:
    """True inside a Jupyter kernel (ipykernel's shell), never in a plain terminal IPython."""
    if "ipykernel" not in sys.modules:
        return False
    from IPython import get_ipython

    shell = get_ipython()
    return shell is not None and getattr(shell, "kernel", None) is not None


class _Bar:
    """What the output area shows: HTML for Jupyter, one text line for text-only frontends."""

    def __init__(self, stats: _Stats, description: str) -> None:
        self.stats, self.description = stats, description

    def _line(self) -> str:
        s = self.stats
        mean = s.mean_reward
        # Fixed decimals, not `fmt`: a line redrawn in place keeps its width as the mean moves.
        reward = "n/a" if mean is None else f"{mean:.3f}"
        elapsed = time.perf_counter() - s.started
        return f"{s.done}/{s.total} · {s.rate:.1f} rollouts/s · reward {reward} · errors {s.num_errors} · {elapsed:.0f}s"

    def __repr__(self) -> str:
        return f"{self.description} {self._line()}"

    def _repr_html_(self) -> str:
        s = self.stats
        color = "#cf222e" if s.num_errors else "#1a7f37"
        return (
            '<div style="font-family:system-ui,sans-serif;font-size:13px">'
            f"<b>{html.escape(self.description)}</b> "
            f'<progress value="{s.done}" max="{max(s.total, 1)}" style="width:160px;vertical-align:middle;'
            f'accent-color:{color}"></progress> {html.escape(self._line())}</div>'
        )


class NotebookProgress:
    """Display the bar once, then refresh it in place from a small thread until `stop()`.

    The thread runs in a copy of the caller's context, where ipykernel keeps the cell's
    message header, so the updates land in the cell that started the run.
    """

    def __init__(self, stats: _Stats, *, description: str = "eval", interval: float = 0.5) -> None:
        from IPython.display import display

        self.stats = stats
        self.description = description
        self.interval = interval
        self._stop = threading.Event()
        self._handle: Any = display(_Bar(stats, description), display_id=True)
        context = contextvars.copy_context()
        self._thread = threading.Thread(
            target=context.run, args=(self._loop,), daemon=True, name="rubric-progress"
        )

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._handle.update(_Bar(self.stats, self.description))

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(timeout=2)
        self._handle.update(_Bar(self.stats, self.description))


__all__ = ["NotebookProgress", "in_notebook"]
