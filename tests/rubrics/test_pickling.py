"""Every kind of leaf, the README's rubrics and the reference environments' TRL arguments
survive a pickle round-trip into a fresh interpreter (a spawned process), as TRL's and Ray's
workers need (issue 19.1): `@reward` used to make a tree unpicklable."""

from __future__ import annotations

import multiprocessing
import pickle
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.docs import code_block

LEAVES = textwrap.dedent(
    """
    import functools

    from rubrics import Gate, WeightedSum, reward


    @reward
    def correct(response, answer):
        return float(response == answer)


    @reward(name="brief", on_error=0.0)
    async def brief(response):
        return 1.0 if len(response) < 10 else 0.5


    def plain(response):
        return 1.0


    def at_least(response, n):
        return float(len(response) >= n)


    class Grader:
        def __init__(self, bonus):
            self.bonus = bonus

        def score(self, response):
            return self.bonus


    rubric = WeightedSum(
        {
            "correct": correct,
            "brief": brief,
            "plain": plain,
            "partial": functools.partial(at_least, n=1),
            "method": Grader(0.5).score,
            "gate": Gate(correct, threshold=1.0),
        }
    )
    """
)


@pytest.fixture
def modules(tmp_path: Path) -> Iterator[Path]:
    (tmp_path / "pickle_leaves.py").write_text(LEAVES)
    (tmp_path / "readme_rubric.py").write_text(code_block("python", "from rubrics import Gate"))
    sys.path.insert(0, str(tmp_path))  # a spawned child is given the parent's sys.path
    yield tmp_path
    sys.path.remove(str(tmp_path))
    for name in ("pickle_leaves", "readme_rubric"):
        sys.modules.pop(name, None)


def _child_scores(blob: bytes, item: dict[str, Any]) -> tuple[float, dict[str, float]]:
    """In the spawned process: unpickle the rubric and score one item."""
    rubric = pickle.loads(blob)
    scored = rubric.score_batch([item])
    return scored[0], dict(scored.rollouts[0].scores)


def _in_fresh_interpreter(function: Any, *args: Any) -> Any:
    with multiprocessing.get_context("spawn").Pool(1) as pool:
        return pool.apply(function, args)


ITEM = {"completion": "4", "answer": "4"}


@pytest.mark.slow
@pytest.mark.parametrize("module", ["pickle_leaves", "readme_rubric"])
def test_a_tree_of_every_leaf_kind_scores_the_same_in_a_fresh_interpreter(modules: Path, module: str) -> None:
    import importlib

    rubric = importlib.import_module(module).rubric
    here = rubric.score_batch([ITEM])
    there = _in_fresh_interpreter(_child_scores, pickle.dumps(rubric), ITEM)
    assert there == (here[0], dict(here.rollouts[0].scores))


def test_trl_reward_functions_pickle(modules: Path) -> None:
    import pickle_leaves  # type: ignore[import-not-found]

    for fn in (pickle_leaves.rubric.as_trl_reward(), *pickle_leaves.rubric.as_trl_reward_funcs()):
        copy = pickle.loads(pickle.dumps(fn))
        assert getattr(copy, "__name__", None) == getattr(fn, "__name__", None)
    assert pickle.loads(pickle.dumps(pickle_leaves.correct)) is pickle_leaves.correct  # by reference


def _child_trl(blob: bytes) -> list[str]:
    kwargs = pickle.loads(blob)
    return sorted(kwargs)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gsm8k", "wordle", "python"])
def test_reference_environments_trl_arguments_reach_a_fresh_interpreter(name: str) -> None:
    from envs import load_environment

    kwargs = load_environment(name).trl(num_examples=2).kwargs
    assert _in_fresh_interpreter(_child_trl, pickle.dumps(kwargs)) == sorted(kwargs)
