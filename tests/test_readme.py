"""README.md's and the docs/ pages' examples run as written (a block moved from README into docs/ is found
there by `code_block`), and README's test command is the one CI runs."""

from __future__ import annotations

import contextlib
import io
import os
import shlex
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from harness.proxy._session import DEFAULT_MAX_REQUEST_BYTES
from rubrics._judge.labels import MAX_FILE_BYTES, MAX_LINE_BYTES
from tests.helpers.docs import code_block, docs_pages, documented, readme

ROOT = Path(__file__).resolve().parents[1]


def test_first_rubric_example_prints_what_readme_says() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code_block("python", "from rubrics import Gate"), "<README>", "exec"), {})
    lines = out.getvalue().splitlines()
    assert lines[0] == "WeightedSum("  # print(rubric) shows the tree
    assert "  (correct) weight=0.8: reward(correct)" in lines
    assert "1.0" in lines
    assert lines[-1] == "0.2 {'correct': 0.0, 'concise.concise': 1.0, 'concise': 1.0}"
    assert f"The last line prints `{lines[-1]}`" in readme()


def test_judge_example_runs_as_written_offline(monkeypatch: pytest.MonkeyPatch) -> None:
    from rubrics.judges import JudgeCache

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # the stand-in judge needs no key
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    JudgeCache.shared.clear()
    out = io.StringIO()
    namespace: dict[str, object] = {}
    with contextlib.redirect_stdout(out):
        exec(compile(code_block("python", "def judge_model(messages, tools)"), "<docs>", "exec"), namespace)
    rubric = namespace["rubric"]
    assert [name for name, _ in rubric.named_children()] == ["correct", "helpful"]  # type: ignore[attr-defined]
    assert "model='judge', parse='number', score_range=(0, 10)" in repr(rubric)
    printed = out.getvalue()
    assert printed.startswith("0.94 {'correct': 1.0, 'helpful': 0.8}")
    assert f"It prints `{printed.split(' prompt_tokens=')[0]}`" in documented()
    assert "judge_usage" not in printed and "prompt_tokens=" in printed
    rollout = namespace["rollout"]
    assert rollout.judge_usage.prompt_tokens > 0 and rollout.usage.prompt_tokens == 0  # type: ignore[attr-defined]
    assert "<question>What is 6 x 7?</question>" in rollout.score_details["helpful"]["prompt"]  # type: ignore[attr-defined]
    assert 'model="gpt-4.1-mini"` with `OPENAI_API_KEY`' in documented()  # how to use a real judge


@pytest.mark.serve
@pytest.mark.slow
def test_rubric_endpoint_serves_the_stand_in_judge_of_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rubrics import LLMJudge
    from tests.helpers.endpoints import free_port
    from tests.helpers.processes import serving

    (tmp_path / "judge_env.py").write_text(code_block("python", "an environment only to carry the policy"))
    line = code_block("bash", "rubric endpoint --policy judge_env.py:judge").split("#")
    command, comment = shlex.split(line[0]), line[1]
    assert command[-2:] == ["--port", "8001"] and 'base_url="http://127.0.0.1:8001/v1"' in comment
    port = free_port()  # 8001 may be taken here
    monkeypatch.chdir(tmp_path)  # the server runs where the file is
    rubric = shutil.which("rubric") or "rubric"
    with serving([rubric, *command[1:-1], str(port)], port, timeout=60) as server:
        judge = LLMJudge(
            "Rate {{ response }}. End with 'Score: N'.",
            model="judge",
            base_url=f"http://127.0.0.1:{port}/v1",
            score_range=(0, 10),
            cache=False,
        )
        assert judge({"completion": "42"}) == 0.8
    assert "serving judge_env.py:judge at" in server.stop()[0]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("rubric") is None, reason="the rubric console script is not installed")
