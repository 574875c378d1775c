"""`rubric init` and `rubric check` from the command line: output, exit codes, one-line errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from cli import main
from tests.helpers.docs import code_block


def test_init_then_eval_the_folder_then_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["init", "cli-env", "--kind", "multi"]) == 0
    assert "rubric eval ./cli-env -m scripted:demo -n 3" in capsys.readouterr().out
    assert main(["eval", "./cli-env", "-m", "scripted:demo", "-n", "3", "--no-progress", "-o", "run"]) == 0
    assert "mean reward" in capsys.readouterr().out
    assert main(["check", "cli-env"]) == 0
    out = capsys.readouterr().out
    assert out.count("PASS") == 8 and "8 passed, 0 failed" in out


def test_check_failure_exits_non_zero_with_one_line_per_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["init", "broken-env", "--dir", str(tmp_path)]) == 0
    (tmp_path / "broken-env" / "README.md").write_text("# no front matter\n")
    capsys.readouterr()
    assert main(["check", str(tmp_path / "broken-env")]) == 1
    out = capsys.readouterr().out
    assert "FAIL  card: README.md has no front matter" in out and "7 passed, 1 failed" in out


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["init", "no good"], "invalid environment name 'no good'"),
        (["check", "/nonexistent/folder"], "no folder at /nonexistent/folder"),
    ],
)
def test_bad_input_is_one_line(argv: list[str], expected: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert expected in err and len(err.strip().splitlines()) == 1


def test_readme_share_block_runs_as_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import shlex

    blocks = [code_block("bash", "rubric init my-env")]
    monkeypatch.chdir(tmp_path)
    for line in blocks[0].splitlines():
        argv = shlex.split(line.split("#")[0])
        assert argv[0] == "rubric"
        assert main([*argv[1:], *(["--no-progress"] if argv[1] == "eval" else [])]) == 0, capsys.readouterr()
    assert "8 passed, 0 failed" in capsys.readouterr().out
