"""A results folder is data: `rubric score`/`view` never import or call what its metadata names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.test_cli import run


def _folder(tmp_path: Path, env: dict) -> Path:
    folder = tmp_path / "shared-run"
    folder.mkdir()
    rollout = {
        "example_id": 0,
        "rollout_index": 0,
        "completion": [{"role": "assistant", "content": "#### 4"}],
    }
    (folder / "results.jsonl").write_text(json.dumps(rollout) + "\n")
    (folder / "metadata.json").write_text(json.dumps({"status": "completed", "env": env}))
    return folder


@pytest.mark.parametrize(
    "env",
    [
        {"name": "x", "load_spec": "os:system", "load_kwargs": {"command": "touch CANARY"}},
        {"name": "x", "load_spec": "subprocess:call", "load_kwargs": {"args": ["touch", "CANARY"]}},
        {"name": "evil", "load_spec": "evil.py", "load_kwargs": {}},
        {"name": "evil", "load_spec": "evil", "load_kwargs": {}},  # importable, but not installed
    ],
)
def test_metadata_naming_code_never_runs_it(tmp_path: Path, env: dict) -> None:
    (tmp_path / "evil.py").write_text("open('CANARY', 'w').write('ran')\ndef load_environment():\n    pass\n")
    folder = _folder(tmp_path, env)
    for command in (["score", str(folder)], ["view", str(folder)]):
        run(*command, cwd=tmp_path)
    score = run("score", str(folder), cwd=tmp_path)
    assert not (tmp_path / "CANARY").exists(), "code named in metadata.json ran"
    assert score.returncode != 0 and len(score.stderr.strip().splitlines()) == 1
    assert "never runs code it names" in score.stderr
    assert f"rubric score {folder} {env['load_spec']}" in score.stderr  # the command to type instead


def test_a_registered_name_is_used_and_said(tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"name": "gsm8k", "load_spec": "gsm8k", "load_kwargs": {"num_examples": 1}})
    proc = run("score", str(folder), "-o", str(tmp_path / "rescored.jsonl"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "using the installed environment 'gsm8k'" in proc.stderr
    assert (tmp_path / "rescored.jsonl").exists()