def test_own_environment_example_runs_with_the_cli(tmp_path: Path) -> None:
    (tmp_path / "my_env.py").write_text(code_block("python", "def load_environment(n: int = 20)"))
    command = (
        code_block("bash", "rubric eval my_env.py -m scripted:demo").splitlines()[0].split("#")[0].split()
    )
    proc = subprocess.run(
        [shutil.which("rubric"), *command[1:], "--no-progress"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "1 ± 0  (over" in proc.stdout and "used_tool" in proc.stdout


def test_readme_test_command_is_the_ci_command_and_provisions_the_suite() -> None:
    """README's test command is CI's last command, and it provisions every area the tests mark
    (issue 47.2: alone on a fresh machine it must pass the suite)."""
    command = code_block("bash", "scripts/test").strip()
    assert command == "scripts/test"
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == command
    test = (ROOT / "scripts" / "test").read_text()
    assert "scripts/provision\n" in test and 'exec python -m pytest -n auto --dist worksteal "$@"' in test
    provision = (ROOT / "scripts" / "provision").read_text()
    for needed in (
        "bubblewrap",
        "chromium",
        '".[test,ray,trl,docs]"',
        '"verl==0.9.1"',
        ".ci/docker-up",
        ".ci/agents-up",
    ):
        assert needed in provision, f"scripts/provision does not install {needed}"


def test_readme_documents_every_cli_command() -> None:
    import cli

    for name in cli.rubric.commands:
        assert f"`rubric {name}" in documented(), f"neither README nor docs/ document `rubric {name}`"


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("rubric") is None, reason="the rubric console script is not installed")
def test_quick_start_command_runs_as_written(tmp_path: Path) -> None:
    install_and_run = code_block("bash", "scripted:oracle\n").strip()
    command = install_and_run.split("&&")[-1].split()
    assert command[:2] == ["rubric", "eval"]
    proc = subprocess.run(
        [shutil.which("rubric"), *command[1:]],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
        env={**os.environ, "COLUMNS": "200"},
    )
    assert proc.returncode == 0, proc.stderr
    assert "mean reward" in proc.stdout and "1 ± 0  (over 200 scored)" in proc.stdout
    assert "Results written to runs/gsm8k--scripted-oracle--" in proc.stdout


@pytest.mark.timeout(300)
def test_train_with_trl_blocks_run_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # nothing is downloaded
    out = io.StringIO()
    namespace: dict[str, object] = {}
    with contextlib.redirect_stdout(out):
        exec(
            compile(code_block("python", "reward_fn = env.rubric.as_trl_reward()"), "<README>", "exec"),
            namespace,
        )
    assert out.getvalue().splitlines()[0] == "[1.0]"
    assert "'environment_factory'" not in out.getvalue() and "'Answer briefly.'" in out.getvalue()
    exec(compile(code_block("python", "model = Qwen2ForCausalLM(config)"), "<docs>", "exec"), namespace)
    assert sum(p.numel() for p in namespace["model"].parameters()) < 50_000  # type: ignore[attr-defined]
    exec(compile(code_block("python", "GRPOTrainer(model=model"), "<docs>", "exec"), namespace)
    trainer = namespace["trainer"]
    assert trainer.state.global_step == 2  # type: ignore[attr-defined]
    # Random weights say anything: each node's batch mean is logged, whatever it is.
    logged = [entry for entry in trainer.state.log_history if "rubric/correct" in entry]  # type: ignore[attr-defined]
    assert logged and all(0 <= entry["rubric/correct"] <= 1 for entry in logged)


def test_train_with_verl_block_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(
            compile(code_block("python", "reward_fn = env.rubric.as_trl_reward()"), "<README>", "exec"),
            namespace,
        )
        exec(compile(code_block("python", "spec = env.verl()"), "<README>", "exec"), namespace)
    assert out.getvalue().splitlines()[-1].startswith("1.0 1.0 ['reward.reward_manager.source=register'")
    assert (tmp_path / "train.parquet").stat().st_size > 0


def test_per_turn_example_prints_what_readme_says() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code_block("python", "reward(closer, per_turn=True)"), "<README>", "exec"), {})
    assert out.getvalue().splitlines() == [
        "0.90625 {'closer': [0.625, 1.0], '': [0.3125, 1.0]}",
        "[0.453125, 0.90625]",
    ]


@pytest.mark.slow
@pytest.mark.interop
def test_mcp_example_runs_a_server_written_with_the_sdk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "calculator_server.py").write_text(code_block("python", 'MCPServer("calculator")'))
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    namespace: dict[str, object] = {}
    with contextlib.redirect_stdout(out):
        exec(compile(code_block("python", "mcp_server([sys.executable"), "<README>", "exec"), namespace)
    assert out.getvalue().splitlines()[-1] == "['add'] 1.0"
    assert "print([t.name for t in env.tools], results[0].reward)  # ['add'] 1.0" in documented()


def test_calibration_example_runs_offline_and_prints_what_readme_says(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rubrics.judges import JudgeCache

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # the judge's local endpoint needs no key
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    JudgeCache.shared.clear()
    out = io.StringIO()
    namespace: dict[str, Any] = {}
    with contextlib.redirect_stdout(out):
        exec(compile(code_block("python", "calibrate(judge, labels"), "<README>", "exec"), namespace)
    first, second = out.getvalue().splitlines()[:2]
    assert first == "0.75 0.5 ((1, 1), (0, 2))"
    assert f"The first line printed is `{first}`" in documented()
    assert second.startswith(
        "Calibration(judge='correctness', kind='binary', rows=4, scored=4, accuracy=0.75"
    )
    report = namespace["report"]
    assert [p.name for p in report.probes] == ["verbosity", "position"]
    assert report.num_calls == 4 and report.cost_per_call is not None and report.cost_per_call > 0


def test_verifiers_example_runs_as_written() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code_block("python", "from envs import from_verifiers"), "<README>", "exec"), {})
    lines = out.getvalue().splitlines()
    assert lines[1:4] == [
        "  (correct) weight=0.8: reward(correct, async)",
        "  (short) weight=0.2: reward(short, async)",
        "  (length) weight=0: reward(length, async)",
    ]
    assert lines[-1] == "[1.0, 1.0, 0.8] {'correct': 1.0, 'short': 0.0, 'length': 3.0}"
    assert f"# {lines[-1]}" in documented()


