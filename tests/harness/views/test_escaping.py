"""Every value in a results folder is data (issue 28.1): a payload planted in every field of
every rollout and of metadata.json, whatever the field's expected type, runs no script in
the HTML report or the comparison page (opened in headless Chromium, panels included) and
makes no live element in the notebook views."""

from __future__ import annotations

import json
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest

from harness import Rollout, load_results
from tests.cli.conftest import Invoke
from tests.helpers.browser import chromium
from tests.helpers.processes import run

MARK = "window.__xss=(window.__xss||0)+1"
PAYLOAD = f'"\'><img src=x onerror="{MARK}"><script>{MARK}</script><svg onload="{MARK}"></svg>'


def _plant(value: Any) -> Any:
    """Every string replaced by the payload (kept unique), every container walked."""
    if isinstance(value, str):
        return PAYLOAD + value
    if isinstance(value, list):
        return [_plant(v) for v in value]
    if isinstance(value, dict):  # a message's role and a call's type are checked on load: kept
        return {k: v if k in ("role", "type") else _plant(v) for k, v in value.items()}
    return value


def _plant_rollout(row: dict[str, Any]) -> dict[str, Any]:
    row = _plant(row)
    # Free-form fields also get payload keys, and values of the wrong type where a number belongs.
    row["scores"][PAYLOAD] = 0.5
    row["score_errors"][PAYLOAD] = PAYLOAD
    row["score_details"][PAYLOAD] = {
        "usage": {"prompt_tokens": PAYLOAD, "completion_tokens": PAYLOAD},
        "prompt": PAYLOAD,
        "reply": PAYLOAD,
        "replies": [PAYLOAD, PAYLOAD],
        PAYLOAD: PAYLOAD,
    }
    row["info"][PAYLOAD] = PAYLOAD
    row["state"][PAYLOAD] = PAYLOAD
    row["state"]["tool_content"] = [  # MCP content blocks the views show: images only when truly images
        {
            "turn": PAYLOAD,
            "tool": PAYLOAD,
            "tool_call_id": PAYLOAD,
            "content": [
                {"type": "image", "mimeType": PAYLOAD, "data": PAYLOAD},
                {"type": "image", "mimeType": "image/png", "data": PAYLOAD},
                {"type": "resource", "resource": {"uri": PAYLOAD, "text": PAYLOAD}},
                {"type": PAYLOAD, PAYLOAD: PAYLOAD},
            ],
        }
    ]
    row["turn_scores"] = {PAYLOAD: [0.5]}
    row["completion"].append(
        {
            "role": "assistant",
            "content": PAYLOAD,
            "name": PAYLOAD,
            "tool_calls": [
                {"id": PAYLOAD, "type": "function", "function": {"name": PAYLOAD, "arguments": PAYLOAD}}
            ],
        }
    )
    row["completion"].append({"role": "tool", "content": PAYLOAD, "tool_call_id": PAYLOAD, "name": PAYLOAD})
    Rollout.model_validate(row)  # still a valid rollout: the renderers must meet it
    return row


def _plant_metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    metadata = _plant(metadata)
    summary = metadata.setdefault("summary", {})
    summary.update(wall_seconds=PAYLOAD, rollouts_per_second=PAYLOAD, planned=PAYLOAD)
    metadata.setdefault("arguments", {})["rollouts_per_example"] = PAYLOAD
    nodes = metadata["env"]["rubric"]
    nodes.append({"path": PAYLOAD, "head": PAYLOAD, "note": PAYLOAD, "threshold": PAYLOAD})
    nodes.append(PAYLOAD)
    metadata["model"]["sampling"] = {PAYLOAD: PAYLOAD}
    metadata["environment_package"] = {"version": PAYLOAD}
    return metadata


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("xss")
    for name in ("a", "b"):
        proc = run("eval", "gsm8k", "-m", "scripted:noisy", "-n", "3", "--no-progress", "-o", name, cwd=where)
        assert proc.returncode == 0, proc.stderr
        folder = where / name
        rows = [json.loads(line) for line in (folder / "results.jsonl").read_text().splitlines()]
        (folder / "results.jsonl").write_text("".join(json.dumps(_plant_rollout(r)) + "\n" for r in rows))
        metadata = json.loads((folder / "metadata.json").read_text())
        (folder / "metadata.json").write_text(json.dumps(_plant_metadata(metadata)))
    return where


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as instance:
        yield instance


LIVE = """() => {
  const live = [];
  for (const node of document.querySelectorAll('*')) {
    for (const attr of node.attributes) if (attr.name.startsWith('on')) live.push(node.tagName + ' ' + attr.name);
    if (['SCRIPT', 'IMG', 'IFRAME', 'OBJECT', 'EMBED'].includes(node.tagName) && node.type !== 'application/json'
        && !(node.tagName === 'SCRIPT' && node.textContent.includes('DecompressionStream'))) live.push(node.tagName);
  }
  return live;
}"""


def _check_page(browser: Any, path: Path) -> None:
    page = browser.new_page()
    problems: list[str] = []
    page.on("pageerror", lambda e: problems.append(str(e)))
    page.on("dialog", lambda d: (problems.append(d.message), d.dismiss()))
    page.goto(path.as_uri())
    page.wait_for_selector("body[data-ready='1']", timeout=10_000)
    page.wait_for_selector("body[data-panels='1']", timeout=10_000)
    rows = page.locator("#rows tbody tr")
    assert rows.count() >= 3
    for i in range(rows.count()):  # every panel, inserted as HTML, rendered in turn
        rows.nth(i).click()
        page.wait_for_selector("#panel .head", timeout=10_000)
        assert page.evaluate("window.__xss") is None, f"script ran after opening row {i}"
        assert page.evaluate(LIVE) == []
        assert PAYLOAD.split("<script>")[0][:3] in page.inner_text("#panel")  # shown as text
    assert page.evaluate("window.__xss") is None and page.evaluate(LIVE) == [] and problems == []
    page.close()


@pytest.mark.browser
@pytest.mark.slow
def test_the_report_and_the_comparison_run_no_planted_script(
    rubric: Invoke, browser: Any, planted: Path
) -> None:
    proc = rubric("view", "a", "--html", cwd=planted)
    assert proc.returncode == 0, proc.stderr
    _check_page(browser, planted / "a" / "report.html")
    proc = rubric("view", "a", "b", "--html", "compare.html", cwd=planted)
    assert proc.returncode == 0, proc.stderr
    _check_page(browser, planted / "compare.html")


class _Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.live: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in {"script", "img", "iframe", "object", "embed"}:
            self.live.append(tag)
        self.live += [f"{tag} {name}" for name, _ in attrs if name.startswith("on")]


@pytest.mark.slow
def test_notebook_views_make_no_live_element(planted: Path) -> None:
    results = load_results(planted / "a")
    views = [results._repr_html_(), results.summary._repr_html_(), *(r._repr_html_() for r in results)]
    for view in views:
        parser = _Tags()
        parser.feed(view)
        assert parser.live == [], parser.live
    assert any("&lt;img src=x onerror=" in view for view in views)  # the payload is there, as text


def test_the_reported_vector_judge_usage_in_score_details(rubric: Invoke, tmp_path: Path) -> None:
    proc = rubric(
        "eval", "gsm8k", "-m", "scripted:noisy", "-n", "2", "--no-progress", "-o", "r", cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    path = tmp_path / "r" / "results.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0]["score_details"] = {"correct": {"usage": {"prompt_tokens": PAYLOAD}}}
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    parser = _Tags()
    parser.feed("".join(r._repr_html_() for r in load_results(tmp_path / "r")))
    assert parser.live == []
