"""The rubrics package's exports: star import and lazily loaded submodules."""

from __future__ import annotations

import importlib
import importlib.util

import pytest

import rubrics


def test_star_import_and_public_names() -> None:
    namespace: dict[str, object] = {}
    exec("from rubrics import *", namespace)
    for name in ("Rubric", "reward", "WeightedSum", "Sequential", "Gate", "RubricList", "RubricDict"):
        assert name in namespace


@pytest.mark.parametrize(("name", "module"), [("parsers", "rubrics.parsers"), ("judges", "rubrics.judges")])
def test_lazy_modules_load_on_first_use_when_present(name: str, module: str) -> None:
    if importlib.util.find_spec(module) is None:
        with pytest.raises(ModuleNotFoundError):
            getattr(rubrics, name)
    else:
        assert getattr(rubrics, name) is importlib.import_module(module)


def test_llm_judge_is_exported_lazily_when_present() -> None:
    if importlib.util.find_spec("rubrics._judge.llm") is None:
        with pytest.raises(ModuleNotFoundError):
            rubrics.LLMJudge
    else:
        assert rubrics.LLMJudge is importlib.import_module("rubrics._judge.llm").LLMJudge


def test_unknown_attribute_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        rubrics.Nope
