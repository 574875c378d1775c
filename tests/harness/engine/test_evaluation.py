"""harness.evaluate end to end over loopback: batches, concurrency, streaming, metadata."""

from __future__ import annotations

import asyncio
import json
import math
from pathlib import Path
from typing import Any

import pytest

from envs import SingleTurnEnv
from harness import Client, Rollout, aevaluate, load_results
from harness._views.progress import ProgressDisplay, RunStats
from harness.scripted._endpoint import ScriptedHTTPError
from rubrics import LLMJudge, RankJudge, WeightedSum, judges
from tests.helpers.endpoints import serve
from tests.helpers.fakes import FakeEnv, MultiTurnFakeEnv, ToolFakeEnv, bisect_policy, sum_policy
from tests.rubrics.test_rank_judge import closeness_ranking


async def test_batch_of_single_turn_rollouts() -> None:
    async with serve(sum_policy) as (endpoint, client):
        results = await aevaluate(FakeEnv(n=5), client, rollouts_per_example=3, progress=False)
    assert [r.key for r in results.rollouts] == [(str(i), k) for i in range(5) for k in range(3)]
    s = results.summary
    assert s.num_rollouts == 15 and s.num_examples == 5 and s.mean_reward == 1.0 and s.reward_stderr == 0.0
    assert s.pass_at_k == {1: 1.0, 2: 1.0, 3: 1.0}
    assert s.stop_reasons == {"completed": 15} and s.num_errors == 0 and s.num_unscored == 0
    assert s.node_means == {"correct": 1.0, "correct.exact": 1.0}
    assert s.prompt_tokens == endpoint.stats.prompt_tokens and s.completion_tokens == 15
    assert s.wall_seconds > 0 and s.rollouts_per_second > 0
    assert endpoint.stats.requests == 15
    assert results.metadata["status"] == "completed"


async def test_tool_and_multi_turn_envs_in_a_batch() -> None:
    async with serve(sum_policy) as (_, client):
        tools = await aevaluate(ToolFakeEnv(n=4), client, num_examples=3, progress=False)
    assert len(tools.rollouts) == 3 and all(r.turns == 2 and r.reward == 1.0 for r in tools.rollouts)
    async with serve(bisect_policy) as (_, client):
        multi = await aevaluate(MultiTurnFakeEnv(n=4), client, progress=False)
    assert multi.summary.stop_reasons == {"solved": 4} and multi.summary.mean_reward == 1.0


async def test_sampling_argument_reaches_the_endpoint() -> None:
    async with serve(lambda messages, tools: "a b c d e", record=True) as (endpoint, client):
        results = await aevaluate(
            FakeEnv(n=2, sampling={"temperature": 0.1}), client, sampling={"max_tokens": 3}, progress=False
        )
    assert results.summary.stop_reasons == {"length": 2}
    body = endpoint.stats.bodies[0]
    assert body["temperature"] == 0.1 and body.get("max_tokens", body.get("max_completion_tokens")) == 3
    assert results.metadata["arguments"]["sampling"] == {"max_tokens": 3}


async def test_permanent_failures_land_on_rollouts_and_the_batch_finishes() -> None:
    def policy(messages: list[dict[str, Any]], tools: Any) -> str:
        if "2+3" in messages[0]["content"]:
            raise ScriptedHTTPError(503, "overloaded")
        return sum_policy(messages, tools)

    async with serve(policy, max_retries=1) as (_, client):
        results = await aevaluate(FakeEnv(n=6), client, rollouts_per_example=2, progress=False)
    failed = [r for r in results.rollouts if r.error]
    assert [r.key for r in failed] == [("2", 0), ("2", 1)]
    assert all(r.stop_reason == "error" and "503" in r.error and math.isnan(r.reward) for r in failed)
    s = results.summary
    assert s.num_errors == 2 and s.num_unscored == 2 and s.num_scored == 10 and s.mean_reward == 1.0
    assert s.unscored_reasons == [("rollout error (EndpointError)", 2)]


async def test_env_that_raises_does_not_stop_the_batch() -> None:
    async with serve(sum_policy) as (_, client):
        results = await aevaluate(ToolFakeEnv(n=3, respond_raises=True), client, progress=False)
    assert results.summary.num_errors == 3 and all(
        r.error == "ValueError: tool runner bug" for r in results.rollouts
    )


async def test_concurrency_is_reached_and_not_exceeded() -> None:
    async with serve(sum_policy, latency=0.15, max_concurrency=32) as (endpoint, client):
        results = await aevaluate(
            FakeEnv(n=12), client, rollouts_per_example=2, concurrency=8, progress=False
        )
        assert endpoint.stats.max_in_flight == 8
    assert len(results.rollouts) == 24


