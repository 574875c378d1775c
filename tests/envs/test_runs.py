"""`envs._driver.runs`: what `rubric eval` does, from Python; `resume(DIR)` needs nothing else (issue 19.2)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from envs._driver.runs import RunRequest, prepare_run, recorded_run, resume, run
from harness import ConfigError


def _request(folder: Path, **options: object) -> RunRequest:
    return RunRequest(
        spec="gsm8k",
        model="scripted:noisy",
        output_dir=folder,
        options={"num_examples": 4, "rollouts_per_example": 2, "progress": False, **options},
    )


def test_a_run_from_python_then_resumed_with_only_its_folder(tmp_path: Path) -> None:
    folder = tmp_path / "r"
    results, written = run(_request(folder))
    assert written == folder and results.summary.num_rollouts == 8
    lines = (folder / "results.jsonl").read_text().splitlines()
    (folder / "results.jsonl").write_text("\n".join(lines[:3]) + "\n")  # a crash after 3 of 8
    recorded = recorded_run(folder)
    assert (recorded.spec, recorded.model, recorded.settings["num_examples"]) == (
        "gsm8k",
        "scripted:noisy",
        4,
    )
    again = resume(folder, progress=False, concurrency=3)  # what may change between sessions
    keys = {(r.example_id, r.rollout_index) for r in again.rollouts}
    assert again.summary.num_rollouts == 8 and len(keys) == 8
    assert [json.loads(line)["example_id"] for line in lines[:3]] == [
        json.loads(line)["example_id"] for line in (folder / "results.jsonl").read_text().splitlines()[:3]
    ]
    with pytest.raises(ValueError, match="num_examples: was 4, now 2"):
        resume(folder, progress=False, num_examples=2)


def test_requests_are_checked_before_anything_is_written(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="rollouts_per_example must be at most 1,000"):
        prepare_run(_request(tmp_path / "a", rollouts_per_example=5000))
    with pytest.raises(ConfigError, match=r"required: ENV \(or --resume DIR\)"):
        prepare_run(RunRequest(model="scripted:noisy"))
    with pytest.raises(ConfigError, match="--shard 3/2"):
        prepare_run(_request(tmp_path / "b", shard="3/2"))
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "x").write_text("")
    with pytest.raises(ValueError, match="already exists and is not empty"):
        prepare_run(_request(tmp_path / "c"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c"]


def test_resume_from_python_uses_a_folders_arguments_only_when_passed(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text(
        "from envs import SingleTurnEnv\n\n"
        "def load_environment(n: int = 2):\n"
        "    env = SingleTurnEnv([{'question': f'q{i}', 'answer': 'a'} for i in range(n)],\n"
        "                        lambda response, answer: 1.0, name='mine')\n"
        "    env.scripted_policies = {'a': lambda messages, tools: 'a'}\n"
        "    return env\n"
    )
    folder = tmp_path / "r"
    request = RunRequest(
        spec=str(tmp_path / "mine.py"), env_args={"n": 3}, model="scripted:a", output_dir=folder
    )
    run(replace(request, options={"progress": False}))
    lines = (folder / "results.jsonl").read_text().splitlines()
    (folder / "results.jsonl").write_text(lines[0] + "\n")
    with pytest.raises(ConfigError, match=r"""pass them: rubric eval --resume \S+ -a '\{"n": 3\}'"""):
        resume(folder, progress=False)
    assert resume(folder, env_args={"n": 3}, progress=False).summary.num_rollouts == 3
