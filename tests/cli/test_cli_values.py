"""Bad command-line values and harmful -S keys: one line naming the flag before anything starts."""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import ConfigError
from harness._core.run.limits import check_planned
from tests.cli.conftest import Invoke

EVAL = ["eval", "gsm8k", "-m", "scripted:oracle", "--no-progress"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-r", "100000000"], "-r/--rollouts-per-example must be at most 1,000, got 100,000,000"),
        (["-c", "1000000"], "-c/--concurrency must be at most 4,096"),
        (["--timeout", "nan"], "--timeout must be a positive number up to 86400, got nan"),
        (["--timeout", "inf"], "--timeout must be a positive number up to 86400, got inf"),
        (["-T", "nan"], "-T/--temperature must be a number from 0 to 2, got nan"),
        (["--seed", "-1"], "--seed must be at least 0, got -1"),
        (
            ["--fail-on-error", "1.5"],
            "--fail-on-error must be a share below 1 (0.1) or a count of rollouts (5), got 1.5",
        ),
        (
            ["--fail-on-error", "nan"],
            "--fail-on-error must be a share below 1 (0.1) or a count of rollouts (5), got nan",
        ),
        (["--resume", "A", "-o", "B"], "-o/--output-dir B cannot be used with it"),
        (["-S", '{"stream": true}'], "-S/--sampling may not set 'stream'"),
        (["-S", '{"messages": []}'], "-S/--sampling may not set 'messages'"),
        (["-S", '{"model": "other"}'], "-S/--sampling may not set 'model'"),
        (["-S", '{"tools": []}'], "-S/--sampling may not set 'tools'"),
        (["-S", '{"n": 4}'], "use -r/--rollouts-per-example for several"),
    ],
)
def test_bad_values_are_one_line_and_nothing_starts(
    rubric: Invoke, tmp_path: Path, args: list[str], message: str
) -> None:
    out = tmp_path / "out"
    extra = ["-o", str(out)] if "--resume" not in args else []
    proc = rubric(*EVAL, *args, *extra, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in proc.stderr
    assert message in lines[0]
    assert not out.exists(), "an output folder was left behind"


@pytest.mark.parametrize(("flag", "value"), [("--worst", "-3"), ("--best", "0")])
def test_view_counts_must_be_positive(rubric: Invoke, tmp_path: Path, flag: str, value: str) -> None:
    proc = rubric("view", str(tmp_path), flag, value, cwd=tmp_path)
    assert proc.returncode == 2 and f"{flag} must be a count of at least 1, got {value}" in proc.stderr


def test_a_run_too_large_in_total_is_refused_before_it_starts() -> None:
    with pytest.raises(
        ConfigError, match=r"5,000 examples x 1,000 rollouts = 5,000,000 rollouts, more than 1,000,000"
    ):
        check_planned(5000, 1000)
    assert check_planned(100, 1000) == 100_000


def test_evaluate_applies_the_same_limits(tmp_path: Path) -> None:
    from harness import Client, evaluate
    from tests.helpers.fakes import FakeEnv

    client = Client("m", base_url="http://127.0.0.1:9/v1", api_key="x")
    with pytest.raises(ConfigError, match="rollouts_per_example must be at most 1,000, got 5,000"):
        evaluate(FakeEnv(), client, rollouts_per_example=5000, output_dir=tmp_path / "r", progress=False)
    with pytest.raises(ConfigError, match="concurrency must be at most 4,096, got 5,000"):
        evaluate(FakeEnv(), client, concurrency=5000, progress=False)
    assert not (tmp_path / "r").exists()
