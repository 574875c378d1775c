"""`rubric view RUN_A RUN_B` in the terminal: the numbers the HTML comparison page shows."""

from __future__ import annotations

import json
import math
from pathlib import Path

from harness import load_results
from harness._results.compare import compare
from tests.cli.conftest import Invoke


def _eval(rubric: Invoke, tmp_path: Path, policy: str, out: str) -> Path:
    proc = rubric("eval", "gsm8k", "-m", policy, "-n", "12", "-o", out, "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    return tmp_path / out


def test_two_runs_compare_in_the_terminal(rubric: Invoke, tmp_path: Path) -> None:
    a, b = _eval(rubric, tmp_path, "scripted:noisy", "a"), _eval(rubric, tmp_path, "scripted:oracle", "b")
    proc = rubric("view", "a", "b", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    comparison = compare(load_results(a), load_results(b))
    fixed = [e for e in comparison.examples if e.reward_a < e.reward_b]
    assert fixed and comparison.flipped == sorted(comparison.flipped, key=lambda e: -abs(e.delta or 0))
    out = proc.stdout
    # Node means in tree order, with B − A for the reward and every node.
    lines = out.splitlines()
    reward = next(line for line in lines if line.lstrip("│ ").startswith("reward "))
    assert f"{comparison.nodes[0].delta:+.4g}" in reward
    node_rows = [line for line in lines if any(f" {p.rsplit('.', 1)[-1]} " in line for p in comparison.paths)]
    assert len(node_rows) >= len(comparison.paths)
    # Every example that flipped is listed (by id, with the node that flipped), none other.
    assert f"examples that flipped ({len(comparison.flipped)} of 12;" in out
    for example in comparison.flipped:
        row = next(line for line in lines if line.lstrip("│ ").startswith(example.example + " "))
        assert "→" in row and f"{example.delta:+.4g}" in row
    unchanged = [e for e in comparison.examples if not e.flipped]
    assert all(not any(line.lstrip("│ ").startswith(e.example + " ") for line in lines) for e in unchanged)
    assert "rubric view a b --html" in out


def test_terminal_comparison_with_unscored_nodes_and_missing_examples(rubric: Invoke, tmp_path: Path) -> None:
    a, b = _eval(rubric, tmp_path, "scripted:oracle", "a"), _eval(rubric, tmp_path, "scripted:oracle", "b")
    rows = [json.loads(line) for line in (b / "results.jsonl").read_text().splitlines()]
    shown_first = load_results(a).rollouts[0].example_id
    first = next(r for r in rows if r["example_id"] == shown_first)
    rows = [first, *(r for r in rows if r is not first)]
    first["reward"] = None  # unscored in B: NaN, a flip
    first["scores"] = {path: None for path in first["scores"]}
    first["score_errors"] = {"": "judge unreachable"}
    (b / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:-1]))  # one example missing
    comparison = compare(load_results(a), load_results(b))
    assert math.isnan(comparison.examples[0].reward_b) and comparison.examples[0].flipped
    assert len(comparison.examples) == 12 and comparison.examples[-1].rollouts_b == ()
    proc = rubric("view", "a", "b", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "NaN" in proc.stdout and str(comparison.examples[0].example) in proc.stdout


def test_picking_rollouts_of_two_runs_is_refused(rubric: Invoke, tmp_path: Path) -> None:
    _eval(rubric, tmp_path, "scripted:oracle", "a")
    _eval(rubric, tmp_path, "scripted:oracle", "b")
    proc = rubric("view", "a", "b", "--worst", "2", cwd=tmp_path)
    assert proc.returncode == 2 and "view each run on its own" in proc.stderr


def test_runs_of_two_environments_are_not_compared(rubric: Invoke, tmp_path: Path) -> None:
    _eval(rubric, tmp_path, "scripted:oracle", "g")
    other = rubric(
        "eval",
        "wordle",
        "-m",
        "scripted:oracle",
        "-a",
        '{"num_games": 3}',
        "-o",
        "w",
        "--no-progress",
        cwd=tmp_path,
    )
    assert other.returncode == 0, other.stderr
    said = "run A is of environment 'gsm8k' and run B of 'wordle': their examples and rubrics differ"
    for extra in ([], ["--html"]):
        proc = rubric("view", "g", "w", *extra, cwd=tmp_path)
        assert proc.returncode != 0 and said in proc.stderr, (extra, proc.stdout, proc.stderr)
        assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not list(tmp_path.glob("compare--*.html"))
