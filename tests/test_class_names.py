"""One name, one meaning: no two classes of the packages share a name (such as `Sandbox`, `Plan`, `Reply`)."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def test_no_two_classes_share_a_name() -> None:
    where: dict[str, list[str]] = defaultdict(list)
    for package in ("rubrics", "envs", "harness"):
        for path in sorted((REPO / package).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                    where[node.name].append(str(path.relative_to(REPO)))
    shared = {name: paths for name, paths in where.items() if len(paths) > 1}
    assert shared == {}, f"rename the less central class to what it is: {shared}"
    assert [len(where[name]) for name in ("Sandbox", "Plan", "Reply")] == [1, 1, 1]