async def test_output_dir_streams_each_rollout_as_it_finishes(tmp_path: Path) -> None:
    out = tmp_path / "run"
    seen_lines: list[int] = []

    def policy(messages: list[dict[str, Any]], tools: Any) -> str:
        path = out / "results.jsonl"
        seen_lines.append(len(path.read_bytes().splitlines()) if path.exists() else -1)
        return sum_policy(messages, tools)

    async with serve(policy) as (_, client):
        results = await aevaluate(FakeEnv(n=5), client, concurrency=1, output_dir=out, progress=False)
    assert seen_lines == [0, 1, 2, 3, 4]  # one line on disk per finished rollout, before the next starts
    lines = (out / "results.jsonl").read_text().splitlines()
    assert [Rollout.model_validate_json(line).key for line in lines] == [r.key for r in results.rollouts]
    meta = json.loads((out / "metadata.json").read_text())
    assert meta["status"] == "completed" and meta["env"] == FakeEnv(n=5).config()
    assert meta["model"]["model"] == "scripted" and "api_key" not in json.dumps(meta)
    assert meta["arguments"]["rollouts_per_example"] == 1 and meta["arguments"]["concurrency"] == 1
    assert set(meta["versions"]) >= {"rubric-rl", "openai", "datasets", "pydantic", "python"}
    assert meta["summary"]["num_rollouts"] == 5 and meta["summary"]["mean_reward"] == 1.0
    assert meta["started_at"] and meta["finished_at"] and meta["sessions"][0]["rollouts_ran"] == 5
    assert not list(out.glob("*.tmp"))
    back = load_results(out)
    assert back.summary.mean_reward == 1.0 and back.metadata["status"] == "completed"


async def test_metadata_says_running_while_the_run_is_going(tmp_path: Path) -> None:
    statuses: list[str] = []

    def policy(messages: list[dict[str, Any]], tools: Any) -> str:
        statuses.append(json.loads((tmp_path / "metadata.json").read_text())["status"])
        return sum_policy(messages, tools)

    async with serve(policy) as (_, client):
        await aevaluate(FakeEnv(n=2), client, output_dir=tmp_path, progress=False)
    assert statuses == ["running", "running"]


async def test_non_empty_output_dir_needs_resume(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    async with serve(sum_policy) as (_, client):
        with pytest.raises(
            FileExistsError, match=r"not empty; pass resume=True .* another output_dir"
        ) as info:
            await aevaluate(FakeEnv(n=2), client, output_dir=tmp_path, progress=False)
    assert str(tmp_path) in str(info.value)


async def test_cancellation_keeps_finished_rollouts_and_marks_interrupted(tmp_path: Path) -> None:
    async with serve(sum_policy, latency=0.05) as (_, client):
        task = asyncio.create_task(
            aevaluate(FakeEnv(n=40), client, concurrency=2, output_dir=tmp_path, progress=False)
        )
        results_file = tmp_path / "results.jsonl"
        for _ in range(200):
            await asyncio.sleep(0.02)
            if results_file.exists() and len(results_file.read_bytes().splitlines()) >= 4:
                break
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        meta = json.loads((tmp_path / "metadata.json").read_text())
        done = len(results_file.read_bytes().splitlines())
        assert meta["status"] == "interrupted" and 4 <= done < 40
        assert meta["summary"]["num_rollouts"] == done
        resumed = await aevaluate(
            FakeEnv(n=40), client, concurrency=8, output_dir=tmp_path, resume=True, progress=False
        )
    assert len(resumed.rollouts) == 40 and len({r.key for r in resumed.rollouts}) == 40
    assert resumed.metadata["sessions"][0]["status"] == "interrupted"
    assert resumed.metadata["sessions"][1]["rollouts_planned"] == 40 - done


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"rollouts_per_example": 0}, "rollouts_per_example must be an integer >= 1"),
        ({"concurrency": 0}, "concurrency must be an integer >= 1"),
        ({"num_examples": 0}, "num_examples must be None"),
    ],
)
async def test_bad_arguments_fail_before_any_request(kwargs: dict[str, Any], message: str) -> None:
    async with serve(sum_policy) as (endpoint, client):
        with pytest.raises(ValueError, match=message):
            await aevaluate(FakeEnv(), client, progress=False, **kwargs)
        assert endpoint.stats.requests == 0


