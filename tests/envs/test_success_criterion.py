"""An environment says what a pass is for pass@k (issue 19.4): Wordle counts wins."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envs import SingleTurnEnv, load_environment
from harness import ConfigError, load_results
from rubrics import WeightedSum
from tests.cli.conftest import Invoke


def test_wordle_pass_at_k_counts_wins(rubric: Invoke, tmp_path: Path) -> None:
    proc = rubric(
        "eval", "wordle", "-m", "scripted:noisy", "-n", "6", "--no-progress", "-o", "w", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert "pass means" in proc.stdout and "grade.win >= 1" in proc.stdout
    results = load_results(tmp_path / "w")
    wins = sum(1 for r in results if r.scores.get("grade.win", 0.0) >= 1.0)
    assert wins > 0 and results.summary.pass_at_k[1] == pytest.approx(wins / len(results))
    assert all(r.reward < 1.0 for r in results)  # under the default rule pass@1 would be 0
    metadata = json.loads((tmp_path / "w" / "metadata.json").read_text())
    assert metadata["env"]["success"] == {"node": "grade.win", "threshold": 1.0}
    assert metadata["summary"]["pass_criterion"] == "grade.win >= 1"


def test_success_is_checked_against_the_rubric() -> None:
    rubric = WeightedSum({"exact": lambda response, answer: float(response == answer)})
    rows = [{"question": "q", "answer": "a"}]
    with pytest.raises(
        ConfigError, match="success names node 'grade.win', which the rubric lacks; its nodes: exact"
    ):
        SingleTurnEnv(rows, rubric, success="grade.win")
    with pytest.raises(ConfigError, match="success must be a rubric node path"):
        SingleTurnEnv(rows, rubric, success=("exact", "high"))  # type: ignore[arg-type]
    env = SingleTurnEnv(rows, rubric, success=("exact", 0.5))
    assert env.config()["success"] == {"node": "exact", "threshold": 0.5}
    assert "success" not in load_environment("gsm8k").config()  # the default rule leaves no key
