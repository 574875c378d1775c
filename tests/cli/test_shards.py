"""`rubric eval --shard`, `merge`, then view / resume of the merged run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import Invoke, Ran
from tests.helpers.docs import code_block


def _eval(rubric: Invoke, tmp_path: Path, *extra: str, model: str = "scripted:noisy") -> Ran:
    return rubric("eval", "gsm8k", "-m", model, "-n", "9", "-r", "2", "--no-progress", *extra, cwd=tmp_path)


def _keys(directory: Path) -> list[tuple[str, int]]:
    lines = (directory / "results.jsonl").read_text().splitlines()
    return [(str(r["example_id"]), r["rollout_index"]) for r in map(json.loads, lines)]


def test_shards_merge_view_and_resume(rubric: Invoke, tmp_path: Path) -> None:
    for index in range(3):
        proc = _eval(rubric, tmp_path, "--shard", f"{index}/3", "-o", f"s{index}")
        assert proc.returncode == 0, proc.stderr
    assert len(_keys(tmp_path / "s1")) == 6

    merged = rubric("merge", "all", "s2", "s0", "s1", cwd=tmp_path)
    assert merged.returncode == 0, merged.stderr
    assert "merged 3 shard(s) (2/3, 0/3, 1/3): 18 rollouts written to all" in merged.stdout
    assert "pass@2" in merged.stdout
    whole = _eval(rubric, tmp_path, "-o", "whole")
    assert whole.returncode == 0, whole.stderr
    # The merge is in plan order; the unsharded run's file is in finishing order.
    plan = json.loads((tmp_path / "all" / "metadata.json").read_text())["example_ids"]
    assert _keys(tmp_path / "all") == [(e, i) for e in plan for i in range(2)]
    assert sorted(_keys(tmp_path / "all")) == sorted(_keys(tmp_path / "whole"))
    summary = json.loads((tmp_path / "all" / "metadata.json").read_text())["summary"]
    expected = json.loads((tmp_path / "whole" / "metadata.json").read_text())["summary"]
    assert summary["mean_reward"] == expected["mean_reward"] and summary["pass_at_k"] == expected["pass_at_k"]

    view = rubric("view", "all", "--worst", "1", cwd=tmp_path)
    assert view.returncode == 0 and "18 (9 examples)" in view.stdout

    partial = rubric("merge", "part", "s0", "s2", cwd=tmp_path)
    assert partial.returncode == 0, partial.stderr
    assert "incomplete: shard(s) 1 not given" in partial.stdout and "--resume part" in partial.stdout
    resumed = _eval(rubric, tmp_path, "--resume", "part")
    assert resumed.returncode == 0, resumed.stderr
    assert sorted(_keys(tmp_path / "part")) == sorted(_keys(tmp_path / "whole"))


@pytest.mark.parametrize(
    ("make", "args", "message"),
    [
        (
            (),
            ("eval", "gsm8k", "-m", "scripted:oracle", "--shard", "3/2"),
            "--shard 3/2: shard 3/2: the index",
        ),
        ((), ("eval", "gsm8k", "-m", "scripted:oracle", "--shard", "half"), "is not of the form i/N"),
        (
            ("scripted:oracle", "scripted:noisy"),
            ("merge", "out", "a", "b"),
            'model.model "scripted:oracle" vs',
        ),
        (("scripted:oracle",), ("merge", "out", "a", "a"), "shard 0/2 given twice"),
        ((), ("merge", "out", "nowhere"), "nowhere is not a run directory"),
    ],
)
def test_shard_and_merge_errors_are_one_line(
    rubric: Invoke, tmp_path: Path, make: tuple[str, ...], args, message: str
) -> None:
    for index, (name, model) in enumerate(zip("ab", make)):
        proc = _eval(rubric, tmp_path, "--shard", f"{index}/2", "-o", name, model=model)
        assert proc.returncode == 0, proc.stderr
    proc = rubric(*args, cwd=tmp_path)
    assert proc.returncode != 0
    assert message in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_readme_shard_example_runs_as_written(rubric: Invoke, tmp_path: Path) -> None:

    block = code_block("bash", "rubric merge")
    for line in block.strip().splitlines():
        command = line.split("#")[0].split()
        assert command[0] == "rubric"
        proc = rubric(*command[1:], cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
    assert "80 rollouts written to runs/merged" in proc.stdout
    assert len(_keys(tmp_path / "runs" / "merged")) == 80