async def test_not_an_environment_not_a_client_and_bad_ids() -> None:
    client = Client("m", base_url="http://127.0.0.1:9/v1", api_key="k")  # never called
    with pytest.raises(TypeError, match="lacks .*setup_rollout"):
        await aevaluate(object(), client, progress=False)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="client must be a harness.Client, got NoneType"):
        await aevaluate(FakeEnv(), None, progress=False)  # type: ignore[arg-type]

    class NoIds(FakeEnv):
        def get_dataset(
            self, split: str = "eval", n: int | None = None, seed: int | None = None
        ) -> list[dict[str, Any]]:
            return [{"question": "q"}]

    class DuplicateIds(FakeEnv):
        def get_dataset(
            self, split: str = "eval", n: int | None = None, seed: int | None = None
        ) -> list[dict[str, Any]]:
            return [{"example_id": 1}, {"example_id": "1"}]

    with pytest.raises(ValueError, match="has no 'example_id'"):
        await aevaluate(NoIds(), client, progress=False)
    with pytest.raises(ValueError, match="'1' appears twice"):
        await aevaluate(DuplicateIds(), client, progress=False)


async def test_empty_dataset_gives_empty_results() -> None:
    async with serve(sum_policy) as (_, client):
        results = await aevaluate(FakeEnv(n=0), client, progress=False)
    assert results.rollouts == [] and results.summary.mean_reward is None


def test_progress_display_renders_live_stats(monkeypatch: pytest.MonkeyPatch) -> None:
    stats = RunStats(total=4, done=1)
    stats.add(Rollout(reward=1.0))
    stats.add(Rollout(reward=math.nan, error="EndpointError: x"))
    assert (stats.done, stats.ran, stats.num_errors, stats.mean_reward) == (3, 2, 1, 1.0)
    assert not ProgressDisplay(stats, enabled=False).active
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("TTY_COMPATIBLE", raising=False)
    # not a terminal (pytest captures output): no bar, no cost
    assert not ProgressDisplay(stats, enabled=True).active
    monkeypatch.setenv("FORCE_COLOR", "1")  # rich: treat the output as a terminal
    display = ProgressDisplay(stats, enabled=True)
    assert display.active
    with display:
        task = display._progress.tasks[0]
        text = "".join(str(column.render(task)) for column in display._progress.columns)
    assert "3/4" in text and "rollouts/s" in text and "reward 1.000" in text and "errors 1" in text


async def test_a_fixed_pool_of_workers_not_one_task_per_rollout() -> None:
    seen: list[int] = []

    class Counting(FakeEnv):
        async def setup_rollout(self, example: Any, rollout_index: int = 0) -> Rollout:
            seen.append(len(asyncio.all_tasks()))
            return await super().setup_rollout(example, rollout_index)

    async with serve(sum_policy) as (_, client):
        results = await aevaluate(
            Counting(n=100), client, rollouts_per_example=3, concurrency=5, progress=False
        )
    assert len(results.rollouts) == 300 and len(seen) == 300
    # The workers, the test's own task, at most one task per pooled connection (aiohttp's),
    # and a little slack: never ~300.
    assert max(seen) <= 5 + 5 + 3


async def test_a_run_closes_the_pools_its_judges_opened(scripted_endpoint: Any) -> None:
    """A judge's HTTP pool belongs to the run's event loop: left open, it warns "Unclosed
    client session" once that loop is gone (a second asyncio.run, a worker process exiting)."""
    number = scripted_endpoint(lambda messages, tools: "1")
    met = scripted_endpoint(lambda messages, tools: '{"met": true}')
    ranks = scripted_endpoint(closeness_ranking)
    judge = LLMJudge(
        "Is {{ response }} right?", model="j", base_url=number.base_url, api_key="k", cache=False
    )
    listed = judges.criteria(["Names a number"], model="c", base_url=met.base_url, api_key="k", cache=False)
    ranked = RankJudge(model="r", base_url=ranks.base_url, api_key="k")  # scored by the driver, per group
    env = SingleTurnEnv(
        [{"question": "Name a number near 10.", "answer": "10"}],
        WeightedSum({"judge": judge, "criteria": listed, "rank": ranked}),
    )
    async with serve(lambda messages, tools: "10") as (_, client):
        results = await aevaluate(env, client, rollouts_per_example=3, progress=False)
        assert results.summary.num_scored == 3 and number.stats.requests == met.stats.requests == 3
        assert ranks.stats.requests == 1
        assert Client.open_clients() == [client]  # the judges' three pools are closed, on the run's loop
