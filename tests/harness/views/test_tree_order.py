"""Views list nodes in tree order and show nodes a chain never reached as skipped, with why
(issue 27.2, 27.3): the terminal rollout view, the notebook batch view and the reward tree."""

from __future__ import annotations

import re

from rich.console import Console

from harness._views.html import rollout_html
from harness._views.terminal import render_rollout
from rubrics import Sequential, WeightedSum


def formatted(response: str) -> float:
    return float(response.startswith("#"))


def zeta(response: str) -> float:
    return 1.0


def alpha(response: str) -> float:
    return 0.5


RUBRIC = WeightedSum({"zeta": zeta, "chain": Sequential({"formatted": formatted, "alpha": alpha})})


def _text(renderable: object) -> str:
    console = Console(record=True, width=160)
    console.print(renderable)
    return console.export_text()


def test_a_rollouts_scores_are_in_tree_order_and_skips_say_why() -> None:
    batch = RUBRIC.score_batch([{"completion": "no hash"}, {"completion": "# ok"}])
    order = list(batch.summary.node_means)
    assert order == ["zeta", "chain", "chain.formatted", "chain.alpha"]
    text = _text(render_rollout(batch.rollouts[0], order))
    table = text[text.index("scores") :]
    names = [m.group(1) for m in re.finditer(r"^│\s+(\w+)\s+│", table, flags=re.M)]
    assert names == ["reward", "zeta", "chain", "formatted", "alpha"]  # tree order, not alphabetical
    assert "skipped: after formatted scored 0" in text and "NaN" not in text


def test_the_notebook_views_show_skipped_not_a_red_nan() -> None:
    batch = RUBRIC.score_batch([{"completion": "no hash"}, {"completion": "# ok"}])
    view = batch._repr_html_()
    assert 'title="skipped: after formatted scored 0">skipped</td>' in view
    assert 'class="num nan"' not in view
    tree = rollout_html(batch.rollouts[0], batch.nodes)
    assert "skipped: after formatted scored 0" in tree


def test_paths_a_tree_lacks_go_under_their_parent() -> None:
    """A Harbor verifier's reward.json components (`tests.a`) are under the verifier's node,
    not after its siblings (47.13); a path with no parent in the tree goes last."""
    from harness._core.tree import place_paths

    known = ["tests", "judge", "judge.x"]
    assert place_paths(known, ["judge.x", "tests.a", "tests.b", "judge.y", "other"]) == [
        "tests",
        "tests.a",
        "tests.b",
        "judge",
        "judge.x",
        "judge.y",
        "other",
    ]
    assert place_paths([], ["", "a.b.c", "a"]) == ["a.b.c", "a"]
