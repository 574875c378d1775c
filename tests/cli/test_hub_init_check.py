"""`rubric init` and `rubric check` from the command line: output, exit codes, one-line errors."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tests.cli.conftest import Invoke
from tests.helpers.docs import code_block


def test_init_then_eval_the_folder_then_check(rubric: Invoke, tmp_path: Path) -> None:
    made = rubric("init", "cli-env", "--kind", "multi", cwd=tmp_path)
    assert made.returncode == 0 and "rubric eval ./cli-env -m scripted:demo -n 3" in made.stdout
    ran = rubric(
        "eval", "./cli-env", "-m", "scripted:demo", "-n", "3", "--no-progress", "-o", "run", cwd=tmp_path
    )
    assert ran.returncode == 0 and "mean reward" in ran.stdout, ran.stderr
    checked = rubric("check", "cli-env", cwd=tmp_path)
    assert checked.returncode == 0, checked.stdout
    assert checked.stdout.count("PASS") == 8 and "8 passed, 0 failed" in checked.stdout


def test_check_failure_exits_non_zero_with_one_line_per_check(rubric: Invoke, tmp_path: Path) -> None:
    assert rubric("init", "broken-env", "--dir", str(tmp_path), cwd=tmp_path).returncode == 0
    (tmp_path / "broken-env" / "README.md").write_text("# no front matter\n")
    checked = rubric("check", str(tmp_path / "broken-env"), cwd=tmp_path)
    assert checked.returncode == 1
    assert (
        "FAIL  card: README.md has no front matter" in checked.stdout
        and "7 passed, 1 failed" in checked.stdout
    )


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["init", "no good"], "invalid environment name 'no good'"),
        (["check", "/nonexistent/folder"], "no folder at /nonexistent/folder"),
    ],
)
def test_bad_input_is_one_line(rubric: Invoke, tmp_path: Path, argv: list[str], expected: str) -> None:
    done = rubric(*argv, cwd=tmp_path)
    assert done.returncode == 2
    assert expected in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_readme_share_block_runs_as_written(rubric: Invoke, tmp_path: Path) -> None:
    for line in code_block("bash", "rubric init my-env").splitlines():
        argv = shlex.split(line.split("#")[0])
        assert argv[0] == "rubric"
        done = rubric(*argv[1:], *(["--no-progress"] if argv[1] == "eval" else []), cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
    assert "8 passed, 0 failed" in done.stdout
