"""The README's "first rubric" example runs as written, and the package's lazy exports."""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import io

import pytest

import rubrics

# Kept identical to the README section "Your first rubric".
FIRST_RUBRIC = """
from rubrics import Gate, WeightedSum, reward

@reward
def correct(response, answer):              # parameters are filled by name
    return response.strip() == answer

def concise(response, max_words=20):        # any other name is a dataset column
    return len(response.split()) <= max_words

rubric = WeightedSum({"correct": correct, "concise": Gate(concise)}, weights=[0.8, 0.2])
print(rubric)                               # the tree, like print(model)

print(rubric({"prompt": "What is 6 x 7?", "completion": "42", "answer": "42"}))

from harness.types import Rollout
rollout = Rollout.model_validate({"completion": "It is 41.", "answer": "42"})
print(rubric(rollout), rollout.scores)      # every node's score, by path
"""


def test_first_rubric_example_runs_and_prints_the_tree_and_scores() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(FIRST_RUBRIC, "<README example>", "exec"), {})
    lines = out.getvalue().splitlines()
    assert lines[0] == "WeightedSum("
    assert "  (correct) weight=0.8: reward(correct)" in lines
    assert "1.0" in lines
    assert lines[-1] == "0.2 {'correct': 0.0, 'concise.concise': 1.0, 'concise': 1.0}"


def test_star_import_and_public_names() -> None:
    namespace: dict[str, object] = {}
    exec("from rubrics import *", namespace)
    for name in ("Rubric", "reward", "WeightedSum", "Sequential", "Gate", "RubricList", "RubricDict"):
        assert name in namespace


@pytest.mark.parametrize("name", ["parsers", "judges"])
def test_lazy_modules_load_on_first_use_when_present(name: str) -> None:
    if importlib.util.find_spec(f"rubrics.{name}") is None:
        with pytest.raises(ModuleNotFoundError):
            getattr(rubrics, name)
    else:
        assert getattr(rubrics, name) is importlib.import_module(f"rubrics.{name}")


def test_llm_judge_is_exported_lazily_when_present() -> None:
    if importlib.util.find_spec("rubrics.llm_judge") is None:
        with pytest.raises(ModuleNotFoundError):
            rubrics.LLMJudge
    else:
        assert rubrics.LLMJudge is importlib.import_module("rubrics.llm_judge").LLMJudge


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        rubrics.Nope
