"""An interrupted Harbor run says the whole command that continues it (issue 47.11): the environment,
which a results folder never runs by itself, and the agent's flags; that one command finishes it."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest

from tests.envs.harbor.test_harbor_tasks import make_task
from tests.helpers.processes import run

pytestmark = [
    pytest.mark.agents,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:--runtime .* replaces the image each task names:UserWarning"),
    pytest.mark.filterwarnings("ignore:task .* asks for a network:UserWarning"),  # bwrap gives none
    pytest.mark.timeout(300),
]


def test_the_hint_after_a_stop_is_the_whole_command_and_it_continues_the_run(tmp_path: Path) -> None:
    """The hint `rubric eval` prints after Ctrl-C/SIGTERM (`cli.resume_hint` over the prepared
    run's environment and flags; tests/cli/test_stop_signals.py sends the signals): for a Harbor
    run it names `harbor:PATH` and the agent's flags, and that one command finishes the run."""
    from cli import resume_hint
    from envs._driver.runs import RunRequest, prepare_run

    tasks, files = tmp_path / "tasks", tmp_path / "agent"
    files.mkdir()
    for name in ("a", "b"):
        make_task(tasks, name, "echo 1 > /logs/verifier/reward.txt")
    agent = "command:true"
    out = tmp_path / "run"
    request = RunRequest(
        spec=f"harbor:{tasks}", agent=agent, agent_files=str(files), runtime="bwrap", output_dir=out
    )
    prepared = prepare_run(request)
    hint = resume_hint(out, prepared.resume_flags(), prepared.request.spec)
    expected = ["rubric", "eval", f"harbor:{tasks}", "--resume", str(out), "--agent", agent]
    assert shlex.split(hint.removeprefix("continue with: ")) == [*expected, "--agent-files", str(files), "--runtime", "bwrap"]  # fmt: skip
    first = run("eval", f"harbor:{tasks}", "--agent", agent, "--agent-files", str(files), "--runtime", "bwrap", "-o", str(out), "--no-progress", cwd=tmp_path)  # fmt: skip
    assert first.returncode == 0, first.stderr
    rows = (out / "results.jsonl").read_text().splitlines()
    (out / "results.jsonl").write_text(rows[0] + "\n")  # as if stopped after one task
    again = run(
        *shlex.split(hint.removeprefix("continue with: rubric ")), "--no-progress", cwd=tmp_path, timeout=300
    )
    assert again.returncode == 0, again.stderr
    assert len((out / "results.jsonl").read_text().splitlines()) == 2


def test_a_resume_refused_for_its_environment_names_the_whole_command(tmp_path: Path) -> None:
    tasks = tmp_path / "tasks"
    make_task(tasks, "a", "echo 1 > /logs/verifier/reward.txt")
    out = tmp_path / "run"
    first = run("eval", f"harbor:{tasks}", "--agent", "command:true", "--runtime", "bwrap", "-o", str(out), "--no-progress", cwd=tmp_path)  # fmt: skip
    assert first.returncode == 0, first.stderr
    (out / "results.jsonl").write_text("")
    refused = run("eval", "--resume", str(out), "--no-progress", cwd=tmp_path)
    said = f"name it yourself: rubric eval harbor:{tasks} --resume {out} --agent command:true --runtime bwrap"
    assert refused.returncode == 2 and said in refused.stderr, refused.stderr
