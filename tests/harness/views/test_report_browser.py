"""The static HTML report and two-run comparison, opened from file:// in headless Chromium."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envs import SingleTurnEnv
from harness import EvalResults, Rollout, aevaluate, run_sync, write_report
from rubrics import Gate, WeightedSum
from tests.helpers.browser import chromium
from tests.helpers.endpoints import serve

pytestmark = [pytest.mark.browser, pytest.mark.slow]

ROWS = [{"question": f"What is {i}+{i + 1}?", "answer": str(2 * i + 1)} for i in range(30)]


def _policy(wrong_every: int):
    def policy(messages: list[dict[str, Any]], tools: Any) -> str:
        a, b = (int(x) for x in messages[-1]["content"].removeprefix("What is ").rstrip("?").split("+"))
        if a == 7:  # model text that must stay text in the page
            return "<script>alert('x')</script><img src=x onerror=alert(1)>"
        return str(a + b + (1 if wrong_every and a % wrong_every == 0 else 0))

    return policy


def correct(response: str, answer: str) -> float:
    return float(response.strip() == answer)


def short(response: str) -> float:
    if len(response) > 30:
        raise ValueError("too long to judge")  # an unscored node, NaN with its reason
    return 1.0 if len(response) <= 1 else 0.6


def _run(wrong_every: int) -> EvalResults:
    env = SingleTurnEnv(
        ROWS, WeightedSum({"correct": correct, "brief": Gate(short, 0.5)}, weights=[0.7, 0.3]), name="adder"
    )

    async def go() -> EvalResults:
        async with serve(_policy(wrong_every)) as (_, client):
            return await aevaluate(env, client, rollouts_per_example=2, progress=False)

    return run_sync(go())


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as instance:
        yield instance


def _open(browser: Any, path: Path) -> tuple[Any, list[str]]:
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    page.on("request", lambda r: problems.append(r.url) if not r.url.startswith("file:") else None)
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-ready='1']", timeout=10_000)
    return page, problems


def _column(page: Any, index: int) -> list[str]:
    return page.eval_on_selector_all(
        f"#rows tbody tr td:nth-child({index})", "tds => tds.map(t => t.textContent)"
    )


def test_run_report_table_sorts_filters_searches_and_opens_a_panel(browser: Any, tmp_path: Path) -> None:
    out = write_report(_run(wrong_every=3), tmp_path / "report.html")
    # Transcripts are embedded compressed: the page inflates them itself (checked below).
    assert "onerror" not in out.read_text(encoding="utf-8")  # model text only in the panels
    page, problems = _open(browser, out)
    page.wait_for_selector("body[data-panels='1']", timeout=10_000)
    assert page.locator("#rows tbody tr").count() == 60
    assert page.inner_text("#count") == "60 of 60 rollouts"
    assert "mean reward" in page.inner_text("table.summary") and page.locator("svg.hist rect").count() == 10

    page.click("#rows th:has-text('reward')")  # ascending: unscored (NaN) first, then by value
    rewards = _column(page, 3)
    assert rewards[:2] == ["NaN", "NaN"]
    values = [float(v) for v in rewards[2:]]
    assert values == sorted(values)
    page.click("#rows th:has-text('reward')")
    assert float(_column(page, 3)[0]) == max(values)

    page.select_option("#status", "unscored")
    assert page.inner_text("#count") == "2 of 60 rollouts"
    page.select_option("#status", "")
    page.select_option("#range-col", label="correct")
    page.fill("#hi", "0.5")
    assert page.inner_text("#count") == "22 of 60 rollouts"  # a % 3 == 0 (10 examples) and a == 7
    page.fill("#hi", "")
    page.fill("#q", "<script>alert")
    page.wait_for_function("document.getElementById('count').textContent.startsWith('2 of')")

    page.click("#rows tbody tr >> nth=0")
    page.wait_for_selector("#panel .msg", timeout=10_000)
    panel = page.inner_text("#panel")
    assert "conversation" in panel and "reward tree" in panel and "<script>alert('x')</script>" in panel
    assert "unscored: ValueError: too long to judge" in panel and "weight=0.7" in panel
    assert page.locator("#panel script, #panel img").count() == 0
    page.screenshot(path=str(tmp_path / "report.png"), full_page=False)
    assert (tmp_path / "report.png").stat().st_size > 10_000
    assert problems == []


HOLD_INFLATE = """
const text = Response.prototype.text;
let release;
window.inflateHeld = new Promise((resolve) => { release = resolve; });
window.releaseInflate = () => release();
Response.prototype.text = function () { return window.inflateHeld.then(() => text.call(this)); };
"""


def test_a_panel_or_search_asked_for_before_the_transcripts_are_inflated_waits_for_them(
    browser: Any, tmp_path: Path
) -> None:
    out = write_report(_run(wrong_every=3), tmp_path / "report.html")
    page = browser.new_page()
    problems: list[str] = []
    page.on("console", lambda m: problems.append(m.text) if m.type == "error" else None)
    page.add_init_script(HOLD_INFLATE)  # the gzip blocks stay compressed until released below
    page.goto(out.as_uri())
    page.wait_for_selector("body[data-ready='1']", timeout=10_000)
    page.fill("#q", "onerror")
    page.click("#rows tbody tr >> nth=0")
    assert page.inner_text("#panel") == "loading transcripts…"
    page.wait_for_function(  # the search box refreshes after a short pause in typing
        "document.getElementById('count').textContent === 'loading transcripts to search…'"
    )
    assert page.get_attribute("body", "data-panels") is None
    page.evaluate("window.releaseInflate()")
    page.wait_for_selector("#panel .msg", timeout=10_000)
    page.wait_for_function("document.getElementById('count').textContent === '2 of 60 rollouts'")
    assert "conversation" in page.inner_text("#panel") and problems == []


def test_comparison_shows_flipped_nodes_side_by_side(browser: Any, tmp_path: Path) -> None:
    out = write_report(_run(wrong_every=3), tmp_path / "compare.html", other=_run(wrong_every=0))
    assert "onerror" not in out.read_text(encoding="utf-8")  # transcripts only inside the gzip blocks
    page, problems = _open(browser, out)
    text = page.inner_text("table.compare-nodes")
    assert "correct" in text and "B − A" in text
    assert "95% CI (paired)" in text and "n for 80% power" in text  # 30 shared examples, paired
    assert page.locator("#rows tbody tr").count() == 30
    # Sorted by the size of the change: the first examples are the ones that got fixed.
    assert float(_column(page, 5)[0]) > 0
    page.select_option("#flipped", "flipped")
    assert page.inner_text("#count") == "10 of 30 examples"
    assert set(_column(page, 6)) == {"correct"}
    page.click("#rows tbody tr >> nth=0")
    page.wait_for_selector("#panel .side", timeout=10_000)
    assert page.locator("#panel .side").count() == 2  # two rollouts of the example, A beside B
    # Both transcripts, inflated from the compressed blocks, A beside B: one question, A's
    # wrong sum and B's right one (the first flipped example: a % 3 == 0, so A added 1).
    side_a, side_b = (page.inner_text(f"#panel .side >> nth=0 >> > div >> nth={i}") for i in (0, 1))
    assert side_a.startswith("A\n") and side_b.startswith("B\n")
    question = next(line for line in side_a.splitlines() if line.startswith("What is "))
    a, b = (int(x) for x in question.removeprefix("What is ").rstrip("?").split("+"))
    assert question in side_b and a % 3 == 0
    assert f"ASSISTANT\n{a + b + 1}\n" in side_a and f"ASSISTANT\n{a + b}\n" in side_b
    flips = page.inner_text("#panel table.flips")
    assert "correct" in flips and "flipped" in flips
    page.screenshot(path=str(tmp_path / "compare.png"), full_page=False)
    assert problems == []


# JupyterLab's rendermime stylesheet right-aligns every table cell of an output; the classic
# notebook's `.rendered_html` rules do the same.
NOTEBOOK_CSS = ".jp-RenderedHTMLCommon td,.jp-RenderedHTMLCommon th{text-align:right;padding:0.5em}"


@pytest.mark.parametrize("trusted", [True, False], ids=["trusted", "untrusted"])
def test_the_rubric_tree_reads_left_to_right_in_a_notebook(browser: Any, trusted: bool) -> None:
    tree = WeightedSum({"correct": correct, "brief": Gate(short, 0.5)}, weights=[0.7, 0.3])
    tree(Rollout.model_validate({"completion": "3", "answer": "3"}))
    fragment = tree._repr_html_()
    if not trusted:  # an untrusted notebook's sanitizer drops <style> elements, keeps style attributes
        fragment = re.sub(r"<style>.*?</style>", "", fragment, flags=re.S)
    page = browser.new_page()
    page.set_content(
        f"<html><head><style>{NOTEBOOK_CSS}</style></head>"
        f'<body><div class="jp-RenderedHTMLCommon">{fragment}</div></body></html>'
    )
    aligns = page.eval_on_selector_all(
        "table.tree tr > :first-child", "cells => cells.map(c => getComputedStyle(c).textAlign)"
    )
    assert aligns == ["left"] * 5  # the header, the root and its children, the gate's child
    # Each level starts one indent right of its parent: the nesting reads forwards.
    starts = page.eval_on_selector_all(
        "table.tree td:first-child b", "names => names.map(b => Math.round(b.getBoundingClientRect().left))"
    )
    assert [x - starts[0] for x in starts] == [0, 16, 16, 32]
    page.close()


def test_the_report_shows_rollouts_first_and_folds_the_groups(browser: Any, tmp_path: Path) -> None:
    out = write_report(_run(wrong_every=3), tmp_path / "report.html")
    page, problems = _open(browser, out)
    groups = page.locator("details.groups")
    assert groups.count() == 1 and groups.get_attribute("open") is None
    assert page.locator("details.groups table.items").count() == 20
    assert not page.locator("details.groups table.items >> nth=0").is_visible()
    rollouts, folded = (
        page.eval_on_selector(sel, "e => e.getBoundingClientRect().top")
        for sel in ("#rows", "details.groups")
    )
    assert rollouts < 900 and rollouts < folded  # the rollout table on the first screen, groups below
    page.click("details.groups > summary")
    assert page.locator("details.groups table.items >> nth=0").is_visible()
    assert problems == []
