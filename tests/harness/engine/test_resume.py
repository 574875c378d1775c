"""Resuming a results directory: only missing rollouts run, settings must match, a torn last
line is dropped, and a SIGKILLed run resumes to exactly the requested rollouts."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from harness import Rollout, aevaluate
from harness._views.html import summary_html
from tests.helpers.endpoints import serve
from tests.helpers.fakes import FakeEnv, sum_policy

ROOT = Path(__file__).resolve().parents[3]


def _keys(path: Path) -> list[tuple[str, int]]:
    return [Rollout.model_validate_json(line).key for line in path.read_bytes().splitlines()]


async def test_resume_runs_only_the_missing_pairs(tmp_path: Path) -> None:
    async with serve(sum_policy) as (endpoint, client):
        await aevaluate(FakeEnv(n=4), client, rollouts_per_example=2, output_dir=tmp_path, progress=False)
        results_file = tmp_path / "results.jsonl"
        lines = results_file.read_bytes().splitlines(keepends=True)
        kept = [line for i, line in enumerate(lines) if i not in (1, 4, 6)]
        missing = {Rollout.model_validate_json(lines[i]).key for i in (1, 4, 6)}
        results_file.write_bytes(b"".join(kept))
        endpoint.reset_stats()
        resumed = await aevaluate(
            FakeEnv(n=4),
            client,
            rollouts_per_example=2,
            output_dir=tmp_path,
            resume=True,
            concurrency=3,
            progress=False,
        )
        assert endpoint.stats.requests == 3
    keys = _keys(results_file)
    assert len(keys) == 8 and set(keys[-3:]) == missing and len(set(keys)) == 8
    assert [r.key for r in resumed.rollouts] == [(str(i), k) for i in range(4) for k in range(2)]
    assert resumed.summary.num_rollouts == 8 and resumed.summary.mean_reward == 1.0
    assert resumed.metadata["status"] == "completed" and len(resumed.metadata["sessions"]) == 2


async def test_resume_of_a_finished_run_does_nothing(tmp_path: Path) -> None:
    async with serve(sum_policy) as (endpoint, client):
        await aevaluate(FakeEnv(n=3), client, output_dir=tmp_path, progress=False)
        endpoint.reset_stats()
        again = await aevaluate(FakeEnv(n=3), client, output_dir=tmp_path, resume=True, progress=False)
        assert endpoint.stats.requests == 0
    assert len(again.rollouts) == 3 and len(_keys(tmp_path / "results.jsonl")) == 3


async def test_resume_into_an_empty_directory_starts_fresh(tmp_path: Path) -> None:
    async with serve(sum_policy) as (_, client):
        results = await aevaluate(
            FakeEnv(n=2), client, output_dir=tmp_path / "new", resume=True, progress=False
        )
    assert len(results.rollouts) == 2


@pytest.mark.parametrize(
    ("env", "kwargs", "differs"),
    [
        (FakeEnv(n=3, max_turns=2), {}, ["env.max_turns: was 1, now 2"]),
        (FakeEnv(n=3), {"rollouts_per_example": 2}, ["arguments.rollouts_per_example: was 1, now 2"]),
        (
            FakeEnv(n=3),
            {"num_examples": 2, "seed": 1},
            ["arguments.num_examples: was null, now 2", "arguments.seed: was null, now 1"],
        ),
        (FakeEnv(n=3), {"sampling": {"temperature": 0.0}}, ["arguments.sampling"]),
    ],
    ids=["env", "rollouts_per_example", "num_examples+seed", "sampling"],
)
async def test_resume_with_different_settings_is_a_clear_error(
    tmp_path: Path, env: FakeEnv, kwargs: dict[str, Any], differs: list[str]
) -> None:
    async with serve(sum_policy) as (endpoint, client):
        await aevaluate(FakeEnv(n=3), client, output_dir=tmp_path, progress=False)
        before = (tmp_path / "results.jsonl").read_bytes()
        endpoint.reset_stats()
        with pytest.raises(ValueError, match="cannot resume") as info:
            await aevaluate(env, client, output_dir=tmp_path, resume=True, progress=False, **kwargs)
        assert endpoint.stats.requests == 0
    for text in differs:
        assert text in str(info.value)
    assert "only concurrency and progress may change" in str(info.value)
    assert (tmp_path / "results.jsonl").read_bytes() == before


async def test_resume_with_a_different_model_is_an_error_but_concurrency_may_change(tmp_path: Path) -> None:
    from harness import Client

    async with serve(sum_policy) as (endpoint, client):
        await aevaluate(FakeEnv(n=3), client, output_dir=tmp_path, concurrency=2, progress=False)
        async with Client("another-model", base_url=endpoint.base_url) as other:
            with pytest.raises(ValueError, match='model.model: was "scripted", now "another-model"'):
                await aevaluate(FakeEnv(n=3), other, output_dir=tmp_path, resume=True, progress=False)
        ok = await aevaluate(
            FakeEnv(n=3), client, output_dir=tmp_path, resume=True, concurrency=7, progress=True
        )
    assert len(ok.rollouts) == 3 and ok.metadata["arguments"]["concurrency"] == 7


async def test_torn_last_line_is_dropped_and_rerun(tmp_path: Path) -> None:
    async with serve(sum_policy) as (endpoint, client):
        await aevaluate(FakeEnv(n=4), client, output_dir=tmp_path, progress=False)
        results_file = tmp_path / "results.jsonl"
        lines = results_file.read_bytes().splitlines(keepends=True)
        torn_key = Rollout.model_validate_json(lines[-1]).key
        results_file.write_bytes(
            b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2]
        )  # as a kill leaves it
        endpoint.reset_stats()
        await aevaluate(FakeEnv(n=4), client, output_dir=tmp_path, resume=True, progress=False)
        assert endpoint.stats.requests == 1
    keys = _keys(results_file)  # every line parses: the torn half is gone
    assert len(keys) == 4 and keys[-1] == torn_key and len(set(keys)) == 4


async def test_rollouts_not_in_the_plan_are_refused(tmp_path: Path) -> None:
    async with serve(sum_policy) as (_, client):
        await aevaluate(FakeEnv(n=3), client, output_dir=tmp_path, progress=False)
        with open(tmp_path / "results.jsonl", "ab") as handle:
            handle.write(Rollout(example_id=99, rollout_index=0).model_dump_json().encode() + b"\n")
        with pytest.raises(ValueError, match=r"holds rollout \('99', 0\)"):
            await aevaluate(FakeEnv(n=3), client, output_dir=tmp_path, resume=True, progress=False)


_CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from harness._endpoint.client import Client
    from harness._engine.evaluation import aevaluate
    from tests.helpers.fakes import FakeEnv

    async def main():
        async with Client("scripted", base_url=sys.argv[1], max_retries=0) as client:
            await aevaluate(FakeEnv(n=30), client, rollouts_per_example=2, concurrency=int(sys.argv[3]),
                           output_dir=sys.argv[2], progress=False)

    asyncio.run(main())
    """
)


