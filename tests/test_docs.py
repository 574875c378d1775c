"""The documentation site (docs/, mkdocs.yml): its examples run as written, offline and with no
API key, and the built site works in headless Chromium.

A ```` ```python ```` block in docs/ is run here, page by page in one namespace (in the page's
order, from a temporary folder), unless a test of its own runs it (one that calls `code_block`
with text from it: tests/test_readme.py and below); a block fenced with attributes, such as
```` ```python title="not run" ````, is shown and not run.
"""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import re
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.helpers.browser import chromium
from tests.helpers.docs import blocks_run_by_tests, code_block, docs_pages, fenced_blocks
from tests.helpers.endpoints import free_port
from tests.helpers.processes import serving
from tests.test_public_api import PUBLIC

ROOT = Path(__file__).resolve().parents[1]
CLAIMED = blocks_run_by_tests()


def _runnable(page: str) -> list[str]:
    return [b for b in fenced_blocks(docs_pages()[page], "python") if not any(c in b for c in CLAIMED)]


def test_examples_no_other_test_runs_run_offline_with_no_api_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.setenv("OPENAI_BASE_URL", f"http://127.0.0.1:{free_port()}/v1")  # nothing listens
    ran = 0
    for page in docs_pages():
        namespace: dict[str, Any] = {"__name__": "docs_example"}
        for block in _runnable(page):
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(block, f"<docs/{page}>", "exec"), namespace)
            ran += 1
    assert ran > 0, "no docs example ran: is the runnable-block convention still read?"


def test_a_block_fenced_with_attributes_is_shown_not_run() -> None:
    page = docs_pages()["guides/sharing.md"]
    assert '```python title="not run: a fragment of load_environment"\nenv.reward_fixtures' in page
    assert not any("env.reward_fixtures = {" in b for b in fenced_blocks(page, "python"))


def test_score_batch_example_continues_the_first_rubric() -> None:
    namespace: dict[str, Any] = {}
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code_block("python", "from rubrics import Gate"), "<docs>", "exec"), namespace)
        exec(compile(code_block("python", "print(batch)  # the rewards"), "<docs>", "exec"), namespace)
    assert "[1.0, 0.2]" in out.getvalue()


def test_readme_is_short_and_its_links_into_docs_resolve() -> None:
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert {"docs/index.md", "docs/reference/rubrics.md", "docs/guides/security.md"} <= set(links)
    assert [link for link in links if not (ROOT / link).is_file()] == []


def test_docs_say_how_to_read_and_publish_the_site() -> None:
    assert "mkdocs serve" in docs_pages()["index.md"] and "mkdocs gh-deploy" in docs_pages()["index.md"]


