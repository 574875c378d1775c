"""Worker processes (`aevaluate(workers=N)`): exact results, a dying worker, Ctrl-C, shares, bad input."""

from __future__ import annotations

import asyncio
import json
import os
import warnings
from pathlib import Path
from typing import Any

import pytest

from harness import Client, ConfigError, Rollout, WorkerError, aevaluate
from harness._core.errors import WorkersHint
from harness._engine.executors.plan import workers_hint
from harness._engine.executors.workers import check_workers, split_evenly
from tests.helpers.endpoints import serve
from tests.helpers.fakes import FakeEnv, FakeSource, load_fake, sum_policy

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


def _keys(directory: Path) -> list[tuple[str, int]]:
    return [
        Rollout.model_validate_json(line).key
        for line in (directory / "results.jsonl").read_bytes().splitlines()
    ]


def _worker_children() -> list[int]:
    """PIDs of this process's children that are worker processes."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        state = stat.rsplit(")", 1)[1].split()[0]
        if ppid == os.getpid() and b"harness._engine.executors.workers" in cmdline and state != "Z":
            found.append(int(entry))
    return found


async def test_two_workers_run_every_rollout_once(tmp_path: Path) -> None:
    async with serve(sum_policy, latency=0.01, max_concurrency=8) as (endpoint, client):
        results = await aevaluate(
            load_fake("fake", n=20),
            client,
            rollouts_per_example=3,
            concurrency=8,
            workers=2,
            output_dir=tmp_path,
            progress=False,
        )
        assert endpoint.stats.requests == 60 and endpoint.stats.max_in_flight <= 8
    keys = _keys(tmp_path)
    assert len(keys) == 60 and len(set(keys)) == 60
    assert [r.key for r in results] == [(str(i), k) for i in range(20) for k in range(3)]
    assert results.summary.mean_reward == 1.0 and results.summary.num_errors == 0
    session = json.loads((tmp_path / "metadata.json").read_text())["sessions"][-1]
    report = session["workers"]
    assert [w["index"] for w in report["workers"]] == [0, 1]
    assert sum(w["rollouts"] for w in report["workers"]) == 60 and report["requeued"] == 0
    assert all(w["peak_rss_mib"] > 0 and not w["imported_datasets"] for w in report["workers"])
    assert report["driver_peak_rss_mib"] > 0
    assert not _worker_children()


async def test_a_dying_worker_loses_and_duplicates_nothing(tmp_path: Path) -> None:
    marker = tmp_path / "died"
    env = load_fake("fake", n=24, die_on=5, marker=str(marker))
    async with serve(sum_policy, latency=0.05) as (_, client):
        results = await aevaluate(
            env,
            client,
            rollouts_per_example=2,
            concurrency=8,
            workers=2,
            output_dir=tmp_path / "run",
            progress=False,
        )
    assert marker.exists()  # a worker really was killed
    keys = _keys(tmp_path / "run")
    assert sorted(keys) == sorted((str(i), k) for i in range(24) for k in range(2))
    assert results.summary.num_rollouts == 48 and results.summary.mean_reward == 1.0
    report = results.metadata["sessions"][-1]["workers"]
    assert len(report["lost"]) == 1 and report["requeued"] >= 1
    assert [w["rollouts"] for w in report["workers"]] != []  # the survivor reported
    assert not _worker_children()


async def test_when_every_worker_dies_the_run_fails_and_keeps_what_finished(tmp_path: Path) -> None:
    env = load_fake("fake", n=12, die_on=11)  # kills whichever worker runs example 11, every time
    async with serve(sum_policy) as (_, client):
        with pytest.raises(WorkerError, match=r"every worker died with 1 rollout\(s\) left"):
            await aevaluate(env, client, concurrency=2, workers=2, output_dir=tmp_path, progress=False)
    keys = _keys(tmp_path)
    assert len(keys) == 11 and len(set(keys)) == 11 and ("11", 0) not in keys
    assert json.loads((tmp_path / "metadata.json").read_text())["status"] == "failed"
    assert not _worker_children()


async def test_cancelling_stops_every_worker_and_keeps_what_finished(tmp_path: Path) -> None:
    async with serve(sum_policy, latency=0.2) as (_, client):
        task = asyncio.create_task(
            aevaluate(
                load_fake("fake", n=200),
                client,
                concurrency=8,
                workers=2,
                output_dir=tmp_path,
                progress=False,
            )
        )
        results_file = tmp_path / "results.jsonl"
        for _ in range(600):
            await asyncio.sleep(0.05)
            if results_file.exists() and len(results_file.read_bytes().splitlines()) >= 8:
                break
        assert _worker_children()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    await asyncio.sleep(0.2)
    assert not _worker_children()
    metadata = json.loads((tmp_path / "metadata.json").read_text())
    assert metadata["status"] == "interrupted"
    keys = _keys(tmp_path)
    assert 8 <= len(keys) < 200 and len(set(keys)) == len(keys)


async def test_environment_without_a_spec_is_refused(tmp_path: Path) -> None:
    async with serve(sum_policy) as (_, client):
        with pytest.raises(ConfigError, match=r"workers>1 needs an environment built from a spec"):
            await aevaluate(FakeEnv(n=2), client, workers=2, output_dir=tmp_path / "x", progress=False)
    assert not (tmp_path / "x").exists()  # refused before anything was written


async def test_environment_changed_after_loading_fails_in_one_line() -> None:
    env = load_fake("fake", n=4)
    env.name = "renamed-in-a-notebook"
    async with serve(sum_policy) as (_, client):
        with pytest.raises(
            WorkerError, match=r"different environment than the driver's \(differs in: name\)"
        ):
            await aevaluate(env, client, workers=2, progress=False)
    assert not _worker_children()


async def test_unloadable_environment_names_the_cause() -> None:
    env = load_fake("fake", n=4)
    env.source = FakeSource("fake", {"n": 4, "no_such_argument": 1})
    env.config = lambda: {"name": env.name}  # type: ignore[method-assign]
    async with serve(sum_policy) as (_, client):
        with pytest.raises(WorkerError, match=r"worker \d cannot load environment 'fake': TypeError"):
            await aevaluate(env, client, workers=2, progress=False)


@pytest.mark.parametrize(
    ("workers", "concurrency", "message"),
    [
        (0, 4, "workers must be an integer >= 1, got 0"),
        (-2, 4, "workers must be an integer >= 1"),
        (2.5, 4, "workers must be an integer >= 1"),
        (5, 4, "workers=5 is more than concurrency=4"),
    ],
)
def test_bad_worker_counts(workers: Any, concurrency: int, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        check_workers(workers, concurrency)


def test_more_workers_than_cpus_warns() -> None:
    cpus = os.cpu_count() or 1
    with pytest.warns(RuntimeWarning, match=f"more than the {cpus} CPUs"):
        assert check_workers(cpus + 1, 64) == cpus + 1


def test_workers_hint_says_when_workers_cannot_help() -> None:
    local, remote = "http://127.0.0.1:8000/v1", "https://api.example.com/v1"
    few = workers_hint(workers=2, rollouts=60, concurrency=64, base_url=local)
    assert few is not None and few.startswith(
        "workers=2 will not speed up 60 rollouts: each worker takes seconds"
    )
    assert "from about 1,000 rollouts per worker" in few
    slow = workers_hint(workers=4, rollouts=40_000, concurrency=64, base_url=remote)
    assert slow is not None and slow.startswith("workers=4 will not speed up this run: at concurrency 64,")
    assert "api.example.com delivers at most 128 completions/s" in slow and "raise concurrency" in slow
    assert (
        workers_hint(workers=4, rollouts=40_000, concurrency=64, base_url=local) is None
    )  # may be CPU-bound
    assert workers_hint(workers=4, rollouts=40_000, concurrency=1024, base_url=remote) is None
    assert workers_hint(workers=1, rollouts=10, concurrency=64, base_url=local) is None


async def test_a_small_run_with_workers_says_so_before_any_rollout(tmp_path: Path) -> None:
    said: list[tuple[str, int]] = []
    async with serve(sum_policy, max_concurrency=8) as (endpoint, client):

        def record(message: Warning | str, category: type[Warning], *args: Any, **kwargs: Any) -> None:
            said.append((str(message), endpoint.stats.requests))

        with warnings.catch_warnings():
            warnings.simplefilter("always", WorkersHint)
            warnings.showwarning = record
            results = await aevaluate(
                load_fake("fake", n=6), client, concurrency=8, workers=2, output_dir=tmp_path, progress=False
            )
    assert results.summary.num_rollouts == 6
    assert said == [(workers_hint(workers=2, rollouts=6, concurrency=8, base_url=client.base_url), 0)]


async def test_bad_executor_settings_are_config_errors() -> None:
    async with serve(sum_policy) as (_, client):
        with pytest.raises(ConfigError, match="executor must be 'local' or 'ray'"):
            await aevaluate(FakeEnv(n=2), client, executor="dask", progress=False)
        with pytest.raises(ConfigError, match="ray_address='auto' needs executor='ray'"):
            await aevaluate(FakeEnv(n=2), client, ray_address="auto", progress=False)


def test_concurrency_shares_add_up_to_the_limit() -> None:
    assert split_evenly(10, 3) == [4, 3, 3] and sum(split_evenly(7, 7)) == 7
    try:
        shares = []
        for index in range(3):
            Client.set_concurrency_share(index, 3)
            shares.append(Client.concurrency_share(64))
        assert shares == [22, 21, 21]
        Client.set_concurrency_share(2, 3)
        assert Client.concurrency_share(2) == 1  # never zero: a worker always makes progress
    finally:
        Client.set_concurrency_share(0, 1)
    assert Client.concurrency_share(64) == 64


async def test_client_limit_is_run_wide_across_workers(tmp_path: Path) -> None:
    async with serve(sum_policy, latency=0.05, max_concurrency=5) as (endpoint, client):
        await aevaluate(load_fake("fake", n=40), client, concurrency=16, workers=2, progress=False)
        assert endpoint.stats.requests == 40
        assert endpoint.stats.max_in_flight <= 5  # 3 + 2, not 5 per worker


async def test_a_rollout_whose_state_cannot_be_sent_is_an_error_on_it_only(tmp_path: Path) -> None:
    async with serve(sum_policy) as (_, client):
        results = await aevaluate(
            load_fake("fake", n=8, lock_on=3), client, workers=2, output_dir=tmp_path / "run", progress=False
        )
    assert sorted(_keys(tmp_path / "run")) == sorted((str(i), 0) for i in range(8))
    failed = [r for r in results if r.error]
    assert [r.example_id for r in failed] == [3] and "could not send the rollout" in (failed[0].error or "")
    assert "unsendable_state" in failed[0].state
