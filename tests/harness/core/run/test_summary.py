"""The summary survives any float a rubric tree can produce: huge finite scores, infinities, tiny values."""

from __future__ import annotations

import math
import statistics
from fractions import Fraction
from pathlib import Path

from hypothesis import example, given
from hypothesis import strategies as st

from harness import Rollout
from harness._core.run.summary import mean_and_stderr, summarize
from tests.cli.conftest import Invoke

HUGE_ENV = """
from envs import SingleTurnEnv


def load_environment():
    rows = [{"question": "q", "answer": "a"}, {"question": "r", "answer": "a"}]
    env = SingleTurnEnv(rows, lambda response, answer: 1e308, name="huge")
    env.scripted_policies = {"a": lambda messages, tools: "a"}
    return env
"""


def _rollouts(rewards: list[float]) -> list[Rollout]:
    return [
        Rollout(example_id=str(i % 3), rollout_index=i // 3, reward=r, scores={"n": r}, completion="x")
        for i, r in enumerate(rewards)
    ]


def test_two_huge_rewards_summarise() -> None:
    summary = summarize(_rollouts([1e308, 1e308]), max_k=1)
    assert summary.mean_reward == 1e308 and summary.node_means == {"n": 1e308}
    assert summary.reward_stderr == 0.0
    assert summarize(_rollouts([1.7e308, -1.7e308, 1.7e308])).mean_reward == 1.7e308 / 3


def test_rubric_eval_and_view_of_huge_rewards(rubric: Invoke, tmp_path: Path) -> None:
    (tmp_path / "huge.py").write_text(HUGE_ENV)
    proc = rubric("eval", "huge.py", "-m", "scripted:a", "-o", "out", "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "1e+308" in proc.stdout
    view = rubric("view", "out", cwd=tmp_path)
    assert view.returncode == 0 and "1e+308" in view.stdout, view.stderr
    compared = rubric("view", "out", "out", cwd=tmp_path)  # the comparison's means and intervals too
    assert compared.returncode == 0 and "Traceback" not in compared.stderr, compared.stderr


def _exact_mean(values: list[float]) -> float:
    exact = sum(map(Fraction, values)) / len(values)
    return float(exact) if abs(exact) <= Fraction(1.7976931348623157e308) else math.copysign(math.inf, exact)


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=40))
@example([1.7976931348623157e308, 3.2e-209, -1.7976931348623157e308])  # squares overflow, the sum does not
@example([2.7e-246, -1.7976931348623155e308, -1.7976931348623155e308, 1.7976931348623155e308])  # the sum too
def test_mean_and_stderr_of_any_finite_floats(values: list[float]) -> None:
    mean, stderr = mean_and_stderr(values)
    assert mean is not None and math.isfinite(mean)  # a mean of finite floats is in their range
    assert math.isclose(mean, _exact_mean(values), rel_tol=1e-12, abs_tol=1e-300)
    if len(values) == 1:
        assert stderr is None
        return
    assert stderr is not None and stderr >= 0
    scale = max(abs(v) for v in values)
    if 1e-100 < scale < 1e100:  # where statistics.stdev itself is exact enough to compare
        expected = statistics.stdev(values) / math.sqrt(len(values))
        assert math.isclose(stderr, expected, rel_tol=1e-9, abs_tol=1e-12 * scale)


@given(st.lists(st.floats(), min_size=1, max_size=40))
def test_mean_and_stderr_never_raise(values: list[float]) -> None:
    mean, stderr = mean_and_stderr(values)
    assert mean is not None
    if any(math.isinf(v) for v in values) and not any(math.isnan(v) for v in values):
        signs = {math.copysign(1, v) for v in values if math.isinf(v)}
        assert math.isnan(mean) if len(signs) == 2 else mean == signs.pop() * math.inf
        assert stderr is None


# A tree's scores are finite or NaN (a node that returns inf is unscored, NaN with its reason).
@given(st.lists(st.floats(allow_infinity=False), min_size=1, max_size=12))
def test_summary_of_any_scores_is_written_and_read_back(rewards: list[float]) -> None:
    summary = summarize(_rollouts(rewards), max_k=2)
    back = type(summary).model_validate_json(summary.model_dump_json())
    assert back == summary or math.isnan(summary.node_means.get("n", 0.0))  # NaN != NaN
    assert back.num_scored == sum(not math.isnan(r) for r in rewards)
    scored = [r for r in rewards if not math.isnan(r)]
    assert (back.mean_reward is None) == (not scored)
    assert back.mean_reward is None or math.isfinite(back.mean_reward)
