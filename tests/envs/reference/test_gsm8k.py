"""The gsm8k reference environment: answer parsing, reward, the problem generator, and
end-to-end runs of its scripted policies over loopback HTTP."""

from __future__ import annotations

import json
import re
from decimal import Decimal
from pathlib import Path

import pytest

from envs.reference import _gsm8k as gsm8k
from envs.reference import _make_gsm8k as make_gsm8k
from envs.reference._data import REPO_DATASETS, read_jsonl


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("$1,234.50 in total", Decimal("1234.50")),
        ("\u22125 degrees", Decimal("-5")),
        ("42", Decimal("42")),
        ("no number here", None),
        (None, None),
    ],
)
def test_parse_number(text, expected):
    assert gsm8k.parse_number(text) == expected


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("3 + 4 = 7\n#### 7", Decimal("7")),
        ("#### 1,000 dollars", Decimal("1000")),
        ("first 12, then 30. The answer is 30.", Decimal("30")),  # no marker: the last number
        ("<think>#### 3</think>so it is\n#### 4", Decimal("4")),  # drafts in think blocks do not count
        ("#### none", None),
        ("", None),
    ],
)
def test_final_answer(reply, expected):
    assert gsm8k.final_answer(reply) == expected


def test_split_solution_and_its_errors():
    assert gsm8k.split_solution("2 * 3 = 6\n#### 6") == ("2 * 3 = 6", "6")
    assert gsm8k.split_solution("x\n#### 1,500") == ("x", "1500")
    with pytest.raises(ValueError, match="must end with '#### <number>'"):
        gsm8k.split_solution("just 6")
    with pytest.raises(ValueError, match="no number after"):
        gsm8k.split_solution("reasoning #### lots")


@pytest.mark.parametrize(
    ("reply", "reward"),
    [
        ("6 * 7 = 42\n#### 42", 1.0),
        ("6 * 7 = 42, so the answer is 42.", 0.8),  # right, format missed
        ("6 * 7 = 41\n#### 41", 0.2),  # format kept, answer wrong
        ("I don't know", 0.0),
    ],
)
def test_rubric_weights_correctness_over_format(reply, reward):
    rubric = gsm8k.make_rubric()
    rollout = {"completion": reply, "answer": "42"}
    assert rubric(rollout) == pytest.approx(reward)


def test_rubric_records_each_node():
    from harness import Rollout

    rollout = Rollout.model_validate({"completion": "#### 5", "answer": "6"})
    gsm8k.make_rubric()(rollout)
    assert rollout.scores == {"correct": 0.0, "format": 1.0}


def test_generator_is_deterministic_and_matches_the_bundled_file(tmp_path: Path):
    assert make_gsm8k.generate(30, seed=3) == make_gsm8k.generate(30, seed=3)
    assert make_gsm8k.generate(30, seed=3) != make_gsm8k.generate(30, seed=4)
    out = tmp_path / "gsm8k.jsonl"
    make_gsm8k.main(["--seed", "0", "--n", "200", "--out", str(out)])
    assert out.read_bytes() == (REPO_DATASETS / "gsm8k_synthetic.jsonl").read_bytes()


def test_generated_reasoning_is_arithmetically_right():
    rows = make_gsm8k.generate(200, seed=0)
    assert len({row["question"] for row in rows}) == 200
    assert len({row["id"] for row in rows}) == 200
    checked = 0
    for row in rows:
        reasoning, number = gsm8k.split_solution(row["answer"])
        for lhs, rhs in re.findall(r"(\d+(?: [-+*/] \d+)+) = (\d+)", reasoning):
            assert eval(lhs) == int(rhs), (row["id"], lhs, rhs)  # digits and operators only
            checked += 1
        last = re.findall(r"= (\d+)", reasoning)[-1]
        assert last == number, row["id"]  # the final step is the answer
    assert checked > 400


def test_load_rows_from_a_local_file_and_bad_rows(tmp_path: Path):
    good = tmp_path / "mine.jsonl"
    good.write_text(json.dumps({"question": "1 + 1?", "answer": "1 + 1 = 2\n#### 2"}) + "\n")
    rows = gsm8k.load_rows(good)
    assert rows == [{"id": "gsm8k-0", "question": "1 + 1?", "answer": "2", "solution": "1 + 1 = 2"}]
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps({"problem": "1 + 1?", "answer": "#### 2"}) + "\n")
    with pytest.raises(ValueError, match=r"lacks \['question'\]"):
        gsm8k.load_rows(bad)


def test_bundled_environment_shape():
    env = gsm8k.load_environment(num_examples=5)
    assert env.name == "gsm8k" and env.max_turns == 1 and len(env.dataset) == 5
    assert set(env.scripted_policies) == {"oracle", "noisy"}
    assert len(read_jsonl(REPO_DATASETS / "gsm8k_synthetic.jsonl")) == 200


def test_oracle_scores_exactly_one():
    env = gsm8k.load_environment()
    results = env.evaluate("scripted:oracle", num_examples=20, progress=False)
    assert len(results.rollouts) == 20
    assert all(r.error is None and r.stop_reason == "completed" for r in results.rollouts)
    assert [r.reward for r in results.rollouts] == [1.0] * 20
    assert all(r.response.endswith(f"#### {r.answer}") for r in results.rollouts)


def test_noisy_policy_scores_strictly_between_zero_and_one():
    env = gsm8k.load_environment()
    rewards = [r.reward for r in env.evaluate("scripted:noisy", num_examples=20, progress=False).rollouts]
    mean = sum(rewards) / len(rewards)
    assert 0.0 < mean < 1.0
    assert {0.0, 1.0} <= set(rewards)  # both outright failures and successes happen
    assert rewards == [
        r.reward for r in env.evaluate("scripted:noisy", num_examples=20, progress=False).rollouts
    ]  # seeded: reproducible


def test_policies_refuse_unknown_questions():
    policies = gsm8k.make_policies([{"question": "What is 2 + 2?", "answer": "4", "solution": "2 + 2 = 4"}])
    assert policies["oracle"]([{"role": "user", "content": "What is 2 + 2?"}], None) == "2 + 2 = 4\n#### 4"
    with pytest.raises(LookupError, match="no dataset row"):
        policies["oracle"]([{"role": "user", "content": "Something else"}], None)


def test_num_examples_must_be_positive():
    with pytest.raises(ValueError, match="num_examples must be a positive integer"):
        gsm8k.load_environment(num_examples=0)
