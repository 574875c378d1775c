"""A run that cannot succeed stops early; one writer per directory; metadata is always final."""

from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from harness import (
    ConfigError,
    EndpointError,
    EvalResults,
    ResultsError,
    Rollout,
    TooManyErrorsError,
    aevaluate,
)
from harness._core.errors import ResultsWarning
from harness._core.run.summary import summarize
from harness.scripted._app import ScriptedHTTPError
from tests.cli.conftest import Invoke
from tests.helpers.endpoints import serve
from tests.helpers.fakes import FakeEnv, sum_policy

REPO = Path(__file__).resolve().parents[3]


def _deny(messages: list[dict], tools: list[dict] | None) -> str:
    raise ScriptedHTTPError(401, "Incorrect API key provided")


async def test_a_401_on_the_first_requests_stops_the_run_early(tmp_path: Path) -> None:
    async with serve(_deny, max_concurrency=4) as (endpoint, client):
        with pytest.raises(EndpointError, match=r"stopped early after \d+ rollout\(s\).*HTTP 401") as caught:
            await aevaluate(
                FakeEnv(n=200), client, concurrency=4, output_dir=tmp_path / "run", progress=False
            )
        requests = endpoint.stats.requests
    assert caught.value.status == 401 and requests <= 8, requests  # not 200 requests
    metadata = json.loads((tmp_path / "run" / "metadata.json").read_text())
    assert (
        metadata["status"] == "failed"
        and metadata["summary"]["num_errors"] == metadata["summary"]["num_rollouts"]
    )


async def test_a_streak_of_422s_before_any_success_stops_the_run_early(tmp_path: Path) -> None:
    def reject(messages: list[dict], tools: list[dict] | None) -> str:
        raise ScriptedHTTPError(422, "Unexpected fields in the request: top_k")

    async with serve(reject, max_concurrency=1) as (endpoint, client):
        with pytest.raises(EndpointError, match=r"stopped early.*HTTP 422.*top_k.*remove the sampling keys"):
            await aevaluate(FakeEnv(n=50), client, concurrency=1, progress=False)
        requests = endpoint.stats.requests
    assert requests <= 4 * (client.max_retries + 1), requests  # the streak, not 50 rollouts


async def test_context_length_400s_never_stop_a_run(tmp_path: Path) -> None:
    def too_long(messages: list[dict], tools: list[dict] | None) -> str:
        raise ScriptedHTTPError(400, "This model's maximum context length is 4096 tokens")

    async with serve(too_long, max_concurrency=1) as (_, client):
        results = await aevaluate(FakeEnv(n=8), client, concurrency=1, progress=False)
    assert len(results) == 8 and {r.stop_reason for r in results} == {"length"}


async def test_a_401_after_successes_is_an_error_on_the_rollout_only(tmp_path: Path) -> None:
    calls = []

    def flaky(messages: list[dict], tools: list[dict] | None) -> str:
        calls.append(1)
        if len(calls) == 3:
            raise ScriptedHTTPError(401, "key revoked mid-run")
        return sum_policy(messages, tools)

    async with serve(flaky) as (_, client):
        results = await aevaluate(FakeEnv(n=6), client, concurrency=1, progress=False)
    assert [r.error is not None for r in results].count(True) == 1 and len(results) == 6


