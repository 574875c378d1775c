"""A run folder's own files are never read or written through links (issue 28.2): a shared
results folder with `report.html`, `.lock`, `results.jsonl` or `metadata.json` planted as a
link to a file elsewhere must leave that file untouched, whatever rubric is asked to do."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from harness import ResultsError, load_results
from harness._core.run.storage import RESULTS_FILE, open_owned
from tests.cli.conftest import Invoke
from tests.helpers.processes import run

pytestmark = [pytest.mark.slow]

PRECIOUS = "precious\nsecond line without newline"


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("runs")
    proc = run("eval", "gsm8k", "-m", "scripted:noisy", "-n", "2", "--no-progress", "-o", "r", cwd=where)
    assert proc.returncode == 0, proc.stderr
    return where / "r"


def _copy_with_link(finished_run: Path, tmp_path: Path, name: str) -> tuple[Path, Path]:
    folder = tmp_path / "r"
    shutil.copytree(finished_run, folder)
    victim = tmp_path / "victim"
    victim.write_text(PRECIOUS)
    target = folder / name
    if target.exists():
        if name == RESULTS_FILE:  # the victim holds what the run had, and a torn last line
            victim.write_text(target.read_text() + "{torn")
        target.unlink()
    target.symlink_to(victim)
    return folder, victim


def test_a_report_written_over_a_link_replaces_the_link_not_its_target(
    rubric: Invoke, finished_run: Path, tmp_path: Path
) -> None:
    folder, victim = _copy_with_link(finished_run, tmp_path, "report.html")
    proc = rubric("view", "r", "--html", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert victim.read_text() == PRECIOUS
    report = folder / "report.html"
    assert not report.is_symlink() and report.read_text().startswith("<!DOCTYPE html>")


@pytest.mark.parametrize("name", [".lock", RESULTS_FILE, "metadata.json"])
def test_resume_refuses_a_linked_file_and_leaves_its_target_alone(
    rubric: Invoke, finished_run: Path, tmp_path: Path, name: str
) -> None:
    folder, victim = _copy_with_link(finished_run, tmp_path, name)
    before = victim.read_bytes()
    proc = rubric(
        "eval", "gsm8k", "-m", "scripted:noisy", "-n", "4", "--no-progress", "--resume", "r", cwd=tmp_path
    )
    assert proc.returncode != 0
    assert f"{Path('r') / name} is a symbolic link" in proc.stderr and "remove the link" in proc.stderr
    assert folder.is_dir()
    assert victim.read_bytes() == before  # not truncated, no PID, no rows appended


def test_a_hard_link_and_a_fifo_are_refused_too(finished_run: Path, tmp_path: Path) -> None:
    folder = tmp_path / "r"
    shutil.copytree(finished_run, folder)
    other = tmp_path / "other.jsonl"
    os.link(folder / RESULTS_FILE, other)
    with pytest.raises(ResultsError, match="has other names"):
        load_results(folder)
    other.unlink()
    (folder / ".lock").unlink(missing_ok=True)
    os.mkfifo(folder / ".lock")
    with pytest.raises(ResultsError, match="is not a plain file"):  # at once: a FIFO would block
        open_owned(folder / ".lock", os.O_RDWR | os.O_CREAT)


def test_reading_a_linked_results_file_is_refused(rubric: Invoke, finished_run: Path, tmp_path: Path) -> None:
    folder, _ = _copy_with_link(finished_run, tmp_path, RESULTS_FILE)
    with pytest.raises(ResultsError, match="is a symbolic link"):
        load_results(folder)
    proc = rubric("view", "r", cwd=tmp_path)
    assert proc.returncode != 0 and "is a symbolic link" in proc.stderr


def test_an_export_over_a_link_replaces_the_link(finished_run: Path, tmp_path: Path) -> None:
    victim = tmp_path / "victim"
    victim.write_text(PRECIOUS)
    out = tmp_path / "export.jsonl"
    out.symlink_to(victim)
    load_results(finished_run).to_jsonl(out)
    assert victim.read_text() == PRECIOUS and not out.is_symlink() and len(out.read_text().splitlines()) == 2
