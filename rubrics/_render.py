"""Text and HTML drawings of a rubric tree, for `repr()` and Jupyter's `_repr_html_`.

The text form follows `print(model)` in PyTorch, so the shape of a reward reads at a glance:
names in parentheses, per-child notes (weights) after the name, node settings in the head.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness._core.display import render_html
from harness._core.types import TreeNode

if TYPE_CHECKING:  # pragma: no cover
    from rubrics._module import Rubric


def node_head(node: Rubric) -> str:
    """`reward(correct)` for a leaf, `Gate(threshold=0.5)` for others."""
    custom = getattr(node, "_repr_head", None)
    if custom is not None:
        return str(custom())
    extra = node.extra_repr()
    if node.name and "name=" not in extra:
        extra = f"name={node.name!r}" + (f", {extra}" if extra else "")
    return f"{type(node).__name__}({extra})"


def _label(parent: Rubric, name: str) -> str:
    note = parent._child_note(name)
    return f"({name})" + (f" {note}" if note else "")


def render_text(node: Rubric) -> str:
    """The tree as indented text, e.g. `WeightedSum(\\n  (correct) weight=0.5: reward(correct)\\n)`."""
    children = list(node.named_children())
    head = node_head(node)
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


def tree_nodes(node: Rubric) -> list[TreeNode]:
    """The tree as flat node descriptions, parents first, for drawing and for run metadata."""
    out: list[TreeNode] = [{"path": "", "head": node_head(node), "note": "", "threshold": _threshold(node)}]
    for path, child in node.named_rubrics():
        parent_path, _, name = path.rpartition(".")
        parent = node.get_rubric(parent_path) if parent_path else node
        out.append(
            {
                "path": path,
                "head": node_head(child),
                "note": parent._child_note(name),
                "threshold": _threshold(child),
            }
        )
    for entry, each in zip(out, [node, *node.rubrics()]):
        if each._group_node:  # only then: the trees of runs without group nodes stay as they were
            entry["group"] = True
    return out


def _threshold(node: Rubric) -> float | None:
    value = getattr(node, "threshold", None)  # a Gate's; drawn as "gate open/closed"
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def tree_html(node: Rubric) -> str | None:
    """The tree as an HTML table (harness._views.html draws it), with each node's `last_score`."""
    nodes = tree_nodes(node)
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
