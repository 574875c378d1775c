"""`env.evaluate` from Python as on the command line: scripted:POLICY, a missing API key, judge tokens."""

from __future__ import annotations

import time
from typing import Any

import pytest

from envs import SingleTurnEnv, load_environment
from harness import Client, ConfigError, ScriptedEndpoint
from rubrics import LLMJudge, WeightedSum
from rubrics.judges import JudgeCache


def test_scripted_policy_runs_offline_like_the_cli(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    env = load_environment("gsm8k")
    start = time.perf_counter()
    results = env.evaluate("scripted:oracle", num_examples=5, progress=False)
    assert time.perf_counter() - start < 20
    assert results.summary.mean_reward == 1.0 and results.summary.num_errors == 0
    assert results.metadata["model"]["model"] == "scripted:oracle"
    with pytest.raises(ConfigError, match=r"no scripted policy 'nope' \(available: noisy, oracle\)"):
        env.evaluate("scripted:nope", num_examples=1, progress=False)


def test_openai_without_a_key_is_one_error_before_any_request(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    env = load_environment("gsm8k")
    start = time.perf_counter()
    with pytest.raises(ConfigError, match="no API key for https://api.openai.com/v1 .*OPENAI_API_KEY"):
        env.evaluate("gpt-4.1-mini", num_examples=2, progress=False)
    assert time.perf_counter() - start < 5
    Client("local", base_url="http://127.0.0.1:9/v1").check_credentials()  # a local server needs none


def test_judge_tokens_are_kept_apart_from_the_policy(monkeypatch: pytest.MonkeyPatch) -> None:
    def policy(messages: list[dict[str, Any]], tools: Any) -> str:
        if messages[0]["role"] == "system" and "grader" in messages[0]["content"]:
            return "Fine work.\nScore: 9"
        return "42"

    JudgeCache.shared.clear()
    with ScriptedEndpoint(policy) as endpoint:
        judge = LLMJudge(
            "<q>{{ prompt_messages[-1].content }}</q><r>{{ response }}</r>",
            client=Client("judge", base_url=endpoint.base_url),
            score_range=(0, 10),
        )
        env = SingleTurnEnv(
            [{"question": f"q{i}", "answer": "42"} for i in range(3)],
            WeightedSum({"judge": judge}),
            name="judged",
        )
        client = Client("policy", base_url=endpoint.base_url)
        results = env.evaluate(client, progress=False)
    summary = results.summary
    assert summary.judge_prompt_tokens > 0 and summary.judge_completion_tokens > 0
    assert summary.prompt_tokens > 0 and summary.prompt_tokens != summary.judge_prompt_tokens
    assert results.metadata["summary"]["judge_prompt_tokens"] == summary.judge_prompt_tokens
    first = results[0]
    assert first.judge_usage.prompt_tokens > 0 and first.score_details["judge"]["prompt"].startswith("<q>q")
    assert "judge tokens" in str(results) and "judge tokens" in results._repr_html_()


def test_evaluate_options_are_exactly_the_keywords_of_harness_evaluate() -> None:
    import inspect

    from harness import EvaluateOptions, aevaluate

    keywords = {
        name
        for name, p in inspect.signature(aevaluate).parameters.items()
        if p.kind is inspect.Parameter.KEYWORD_ONLY
    }
    assert set(EvaluateOptions.__annotations__) == keywords


def test_a_model_that_is_neither_a_client_nor_a_name_is_refused_by_name() -> None:
    from harness import ConfigTypeError

    env = load_environment("gsm8k", num_examples=2)
    with pytest.raises(ConfigTypeError, match="model must be a harness.Client, a model name"):
        env.evaluate(42, num_examples=1, progress=False)  # type: ignore[arg-type]
