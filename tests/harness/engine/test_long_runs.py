"""A run longer than `KEPT_IN_MEMORY` keeps only its summary and hands its rollouts back from
results.jsonl when asked (issue 21: the driver's memory is flat in the number of rollouts)."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import aevaluate, load_results
from harness._engine import evaluation
from tests.helpers.endpoints import serve
from tests.helpers.fakes import FakeEnv, sum_policy


async def test_a_long_run_reads_its_rollouts_back_in_order(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(evaluation, "KEPT_IN_MEMORY", 10)
    async with serve(sum_policy) as (_, client):
        results = await aevaluate(
            FakeEnv(n=30),
            client,
            rollouts_per_example=2,
            output_dir=tmp_path / "r",
            concurrency=8,
            progress=False,
        )
    s = results.summary
    assert (s.num_rollouts, s.num_examples, s.mean_reward, s.pass_at_k[2]) == (60, 30, 1.0, 1.0)
    keys = [r.key for r in results.rollouts]  # read from results.jsonl now, in dataset order
    assert keys == [r.key for r in load_results(tmp_path / "r").rollouts]
    assert keys[:4] == [(keys[0][0], 0), (keys[0][0], 1), (keys[2][0], 0), (keys[2][0], 1)]
    assert len(set(keys)) == 60 and len(results) == 60


async def test_a_long_run_resumed_counts_the_earlier_session(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(evaluation, "KEPT_IN_MEMORY", 10)
    out = tmp_path / "r"
    async with serve(sum_policy) as (_, client):
        await aevaluate(FakeEnv(n=30), client, output_dir=out, progress=False)
        lines = (out / "results.jsonl").read_text().splitlines()
        (out / "results.jsonl").write_text("\n".join(lines[:12]) + "\n")  # a crash after 12 of 30
        resumed = await aevaluate(FakeEnv(n=30), client, output_dir=out, resume=True, progress=False)
    assert resumed.summary.num_rollouts == 30 and resumed.summary.mean_reward == 1.0
    assert resumed.metadata["sessions"][-1]["rollouts_ran"] == 18
    assert sorted(r.key for r in resumed.rollouts) == sorted(r.key for r in load_results(out).rollouts)
