"""Text and HTML drawings of a rubric tree, for `repr()` and Jupyter's `_repr_html_`.

The text form follows `print(model)` in PyTorch, so the shape of a reward reads at a glance:
names in parentheses, per-child notes (weights) after the name, node settings in the head.
"""

from __future__ import annotations

import html
import math
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from rubrics.module import Rubric


def node_head(node: Rubric) -> str:
    """`reward(correct)` for a leaf, `Gate(threshold=0.5)` for others."""
    custom = getattr(node, "_repr_head", None)
    if custom is not None:
        return custom()
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


def _score_badge(node: Rubric) -> str:
    score = node.last_score
    if score is None:
        return ""
    text = "NaN" if math.isnan(score) else f"{score:.4g}"
    error = f' title="{html.escape(str(node.last_error), quote=True)}"' if node.last_error is not None else ""
    return f' <span class="rubric-last"{error}>last={html.escape(text)}</span>'


def _html_node(node: Rubric, label: str) -> str:
    head = html.escape(node_head(node))
    prefix = f"<code>{html.escape(label)}</code>: " if label else ""
    body = "".join(_html_node(child, _label(node, name)) for name, child in node.named_children())
    inner = f"<ul>{body}</ul>" if body else ""
    return f"<li>{prefix}<b>{head}</b>{_score_badge(node)}{inner}</li>"


def render_html(node: Rubric) -> str:
    """The tree as nested lists; every name and value is HTML-escaped."""
    return f'<div class="rubric-tree"><ul style="list-style: none">{_html_node(node, "")}</ul></div>'


__all__ = ["node_head", "render_html", "render_text"]