@pytest.mark.slow
@pytest.mark.interop
def test_openenv_client_example_runs_a_server_written_with_openenv(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "counter_env.py").write_text(code_block("python", "class CountEnvironment(Environment)"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # the scripted policy needs no key
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code_block("python", 'from_openenv(\n    "counter_env:app"'), "<README>", "exec"), {})
    lines = out.getvalue().splitlines()
    assert lines == ["count", "done {'env': 1.5, 'few_steps': 1.0} [0.5, 0.5, 0.5]"]
    assert f'print(r.stop_reason, r.scores, r.turn_scores["env"])  # {lines[1]}' in documented()


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_openenv_serve_example_plays_python_with_openenv_client(tmp_path: Path) -> None:
    import socket
    import time

    from tests.helpers.endpoints import free_port
    from tests.helpers.processes import RUBRIC

    port = free_port()
    command = code_block("bash", "rubric serve python").split()
    assert command[:3] == ["rubric", "serve", "python"]
    server = subprocess.Popen([str(RUBRIC), *command[1:-1], str(port)], stdout=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "rubric serve did not start"
                time.sleep(0.1)
        block = code_block("python", "GenericEnvClient(base_url=").replace(":8000", f":{port}")
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(block, "<README>", "exec"), {"__name__": "readme"})
    finally:
        server.terminate()
        server.wait(20)
    lines = out.getvalue().splitlines()
    assert lines[:2] == ["['run_python']", "False 42"]
    assert lines[2:] == ["True completed ['correct', 'ran_code']"]
    assert f"# {lines[2]}  (and final.reward" in documented()


def test_comparing_within_a_group_example_prints_what_readme_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)  # the stand-in judge needs no key
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    out = io.StringIO()
    namespace: dict[str, Any] = {}
    with contextlib.redirect_stdout(out):
        exec(compile(code_block("python", "def rank_model(messages, tools)"), "<docs>", "exec"), namespace)
    lines = out.getvalue().splitlines()
    assert f"The first line prints `{lines[0]}`" in documented()
    assert lines[1].startswith("'The answer is 42.'  0.15") and lines[2].startswith(
        "'41'                 0.15"
    )
    assert namespace["endpoint"].stats.requests == 2  # one group, two orders


def test_pairwise_example_prints_what_its_comment_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    block = code_block("python", "def pair_model(messages, tools)")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(block, "<docs>", "exec"), {})
    printed = out.getvalue().strip()
    assert printed == "[1.0, 0.5, 0.0] 6"
    assert f"# {printed}\n" in block


def test_capture_proxy_example_prints_what_readme_says() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code_block("python", 'model_aliases=["gpt-5"]'), "<README>", "exec"), {})
    printed = out.getvalue().strip()
    assert printed == "responses ['user'] '4' prompt_tokens=3 completion_tokens=1"
    assert f"It prints `{printed}`" in documented()


@pytest.mark.slow
def test_the_wordle_run_then_score_lines_work_outside_a_terminal(tmp_path: Path) -> None:
    block = code_block("bash", "rubric score runs/wordle").splitlines()
    lines = [
        next(line for line in block if line.startswith(start))
        for start in ("rubric eval wordle", "rubric score runs/wordle ")
    ]
    for line in lines:  # stdin is not a terminal: nothing can be confirmed, what to pass is on the line
        command = shlex.split(line.split("#")[0])
        proc = subprocess.run(
            [
                shutil.which("rubric") or "rubric",
                *command[1:],
                *(["--no-progress"] if "eval" in command else []),
            ],
            cwd=tmp_path,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "COLUMNS": "200"},
        )
        assert proc.returncode == 0, f"{line}: {proc.stderr}"
    assert list((tmp_path / "runs" / "wordle").glob("results.rescored-*.jsonl"))


def test_the_security_table_states_the_caps_and_the_resume_rule() -> None:
    table = docs_pages()["guides/security.md"]
    labels = next(row for row in table.splitlines() if "**labels file**" in row)
    assert f"{MAX_LINE_BYTES // 2**20} MiB a line or {MAX_FILE_BYTES // 2**20} MiB in all" in labels
    results = next(row for row in table.splitlines() if "**results folder**" in row)
    assert "send your key to its recorded endpoint" in results and "`-b URL`" in results
    proxy = next(row for row in table.splitlines() if "**agent's model calls**" in row)
    assert f"`max_request_bytes` ({DEFAULT_MAX_REQUEST_BYTES // 2**20} MiB by default)" in proxy
    assert "pass a budget by sending calls at once" in proxy and '`"forged": true`' in proxy
