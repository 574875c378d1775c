"""An interrupted Harbor run says the whole command that continues it (issue 47.11): the environment,
which a results folder never runs by itself, and the agent's flags; that one command finishes it."""

from __future__ import annotations

import shlex
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.envs.harbor.test_harbor_tasks import make_task
from tests.helpers.processes import RUBRIC, run

pytestmark = [
    pytest.mark.agents,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:--runtime .* replaces the image each task names:UserWarning"),
    pytest.mark.timeout(300),
]


def test_the_hint_after_ctrl_c_is_the_whole_command_and_it_continues_the_run(tmp_path: Path) -> None:
    tasks, files = tmp_path / "tasks", tmp_path / "agent"
    files.mkdir()
    (files / "hang").write_text("")  # the agent waits while this is here (gone before the resume)
    for name in ("a", "b"):
        make_task(tasks, name, "echo 1 > /logs/verifier/reward.txt")
    agent = "command:if test -e /agent/hang; then sleep 600; fi"
    out = tmp_path / "run"
    command = [RUBRIC or "rubric", "eval", f"harbor:{tasks}", "--agent", agent, "--agent-files", str(files)]
    command += ["--runtime", "bwrap", "-o", str(out), "--no-progress"]
    with subprocess.Popen(
        command, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    ) as proc:
        deadline = time.monotonic() + 120
        while not (out / "metadata.json").exists():  # the run has its folder: what the hint names
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.2)
        time.sleep(2)  # the episodes start (the hint is the same if they have not yet)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    hint = next(line for line in err.splitlines() if line.startswith("continue with: "))
    expected = ["rubric", "eval", f"harbor:{tasks}", "--resume", str(out), "--agent", agent]
    assert shlex.split(hint.removeprefix("continue with: ")) == [*expected, "--agent-files", str(files), "--runtime", "bwrap"]  # fmt: skip
    (files / "hang").unlink()
    again = run(
        *shlex.split(hint.removeprefix("continue with: rubric ")), "--no-progress", cwd=tmp_path, timeout=300
    )
    assert again.returncode == 0, again.stderr
    rows = (out / "results.jsonl").read_text().splitlines()
    assert len(rows) == 2


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
