"""A judge that cannot answer at all fails once, loudly, before scoring, naming its own
settings (issue 19.7): no API key, or an endpoint nothing answers at."""

from __future__ import annotations

import pytest

from harness import ConfigError, Rollout
from rubrics import LLMJudge, WeightedSum
from tests.cli.conftest import Invoke
from tests.helpers.docs import code_block
from tests.helpers.endpoints import free_port

ITEM = {"prompt": "What is 6 x 7?", "completion": "42", "answer": "42"}


def test_the_readme_judge_block_without_a_key_is_one_loud_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    with pytest.raises(
        ConfigError, match=r"judge '.*' \(model 'gpt-4.1-mini' at https://api.openai.com/v1\) has no API key"
    ):
        exec(
            compile(code_block("python", 'judges.correctness(model="gpt-4.1-mini")'), "<README>", "exec"), {}
        )


def test_a_judge_whose_endpoint_is_down_fails_before_scoring() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    rubric = WeightedSum(
        {"helpful": LLMJudge("Rate {{ response }}. Score: N", model="m", base_url=url, api_key="k")}
    )
    with pytest.raises(
        ConfigError, match=r"judge 'helpful' .* cannot reach its endpoint .* fix its base_url"
    ):
        rubric.score_batch([ITEM, ITEM])
    with pytest.raises(ConfigError, match="cannot reach its endpoint"):
        rubric(Rollout.model_validate(ITEM))


JUDGED_ENV = """
from envs import SingleTurnEnv
from rubrics import LLMJudge


def load_environment():
    judge = LLMJudge("Rate {{ response }}. End with Score: N", model="gpt-4.1-mini", parse="number", score_range=(0, 10))
    env = SingleTurnEnv([{"question": "What is 2 + 2?", "answer": "4"}] * 3, {"helpful": judge})
    env.scripted_policies = {"four": lambda messages, tools: "4"}
    return env
"""


def test_rubric_eval_stops_before_any_rollout_when_its_judge_has_no_key(rubric: Invoke, tmp_path) -> None:  # type: ignore[no-untyped-def]
    (tmp_path / "judged.py").write_text(JUDGED_ENV)
    proc = rubric(
        "eval",
        "judged.py",
        "-m",
        "scripted:four",
        "--no-progress",
        "-o",
        "out",
        cwd=tmp_path,
        env={"OPENAI_API_KEY": "", "OPENAI_BASE_URL": ""},
    )
    assert proc.returncode != 0 and "has no API key" in proc.stderr and "judge" in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not (tmp_path / "out" / "results.jsonl").exists()
