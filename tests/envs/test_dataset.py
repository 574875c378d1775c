"""Dataset sources, column mapping, normalisation and construction-time validation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from datasets import Dataset, DatasetDict
from envs import Environment
from harness import Message

ROWS = [
    {"question": "1+1?", "answer": "2", "difficulty": "easy"},
    {"question": "2+3?", "answer": "5", "difficulty": "easy"},
    {"question": "7*6?", "answer": "42", "difficulty": "hard"},
]


def exact(response: str, answer: str) -> float:
    return float(response.strip() == answer)


def by_difficulty(response: str, difficulty: str) -> float:
    return 1.0 if difficulty == "easy" else 0.5


def make(dataset=ROWS, **kwargs) -> Environment:
    return Environment(dataset, exact, **kwargs)


def questions(env: Environment, **kwargs) -> list[str]:
    return list(env.get_dataset(**kwargs)["question"])


# ---------------------------------------------------------------- sources


def test_list_of_dicts() -> None:
    env = make()
    assert questions(env) == ["1+1?", "2+3?", "7*6?"]


def test_hf_dataset() -> None:
    env = make(Dataset.from_list(ROWS))
    assert questions(env) == ["1+1?", "2+3?", "7*6?"]


def test_dataset_dict_with_split() -> None:
    dd = DatasetDict(train=Dataset.from_list(ROWS), test=Dataset.from_list(ROWS[:1]))
    assert questions(make(dd, split="test")) == ["1+1?"]
    assert questions(make(dd, split="train")) == ["1+1?", "2+3?", "7*6?"]


def test_dataset_dict_single_split_needs_no_split() -> None:
    assert len(make(DatasetDict(only=Dataset.from_list(ROWS))).get_dataset()) == 3


def test_dataset_dict_ambiguous_lists_splits() -> None:
    dd = DatasetDict(train=Dataset.from_list(ROWS), test=Dataset.from_list(ROWS))
    with pytest.raises(ValueError, match="several splits") as err:
        make(dd)
    assert "test, train" in str(err.value) and "split=" in str(err.value)


def test_dataset_dict_unknown_split_lists_splits() -> None:
    dd = DatasetDict(train=Dataset.from_list(ROWS), test=Dataset.from_list(ROWS))
    with pytest.raises(KeyError, match="validation") as err:
        make(dd, split="validation")
    assert "test, train" in str(err.value)


def test_jsonl_file(tmp_path: Path) -> None:
    path = tmp_path / "data.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ROWS))
    assert questions(make(str(path))) == ["1+1?", "2+3?", "7*6?"]


def test_json_array_file(tmp_path: Path) -> None:
    path = tmp_path / "data.json"
    path.write_text(json.dumps(ROWS))
    assert questions(make(path)) == ["1+1?", "2+3?", "7*6?"]


def test_csv_file(tmp_path: Path) -> None:
    path = tmp_path / "data.csv"
    path.write_text("question,answer,difficulty\n1+1?,2,easy\n7*6?,42,hard\n")
    env = make(path)
    rows = list(env.get_dataset())
    assert [r["question"] for r in rows] == ["1+1?", "7*6?"]
    assert [str(r["answer"]) for r in rows] == ["2", "42"]


def test_parquet_file(tmp_path: Path) -> None:
    path = tmp_path / "data.parquet"
    Dataset.from_list(ROWS).to_parquet(str(path))
    assert questions(make(path)) == ["1+1?", "2+3?", "7*6?"]


def test_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="nope.jsonl"):
        make(str(tmp_path / "nope.jsonl"))


def test_unsupported_extension_lists_formats(tmp_path: Path) -> None:
    path = tmp_path / "data.txt"
    path.write_text("hello")
    with pytest.raises(ValueError, match=r"\.txt") as err:
        make(path)
    assert ".jsonl" in str(err.value) and ".parquet" in str(err.value)


def test_wrong_source_type() -> None:
    with pytest.raises(TypeError, match="list of row dicts"):
        make(42)


def test_row_that_is_not_a_dict() -> None:
    with pytest.raises(TypeError, match=r"dataset\[1\]"):
        make([{"question": "a"}, "b"])


def test_empty_list_rejected() -> None:
    with pytest.raises(ValueError, match="empty"):
        make([])


# ---------------------------------------------------------------- normalisation


def test_standard_columns_added_and_example_id_is_row_index() -> None:
    rows = list(make([{"question": "a"}, {"question": "b"}]).get_dataset())
    assert [r["example_id"] for r in rows] == [0, 1]
    assert all(r["answer"] is None and r["task"] is None and r["info"] == {} for r in rows)


def test_id_column_becomes_example_id() -> None:
    env = make([{"id": "x-1", "question": "a"}, {"id": "x-2", "question": "b"}])
    assert list(env.get_dataset()["example_id"]) == ["x-1", "x-2"]


def test_duplicate_ids_rejected() -> None:
    with pytest.raises(ValueError, match="duplicate id 'x'"):
        make([{"id": "x", "question": "a"}, {"id": "x", "question": "b"}])


def test_info_as_json_string_is_parsed() -> None:
    env = make([{"question": "a", "info": json.dumps({"unit": "cm", "tolerance": 0.5})}])
    assert env.get_dataset()[0]["info"] == {"unit": "cm", "tolerance": 0.5}


async def test_info_with_disagreeing_types_still_reaches_rollouts() -> None:
    env = make([{"question": "a", "info": '{"k": 1}'}, {"question": "b", "info": '{"k": "text"}'}])
    rollouts = [await env.setup_rollout(row) for row in env.get_dataset()]
    assert [r.info["k"] for r in rollouts] == [1, "text"]


def test_invalid_info_json_names_row() -> None:
    with pytest.raises(ValueError, match="row 1: info is a string but not valid JSON"):
        make([{"question": "a", "info": "{}"}, {"question": "b", "info": "{oops"}])


def test_columns_mapping_renames() -> None:
    env = make([{"problem": "p1", "solution": "s1"}], columns={"question": "problem", "answer": "solution"})
    row = env.get_dataset()[0]
    assert row["question"] == "p1" and row["answer"] == "s1"
    assert "problem" not in row


def test_columns_mapping_unknown_source_lists_columns() -> None:
    with pytest.raises(ValueError, match="no column 'problm'") as err:
        make([{"problem": "p", "solution": "s"}], columns={"question": "problm"})
    assert "problem, solution" in str(err.value)


# ---------------------------------------------------------------- get_dataset


def test_get_dataset_n_and_seed_are_reproducible_and_keep_ids() -> None:
    env = make([{"question": f"q{i}"} for i in range(20)])
    first = env.get_dataset(n=5, seed=3)
    again = env.get_dataset(n=5, seed=3)
    assert len(first) == 5
    assert list(first["example_id"]) == list(again["example_id"])
    assert list(first["example_id"]) != [0, 1, 2, 3, 4]
    assert all(f"q{row['example_id']}" == row["question"] for row in first)
    assert list(env.get_dataset(n=5)["example_id"]) == [0, 1, 2, 3, 4]


def test_get_dataset_n_larger_than_dataset() -> None:
    assert len(make().get_dataset(n=100)) == 3


def test_eval_split_falls_back_to_dataset_and_uses_eval_dataset() -> None:
    env = make()
    assert questions(env, split="eval") == questions(env, split="train")
    env = make(eval_dataset=[{"question": "held out", "answer": "x", "difficulty": "hard"}])
    assert questions(env) == ["held out"]
    assert questions(env, split="train") == ["1+1?", "2+3?", "7*6?"]


def test_get_dataset_bad_arguments() -> None:
    env = make()
    with pytest.raises(ValueError, match="'eval' or 'train'"):
        env.get_dataset(split="test")
    with pytest.raises(ValueError, match="non-negative"):
        env.get_dataset(n=-1)


# ---------------------------------------------------------------- validation


def test_missing_prompt_and_question_lists_columns() -> None:
    with pytest.raises(ValueError, match="'prompt' or a 'question'") as err:
        make([{"problem": "p", "solution": "s"}])
    assert "problem, solution" in str(err.value)
    assert "columns={'question'" in str(err.value)


def test_prompt_template_can_replace_question() -> None:
    env = make([{"a": 2, "b": 3}], prompt_template="What is {{ a }} + {{ b }}?")
    assert env.format_prompt(env.get_dataset()[0])[0].content == "What is 2 + 3?"


def test_template_with_unknown_column_lists_columns() -> None:
    with pytest.raises(ValueError, match=r"\{\{ qestion \}\}") as err:
        make(prompt_template="Q: {{ qestion }}")
    assert "difficulty" in str(err.value) and "question" in str(err.value)


def test_system_template_with_unknown_column() -> None:
    with pytest.raises(ValueError, match="system_prompt uses") as err:
        make(system_prompt="Level: {{ level }}")
    assert "difficulty" in str(err.value)


def test_template_syntax_error() -> None:
    with pytest.raises(ValueError, match="not a valid jinja2 template"):
        make(prompt_template="{{ question ")


def test_eval_dataset_with_different_columns() -> None:
    with pytest.raises(ValueError, match="same columns") as err:
        make(eval_dataset=[{"question": "q", "answer": "a", "level": 1}])
    message = str(err.value)
    assert "only in dataset: difficulty" in message and "only in eval_dataset: level" in message


def test_rubric_column_missing_lists_available() -> None:
    with pytest.raises(ValueError, match="'difficulty'") as err:
        Environment([{"question": "q", "answer": "a", "level": 2}], by_difficulty)
    assert "available columns (including info keys): level, question" in str(err.value)


async def test_rubric_column_found_as_column_or_info_key() -> None:
    for dataset in (
        [{"question": "q", "difficulty": "easy"}],
        [{"question": "q", "info": {"difficulty": "easy"}}],
        [{"question": "q", "info": json.dumps({"difficulty": "easy"})}],
    ):
        env = Environment(dataset, by_difficulty)
        rollout = await env.setup_rollout(next(iter(env.get_dataset())))
        rollout.completion.append(Message(role="assistant", content="2"))
        await env.score(rollout)
        assert rollout.reward == 1.0, dataset


def test_rubric_check_applies_to_eval_dataset() -> None:
    train = [{"question": "q", "info": {"difficulty": "easy"}}]
    with pytest.raises(ValueError, match="eval_dataset lacks"):
        Environment(train, by_difficulty, eval_dataset=[{"question": "q", "info": {"other": 1}}])


def test_rubric_cannot_ask_for_example_id_as_a_column() -> None:
    def by_id(example_id: int) -> float:
        return float(example_id)

    with pytest.raises(ValueError, match="'example_id'"):
        Environment(ROWS, by_id)


async def test_info_rows_with_different_keys_keep_exactly_their_own_keys() -> None:
    env = make([{"question": "a", "info": {"x": 1}}, {"question": "b", "info": '{"y": [1, 2]}'}])
    rollouts = [await env.setup_rollout(row) for row in env.get_dataset()]
    assert rollouts[0].info == {"x": 1, "question": "a"}
    assert rollouts[1].info == {"y": [1, 2], "question": "b"}


def test_info_rows_with_the_same_keys_stay_dicts() -> None:
    env = make([{"question": "a", "info": {"x": 1}}, {"question": "b", "info": '{"x": 2}'}])
    assert [row["info"] for row in env.get_dataset()] == [{"x": 1}, {"x": 2}]


def test_jsonl_bad_line_is_reported_with_its_number(tmp_path: Path) -> None:
    path = tmp_path / "bad.jsonl"
    path.write_text('{"question": "a"}\n\n{"question": \n')
    with pytest.raises(ValueError, match="line 3 is not valid JSON"):
        make(path)


async def test_jsonl_info_keys_stay_per_row(tmp_path: Path) -> None:
    path = tmp_path / "info.jsonl"
    path.write_text('{"question": "a", "info": {"x": 1}}\n{"question": "b", "info": {"y": {"z": true}}}\n')
    env = make(path)
    rollouts = [await env.setup_rollout(row) for row in env.get_dataset()]
    assert [r.info for r in rollouts] == [{"x": 1, "question": "a"}, {"y": {"z": True}, "question": "b"}]


def test_split_without_dataset_dict_is_rejected() -> None:
    with pytest.raises(ValueError, match="split='train' picks a split of a DatasetDict"):
        make(split="train")
