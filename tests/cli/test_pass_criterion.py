"""pass@k always says what a pass is, and warns when the rubric tops out below the default criterion."""

from __future__ import annotations

from pathlib import Path

from rich.console import Console

from harness import EvalResults, Rollout
from tests.cli.conftest import Invoke

# A judge at weight 0.2 on a 0-10 scale, as the issue found it: a perfect answer earns 0.2.
CAPPED_ENV = """
from envs import SingleTurnEnv


def load_environment():
    rows = [{"question": f"q{i}", "answer": "a"} for i in range(3)]
    env = SingleTurnEnv(rows, lambda response, answer: 0.2 * float(response == answer), name="capped")
    env.scripted_policies = {"a": lambda messages, tools: "a"}
    return env
"""


def _text(results: EvalResults) -> str:
    console = Console(record=True, width=200)
    console.print(results)
    return console.export_text()


def test_the_default_criterion_is_shown() -> None:
    results = EvalResults([Rollout(example_id=i, rollout_index=0, reward=1.0) for i in range(2)])
    assert "pass means" in _text(results) and "reward >= 1" in _text(results)
    assert "reward &gt;= 1" in results._repr_html_() and "no rollout reached" not in _text(results)


def test_nothing_to_doubt_when_no_rollout_earned_anything() -> None:
    results = EvalResults([Rollout(example_id=i, rollout_index=0, reward=0.0) for i in range(2)])
    assert "no rollout reached" not in _text(results)


def test_a_rubric_that_tops_out_below_1_is_named(rubric: Invoke, tmp_path: Path) -> None:
    (tmp_path / "capped.py").write_text(CAPPED_ENV)
    proc = rubric(
        "eval", "capped.py", "-m", "scripted:a", "-r", "2", "-o", "out", "--no-progress", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    warning = (
        "no rollout reached reward 1 (the best: 0.2), which pass@k counts as a pass; if this rubric's "
        "top reward is below 1, say what passes with success=(node, threshold)"
    )
    pass_means = next(line for line in proc.stdout.splitlines() if "pass means" in line)
    assert "reward >= 1" in pass_means and "no rollout reached reward 1" in pass_means
    said = " ".join((proc.stdout + proc.stderr).split())  # the table wraps its cells
    assert said.count("no rollout reached reward 1") == 1 and warning.split(";")[0] in said  # once (47.20)
    view = rubric("view", "out", "--html", cwd=tmp_path)
    assert view.returncode == 0, view.stderr
    assert "no rollout reached reward 1" in (tmp_path / "out" / "report.html").read_text()
