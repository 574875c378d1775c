"""Hold each example's finished rollouts until its group is complete, then score the group.

For an environment whose rubric compares the rollouts of one example (`ScoresGroups`), the
episodes run unscored, wherever they run (this event loop, worker processes, Ray actors), and
come back to the driver one by one. (A run whose episodes hold resources that scoring reads, an
agent's sandboxes, plays and scores each group in one place instead: `runner.rollout_group`.) `GroupScorer.add` keeps them per example; when the last
member arrives the group is scored (`env.score_group`) in a task on the driver's loop and its
members are passed on, in rollout order, to what streams them to disk. So a group is written
whole or not at all, which is what lets a resumed run keep groups together.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from harness._core.protocol import ScoresGroups, scores_groups
from harness._core.types import Rollout
from harness._engine.runner import score_group


class GroupScorer:
    """Collects rollouts by example; scores a group when its `group_size`-th member finishes.

    Args:
        env: the environment that scores groups.
        group_size: rollouts per example (`rollouts_per_example`).
        on_finished: called once per scored rollout, on the driver's loop, members of one
            group together and in `rollout_index` order.
    """

    def __init__(self, env: ScoresGroups, group_size: int, on_finished: Callable[[Rollout], None]) -> None:
        self.env = env
        self.group_size = group_size
        self.on_finished = on_finished
        self.waiting: dict[str, list[Rollout]] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.groups_scored = 0

    @staticmethod
    def needed(env: object) -> bool:
        """Whether `env` scores the rollouts of an example together (`scores_groups`)."""
        return scores_groups(env)

    @classmethod
    def of(cls, env: object, group_size: int, on_finished: Callable[[Rollout], None]) -> GroupScorer | None:
        """A GroupScorer when `env` scores groups (`scores_groups`), else None."""
        return (
            cls(env, group_size, on_finished)
            if isinstance(env, ScoresGroups) and scores_groups(env)
            else None
        )

    def add(self, rollout: Rollout) -> None:
        """Take one finished (unscored) rollout; start scoring its group if it was the last."""
        key = str(rollout.example_id)
        members = self.waiting.setdefault(key, [])
        members.append(rollout)
        if len(members) >= self.group_size:
            del self.waiting[key]
            self._start(members)

    def _start(self, members: list[Rollout]) -> None:
        task = asyncio.get_running_loop().create_task(self._score(members))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _score(self, members: list[Rollout]) -> None:
        members.sort(key=lambda r: r.rollout_index)
        await score_group(self.env, members)
        self.groups_scored += 1
        for r in members:
            self.on_finished(r)

    async def drain(self) -> None:
        """Wait for every group being scored; a group still short of members (a job that never
        came back) is scored as it is, so nothing finished is lost."""
        for members in list(self.waiting.values()):
            self._start(members)
        self.waiting.clear()
        while self.tasks:
            await asyncio.gather(*list(self.tasks))

    def cancel(self) -> None:
        """Stop scoring (the run was interrupted): unsaved groups are run again on resume."""
        for task in list(self.tasks):
            task.cancel()


async def run_scoring_groups(work: Coroutine[Any, Any, None], scorer: GroupScorer) -> None:
    """Await the run's `work` (whose rollouts go to `scorer.add`), then the groups' scoring."""
    try:
        await work
        await scorer.drain()
    finally:
        scorer.cancel()


__all__ = ["GroupScorer", "run_scoring_groups"]
