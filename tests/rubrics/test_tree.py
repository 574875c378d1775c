"""Rubric.tree(): the one description of a tree, from what each node says of itself."""

from __future__ import annotations

import json

from harness import Rollout, TreeNode
from rubrics import Gate, LLMJudge, RankJudge, Rubric, WeightedSum, relative


def correct(response: str, answer: str) -> float:
    return float(response == answer)


def short(response: str) -> float:
    return float(len(response) < 20)


class Strict(Rubric):
    """A node with attributes named like a gate's and a judge's settings, which it is not."""

    threshold = 3
    model = "not-a-judge"
    parse = "json"

    def forward(self, rollout: Rollout) -> float:
        return 1.0


class Seeded(Rubric):
    """A node that describes a setting of its own, as a user's subclass would."""

    def __init__(self, seed: int) -> None:
        super().__init__()
        self.seed = seed

    def forward(self, rollout: Rollout) -> float:
        return 0.5

    def extra_repr(self) -> str:
        return f"seed={self.seed}"

    def describe(self) -> TreeNode:
        entry = super().describe()
        entry["settings"] = {"seed": self.seed}
        return entry


def test_tree_lists_every_node_parents_first_with_what_each_says_of_itself() -> None:
    judge = LLMJudge("Grade {{ response }}", model="judge-model", name="judge")
    tree = WeightedSum(
        {
            "gate": Gate(
                WeightedSum({"correct": correct, "short": short}, weights=[0.5, 0.5]), threshold=0.5
            ),
            "judge": judge,
            "rel": relative(short),
        },
        weights=[0.6, 0.3, 0.1],
    )
    assert tree.tree() == [
        {"path": "", "type": "WeightedSum", "head": "WeightedSum()", "note": ""},
        {
            "path": "gate",
            "type": "Gate",
            "head": "Gate(threshold=0.5)",
            "threshold": 0.5,
            "note": "weight=0.6",
            "weight": 0.6,
        },
        {"path": "gate.weighted_sum", "type": "WeightedSum", "head": "WeightedSum()", "note": ""},
        {
            "path": "gate.weighted_sum.correct",
            "type": "FunctionRubric",
            "head": "reward(correct)",
            "note": "weight=0.5",
            "weight": 0.5,
        },
        {
            "path": "gate.weighted_sum.short",
            "type": "FunctionRubric",
            "head": "reward(short)",
            "note": "weight=0.5",
            "weight": 0.5,
        },
        {
            "path": "judge",
            "type": "LLMJudge",
            "head": "LLMJudge(name='judge', model='judge-model', parse='number', score_range=(0, 1))",
            "settings": {"model": "judge-model", "parse": "number"},
            "note": "weight=0.3",
            "weight": 0.3,
        },
        {
            "path": "rel",
            "type": "Relative",
            "head": "Relative(method='rank')",
            "group": True,
            "note": "weight=0.1",
            "weight": 0.1,
        },
        {"path": "rel.short", "type": "FunctionRubric", "head": "reward(short)", "note": ""},
    ]
    assert json.loads(json.dumps(tree.tree())) == tree.tree()  # JSON as it is: metadata.json holds it


def test_a_node_is_described_by_itself_not_by_attributes_that_look_like_settings() -> None:
    tree = WeightedSum({"strict": Strict(), "seeded": Seeded(7)})
    strict, seeded = tree.tree()[1:]
    assert strict == {
        "path": "strict",
        "type": "Strict",
        "head": "Strict()",
        "note": "weight=0.5",
        "weight": 0.5,
    }
    assert seeded["settings"] == {"seed": 7} and seeded["head"] == "Seeded(seed=7)"


def test_group_judges_describe_their_model_and_parse_mode() -> None:
    (root,) = RankJudge("which answer is clearer", model="ranker").tree()
    assert root["type"] == "RankJudge" and root["group"] is True
    assert root["settings"] == {"model": "ranker", "parse": "ranking"}


def test_a_scored_batch_and_the_notebook_draw_the_same_tree() -> None:
    tree = WeightedSum({"gate": Gate(correct, threshold=1.0), "short": short})
    batch = tree.score_batch([{"completion": "4", "answer": "4"}, {"completion": "5", "answer": "4"}])
    assert batch.nodes == tree.tree() and batch.paths == ["gate", "gate.correct", "short"]
    page = tree._repr_html_()
    assert page is not None and "Gate(threshold=1)" in page and "weight=0.5" in page
