"""Default run folders: sorted by start time, and apart for runs started in the same second."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from harness._core.run import dirs as run_dirs
from tests.helpers.processes import RUBRIC


def test_runs_started_in_the_same_second_get_their_own_folders(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(run_dirs.time, "strftime", lambda fmt: "20261126-081500")
    names = {run_dirs.default_run_dir("gsm8k", "scripted:oracle").name for _ in range(50)}
    assert len(names) == 50
    assert all(re.fullmatch(r"gsm8k--scripted-oracle--20261126-081500-[0-9a-f]{6}", n) for n in names)


@pytest.mark.slow
def test_two_rubric_evals_at_once_write_two_folders(tmp_path: Path) -> None:
    command = [str(RUBRIC), "eval", "gsm8k", "-m", "scripted:oracle", "-n", "20", "--no-progress"]
    procs = [
        subprocess.Popen(command, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        for _ in range(2)
    ]
    outputs = [proc.communicate(timeout=120) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], outputs
    folders = sorted((tmp_path / "runs").iterdir())
    assert len(folders) == 2 and all(
        len((f / "results.jsonl").read_text().splitlines()) == 20 for f in folders
    )
