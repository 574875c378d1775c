"""The python reference environment: the sandbox's limits (wall clock, CPU, memory, output,
environment variables, child processes), per-rollout scratch directories, the verified
question set, and end-to-end scripted runs."""

from __future__ import annotations

import asyncio
import os
import time
from pathlib import Path

import pytest

from envs.reference import make_python_questions, python_env
from envs.reference.data import REPO_DATASETS, read_jsonl
from envs.reference.sandbox import SandboxLimits, run_code
from envs.reference.scripting import evaluate_with_policy
from harness import run_sync
from harness.types import Message

# ----------------------------------------------------------------------------- sandbox


async def test_sandbox_runs_code_in_its_workdir(tmp_path: Path):
    result = await run_code("import os\nprint(6 * 7)\nprint(os.getcwd())", tmp_path)
    assert result.output.split() == ["42", str(tmp_path)]
    assert result.returncode == 0 and not result.timed_out and not result.truncated
    assert result.render() == f"42\n{tmp_path}"
    assert (await run_code("x = 1", tmp_path)).render() == "(no output)"


async def test_sandbox_reports_errors_without_its_own_frames(tmp_path: Path):
    result = await run_code("def f():\n    return 1 / 0\nf()", tmp_path)
    text = result.render()
    assert "ZeroDivisionError: division by zero" in text and text.endswith("[exit code 1]")
    assert 'File "<cell>", line 3' in text and "exec(" not in text
    assert (await run_code("import sys; sys.exit(3)", tmp_path)).render() == "[exit code 3]"


async def test_timeout_kills_an_infinite_loop_and_its_children(tmp_path: Path):
    code = (
        "import subprocess, sys\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'])\n"
        "open('child.pid', 'w').write(str(child.pid))\n"
        "print('started', flush=True)\n"
        "while True:\n    pass\n"
    )
    started = time.monotonic()
    result = await run_code(code, tmp_path, SandboxLimits(timeout=1.5, cpu_seconds=30))
    assert time.monotonic() - started < 6
    assert result.timed_out and result.output.startswith("started")  # partial output is kept
    assert "[timed out after 1.5 s; the process was killed]" in result.render()
    pid = int((tmp_path / "child.pid").read_text())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(pid):
        await asyncio.sleep(0.05)
    assert not _alive(pid), "the grandchild outlived the timeout"


async def test_background_processes_do_not_outlive_the_call(tmp_path: Path):
    code = (
        "import subprocess, sys\n"
        "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],\n"
        "                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print(child.pid)\n"
    )
    result = await run_code(code, tmp_path, SandboxLimits(timeout=5))
    assert result.returncode == 0 and not result.timed_out
    pid = int(result.output)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and _alive(pid):
        await asyncio.sleep(0.05)
    assert not _alive(pid)


