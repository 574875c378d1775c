"""Shards (`aevaluate(shard="i/N")`) and `merge_results`: exact coverage, checks, resume of a merge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness import ConfigError, ResultsError, Shard, aevaluate, load_results, merge_results
from harness._core.errors import ResultsWarning
from tests.helpers.endpoints import serve
from tests.helpers.fakes import FakeEnv, sum_policy


def noisy_policy(messages, tools):  # right for even examples only, so pass@k is not trivial
    answer = sum_policy(messages, tools)
    return answer if int(answer) % 4 == 1 else "wrong"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("3/2", r"the index must be 0..1 \(shards are numbered from 0\)"),
        ("2/2", "the index must be 0..1"),
        ("0/0", "the number of shards must be at least 1"),
        ("-1/3", "the index must be 0..2"),
        ("1-of-2", "is not of the form i/N"),
        ("", "is not of the form i/N"),
    ],
)
def test_bad_shards_are_config_errors(text: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        Shard.parse(text)


def test_shard_slices_are_disjoint_and_cover_everything() -> None:
    items = list(range(11))
    slices = [Shard.parse(f"{i}/3").select(items) for i in range(3)]
    assert slices == [[0, 3, 6, 9], [1, 4, 7, 10], [2, 5, 8]]
    assert Shard.parse(" 1 / 3 ") == Shard(1, 3) and str(Shard(1, 3)) == "1/3"


async def _run_shards(client, root: Path, count: int, *, n: int = 7, r: int = 2, **kwargs) -> list[Path]:
    dirs = []
    for index in range(count):
        out = root / f"shard{index}"
        await aevaluate(
            FakeEnv(n=n),
            client,
            rollouts_per_example=r,
            output_dir=out,
            progress=False,
            shard=f"{index}/{count}",
        )
        dirs.append(out)
    return dirs


async def test_shards_merge_into_the_unsharded_run(tmp_path: Path) -> None:
    async with serve(noisy_policy) as (_, client):
        whole = await aevaluate(FakeEnv(n=7), client, rollouts_per_example=2, progress=False)
        dirs = await _run_shards(client, tmp_path, 3)
    counts = [len(load_results(d)) for d in dirs]
    assert counts == [6, 4, 4]  # examples 0,3,6 / 1,4 / 2,5, two rollouts each
    shard_meta = json.loads((dirs[1] / "metadata.json").read_text())
    assert shard_meta["arguments"]["shard"] == "1/3"
    assert shard_meta["shard"]["example_ids"] == ["1", "4"] and shard_meta["shard"]["examples_total"] == 7

    report = merge_results(tmp_path / "merged", reversed(dirs))
    assert report.status == "completed" and report.num_rollouts == 14 and not report.missing
    merged = load_results(tmp_path / "merged")
    assert [r.key for r in merged] == [r.key for r in whole]  # plan order, each pair once
    assert merged.summary.mean_reward == whole.summary.mean_reward
    assert merged.summary.pass_at_k == whole.summary.pass_at_k and 2 in merged.summary.pass_at_k
    assert "shard" not in merged.metadata["arguments"] and len(merged.metadata["merged_from"]) == 3


async def test_missing_shard_and_rollout_are_reported_and_resume_fills_them(tmp_path: Path) -> None:
    async with serve(sum_policy) as (endpoint, client):
        dirs = await _run_shards(client, tmp_path, 3)
        lines = (dirs[0] / "results.jsonl").read_text().splitlines(keepends=True)
        (dirs[0] / "results.jsonl").write_text("".join(lines[:-1]))  # drop the last to finish
        dropped = json.loads(lines[-1])
        report = merge_results(tmp_path / "merged", [dirs[0], dirs[2]])
        assert report.status == "incomplete"
        assert report.missing_shards == [1]
        assert report.missing == [(str(dropped["example_id"]), dropped["rollout_index"])]
        assert json.loads((tmp_path / "merged" / "metadata.json").read_text())["status"] == "incomplete"

        endpoint.reset_stats()
        resumed = await aevaluate(
            FakeEnv(n=7),
            client,
            rollouts_per_example=2,
            output_dir=tmp_path / "merged",
            resume=True,
            progress=False,
        )
        assert endpoint.stats.requests == 5  # shard 1 (examples 1, 4: four rollouts) + the dropped one
    keys = [r.key for r in load_results(tmp_path / "merged")]
    assert len(keys) == 14 and len(set(keys)) == 14
    assert resumed.metadata["status"] == "completed" and resumed.summary.mean_reward == 1.0


async def test_merge_refuses_other_model_environment_or_arguments(tmp_path: Path) -> None:
    async with serve(sum_policy) as (_, client):
        a = tmp_path / "a"
        await aevaluate(FakeEnv(n=4), client, output_dir=a, progress=False, shard="0/2")
        client.model = "another-model"
        b = tmp_path / "b"
        await aevaluate(FakeEnv(n=4), client, output_dir=b, progress=False, shard="1/2")
        client.model = "scripted"
        c = tmp_path / "c"
        await aevaluate(FakeEnv(n=4), client, output_dir=c, progress=False, shard="1/2", seed=3)
        d = tmp_path / "d"
        other = FakeEnv(n=4)
        other.name = "other-env"
        await aevaluate(other, client, output_dir=d, progress=False, shard="1/2")
    with pytest.raises(ResultsError, match=r'model\.model "scripted" vs "another-model"'):
        merge_results(tmp_path / "m1", [a, b])
    with pytest.raises(ResultsError, match=r"arguments\.seed null vs 3"):
        merge_results(tmp_path / "m2", [a, c])
    with pytest.raises(ResultsError, match=r"differs from .*: env\.name"):
        merge_results(tmp_path / "m3", [a, d])
    assert not (tmp_path / "m1").exists()  # nothing written when the shards do not belong together


async def test_merge_refuses_duplicates_and_unsharded_runs(tmp_path: Path) -> None:
    async with serve(sum_policy) as (_, client):
        dirs = await _run_shards(client, tmp_path, 2, n=4, r=1)
        plain = tmp_path / "plain"
        await aevaluate(FakeEnv(n=4), client, output_dir=plain, progress=False)
    with pytest.raises(ResultsError, match="shard 0/2 given twice"):
        merge_results(tmp_path / "m1", [dirs[0], dirs[0], dirs[1]])
    first = (dirs[0] / "results.jsonl").read_text().splitlines(keepends=True)[0]
    with open(dirs[1] / "results.jsonl", "a") as handle:  # the same rollout in two shards
        handle.write(first)
    with pytest.raises(ResultsError, match=r"outside their shard's plan: \('0', 0\)"):
        merge_results(tmp_path / "m2", dirs)
    (dirs[1] / "results.jsonl").write_text(
        "".join((dirs[1] / "results.jsonl").read_text().splitlines(True)[:-1])
    )
    with open(dirs[0] / "results.jsonl", "a") as handle:  # repeated within a shard: read once
        handle.write(first)
    with pytest.warns(ResultsWarning, match="ignored 1 repeated rollout"):
        merged = merge_results(tmp_path / "m2b", dirs)
    assert merged.num_rollouts == 4
    with pytest.raises(ResultsError, match="was not run with --shard"):
        merge_results(tmp_path / "m3", [plain])
    with pytest.raises(ResultsError, match="not a run directory"):
        merge_results(tmp_path / "m4", [tmp_path / "nowhere"])


async def test_resuming_a_shard_keeps_its_slice(tmp_path: Path) -> None:
    async with serve(sum_policy) as (_, client):
        [out] = [tmp_path / "s"]
        await aevaluate(FakeEnv(n=6), client, output_dir=out, progress=False, shard="1/2")
        with pytest.raises(ValueError, match=r'arguments\.shard: was "1/2", now "0/2"'):
            await aevaluate(FakeEnv(n=6), client, output_dir=out, resume=True, progress=False, shard="0/2")
        again = await aevaluate(
            FakeEnv(n=6), client, output_dir=out, resume=True, progress=False, shard="1/2"
        )
    assert [r.key for r in again] == [("1", 0), ("3", 0), ("5", 0)]
