"""Environments in worker processes: loaded from their spec without `datasets`, judges' limits run-wide."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from envs import EnvironmentSpec, load_environment
from harness import Client, ScriptedEndpoint, aevaluate
from tests.helpers.fakes import sum_policy

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

ENV_FILE = textwrap.dedent(
    """
    from envs import SingleTurnEnv
    from rubrics import LLMJudge, WeightedSum


    def correct(response, answer):
        return float(response.strip() == answer)


    def load_environment(judge_url: str, judge_limit: int, n: int = 24):
        rows = [{"question": f"What is {i}+{i + 1}?", "answer": str(2 * i + 1)} for i in range(n)]
        judge = LLMJudge(
            "Is {{ response }} right? Score: 0 or 1",
            model="judge",
            base_url=judge_url,
            api_key="x",
            cache=False,
            client_options={"max_concurrency": judge_limit},
        )
        return SingleTurnEnv(rows, WeightedSum({"correct": correct, "judge": judge}), name="judged")
    """
)


async def test_judge_limit_is_for_the_whole_run_and_workers_skip_datasets(tmp_path: Path) -> None:
    (tmp_path / "judged.py").write_text(ENV_FILE)
    with (
        ScriptedEndpoint(lambda messages, tools: "Score: 1", latency=0.05) as judge,
        ScriptedEndpoint(sum_policy) as policy,
    ):
        env = load_environment(str(tmp_path / "judged.py"), judge_url=judge.base_url, judge_limit=3)
        env.max_turns = 2  # changed after loading: the workers apply it too
        async with Client("policy", base_url=policy.base_url, max_concurrency=16) as client:
            results = await aevaluate(env, client, concurrency=16, workers=2, progress=False)
        assert judge.stats.requests == 24
        assert judge.stats.max_in_flight <= 3  # 2 + 1 across the two workers, not 3 each
    assert results.summary.mean_reward == 1.0 and results.summary.num_rollouts == 24
    report = results.metadata["sessions"][-1]["workers"]["workers"]
    assert [w["imported_datasets"] for w in report] == [False, False]
    assert sum(w["rollouts"] for w in report) == 24


def test_worker_environment_loads_its_dataset_only_when_used() -> None:
    env = EnvironmentSpec("gsm8k").load(worker=True)
    assert "dataset" not in env.__dict__
    assert env.config() == load_environment("gsm8k").config()
    assert len(env.dataset) == 200 and env.eval_dataset is None  # built on first use
    with pytest.raises(AttributeError, match="no attribute 'nothing'"):
        env.nothing