def test_cli_early_stop_and_fail_on_error(rubric: Invoke, tmp_path: Path) -> None:
    env_file = tmp_path / "deny_env.py"
    env_file.write_text(
        textwrap.dedent(
            """
            from envs.reference._gsm8k import load_environment as base
            from harness.scripted._app import ScriptedHTTPError

            def load_environment(**kwargs):
                env = base(**kwargs)
                def deny(messages, tools):
                    raise ScriptedHTTPError(401, "Incorrect API key provided")
                def some(messages, tools):
                    if "9" in messages[-1]["content"]:
                        raise ScriptedHTTPError(400, "bad request")
                    return env.scripted_policies["oracle"](messages, tools)
                env.scripted_policies = {**env.scripted_policies, "deny": deny, "some": some}
                return env
            """
        )
    )
    denied = rubric(
        "eval",
        str(env_file),
        "-m",
        "scripted:deny",
        "-c",
        "2",
        "-o",
        str(tmp_path / "a"),
        "--no-progress",
        cwd=tmp_path,
    )
    assert denied.returncode != 0 and "stopped early" in denied.stderr and "HTTP 401" in denied.stderr
    assert len(denied.stderr.strip().splitlines()) == 1
    assert len((tmp_path / "a" / "results.jsonl").read_text().splitlines()) <= 4  # not all 200
    common = ["eval", str(env_file), "-m", "scripted:some", "-n", "40", "--no-progress"]
    first = rubric(*common, "-o", str(tmp_path / "b"), cwd=tmp_path)  # by default only all-errored fails
    assert first.returncode == 0, first.stderr
    errors = json.loads((tmp_path / "b" / "metadata.json").read_text())["summary"]["num_errors"]
    assert 0 < errors < 10 and f"(over {40 - errors} scored, {errors} errored)" in first.stdout
    for flag, code, why in (
        (["--fail-on-error"], 1, "(--fail-on-error: any error)"),  # bare: any error
        (["--fail-on-error", "0.01"], 1, "(more than --fail-on-error 0.01)"),  # a share
        (["--fail-on-error", "0.9"], 0, ""),
        (["--fail-on-error", str(errors - 1)], 1, f"(more than --fail-on-error {errors - 1})"),  # a count
        (["--fail-on-error", str(errors)], 0, ""),
    ):
        proc = rubric(*common, "-o", str(tmp_path / f"c{len(flag)}{code}{flag[-1]}"), *flag, cwd=tmp_path)
        assert proc.returncode == code, (flag, proc.stderr)
        assert f"{errors} of 40 rollouts errored {why}" in proc.stderr if code else not proc.stderr
    bad = rubric(*common, "-o", str(tmp_path / "d"), "--fail-on-error", "2.5", cwd=tmp_path)
    assert bad.returncode == 2 and "must be a share below 1 (0.1) or a count of rollouts (5)" in bad.stderr


@pytest.mark.slow
def test_two_concurrent_resumes_one_writer(rubric: Invoke, tmp_path: Path) -> None:
    env_file = tmp_path / "slow_env.py"
    env_file.write_text(
        textwrap.dedent(
            """
            import time
            from envs.reference._gsm8k import load_environment as base

            def load_environment(**kwargs):
                env = base(**kwargs)
                oracle = env.scripted_policies["oracle"]
                def slow(messages, tools):
                    time.sleep(0.5)
                    return oracle(messages, tools)
                env.scripted_policies = {**env.scripted_policies, "slow": slow}
                return env
            """
        )
    )
    out = tmp_path / "run"
    common = ["eval", str(env_file), "-m", "scripted:slow", "-n", "24", "-c", "1", "--no-progress"]

    def start(*extra: str) -> subprocess.Popen[str]:
        code = "import cli, sys; sys.exit(cli.main(sys.argv[1:]))"
        return subprocess.Popen(
            [sys.executable, "-c", code, *common, *extra],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def wait_for_lines(n: int) -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if (out / "results.jsonl").exists() and len(
                (out / "results.jsonl").read_text().splitlines()
            ) >= n:
                return
            time.sleep(0.05)

    crashed = start("-o", str(out))
    wait_for_lines(2)
    crashed.kill()  # an interrupted run, to be resumed twice at once
    crashed.communicate(timeout=10)
    first = start("--resume", str(out))
    try:
        wait_for_lines(5)
        second = rubric(*common, "--resume", str(out), cwd=tmp_path)
        assert second.returncode != 0 and len(second.stderr.strip().splitlines()) == 1, second.stderr
        assert f"being written by another run (process {first.pid})" in second.stderr
    finally:
        _, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    lines = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines() if line.strip()]
    assert len({(r["example_id"], r["rollout_index"]) for r in lines}) == 24 and len(lines) <= 25


