"""The python reference environment: its tool, the verified question set, and end-to-end
scripted runs (the sandbox itself: tests/test_sandbox.py)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import uuid
from pathlib import Path

import pytest

from envs.reference import _make_python_questions as make_python_questions
from envs.reference import _python_env as python_env
from envs.reference._data import REPO_DATASETS, read_jsonl
from envs.reference._sandbox import run_code
from harness import Message
from tests.harness.runtimes.conftest import DOCKER

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

# ----------------------------------------------------------------------------- environment


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
    results = await asyncio.gather(*(run_code(row["code"]) for row in rows))
    assert [r.output.strip() for r in results] == [row["answer"] for row in rows]


def test_known_answers():
    questions = {r["question"]: r["answer"] for r in read_jsonl(REPO_DATASETS / "python_questions.jsonl")}
    assert questions["How many prime numbers are less than 100000?"] == "9592"
    assert questions["What is the sum of the first 100 prime numbers?"] == "24133"


def test_oracle_scores_exactly_one_and_cleans_up():
    env = python_env.load_environment()
    rollouts = env.evaluate("scripted:oracle", num_examples=20, progress=False).rollouts
    assert len(rollouts) == 20 and all(r.error is None for r in rollouts)
    assert [r.reward for r in rollouts] == [1.0] * 20
    assert all(r.turns == 2 and r.scores["ran_code"] == 1.0 for r in rollouts)


def test_noisy_policy_scores_strictly_between_zero_and_one():
    env = python_env.load_environment()
    rollouts = env.evaluate("scripted:noisy", num_examples=20, progress=False).rollouts
    mean = sum(r.reward for r in rollouts) / len(rollouts)
    assert 0.0 < mean < 1.0
    assert {r.scores["ran_code"] for r in rollouts} == {0.0, 1.0}


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


@pytest.mark.docker
def test_rubric_eval_python_on_docker_end_to_end(tmp_path: Path):
    """`rubric eval python -a '{"runtime": "docker:IMAGE"}'`: every program runs in a fresh
    container (as nobody, no network), the oracle scores 1, and no container outlives the run."""
    out, run_id = tmp_path / "run", f"e2e-{uuid.uuid4().hex[:8]}"  # a run id no other session uses
    done = subprocess.run(
        ["rubric", "eval", "python", "-m", "scripted:oracle", "-n", "4", "--no-progress", "-o", str(out),
         "-a", json.dumps({"runtime": DOCKER})],
        capture_output=True, text=True, timeout=300, env={**os.environ, "RUBRIC_RUN_ID": run_id},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert [row["reward"] for row in rows] == [1.0] * 4
    assert f'"runtime": "{DOCKER}"' in (out / "metadata.json").read_text()  # recorded with the run
    listed = subprocess.run(["docker", "ps", "-aq", "--filter", f"label=rubric.run={run_id}"],
                            capture_output=True, text=True, check=True)  # fmt: skip
    assert listed.stdout == ""
