"""Re-scored results can be viewed (issue 19.8): as a file, in HTML, or with --rescored, and
the view says whose scores it shows."""

from __future__ import annotations

from pathlib import Path

from harness import load_results
from tests.cli.conftest import Invoke


def test_a_rescored_file_views_in_the_terminal_and_in_html(rubric: Invoke, tmp_path: Path) -> None:
    assert (
        rubric(
            "eval", "gsm8k", "-m", "scripted:noisy", "-n", "4", "-o", "r", "--no-progress", cwd=tmp_path
        ).returncode
        == 0
    )
    assert rubric("view", "r", "--rescored", cwd=tmp_path).returncode == 2  # nothing re-scored yet: said
    scored = rubric("score", "r", cwd=tmp_path)
    assert scored.returncode == 0, scored.stderr
    (rescored,) = (tmp_path / "r").glob("results.rescored-*.jsonl")
    shown = rubric("view", "r", "--rescored", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "scores from" in shown.stdout and rescored.name in shown.stdout.replace("\n", "").replace(" ", "")
    page = rubric("view", str(rescored), "--html", cwd=tmp_path)
    assert page.returncode == 0, page.stderr
    html = rescored.with_suffix(".html").read_text()
    assert f"gsm8k · scripted:noisy · scores from {rescored.name}" in html
    results = load_results(rescored)
    assert results.metadata["env"]["name"] == "gsm8k" and len(results) == 4
    assert (tmp_path / "r" / "results.jsonl").exists()  # the run itself is untouched
