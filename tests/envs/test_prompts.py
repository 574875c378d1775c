"""Prompt formatting: templates, system prompts, given prompts, and rollout setup."""

from __future__ import annotations

import json

import pytest

from envs import Environment, SingleTurnEnv
from harness import Rollout


def exact(response: str, answer: str) -> float:
    return float(response.strip() == answer)


def roles(messages) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in messages]


def test_question_becomes_user_message() -> None:
    env = Environment([{"question": "2+2?", "answer": "4"}], exact)
    assert roles(env.format_prompt(env.get_dataset()[0])) == [("user", "2+2?")]


def test_static_system_prompt_comes_first() -> None:
    env = Environment([{"question": "2+2?"}], exact, system_prompt="Answer with a number.")
    assert roles(env.format_prompt(env.get_dataset()[0])) == [
        ("system", "Answer with a number."),
        ("user", "2+2?"),
    ]


def test_system_prompt_template_sees_columns_and_info() -> None:
    rows = [{"question": "q", "lang": "French", "info": {"style": "terse"}}]
    env = Environment(rows, exact, system_prompt="Reply in {{ lang }}, {{ info.style }}.")
    assert env.format_prompt(env.get_dataset()[0])[0].content == "Reply in French, terse."


def test_prompt_template_uses_any_column() -> None:
    rows = [{"question": "Capital of France?", "topic": "geography"}]
    env = Environment(rows, exact, prompt_template="[{{ topic }}] {{ question }}\nThink step by step.")
    assert (
        env.format_prompt(env.get_dataset()[0])[-1].content
        == "[geography] Capital of France?\nThink step by step."
    )


def test_prompt_column_as_text() -> None:
    env = Environment([{"prompt": "Say hi"}], exact, system_prompt="Be kind.")
    assert roles(env.format_prompt(env.get_dataset()[0])) == [("system", "Be kind."), ("user", "Say hi")]


def test_prompt_column_as_messages_keeps_its_own_system_message() -> None:
    prompt = [{"role": "system", "content": "own"}, {"role": "user", "content": "hello"}]
    env = Environment([{"prompt": prompt}], exact, system_prompt="ignored when the prompt has one")
    assert roles(env.format_prompt(env.get_dataset()[0])) == [("system", "own"), ("user", "hello")]


def test_prompt_wins_over_question_without_template() -> None:
    env = Environment([{"prompt": "P", "question": "Q"}], exact)
    assert roles(env.format_prompt(env.get_dataset()[0])) == [("user", "P")]


async def test_setup_rollout_fills_fields_and_carries_columns_into_info() -> None:
    rows = [
        {
            "id": "ex-7",
            "question": "2+2?",
            "answer": "4",
            "task": "math",
            "source": "gsm",
            "info": json.dumps({"unit": "none"}),
        }
    ]
    env = SingleTurnEnv(rows, exact, system_prompt="S")
    rollout = await env.setup_rollout(env.get_dataset()[0], rollout_index=3)
    assert isinstance(rollout, Rollout)
    assert (rollout.example_id, rollout.rollout_index, rollout.answer, rollout.task) == (
        "ex-7",
        3,
        "4",
        "math",
    )
    assert roles(rollout.prompt) == [("system", "S"), ("user", "2+2?")]
    assert rollout.info == {"unit": "none", "question": "2+2?", "source": "gsm"}
    assert rollout.completion == [] and rollout.state == {}


async def test_explicit_info_wins_over_a_column_of_the_same_name() -> None:
    env = Environment([{"question": "q", "source": "column", "info": {"source": "info"}}], exact)
    rollout = await env.setup_rollout(env.get_dataset()[0])
    assert rollout.info["source"] == "info"


async def test_example_id_is_stable_across_calls_and_shuffles() -> None:
    env = Environment([{"question": f"q{i}"} for i in range(6)], exact)
    ids_a = {row["question"]: row["example_id"] for row in env.get_dataset(seed=1)}
    ids_b = {row["question"]: row["example_id"] for row in env.get_dataset(seed=2)}
    assert ids_a == ids_b == {f"q{i}": i for i in range(6)}


async def test_setup_rollout_rejects_rows_without_example_id() -> None:
    env = Environment([{"question": "q"}], exact)
    with pytest.raises(ValueError, match="get_dataset"):
        await env.setup_rollout({"question": "q"})
