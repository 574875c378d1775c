"""Text and HTML drawings of a rubric tree, for `repr()` and Jupyter's `_repr_html_`, and its
flat description (`Rubric.tree()`) that runs, views and hub cards share.

The text form follows `print(model)` in PyTorch, so the shape of a reward reads at a glance:
names in parentheses, per-child notes (weights) after the name, node settings in the head.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Protocol

from harness._core.display import render_html
from harness._core.tree import TreeNode


class DrawnNode(Protocol):
    """What the drawings need of a rubric node (`Rubric` is one), declared here so this module
    does not import the class that calls it."""

    @property
    def name(self) -> str | None: ...

    @property
    def last_score(self) -> float | None: ...

    @property
    def last_error(self) -> BaseException | None: ...

    def named_children(self) -> Iterator[tuple[str, DrawnNode]]: ...

    def named_rubrics(self) -> Iterator[tuple[str, DrawnNode]]: ...

    def get_rubric(self, path: str) -> DrawnNode: ...

    def extra_repr(self) -> str: ...

    def describe(self) -> TreeNode: ...

    def tree(self) -> list[TreeNode]: ...

    def _repr_head(self) -> str: ...

    def _child_note(self, name: str) -> str: ...

    def _child_weight(self, name: str) -> float | None: ...


def node_head(node: DrawnNode) -> str:
    """`Gate(threshold=0.5)`: the class and its `extra_repr()` (and name); the default of
    `Rubric._repr_head`, which leaves override (`reward(correct)`)."""
    extra = node.extra_repr()
    if node.name and "name=" not in extra:
        extra = f"name={node.name!r}" + (f", {extra}" if extra else "")
    return f"{type(node).__name__}({extra})"


def _label(parent: DrawnNode, name: str) -> str:
    note = parent._child_note(name)
    return f"({name})" + (f" {note}" if note else "")


def render_text(node: DrawnNode) -> str:
    """The tree as indented text, e.g. `WeightedSum(\\n  (correct) weight=0.5: reward(correct)\\n)`."""
    children = list(node.named_children())
    head = node._repr_head()
    if not children:
        return head
    # PyTorch style: settings on the first inner line, then one line per child.
    cls_open, _, settings = head.partition("(")
    lines = [f"{cls_open}("]
    settings = settings[:-1] if settings.endswith(")") else settings
    if settings:
        lines.append(f"  {settings}")
    for name, child in children:
        sub = render_text(child).replace("\n", "\n  ")
        lines.append(f"  {_label(node, name)}: {sub}")
    lines.append(")")
    return "\n".join(lines)


def tree_nodes(root: DrawnNode) -> list[TreeNode]:
    """`Rubric.tree()`: each node's own description (`Rubric.describe()`) under its path, with
    what its parent says about it (a weight), root first, parents before their children."""
    out = [_entry(root, "", None, "")]
    for path, child in root.named_rubrics():
        parent_path, _, name = path.rpartition(".")
        out.append(_entry(child, path, root.get_rubric(parent_path), name))
    return out


def _entry(node: DrawnNode, path: str, parent: DrawnNode | None, name: str) -> TreeNode:
    entry: TreeNode = {"path": path, **node.describe()}
    entry["note"] = parent._child_note(name) if parent is not None else ""
    weight = parent._child_weight(name) if parent is not None else None
    if weight is not None:
        entry["weight"] = weight
    return entry


def tree_html(node: DrawnNode) -> str | None:
    """The tree as an HTML table (harness._views.html draws it), with each node's `last_score`."""
    nodes = node.tree()
    scores: dict[str, float] = {}
    errors: dict[str, str] = {}
    for path, child in node.named_rubrics():
        if child.last_score is not None:
            scores[path] = child.last_score
        if child.last_error is not None:
            errors[path] = str(child.last_error)
    if node.last_error is not None:
        errors[""] = str(node.last_error)
    return render_html("rubric_tree", nodes, scores, reward=node.last_score, errors=errors)


__all__ = ["node_head", "render_text", "tree_html", "tree_nodes"]
