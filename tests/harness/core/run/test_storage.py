"""Results on disk: corrupt and repeated lines, one writer per directory, file modes."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness import ResultsError, Rollout, load_results
from harness._core.errors import ResultsWarning
from harness._core.run.storage import (
    RESULTS_FILE,
    RunLock,
    iter_rollouts,
    prepare_directory,
    write_json_atomic,
)


def _line(example_id: int | str, index: int = 0, reward: float = 1.0) -> str:
    return Rollout(example_id=example_id, rollout_index=index, reward=reward).model_dump_json() + "\n"


def test_corrupt_lines_are_skipped_with_their_numbers(tmp_path: Path) -> None:
    path = tmp_path / RESULTS_FILE
    path.write_text(_line(1) + "{}\n" + '{"example_id": 2, "rollout_ind\n' + _line(3) + '{"reward": "x"}\n')
    with pytest.warns(ResultsWarning) as caught:
        rollouts = list(iter_rollouts(path))
    assert [r.example_id for r in rollouts] == [1, 3]  # "{}" is not a rollout
    [warning] = caught
    assert "skipped 3 line(s) that are not valid rollouts (line 2, 3, 5)" in str(warning.message)


def test_repeated_rollouts_are_read_once_and_said_so(tmp_path: Path) -> None:
    (tmp_path / RESULTS_FILE).write_text(_line(1, reward=0.5) + _line(2) + _line(1, reward=0.0) + _line(1, 1))
    with pytest.warns(ResultsWarning, match=r"ignored 1 repeated rollout\(s\).*\(line 3\)"):
        results = load_results(tmp_path)
    assert sorted((r.example_id, r.rollout_index, r.reward) for r in results) == [
        (1, 0, 0.5),
        (1, 1, 1.0),
        (2, 0, 1.0),
    ]


def test_clean_files_read_silently(tmp_path: Path, recwarn: pytest.WarningsRecorder) -> None:
    (tmp_path / RESULTS_FILE).write_text(_line(1) + _line(2) + '{"example_id": 3, "rollo')  # torn by a kill
    assert len(load_results(tmp_path)) == 2 and not recwarn.list


@pytest.mark.slow
def test_second_writer_is_refused_with_the_holders_pid(tmp_path: Path) -> None:
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import sys, time
                from pathlib import Path
                from harness._core.run.storage import RunLock
                lock = RunLock(Path({str(tmp_path)!r}))
                lock.acquire()
                print('locked', flush=True)
                time.sleep(30)
                """
            ),
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).resolve().parents[4],
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        with pytest.raises(ResultsError, match=f"being written by another run \\(process {holder.pid}\\)"):
            prepare_directory(tmp_path, resume=True, lock=RunLock(tmp_path))
    finally:
        holder.kill()
        holder.wait(5)
        assert holder.stdout is not None
        holder.stdout.close()
    lock = RunLock(tmp_path)  # the kernel released the killed holder's lock: never stale
    prepare_directory(tmp_path, resume=True, lock=lock)
    assert (tmp_path / ".lock").read_text().strip() == str(os.getpid())
    with pytest.raises(ResultsError, match=f"process {os.getpid()}"):
        RunLock(tmp_path).acquire()  # also within one process
    lock.release()
    again = RunLock(tmp_path)
    again.acquire()
    again.release()


def test_results_and_metadata_share_one_file_mode(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        write_json_atomic(tmp_path / "metadata.json", {"a": 1})
        with open(tmp_path / RESULTS_FILE, "ab"):
            pass
    finally:
        os.umask(old)
    modes = {stat.S_IMODE((tmp_path / name).stat().st_mode) for name in ("metadata.json", RESULTS_FILE)}
    assert modes == {0o644}
    assert json.loads((tmp_path / "metadata.json").read_text()) == {"a": 1}