# ---------------------------------------------------------------- the built site in Chromium


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The site built strictly into a temporary folder, served on 127.0.0.1 (search needs HTTP)."""
    folder = tmp_path_factory.mktemp("site")
    proc = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "--site-dir", str(folder)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert proc.returncode == 0, proc.stderr
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "http.server",
        str(port),
        "--bind",
        "127.0.0.1",
        "--directory",
        str(folder),
    ]
    with serving(command, port):
        yield f"http://127.0.0.1:{port}"


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as instance:
        yield instance


def _open(browser: Any, url: str) -> tuple[Any, list[str]]:
    page = browser.new_page(viewport={"width": 1300, "height": 900})
    problems: list[str] = []
    page.on("console", lambda m: problems.append(f"{url}: {m.text}") if m.type == "error" else None)
    page.on("pageerror", lambda e: problems.append(f"{url}: {e}"))
    local = url.split("/", 3)[:3]
    page.on("request", lambda r: None if r.url.split("/", 3)[:3] == local else problems.append(r.url))
    page.goto(url, wait_until="load")
    return page, problems


@pytest.mark.browser
@pytest.mark.serve
@pytest.mark.slow
def test_start_page_renders_and_search_finds_weighted_sum(browser: Any, site: str) -> None:
    with urllib.request.urlopen(f"{site}/search/search_index.json", timeout=10) as response:
        index = json.load(response)
    assert any("WeightedSum" in doc["title"] for doc in index["docs"])

    page, problems = _open(browser, f"{site}/")
    assert page.locator("article h1").first.inner_text().rstrip("¶") == "rubric"
    assert "Rubric trees" in page.locator("article").inner_text()
    assert page.locator("nav").first.is_visible()
    page.locator("input.md-search__input").click()
    # Material's search worker says "Initializing search" until its index is loaded.
    page.wait_for_function(
        "() => !document.querySelector('.md-search-result__meta').textContent.includes('Initializing')",
        timeout=15_000,
    )
    page.locator("input.md-search__input").press_sequentially("WeightedSum")
    page.wait_for_selector(".md-search-result__item", timeout=15_000)
    results = page.locator(".md-search-result__item").all_inner_texts()
    assert any("WeightedSum" in r for r in results), results
    page.close()
    assert problems == []


@pytest.mark.serve
@pytest.mark.slow
@pytest.mark.parametrize("package", PUBLIC)
def test_reference_page_has_an_entry_for_every_public_name(package: str, site: str) -> None:
    """The three packages and each public module have a page listing their whole `__all__`."""
    with urllib.request.urlopen(f"{site}/reference/{package}/", timeout=10) as response:
        html = response.read().decode()
    entries = set(re.findall(rf'id="{re.escape(package)}\.(\w+)"', html))
    assert entries >= set(importlib.import_module(package).__all__)


@pytest.mark.browser
@pytest.mark.serve
@pytest.mark.slow
def test_rubrics_reference_lists_llm_judge_with_its_arguments(browser: Any, site: str) -> None:
    page, problems = _open(browser, f"{site}/reference/rubrics/")
    judge = page.locator('[id="rubrics.LLMJudge"]')
    assert judge.count() == 1
    section = judge.locator("xpath=..").inner_text()
    for argument in ("prompt", "model", "client", "parse", "score_range", "samples", "on_error"):
        assert argument in section, argument
    page.close()
    assert problems == []


@pytest.mark.browser
@pytest.mark.serve
@pytest.mark.slow
def test_no_page_has_a_console_error(browser: Any, site: str) -> None:
    problems: list[str] = []
    for source in docs_pages():
        path = "" if source == "index.md" else source.removesuffix(".md") + "/"
        page, seen = _open(browser, f"{site}/{path}")
        assert page.locator("article h1").count() == 1, source
        page.close()
        problems += seen
    assert problems == []


def _undocumented_args() -> list[str]:
    """Each exported function or class (of a package or public module) whose signature has a
    parameter missing from `Args:`.

    A data model (pydantic, NamedTuple) may list its fields under `Attributes:` instead, since
    griffe (mkdocs --strict) rejects `Args:` entries it cannot find in their signature.
    """
    import inspect

    import docstring_parser

    offenders = []
    for package in PUBLIC:
        module = importlib.import_module(package)
        for name in module.__all__:
            obj = getattr(module, name)
            if not (inspect.isclass(obj) or inspect.isfunction(obj)):
                continue
            try:
                signature = inspect.signature(obj)
            except (TypeError, ValueError):
                continue
            docs = [inspect.getdoc(obj) or ""]
            if inspect.isclass(obj) and "__init__" in vars(obj):
                docs.append(inspect.getdoc(vars(obj)["__init__"]) or "")
            documented = {
                p.arg_name.split(" ")[0].lstrip("*")
                for doc in docs
                for p in docstring_parser.parse(doc, docstring_parser.DocstringStyle.GOOGLE).params
            }
            missing = [
                p.name
                for p in signature.parameters.values()
                if p.name not in ("self", "cls")
                and not p.name.startswith("_")
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
                and p.name not in documented
            ]
            if missing:
                offenders.append(f"{package}.{name}: {', '.join(missing)}")
    return offenders


def test_every_public_name_documents_each_parameter_under_args() -> None:
    offenders = _undocumented_args()
    assert offenders == [], "parameters missing from Args:\n" + "\n".join(offenders)
