"""`rubric` eval, resume, view, score, list, endpoint and errors (real processes where that is the point)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.cli.conftest import Invoke
from tests.helpers.processes import RUBRIC, run

needs_script = pytest.mark.skipif(RUBRIC is None, reason="the rubric console script is not installed")


def read_rollouts(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


@pytest.mark.slow
@needs_script
def test_help_and_version(tmp_path: Path) -> None:
    help_text = run("--help", cwd=tmp_path)
    assert help_text.returncode == 0
    for command in ("eval", "view", "score", "list", "endpoint"):
        assert command in help_text.stdout
    version = run("--version", cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("rubric ")


def test_eval_oracle_writes_results_and_prints_summary(rubric: Invoke, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = rubric(
        "eval",
        "gsm8k",
        "-m",
        "scripted:oracle",
        "-n",
        "6",
        "-r",
        "2",
        "-o",
        str(out),
        "--no-progress",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "mean reward" in proc.stdout and "1 ± 0" in proc.stdout
    assert "pass@2" in proc.stdout
    assert "correct" in proc.stdout and "format" in proc.stdout  # every node's mean
    assert f"Results written to {out}" in proc.stdout
    rollouts = read_rollouts(out / "results.jsonl")
    assert len(rollouts) == 12
    assert {r["reward"] for r in rollouts} == {1.0}
    metadata = json.loads((out / "metadata.json").read_text())
    assert metadata["env"]["name"] == "gsm8k"


def test_eval_default_output_dir_under_runs(rubric: Invoke, tmp_path: Path) -> None:
    proc = rubric("eval", "gsm8k", "-m", "scripted:noisy", "-n", "3", "--no-progress", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    dirs = list((tmp_path / "runs").iterdir())
    assert len(dirs) == 1 and dirs[0].name.startswith("gsm8k--scripted-noisy--")
    assert len(read_rollouts(dirs[0] / "results.jsonl")) == 3


def test_eval_sampling_and_max_turns_reach_the_run(rubric: Invoke, tmp_path: Path) -> None:
    out = tmp_path / "run"
    proc = rubric(
        "eval",
        "wordle",
        "-m",
        "scripted:noisy",
        "-n",
        "4",
        "--max-turns",
        "2",
        "-t",
        "64",
        "-T",
        "0.5",
        "-S",
        '{"top_p": 0.9}',
        "-a",
        '{"num_games": 4}',
        "-o",
        str(out),
        "--no-progress",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    rollouts = read_rollouts(out / "results.jsonl")
    assert len(rollouts) == 4
    assert all(r["turns"] <= 2 for r in rollouts)
    metadata = json.loads((out / "metadata.json").read_text())
    text = json.dumps(metadata)
    assert '"top_p": 0.9' in text and '"max_tokens": 64' in text


def test_resume_runs_only_missing_rollouts(rubric: Invoke, tmp_path: Path) -> None:
    out = tmp_path / "run"
    first = rubric(
        "eval", "gsm8k", "-m", "scripted:oracle", "-n", "10", "-o", str(out), "--no-progress", cwd=tmp_path
    )
    assert first.returncode == 0, first.stderr
    results = out / "results.jsonl"
    lines = results.read_text().splitlines()
    # Keep 4 finished rollouts and a torn fifth line, as a kill mid-write would leave.
    results.write_text("\n".join(lines[:4]) + "\n" + lines[4][: len(lines[4]) // 2])
    resumed = rubric(
        "eval",
        "gsm8k",
        "-m",
        "scripted:oracle",
        "-n",
        "10",
        "--resume",
        str(out),
        "--no-progress",
        cwd=tmp_path,
    )
    assert resumed.returncode == 0, resumed.stderr
    rollouts = read_rollouts(results)
    keys = [(r["example_id"], r["rollout_index"]) for r in rollouts]
    assert len(keys) == 10 and len(set(keys)) == 10


def test_resume_with_other_settings_is_one_clear_line(rubric: Invoke, tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert (
        rubric(
            "eval", "gsm8k", "-m", "scripted:oracle", "-n", "3", "-o", str(out), "--no-progress", cwd=tmp_path
        ).returncode
        == 0
    )
    proc = rubric(
        "eval",
        "gsm8k",
        "-m",
        "scripted:noisy",
        "-n",
        "3",
        "--resume",
        str(out),
        "--no-progress",
        cwd=tmp_path,
    )
    assert proc.returncode != 0
    assert 'model.model: was "scripted:oracle", now "scripted:noisy"' in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr


def test_view_shows_conversations_and_node_scores(rubric: Invoke, tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert (
        rubric(
            "eval",
            "python",
            "-m",
            "scripted:oracle",
            "-n",
            "2",
            "-o",
            str(out),
            "--no-progress",
            cwd=tmp_path,
        ).returncode
        == 0
    )
    example_id = read_rollouts(out / "results.jsonl")[0]["example_id"]
    proc = rubric("view", str(out), "--rollout", str(example_id), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "run_python(" in proc.stdout  # the tool call
    assert "tool result" in proc.stdout
    assert "correct" in proc.stdout and "scores" in proc.stdout
    worst = rubric("view", str(out), "--worst", "1", "--best", "1", cwd=tmp_path)
    assert worst.returncode == 0 and worst.stdout.count("example ") >= 2
    missing = rubric("view", str(out), "--rollout", "no-such-id", cwd=tmp_path)
    assert missing.returncode != 0 and "no rollout with id" in missing.stderr


def test_score_rescores_into_a_new_file_without_model_calls(rubric: Invoke, tmp_path: Path) -> None:
    out = tmp_path / "run"
    assert (
        rubric(
            "eval", "gsm8k", "-m", "scripted:noisy", "-n", "8", "-o", str(out), "--no-progress", cwd=tmp_path
        ).returncode
        == 0
    )
    original = read_rollouts(out / "results.jsonl")
    # A rubric change: an environment file whose rubric gives 1.0 only to answers of 0 tokens or more (always 1).
    env_file = tmp_path / "always_one.py"
    env_file.write_text(
        "from envs.reference._gsm8k import load_environment as base\n"
        "from rubrics import reward\n\n"
        "def load_environment(**kwargs):\n"
        "    env = base(**kwargs)\n"
        "    env.rubric = reward(lambda response: 1.0, name='anything')\n"
        "    return env\n"
    )
    proc = rubric("score", str(out), str(env_file), "-o", str(tmp_path / "rescored.jsonl"), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    rescored = read_rollouts(tmp_path / "rescored.jsonl")
    assert len(rescored) == len(original)
    assert {r["reward"] for r in rescored} == {1.0}
    # Re-scored rollouts come in dataset order; results.jsonl in the order they finished.
    by_key = {(r["example_id"], r["rollout_index"]): r for r in original}
    assert all(r["completion"] == by_key[r["example_id"], r["rollout_index"]]["completion"] for r in rescored)
    assert read_rollouts(out / "results.jsonl") == original  # the original file is untouched
    # Without ENV it uses the environment recorded in the run and reproduces the rewards.
    again = rubric("score", str(out), cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    new_files = list(out.glob("results.rescored-*.jsonl"))
    assert len(new_files) == 1
    assert all(
        r["reward"] == by_key[r["example_id"], r["rollout_index"]]["reward"]
        for r in read_rollouts(new_files[0])
    )


def test_list_shows_reference_environments(rubric: Invoke, tmp_path: Path) -> None:
    proc = rubric("list", cwd=tmp_path)
    assert proc.returncode == 0
    for name in ("gsm8k", "wordle", "python"):
        assert name in proc.stdout


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.slow
@needs_script
def test_endpoint_serves_and_eval_uses_it(rubric: Invoke, tmp_path: Path) -> None:
    port = free_port()
    server = subprocess.Popen(
        [RUBRIC, "endpoint", "--policy", "gsm8k:oracle", "--port", str(port)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                time.sleep(0.1)
        else:
            pytest.fail("rubric endpoint did not start listening")
        proc = rubric(
            "eval", "gsm8k", "-m", "any-model", "-b", f"http://127.0.0.1:{port}/v1", "-n", "3",
            "-o", str(tmp_path / "run"), "--no-progress", cwd=tmp_path, env={"OPENAI_API_KEY": None},
        )  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert "1 ± 0  (over" in proc.stdout
    finally:
        server.terminate()
        server.communicate(timeout=10)  # waits, and closes its pipes


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["eval", "no-such-env", "-m", "scripted:oracle"], "no environment named 'no-such-env'"),
        (["eval", "gsm8k", "-m", "scripted:oracle", "-a", "{bad"], "-a/--env-args is not valid JSON"),
        (["eval", "gsm8k", "-m", "scripted:oracle", "-S", "[1]"], "-S/--sampling must be a JSON object"),
        (["eval", "gsm8k", "-m", "m", "-b", "http://127.0.0.1:9/v1"], "cannot reach the endpoint"),
        (["eval", "gsm8k", "-m", "m", "-k", "RUBRIC_TEST_UNSET_KEY"], "RUBRIC_TEST_UNSET_KEY is not set"),
        (["eval", "gsm8k", "-m", "scripted:nope"], "no scripted policy 'nope'"),
        (["view", "does-not-exist"], "no results directory"),
        (["eval", "gsm8k", "-m", "scripted:oracle", "-c", "0"], "-c/--concurrency must be at least 1, got 0"),
        (
            ["eval", "gsm8k", "-m", "scripted:oracle", "-r", "0"],
            "-r/--rollouts-per-example must be at least 1",
        ),
        (["eval", "gsm8k", "-m", "scripted:oracle", "--timeout", "0"], "--timeout must be a positive number"),
        (
            ["eval", "gsm8k", "-m", "scripted:oracle", "-a", '{"no_such_arg": 1}'],
            "does not accept argument(s) no_such_arg",
        ),
    ],
)
def test_errors_are_one_clear_line(rubric: Invoke, tmp_path: Path, args: list[str], message: str) -> None:
    proc = rubric(*args, cwd=tmp_path, env={"OPENAI_API_KEY": ""})
    assert proc.returncode != 0
    assert message in proc.stderr
    assert "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1


def test_existing_output_dir_needs_resume(rubric: Invoke, tmp_path: Path) -> None:
    out = tmp_path / "run"
    out.mkdir()
    (out / "results.jsonl").write_text("")
    proc = rubric("eval", "gsm8k", "-m", "scripted:oracle", "-o", str(out), cwd=tmp_path)
    assert proc.returncode != 0
    assert "already exists" in proc.stderr and "--resume" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_debug_shows_traceback(rubric: Invoke, tmp_path: Path) -> None:
    proc = rubric("--debug", "eval", "no-such-env", "-m", "scripted:oracle", cwd=tmp_path)
    assert proc.returncode != 0
    assert "Traceback" in proc.stderr


def test_errors_in_rollouts_are_said_and_fail_the_run_only_past_the_error_rate(
    rubric: Invoke, tmp_path: Path
) -> None:
    env_file = tmp_path / "broken.py"
    env_file.write_text(
        "from envs import MultiTurnEnv\n\n"
        "class Broken(MultiTurnEnv):\n"
        "    def env_response(self, rollout):\n"
        "        raise RuntimeError('feedback bug')\n\n"
        "def load_environment():\n"
        "    env = Broken([{'question': 'q', 'answer': 'a'}], lambda response: 1.0, max_turns=3, name='broken')\n"
        "    env.scripted_policies = {'echo': lambda messages, tools: 'hello'}\n"
        "    return env\n"
    )
    proc = rubric(
        "eval",
        str(env_file),
        "-m",
        "scripted:echo",
        "-o",
        str(tmp_path / "run"),
        "--no-progress",
        "--fail-on-error",
        "1",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert "ended with an error" in proc.stdout
    rollouts = read_rollouts(tmp_path / "run" / "results.jsonl")
    assert rollouts[0]["stop_reason"] == "error" and "feedback bug" in rollouts[0]["error"]
    # By default a run in which every rollout errored fails.
    again = rubric(
        "eval",
        str(env_file),
        "-m",
        "scripted:echo",
        "-o",
        str(tmp_path / "r2"),
        "--no-progress",
        cwd=tmp_path,
    )
    assert again.returncode == 1 and "1 of 1 rollouts errored (every rollout)" in again.stderr


@pytest.mark.slow
def test_help_starts_without_heavy_imports() -> None:
    code = (
        "import contextlib, io, sys, cli\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    assert cli.main(['eval', '--help']) == 0\n"
        "print('datasets' in sys.modules, 'openai' in sys.modules)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=Path(__file__).resolve().parents[2],
    )
    assert proc.stdout.strip() == "False False"


def _run_in_terminal(args: list[str], cwd: Path, timeout: float = 90) -> str:
    """Run `rubric` with a pseudo-terminal as stdout/stderr, as a person at a shell would."""
    import pty
    import select

    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [RUBRIC, *args],
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        stdout=follower,
        stderr=follower,
        env={**os.environ, "COLUMNS": "100", "TERM": "xterm"},
    )
    os.close(follower)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                data = os.read(leader, 65536)
            except OSError:  # the child closed the terminal
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    proc.wait(timeout=10)
    os.close(leader)
    assert proc.returncode == 0
    return b"".join(chunks).decode(errors="replace")


@pytest.mark.slow
@needs_script
def test_progress_bar_shows_on_a_terminal_only(rubric: Invoke, tmp_path: Path) -> None:
    shown = _run_in_terminal(
        ["eval", "gsm8k", "-m", "scripted:noisy", "-n", "30", "-o", str(tmp_path / "a")], tmp_path
    )
    assert "30/30 · " in shown and "rollouts/s · reward 0." in shown and "errors 0" in shown
    piped = rubric(
        "eval", "gsm8k", "-m", "scripted:noisy", "-n", "30", "-o", str(tmp_path / "b"), cwd=tmp_path
    )
    assert piped.returncode == 0 and "rollouts/s · reward" not in piped.stdout + piped.stderr
    quiet = _run_in_terminal(
        ["eval", "gsm8k", "-m", "scripted:noisy", "-n", "30", "-o", str(tmp_path / "c"), "--no-progress"],
        tmp_path,
    )
    assert "rollouts/s · reward" not in quiet and "mean reward" in quiet


def test_a_command_run_in_this_process_leaves_nothing_behind(rubric: Invoke, tmp_path: Path) -> None:
    """The `rubric` fixture puts back what a command changes: `eval ./PACKAGE` puts the folder
    first on sys.path and imports its module; cwd, the environment and the modules are this test's."""
    before = (os.getcwd(), list(sys.path), dict(os.environ))
    assert rubric("init", "left-env", cwd=tmp_path).returncode == 0
    done = rubric(
        "eval", "./left-env", "-m", "scripted:demo", "-n", "1", "-o", "run", "--no-progress",
        cwd=tmp_path, env={"RUBRIC_TEST_SET_BY_A_TEST": "1"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (os.getcwd(), list(sys.path), dict(os.environ)) == before
    assert not [name for name in sys.modules if name.startswith("left_env")]
