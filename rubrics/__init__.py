"""The reward side: a Rubric tree that scores a Rollout, node by node.

    from rubrics import reward, WeightedSum, Gate
    rubric = WeightedSum({"correct": correct, "format": Gate(has_tags, 1.0)}, weights=[0.8, 0.2])
    rubric({"completion": "...", "answer": "42"})     # -> float; rollout.scores has every node

`LLMJudge` and the `judges` / `parsers` modules load lazily, on first use.

Inside: `module` (the Rubric tree), `containers`, `leaf` (reward functions as nodes, with
`injection` filling their arguments), `turns` (per-turn scoring), `judge/` (LLMJudge, its
prompt, verdict parsing, cache and the ready-made `judges`), `parsers`, `credit` (per-turn
rewards), `trl` and `verl` (trees as TRL and verl reward functions), `render` and `batch`
(what people see).
May import `harness` (the data model, errors, client and views); never `envs`.
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

from harness.types import Rollout
from rubrics.batch import ScoredBatch
from rubrics.containers import Gate, RubricDict, RubricList, Sequential, WeightedSum
from rubrics.leaf import FunctionRubric, reward
from rubrics.module import IncompatibleKeys, RemovableHandle, Rubric, ScoringError

if TYPE_CHECKING:  # pragma: no cover
    from rubrics import parsers
    from rubrics.group import GroupRubric, Relative, relative
    from rubrics.judge import presets as judges
    from rubrics.judge.config import JudgeConfig
    from rubrics.judge.llm import LLMJudge
    from rubrics.judge.rank import PairwiseJudge, RankJudge

_LAZY_ATTRS = {"LLMJudge": "rubrics.judge.llm", "JudgeConfig": "rubrics.judge.config"}
_LAZY_ATTRS.update({"GroupRubric": "rubrics.group", "Relative": "rubrics.group", "relative": "rubrics.group"})
_LAZY_ATTRS.update({"RankJudge": "rubrics.judge.rank", "PairwiseJudge": "rubrics.judge.rank"})
_LAZY_MODULES = {"judges": "rubrics.judge.presets", "parsers": "rubrics.parsers"}


def __getattr__(name: str) -> Any:
    if name in _LAZY_MODULES:
        value = importlib.import_module(_LAZY_MODULES[name])
    elif name in _LAZY_ATTRS:
        value = getattr(importlib.import_module(_LAZY_ATTRS[name]), name)
    else:
        raise AttributeError(f"module 'rubrics' has no attribute {name!r}")
    globals()[name] = value
    return value


def _available(module: str) -> bool:
    # `from rubrics import *` must not fail while a lazily loaded module is absent.
    return importlib.util.find_spec(module) is not None


__all__ = [
    "FunctionRubric",
    "Gate",
    "IncompatibleKeys",
    "RemovableHandle",
    "Rollout",
    "Rubric",
    "RubricDict",
    "RubricList",
    "ScoredBatch",
    "ScoringError",
    "Sequential",
    "WeightedSum",
    "reward",
    *(name for name, module in _LAZY_ATTRS.items() if _available(module)),
    *(name for name, module in _LAZY_MODULES.items() if _available(module)),
]