@pytest.mark.slow
async def test_sigkill_mid_run_then_resume_gives_exactly_the_requested_rollouts(tmp_path: Path) -> None:
    out = tmp_path / "run"
    results_file = out / "results.jsonl"
    async with serve(sum_policy, latency=0.03) as (endpoint, client):
        child = _start_child(endpoint.base_url, out, concurrency=4)
        await _kill_after_lines(child, results_file, 10, signal.SIGKILL)
        child.communicate(timeout=10)  # closes its pipes
        assert child.returncode == -signal.SIGKILL
        before = Counter(_keys_tolerant(results_file))
        assert 10 <= sum(before.values()) < 60, "the kill must land mid-run"
        assert json.loads((out / "metadata.json").read_text())["status"] == "running"
        resumed = await aevaluate(
            FakeEnv(n=30),
            client,
            rollouts_per_example=2,
            concurrency=8,
            output_dir=out,
            resume=True,
            progress=False,
        )
    assert resumed.metadata["sessions"][-1]["rollouts_ran"] == 60 - sum(before.values())
    keys = _keys(results_file)
    assert Counter(keys[: sum(before.values())]) == before  # what survived the kill was kept as it was
    assert len(keys) == 60 and len(set(keys)) == 60
    assert set(keys) == {(str(i), k) for i in range(30) for k in range(2)}
    assert len(resumed.rollouts) == 60 and resumed.summary.mean_reward == 1.0
    assert resumed.metadata["status"] == "completed"


