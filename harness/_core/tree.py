"""The one description of a rubric tree: `TreeNode`, and reading it back from a file.

`Rubric.tree()` builds the list (root first, then every descendant, parents before their
children); a run records it in metadata.json (under the environment's "rubric"), the views
draw it, and `rubric build` ships it in a package's `rubric_card.json`. A file is data:
`read_tree` keeps only well-formed fields, so a hand-edited or older file is drawn as far as
it can be, and never raises.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

# pydantic validates a TypedDict only from typing_extensions before Python 3.12 (the hub card
# holds a list of these).
from typing_extensions import TypedDict

Setting = str | int | float | bool


class TreeNode(TypedDict, total=False):
    """One node of a rubric tree, as `Rubric.tree()` describes it (JSON-ready).

    Attributes:
        path: Dotted path from the root, as in `rollout.scores` ("" is the root itself).
        type: The node's class, e.g. "WeightedSum", "Gate", "FunctionRubric", "LLMJudge".
        head: How `repr()` heads the node, e.g. "Gate(threshold=1)" or "reward(correct)".
        note: What its parent says about it, e.g. "weight=0.8" ("" when nothing).
        weight: Its weight in its parent (present under a `WeightedSum` only).
        threshold: A `Gate`'s threshold (the views draw "gate open" or "gate closed").
        group: True on a node that scores the rollouts of one example together (absent
            otherwise).
        settings: What else shapes its score, e.g. a judge's `{"model": ..., "parse": ...}`.
    """

    path: str
    type: str
    head: str
    note: str
    weight: float
    threshold: float
    group: bool
    settings: dict[str, Setting]


def _number(value: object) -> float | None:
    """`value` if it is a finite real number (not a bool), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _settings(node: Mapping[str, object]) -> dict[str, Setting]:
    """A node's settings as text, numbers and booleans; a judge's `model` and `parse` beside
    the path (cards written before `settings` existed) are read as settings too."""
    found = node.get("settings")
    pairs = list(found.items()) if isinstance(found, Mapping) else []
    pairs += [(key, node[key]) for key in ("model", "parse") if key in node]
    return {
        str(key): value
        for key, value in pairs
        if isinstance(value, (str, bool)) or _number(value) is not None
    }


def read_node(node: object) -> TreeNode | None:
    """One node read from JSON, or None when it has no text `path`: text fields as text,
    numbers as numbers, anything else left out."""
    if not isinstance(node, Mapping) or not isinstance(node.get("path"), str):
        return None
    clean: TreeNode = {"path": node["path"]}
    for key in ("type", "head", "note"):
        value = node.get(key)
        if isinstance(value, (str, int, float)):
            clean[key] = str(value)
    for key in ("weight", "threshold"):
        number = _number(node.get(key))
        if number is not None:
            clean[key] = number  # type: ignore[literal-required]
    if node.get("group") is True:
        clean["group"] = True
    settings = _settings(node)
    if settings:
        clean["settings"] = settings
    return clean


def read_tree(data: object) -> list[TreeNode] | None:
    """A rubric tree read from JSON (a run's metadata, a hub card), or None when `data` is
    not a list (a run recorded without one); malformed nodes are left out."""
    if not isinstance(data, list):
        return None
    return [node for node in map(read_node, data) if node is not None]


def tree_from_paths(paths: Iterable[str]) -> list[TreeNode]:
    """A tree drawn from dotted score paths alone (no heads or weights known), parents first."""
    seen: dict[str, None] = {"": None}
    for path in paths:
        parts = path.split(".")
        for i in range(1, len(parts) + 1):
            seen.setdefault(".".join(parts[:i]), None)
    return [{"path": p, "head": "reward" if not p else "", "note": ""} for p in seen]


def tree_paths(nodes: Sequence[TreeNode]) -> list[str]:
    """The dotted paths of a tree's nodes below the root, in tree order."""
    return [node["path"] for node in nodes if node.get("path")]


def place_paths(known: Iterable[str], others: Iterable[str]) -> list[str]:
    """The dotted paths of `known` (in tree order) with each path of `others` they lack placed
    under its nearest parent among them, after that parent's descendants (a Harbor verifier's
    reward.json components under the verifier, not after its siblings); a path with no parent
    among them goes last. The root ("") is left out.

    Args:
        known: Paths in tree order (a rubric tree's, a run summary's).
        others: More paths (the scores a rollout has), in the order they should keep.
    """
    placed = [p for p in dict.fromkeys(known) if p]
    seen = set(placed)
    for path in others:
        if not path or path in seen:
            continue
        parent = path.rpartition(".")[0]
        while parent and parent not in seen:
            parent = parent.rpartition(".")[0]
        below = (
            [i for i, p in enumerate(placed) if p == parent or p.startswith(parent + ".")] if parent else []
        )
        placed.insert(below[-1] + 1 if below else len(placed), path)
        seen.add(path)
    return placed


__all__ = ["Setting", "TreeNode", "place_paths", "read_node", "read_tree", "tree_from_paths", "tree_paths"]
