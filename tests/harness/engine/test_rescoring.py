"""harness.rescore / arescore: saved rollouts scored again, the originals untouched."""

from __future__ import annotations

import math

import pytest

from harness import ConfigError, EvalResults, Rollout, Summary, arescore, rescore
from tests.helpers.fakes import FakeEnv


def _saved() -> EvalResults:
    rollouts = [
        Rollout(
            example_id=i, rollout_index=0, completion=[{"role": "assistant", "content": text}], answer="3"
        )
        for i, text in enumerate(["3", "4", "3"])
    ]
    for r in rollouts:
        r.reward, r.scores = 0.5, {"old": 0.5}
    return EvalResults(rollouts, metadata={"env": {"name": "fake-single"}})


def test_rescore_scores_copies_with_the_current_rubric() -> None:
    saved = _saved()
    new = rescore(saved, FakeEnv(), concurrency=2)
    assert [r.reward for r in new.rollouts] == [1.0, 0.0, 1.0]
    assert all("old" not in r.scores and "correct" in r.scores for r in new.rollouts)
    assert [r.reward for r in saved.rollouts] == [0.5, 0.5, 0.5]  # the originals are untouched
    assert new.metadata["rescored_with"] == "fake-single" and new.metadata["env"] == {"name": "fake-single"}
    assert new.summary.num_rollouts == 3 and new.summary.mean_reward == pytest.approx(2 / 3)


async def test_arescore_records_a_scoring_crash_as_nan_with_its_reason() -> None:
    new = await arescore(_saved(), FakeEnv(score_raises=True))
    assert all(math.isnan(r.reward) for r in new.rollouts)
    assert new.rollouts[0].score_errors[""] == "scoring failed: RuntimeError: rubric exploded"


def test_rescore_rejects_a_bad_concurrency() -> None:
    with pytest.raises(ConfigError, match="concurrency must be an integer >= 1, got 0"):
        rescore(_saved(), FakeEnv(), concurrency=0)


def test_summary_reads_metadata_written_before_the_num_rename() -> None:
    old = Summary.model_validate({"rollouts": 9, "examples": 3, "mean_reward": 0.5})
    assert (old.num_rollouts, old.num_examples) == (9, 3)
    assert "rollouts" not in old.model_dump() and old.model_dump()["num_rollouts"] == 9


def test_the_summary_times_the_rescoring_not_the_original_run() -> None:
    saved = _saved()
    saved.metadata["summary"] = {"wall_seconds": 3600.0}  # the original run took an hour
    new = rescore(saved, FakeEnv(), concurrency=2)
    assert new.summary.wall_seconds is not None and new.summary.wall_seconds < 60
