"""The reward side: a Rubric tree that scores a Rollout, node by node.

    from rubrics import reward, WeightedSum, Gate
    rubric = WeightedSum({"correct": correct, "format": Gate(has_tags, 1.0)}, weights=[0.8, 0.2])
    rubric({"completion": "...", "answer": "42"})     # -> float; rollout.scores has every node

Everything a user needs is exported here (`__all__`, checked by `tests/test_public_api.py`);
the public modules are `rubrics.judges` (ready-made judges), `rubrics.parsers`,
`rubrics.credit` (per-turn rewards) and `rubrics.calibration` (a judge against human labels).
The rest is private: `_module` (the Rubric tree), `_containers`, `_leaf` (reward functions as
nodes, with `_injection` filling their arguments), `_scoring` (the one scoring path),
`_turns`, `_group`, `_judge/` (LLMJudge, its prompt, verdicts and cache), `_trl` and `_verl`,
`_render` and `_batch`.
Imports the harness foundation, its client and the `harness` package; never `envs`.
"""

from __future__ import annotations

from harness._core.types import Rollout
from rubrics import credit, judges, parsers
from rubrics._containers import Gate, RubricDict, RubricList, Sequential, WeightedSum
from rubrics._group import GroupRubric, Relative, relative
from rubrics._judge.config import JudgeConfig
from rubrics._judge.llm import LLMJudge
from rubrics._judge.rank import PairwiseJudge, RankJudge
from rubrics._leaf import FunctionRubric, reward
from rubrics._tree.batch import ScoredBatch
from rubrics._tree.module import IncompatibleKeys, RemovableHandle, Rubric, ScoringError
from rubrics._verl import register_advantage_estimator

__all__ = [
    "FunctionRubric",
    "Gate",
    "GroupRubric",
    "IncompatibleKeys",
    "JudgeConfig",
    "LLMJudge",
    "PairwiseJudge",
    "RankJudge",
    "Relative",
    "RemovableHandle",
    "Rollout",
    "Rubric",
    "RubricDict",
    "RubricList",
    "ScoredBatch",
    "ScoringError",
    "Sequential",
    "WeightedSum",
    "credit",
    "judges",
    "parsers",
    "register_advantage_estimator",
    "relative",
    "reward",
]
