"""Workers as Ray actors (`executor="ray"`) on a real local Ray with 2 CPUs: an actor killed mid-run."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envs import load_environment
from harness import ConfigError, Rollout, aevaluate
from tests.helpers.endpoints import serve
from tests.helpers.fakes import load_fake, sum_policy

if os.environ.get("CI") != "true":  # CI installs the [ray] extra and always runs these
    pytest.importorskip("ray", reason="Ray tests need pip install 'rubric-rl[ray]'")

pytestmark = [pytest.mark.timeout(240), pytest.mark.ray, pytest.mark.slow]


@pytest.fixture(scope="module")
def local_ray() -> Iterator[Any]:
    import ray

    ray.init(num_cpus=2, include_dashboard=False, logging_level="warning")
    yield ray
    ray.shutdown()


async def test_unreachable_ray_address_is_one_clear_error(tmp_path: Path) -> None:
    async with serve(sum_policy) as (_, client):
        with pytest.raises(
            ConfigError, match=r"cannot connect to the Ray cluster at 127\.0\.0\.1:1: nothing answers"
        ):
            await aevaluate(
                load_fake("fake", n=2),
                client,
                workers=2,
                executor="ray",
                ray_address="127.0.0.1:1",
                output_dir=tmp_path / "out",
                progress=False,
            )
    assert not (tmp_path / "out").exists()


async def _kill_one_actor(ray: Any, results_file: Path, after: int) -> str:
    from harness._engine.executors.ray_cluster import ACTOR_PREFIX

    while not results_file.exists() or len(results_file.read_bytes().splitlines()) < after:
        await asyncio.sleep(0.05)
    names = sorted(
        a["name"]
        for a in ray.util.list_named_actors(all_namespaces=True)
        if a["name"].startswith(ACTOR_PREFIX)
    )
    assert len(names) == 2, names
    ray.kill(ray.get_actor(names[1]), no_restart=True)
    return names[1]


async def test_killing_an_actor_mid_run_loses_and_duplicates_nothing(local_ray: Any, tmp_path: Path) -> None:
    out = tmp_path / "run"
    async with serve(sum_policy, latency=0.1) as (endpoint, client):
        run = asyncio.create_task(
            aevaluate(
                load_fake("fake", n=40),
                client,
                rollouts_per_example=2,
                concurrency=8,
                workers=2,
                executor="ray",
                output_dir=out,
                progress=False,
            )
        )
        killed = await asyncio.wait_for(_kill_one_actor(local_ray, out / "results.jsonl", after=10), 180)
        results = await asyncio.wait_for(run, 180)
    keys = [
        Rollout.model_validate_json(line).key for line in (out / "results.jsonl").read_bytes().splitlines()
    ]
    assert sorted(keys) == sorted((str(i), k) for i in range(40) for k in range(2))  # each exactly once
    assert results.summary.num_rollouts == 80 and results.summary.mean_reward == 1.0
    report = results.metadata["sessions"][-1]["workers"]
    assert report["executor"] == "ray" and report["lost"] == [int(killed.rsplit("-", 1)[1])]
    assert report["requeued"] >= 1  # its in-flight jobs ran again elsewhere
    assert endpoint.stats.requests >= 80
    assert not [a for a in local_ray.util.list_named_actors(all_namespaces=True) if a["name"] == killed]


async def test_ray_batches_keep_every_rollout_and_name_one_that_cannot_be_sent(
    local_ray: Any, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    async with serve(sum_policy, latency=0.01) as (endpoint, client):
        results = await aevaluate(
            load_fake("fake", n=60, lock_on=7),
            client,
            rollouts_per_example=2,
            concurrency=16,
            workers=2,
            executor="ray",
            output_dir=out,
            progress=False,
        )
    keys = [
        Rollout.model_validate_json(line).key for line in (out / "results.jsonl").read_bytes().splitlines()
    ]
    assert sorted(keys) == sorted((str(i), k) for i in range(60) for k in range(2))  # each exactly once
    failed = sorted(r.key for r in results if r.error)
    assert failed == [("7", 0), ("7", 1)] and endpoint.stats.requests == 120
    assert all("could not send the rollout" in (r.error or "") for r in results if r.error)
    report = results.metadata["sessions"][-1]["workers"]
    assert sorted(w["rollouts"] for w in report["workers"]) != [0, 120]  # both actors worked
    assert sum(w["rollouts"] for w in report["workers"]) == 120


@pytest.mark.parametrize("grouped", [False, True], ids=["rollouts", "groups"])
def test_agent_episodes_on_bwrap_run_in_ray_actors(local_ray: Any, tmp_path: Path, grouped: bool) -> None:
    """Ray's workers run uvloop, whose children inherit the worker's descriptors: the sandbox's
    relay (a background process) used to hold its start command's output, so every episode
    ended with "the relay ... did not start". Each model call is a recorded turn. The actors
    rebuild the agent run from its name and settings. Under a tree with a group node over a
    sandbox reader, each group is handed to one actor, which plays its members, scores them
    together while their sandboxes are open, then releases them."""
    spec = (
        "tests.envs.agents.test_agent_rubrics:grouped_env"
        if grouped
        else "tests.envs.agents.conftest:task_env"
    )
    results = load_environment(spec).evaluate(
        "scripted:solve",
        agent="bash",
        runtime="bwrap",
        rollouts_per_example=2,
        workers=2,
        executor="ray",
        output_dir=tmp_path / "run",
        progress=False,
    )
    assert [(r.error, r.stop_reason, r.reward) for r in results] == [
        (None, "completed", 0.75 if grouped else 1.0)
    ] * 2
    assert all([c.status for c in r.model_calls] == [200, 200] for r in results)
    workers = results.metadata["sessions"][-1]["workers"]
    assert workers["executor"] == "ray" and results.metadata["episodes"]["agent"] == "bash"
    if grouped:
        assert all(r.scores == {"file": 1.0, "rank": 0.5, "rank.command_passes": 1.0} for r in results)
        assert sorted(w["rollouts"] for w in workers["workers"]) == [0, 2]  # the group went to one actor


def test_a_folder_named_ray_is_not_taken_for_ray(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 47.23: a folder named `ray` on the path (the temp folder holds Ray's own) imported as
    an empty namespace package; `--ray` then failed with an AttributeError. It is named now."""
    import sys

    from harness import ConfigError
    from harness._engine.executors.ray_cluster import _import_ray

    (tmp_path / "ray").mkdir()
    # Where Ray is not installed: only the standard library and the folder on the path.
    monkeypatch.setattr(sys, "path", [str(tmp_path), *(p for p in sys.path if "-packages" not in p)])
    monkeypatch.delitem(sys.modules, "ray", raising=False)
    with pytest.raises(ConfigError, match=r"`import ray` found a folder \(.*/ray\), not the Ray package"):
        _import_ray()
    monkeypatch.delitem(sys.modules, "ray")  # the namespace package: the next import is the real one


def test_an_installed_environment_name_does_not_put_the_working_folder_on_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    from envs import load_environment

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    load_environment("gsm8k")
    assert str(tmp_path) not in sys.path
