"""harness._core.tree: reading a rubric tree back from a file (a run's metadata, a hub card), old forms included."""

from __future__ import annotations

import json
import math

from harness._core.tree import read_tree, tree_from_paths, tree_paths
from rubrics import Gate, LLMJudge, WeightedSum


def correct(response: str, answer: str) -> float:
    return float(response == answer)


def test_a_tree_reads_back_from_json_as_it_was_written() -> None:
    tree = WeightedSum({"gate": Gate(correct, threshold=0.5), "judge": LLMJudge("{{ response }}", model="m")})
    assert read_tree(json.loads(json.dumps(tree.tree()))) == tree.tree()
    assert tree_paths(tree.tree()) == ["gate", "gate.correct", "judge"]


def test_metadata_written_before_the_schema_grew_still_reads() -> None:
    # What runs recorded before `type`, `weight` and `settings`: every node had a threshold key.
    old = [
        {"path": "", "head": "WeightedSum()", "note": "", "threshold": None},
        {"path": "g", "head": "Gate(threshold=0.5)", "note": "weight=0.4", "threshold": 0.5, "group": True},
        {"path": "g.short", "head": "reward(short)", "note": "", "threshold": None},
    ]
    assert read_tree(old) == [
        {"path": "", "head": "WeightedSum()", "note": ""},
        {"path": "g", "head": "Gate(threshold=0.5)", "note": "weight=0.4", "threshold": 0.5, "group": True},
        {"path": "g.short", "head": "reward(short)", "note": ""},
    ]


def test_a_card_written_before_settings_reads_a_judges_model_and_parse_as_settings() -> None:
    old = [
        {"path": "", "type": "WeightedSum"},
        {"path": "j", "type": "LLMJudge", "weight": 0.9, "model": "m", "parse": "choice"},
    ]
    assert read_tree(old) == [
        {"path": "", "type": "WeightedSum"},
        {"path": "j", "type": "LLMJudge", "weight": 0.9, "settings": {"model": "m", "parse": "choice"}},
    ]


def test_a_file_is_data_malformed_fields_and_nodes_are_left_out() -> None:
    hostile = [
        "not a node",
        {"head": "no path"},
        {"path": 3},
        {
            "path": "x",
            "head": {"nested": 1},
            "note": 7,
            "weight": "heavy",
            "threshold": math.inf,
            "group": "yes",
            "settings": {"ok": 1, "bad": [1], "flag": True, "none": None},
        },
    ]
    assert read_tree(json.loads(json.dumps(hostile))) == [
        {"path": "x", "note": "7", "settings": {"ok": 1, "flag": True}}
    ]
    assert read_tree({"path": ""}) is None and read_tree(None) is None  # no tree recorded


def test_a_tree_drawn_from_score_paths_alone_has_every_parent() -> None:
    assert [n["path"] for n in tree_from_paths(["a.b.c", "d"])] == ["", "a", "a.b", "a.b.c", "d"]