class InfEnv(FakeEnv):
    """A duck-typed environment (not envs.Environment) that writes an infinite reward."""

    async def score(self, rollout: Rollout) -> None:
        rollout.reward = math.inf


async def test_metadata_is_finalized_even_when_the_summary_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with serve(sum_policy) as (_, client):
        results = await aevaluate(InfEnv(n=3), client, output_dir=tmp_path / "inf", progress=False)
    metadata = json.loads((tmp_path / "inf" / "metadata.json").read_text())  # strict JSON, inf -> null
    assert metadata["status"] == "completed" and metadata["summary"] is not None and len(results) == 3

    def broken(*args: object, **kwargs: object) -> object:
        raise ZeroDivisionError("summary bug")

    monkeypatch.setattr("harness._engine.evaluation.RunningSummary.summary", broken)
    async with serve(sum_policy) as (_, client):
        with pytest.raises(ZeroDivisionError):
            await aevaluate(FakeEnv(n=3), client, output_dir=tmp_path / "broken", progress=False)
    metadata = json.loads((tmp_path / "broken" / "metadata.json").read_text())
    assert metadata["status"] == "failed" and "summary bug" in metadata["error"]
    assert summarize  # the real one is untouched outside this test


async def test_a_locked_directory_is_refused_in_process(tmp_path: Path) -> None:
    from harness._core.run.storage import RunLock

    lock = RunLock(tmp_path / "run")
    (tmp_path / "run").mkdir()
    lock.acquire()
    try:
        async with serve(sum_policy) as (_, client):
            with pytest.raises(ResultsError, match="being written by another run"):
                await aevaluate(
                    FakeEnv(n=2), client, output_dir=tmp_path / "run", resume=True, progress=False
                )
    finally:
        lock.release()


async def test_resume_reruns_the_rollouts_of_corrupt_lines(tmp_path: Path) -> None:
    out = tmp_path / "run"
    async with serve(sum_policy) as (_, client):
        await aevaluate(FakeEnv(n=4), client, output_dir=out, progress=False)
        lines = (out / "results.jsonl").read_text().splitlines(keepends=True)
        lines[1] = lines[1][:40] + "\n"  # a corrupt middle line
        (out / "results.jsonl").write_text("".join(lines) + "{}\n")
        with pytest.warns(ResultsWarning, match=r"skipped 2 line\(s\).*line 2, 5"):
            again = await aevaluate(FakeEnv(n=4), client, output_dir=out, resume=True, progress=False)
    assert sorted(r.key for r in again) == [(str(i), 0) for i in range(4)]
    assert again.metadata["sessions"][-1]["rollouts_planned"] == 1  # only the corrupt one ran again


async def test_evaluate_fail_on_error_raises_with_the_results_after_saving(tmp_path: Path) -> None:
    calls = 0

    def two_bad(messages: Any, tools: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls <= 2:
            raise ScriptedHTTPError(400, "bad request")
        return sum_policy(messages, tools)

    async with serve(two_bad) as (_, client):
        with pytest.raises(
            TooManyErrorsError, match=r"2 of 6 rollouts errored \(more than fail_on_error 1\)"
        ) as caught:
            await aevaluate(
                FakeEnv(n=6), client, concurrency=1, progress=False, output_dir=tmp_path, fail_on_error=1
            )
        assert isinstance(caught.value.results, EvalResults) and len(caught.value.results.rollouts) == 6
        assert json.loads((tmp_path / "metadata.json").read_text())["status"] == "completed"
        calls = 0
        kept = await aevaluate(FakeEnv(n=6), client, concurrency=1, progress=False, fail_on_error=0.5)
        assert kept.summary.num_errors == 2
        with pytest.raises(ConfigError, match="fail_on_error must be a share below 1"):
            await aevaluate(FakeEnv(n=6), client, progress=False, fail_on_error=1.5)