def _alive(pid: int) -> bool:
    """True while `pid` runs (a zombie waiting to be reaped counts as dead)."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in status


async def test_cpu_limit_kills_a_busy_loop(tmp_path: Path):
    result = await run_code("while True:\n    pass", tmp_path, SandboxLimits(timeout=20, cpu_seconds=1))
    assert not result.timed_out and result.returncode is not None and result.returncode < 0
    assert "SIGXCPU" in result.render() or "SIGKILL" in result.render()


async def test_memory_limit(tmp_path: Path):
    code = "data = bytearray(1024 * 1024 * 1024)\nprint('allocated')"
    limited = await run_code(code, tmp_path, SandboxLimits(memory_mb=256))
    assert "MemoryError" in limited.output and "allocated" not in limited.output
    assert limited.returncode == 1
    small = await run_code(
        "data = bytearray(16 * 1024 * 1024)\nprint('ok')", tmp_path, SandboxLimits(memory_mb=256)
    )
    assert small.output.strip() == "ok"


async def test_output_is_truncated_and_says_so(tmp_path: Path):
    result = await run_code("print('x' * 100000)", tmp_path, SandboxLimits(output_limit=100))
    assert result.truncated and result.total_bytes == 100001 and result.output == "x" * 100
    assert result.render().endswith("[output truncated: showing the first 100 of 100001 bytes]")


async def test_child_does_not_see_our_environment(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-do-not-leak")
    result = await run_code("import os; print(sorted(os.environ.items()))", tmp_path)
    assert "sk-do-not-leak" not in result.output and "OPENAI_API_KEY" not in result.output


async def test_runs_are_concurrent(tmp_path: Path):
    started = time.monotonic()
    results = await asyncio.gather(
        *(run_code("import time; time.sleep(1); print('done')", tmp_path) for _ in range(4))
    )
    assert [r.output.strip() for r in results] == ["done"] * 4
    assert time.monotonic() - started < 3.0  # four 1 s sleeps overlap


def test_bad_limits_and_workdir(tmp_path: Path):
    with pytest.raises(ValueError, match="timeout must be > 0"):
        SandboxLimits(timeout=0)
    with pytest.raises(ValueError, match="output_limit"):
        SandboxLimits(output_limit=0)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        run_sync(run_code("print(1)", tmp_path / "missing"))


# ----------------------------------------------------------------------------- environment


async def test_each_rollout_gets_its_own_scratch_dir_removed_at_scoring():
    env = python_env.load_environment(num_examples=2)
    first, second = [await env.setup_rollout(row) for row in env.get_dataset()]
    a, b = Path(first.state["scratch_dir"]), Path(second.state["scratch_dir"])
    assert a != b and a.is_dir() and b.is_dir() and a.parent == b.parent == Path(env.scratch_root)
    assert await env.run_python("open('note.txt', 'w').write('kept')", first.state) == "(no output)"
    assert await env.run_python("print(open('note.txt').read())", first.state) == "kept"  # files persist
    assert "FileNotFoundError" in await env.run_python("open('note.txt')", second.state)  # and stay private
    first.completion.append(Message(role="assistant", content="<answer>0</answer>"))
    await env.score(first)
    assert not a.exists() and b.exists()
    assert "scratch directory is gone" in await env.run_python("print(1)", first.state)
    env.close()
    assert not Path(env.scratch_root).exists()


async def test_tool_call_through_the_environment():
    env = python_env.load_environment(num_examples=1, timeout=2)
    rollout = await env.setup_rollout(env.get_dataset()[0])
    rollout.completion.append(
        Message.model_validate(
            {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": "c1",
                        "type": "function",
                        "function": {"name": "run_python", "arguments": '{"code": "print(2**10)"}'},
                    }
                ],
            }
        )
    )
    [reply] = await env.respond(rollout)
    assert reply.role == "tool" and reply.text == "1024" and rollout.state["python_runs"] == 1
    schema = env.tool_schemas[0]["function"]
    assert schema["name"] == "run_python" and list(schema["parameters"]["properties"]) == ["code"]
    assert "2 s wall clock" in schema["description"]
    env.close()


@pytest.mark.parametrize(
    ("reply", "reward"),
    [
        ("It is <answer>1,024</answer>.", 1.0),
        ("Printed 1024", 1.0),  # no tags: the last number
        ("<answer>1023</answer> (not 1024)", 0.0),  # the tag wins over later numbers
        ("no idea", 0.0),
    ],
)
def test_correctness_reward(reply, reward):
    assert python_env.correct(reply, "1024") == reward


def test_question_generator_is_deterministic_and_matches_the_bundled_file(tmp_path: Path):
    out = tmp_path / "questions.jsonl"
    make_python_questions.main(["--seed", "0", "--n", "30", "--out", str(out)])
    assert out.read_bytes() == (REPO_DATASETS / "python_questions.jsonl").read_bytes()
    assert make_python_questions.generate(10, seed=5) != make_python_questions.generate(10, seed=6)


async def test_bundled_reference_code_prints_the_answer_in_the_sandbox(tmp_path: Path):
    rows = read_jsonl(REPO_DATASETS / "python_questions.jsonl")
    assert len(rows) == 30 and len({r["question"] for r in rows}) == 30
    results = await asyncio.gather(*(run_code(row["code"], tmp_path) for row in rows))
    assert [r.output.strip() for r in results] == [row["answer"] for row in rows]


def test_known_answers():
    questions = {r["question"]: r["answer"] for r in read_jsonl(REPO_DATASETS / "python_questions.jsonl")}
    assert questions["How many prime numbers are less than 100000?"] == "9592"
    assert questions["What is the sum of the first 100 prime numbers?"] == "24133"


def test_oracle_scores_exactly_one_and_cleans_up():
    env = python_env.load_environment()
    rollouts = evaluate_with_policy(env, "oracle", num_examples=20, progress=False).rollouts
    assert len(rollouts) == 20 and all(r.error is None for r in rollouts)
    assert [r.reward for r in rollouts] == [1.0] * 20
    assert all(r.turns == 2 and r.scores["ran_code"] == 1.0 for r in rollouts)
    assert os.listdir(env.scratch_root) == []  # every rollout's scratch dir was removed
    env.close()


def test_noisy_policy_scores_strictly_between_zero_and_one():
    env = python_env.load_environment()
    rollouts = evaluate_with_policy(env, "noisy", num_examples=20, progress=False).rollouts
    mean = sum(r.reward for r in rollouts) / len(rollouts)
    assert 0.0 < mean < 1.0
    assert {r.scores["ran_code"] for r in rollouts} == {0.0, 1.0}
    env.close()


def test_bad_arguments_fail_at_load_time(tmp_path: Path):
    with pytest.raises(ValueError, match="num_examples must be a positive integer"):
        python_env.load_environment(num_examples=-1)
    with pytest.raises(ValueError, match="timeout must be > 0"):
        python_env.load_environment(timeout=0)
    rows = tmp_path / "q.jsonl"
    rows.write_text('{"question": "2 + 2?"}\n')
    with pytest.raises(ValueError, match=r"lacks \['answer'\]"):
        python_env.load_environment(dataset=rows)


def test_policies_need_reference_code():
    policy = python_env.make_policies([{"question": "2 + 2?", "answer": "4"}])["oracle"]
    with pytest.raises(LookupError, match="has no reference 'code'"):
        policy([{"role": "user", "content": "2 + 2?"}], None)
