"""The hub card's rubric tree: the one tree schema, as `Rubric.tree()` writes it and older cards wrote it."""

from __future__ import annotations

import json

from envs.hub._card import read_record
from envs.hub._display import node_line
from rubrics import Gate, LLMJudge, WeightedSum


def correct(response: str, answer: str) -> float:
    return float(response == answer)


def _record(rubric: object) -> bytes:
    card = {"name": "e", "description": "d", "license": "MIT", "kind": "single-turn"}
    return json.dumps(
        {
            "name": "e",
            "version": "0.1.0",
            "entry_points": {"e": "e.environment:load_environment"},
            "card": card,
            "rubric": rubric,
            "compatibility": {"rubric-rl": ["0.1.0"]},
            "content_hash": "sha256:0",
        }
    ).encode()


def test_the_card_carries_the_tree_as_rubric_tree_describes_it() -> None:
    tree = WeightedSum({"gate": Gate(correct, threshold=0.5), "judge": LLMJudge("{{ response }}", model="m")})
    record, problem = read_record(_record(tree.tree()))
    assert problem is None and record is not None and record.rubric == tree.tree()
    assert [node_line(n) for n in record.rubric] == [
        "WeightedSum()",
        "Gate(threshold=0.5) (weight=0.5)",
        "reward(correct)",
        "LLMJudge(name='judge', model='m', parse='number', score_range=(0, 1)) (weight=0.5)",
    ]


def test_a_card_built_before_the_one_schema_still_reads_and_prints() -> None:
    old = [
        {"path": "", "type": "WeightedSum"},
        {"path": "gate", "type": "Gate", "weight": 0.9, "threshold": 1.0},
        {"path": "judge", "type": "LLMJudge", "weight": 0.1, "model": "m", "parse": "choice"},
    ]
    record, problem = read_record(_record(old))
    assert problem is None and record is not None
    assert record.rubric[2] == {
        "path": "judge",
        "type": "LLMJudge",
        "weight": 0.1,
        "settings": {"model": "m", "parse": "choice"},
    }
    assert [node_line(n) for n in record.rubric] == [
        "WeightedSum",
        "Gate (weight=0.9, threshold=1)",
        "LLMJudge (weight=0.1, model=m, parse=choice)",
    ]


def test_a_card_whose_tree_is_not_a_list_is_refused_with_where() -> None:
    record, problem = read_record(_record({"path": ""}))
    assert record is None and problem is not None and "rubric" in problem
