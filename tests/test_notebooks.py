"""notebooks/*.ipynb run top to bottom in a real Jupyter kernel (nbclient + ipykernel)."""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

pytestmark = [pytest.mark.kernel, pytest.mark.slow]

NOTEBOOKS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("*.ipynb"))


def _execute(path: Path, workdir: Path) -> nbformat.NotebookNode:
    copy = workdir / path.name
    shutil.copy(path, copy)
    notebook = nbformat.read(copy, as_version=4)
    NotebookClient(
        notebook, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(workdir)}}
    ).execute()
    return notebook


@pytest.mark.timeout(300)
@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_notebook_runs_without_errors(path: Path, tmp_path: Path) -> None:
    notebook = _execute(path, tmp_path)
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        kinds = [o.output_type for o in cell.outputs]
        assert "error" not in kinds, cell.source
        # one display per result: a cell shows its value once (no second copy through rich)
        assert kinds.count("execute_result") <= 1, cell.source
        # A user's notebook shows no stderr at all: no warning from a dependency either.
        stderr = [o.text for o in cell.outputs if o.output_type == "stream" and o.name == "stderr"]
        assert not stderr, (cell.source, stderr)
    # What the notebook writes goes under runs/ (git-ignored), never beside the notebook.
    left = {p.relative_to(tmp_path).parts[0] for p in tmp_path.iterdir()} - {path.name}
    assert left <= {"runs"}, left


def test_tutorial_shows_html_reprs_and_progress_in_place(tmp_path: Path) -> None:
    notebook = _execute(Path(__file__).resolve().parents[1] / "notebooks" / "tutorial.ipynb", tmp_path)
    cells = {c.source.splitlines()[-1]: c for c in notebook.cells if c.cell_type == "code"}

    def shown(last_line: str) -> tuple[list[str], dict]:
        outputs = cells[last_line].outputs
        results = [o for o in outputs if o.output_type == "execute_result"]
        assert len(results) == 1, outputs
        return [o.output_type for o in outputs], results[0].data

    _, tree = shown("rubric")
    assert '<table class="tree">' in tree["text/html"] and "weight=0.8" in tree["text/html"]
    _, rollout = shown("sample")
    assert "conversation" in rollout["text/html"] and rollout["text/plain"].startswith("Rollout(")
    kinds, results = shown("results")
    assert "<svg" in results["text/html"] and "mean reward" in results["text/html"]
    # The progress display came first, as one display updated in place to its final count.
    progress = [o for o in cells["results"].outputs if o.output_type == "display_data"]
    assert kinds[0] == "display_data" and len(progress) == 1
    assert "24/24" in progress[0].data["text/plain"] and "<progress" in progress[0].data["text/html"]
    _, head = shown("results[:4]")
    assert "4 (2 examples)" in head["text/html"]
    _, frame = shown(
        'df[["example_id", "rollout_index", "reward", "correct", "work", "response", "answer"]].head()'
    )
    assert "<table" in frame["text/html"] and "answer" in frame["text/plain"]
    _, summary = shown("results.summary")
    assert summary["text/plain"].startswith("Summary(rollouts=24")
    _, better = shown("better")
    assert "1 ±" in better["text/html"] or ">1<" in better["text/html"]
    assert (tmp_path / "runs" / "compare.html").read_text().startswith("<!DOCTYPE html>")
