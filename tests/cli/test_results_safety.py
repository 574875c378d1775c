"""A results folder is data: `rubric score`/`view` never import or call what its metadata names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import Invoke
from tests.helpers.processes import at_a_terminal


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
def test_metadata_naming_code_never_runs_it(rubric: Invoke, tmp_path: Path, env: dict) -> None:
    (tmp_path / "evil.py").write_text("open('CANARY', 'w').write('ran')\ndef load_environment():\n    pass\n")
    folder = _folder(tmp_path, env)
    for command in (["score", str(folder)], ["view", str(folder)]):
        rubric(*command, cwd=tmp_path)
    score = rubric("score", str(folder), cwd=tmp_path)
    assert not (tmp_path / "CANARY").exists(), "code named in metadata.json ran"
    assert score.returncode != 0 and len(score.stderr.strip().splitlines()) == 1
    assert "never runs code it names" in score.stderr
    assert f"rubric score {folder} {env['load_spec']}" in score.stderr  # the command to type instead


def test_a_registered_name_is_used_and_said(rubric: Invoke, tmp_path: Path) -> None:
    folder = _folder(tmp_path, {"name": "gsm8k", "load_spec": "gsm8k", "load_kwargs": {}})
    proc = rubric("score", str(folder), "-o", str(tmp_path / "rescored.jsonl"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "using the installed environment 'gsm8k'" in proc.stderr
    assert (tmp_path / "rescored.jsonl").exists()


@pytest.mark.slow
def test_the_folders_arguments_are_used_only_when_the_user_passes_or_accepts_them(
    rubric: Invoke, tmp_path: Path
) -> None:
    recorded = {"num_examples": 1}
    folder = _folder(tmp_path, {"name": "gsm8k", "load_spec": "gsm8k", "load_kwargs": recorded})
    refused = rubric("score", str(folder), "-o", str(tmp_path / "a.jsonl"), cwd=tmp_path)
    assert refused.returncode == 2 and not (tmp_path / "a.jsonl").exists()
    assert """records these arguments for 'gsm8k': {"num_examples": 1}""" in refused.stderr
    assert (
        f"""used only if you pass them: rubric score {folder} -a '{{"num_examples": 1}}'""" in refused.stderr
    )
    typed = rubric(
        "score", str(folder), "-a", json.dumps(recorded), "-o", str(tmp_path / "b.jsonl"), cwd=tmp_path
    )
    assert typed.returncode == 0, typed.stderr
    for answer, code in (("n", 2), ("y", 0)):
        assert (
            _at_a_terminal(["score", str(folder), "-o", str(tmp_path / f"{answer}.jsonl")], tmp_path, answer)
            == code
        )
    assert (tmp_path / "y.jsonl").exists() and not (tmp_path / "n.jsonl").exists()


def _at_a_terminal(args: list[str], cwd: Path, answer: str) -> int:
    proc = at_a_terminal(*args, cwd=cwd, answer=answer)
    assert "[y/N]" in proc.stdout, proc.stdout + proc.stderr
    return proc.returncode


def test_the_hint_never_carries_raw_control_characters(rubric: Invoke, tmp_path: Path) -> None:
    spec = "evil\x1b]0;pwned\x07\u202e.py"
    folder = _folder(tmp_path, {"name": "evil", "load_spec": spec, "load_kwargs": {}})
    proc = rubric("score", str(folder), cwd=tmp_path)
    assert proc.returncode != 0 and "never runs code it names" in proc.stderr
    assert not any(c in proc.stderr for c in ("\x1b", "\x07", "\u202e")), repr(proc.stderr)
    assert "\\x1b]0;pwned\\x07" in proc.stderr