def _keys_tolerant(path: Path) -> list[tuple[str, int]]:
    data = path.read_bytes()
    return [Rollout.model_validate_json(line).key for line in data[: data.rfind(b"\n") + 1].splitlines()]


# The sync face (what `env.evaluate(...)` and the CLI use): the work runs on run_sync's loop thread.
_CHILD_SYNC = textwrap.dedent(
    """
    import sys
    from harness._core.aio import run_sync
    from harness._endpoint.client import Client
    from harness._engine.evaluation import aevaluate
    from tests.helpers.fakes import FakeEnv

    client = Client("scripted", base_url=sys.argv[1], max_retries=0)
    run_sync(aevaluate(FakeEnv(n=30), client, rollouts_per_example=2, concurrency=int(sys.argv[3]),
                      output_dir=sys.argv[2], progress=False))
    """
)


def _start_child(
    base_url: str, out: Path, *, concurrency: int, code: str = _CHILD
) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    return subprocess.Popen(
        [sys.executable, "-c", code, base_url, str(out), str(concurrency)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


async def _kill_after_lines(child: subprocess.Popen[bytes], results_file: Path, lines: int, sig: int) -> None:
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if results_file.exists() and results_file.read_bytes().count(b"\n") >= lines:
                break
            if child.poll() is not None:
                pytest.fail(f"child exited early: {child.stderr.read().decode()[-2000:]}")
            await asyncio.sleep(0.01)
        os.kill(child.pid, sig)
    finally:
        child.wait(30)
        assert child.stdout is not None
        child.stdout.close()  # stderr is read by the test, then closed by communicate()


@pytest.mark.slow
@pytest.mark.parametrize("code", [_CHILD, _CHILD_SYNC], ids=["asyncio.run", "run_sync"])
async def test_ctrl_c_marks_the_run_interrupted(tmp_path: Path, code: str) -> None:
    out = tmp_path / "run"
    async with serve(sum_policy, latency=0.03) as (endpoint, client):
        child = _start_child(endpoint.base_url, out, concurrency=2, code=code)
        await _kill_after_lines(child, out / "results.jsonl", 4, signal.SIGINT)
        stderr = child.communicate(timeout=10)[1].decode()
        assert child.returncode != 0 and "KeyboardInterrupt" in stderr
        meta = json.loads((out / "metadata.json").read_text())
        done = len(_keys(out / "results.jsonl"))
        assert meta["status"] == "interrupted" and meta["summary"]["num_rollouts"] == done and 4 <= done < 60
        resumed = await aevaluate(
            FakeEnv(n=30), client, rollouts_per_example=2, output_dir=out, resume=True, progress=False
        )
    assert len(resumed.rollouts) == 60 and len(set(_keys(out / "results.jsonl"))) == 60


async def test_a_resumed_runs_wall_time_is_reported_for_this_session_and_in_total(tmp_path: Path) -> None:
    async with serve(sum_policy, latency=0.3) as (_, client):  # a slow first session
        first = await aevaluate(FakeEnv(n=4), client, output_dir=tmp_path, concurrency=1, progress=False)
    lines = (tmp_path / "results.jsonl").read_bytes().splitlines(keepends=True)
    (tmp_path / "results.jsonl").write_bytes(lines[0])  # a crash after 1 of 4
    async with serve(sum_policy) as (_, client):
        resumed = await aevaluate(FakeEnv(n=4), client, output_dir=tmp_path, resume=True, progress=False)
    session, total = resumed.summary.wall_seconds, resumed.summary.total_wall_seconds
    assert first.summary.total_wall_seconds == first.summary.wall_seconds  # one session: one time
    assert session is not None and total is not None and session < 0.3 < 1.2 < total
    walls = [s["wall_seconds"] for s in resumed.metadata["sessions"]]
    assert total == pytest.approx(sum(walls)) and walls[-1] == session
    saved = json.loads((tmp_path / "metadata.json").read_text())["summary"]
    assert (saved["wall_seconds"], saved["total_wall_seconds"]) == (session, total)
    shown = resumed.table()  # this session's time and rate, then the run's over both sessions
    text = "".join(str(cell) for column in shown.columns for cell in column._cells)
    assert f"{session:.1f}s this session" in text and f"{total:.1f}s over all sessions" in text
    assert f"{total:.1f}s over all sessions" in summary_html(resumed.summary)  # the report says so too
