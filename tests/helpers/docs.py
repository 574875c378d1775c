"""README.md and the docs/ pages as the tests read them: read on first use (and once), code
blocks found by their content, and the blocks that a test of their own runs."""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@functools.cache
def readme() -> str:
    """README.md's text."""
    return (ROOT / "README.md").read_text()


@functools.cache
def docs_pages() -> dict[str, str]:
    """The documentation site's pages (docs/, built by mkdocs.yml), by path relative to docs/."""
    folder = ROOT / "docs"
    return {str(path.relative_to(folder)): path.read_text() for path in sorted(folder.rglob("*.md"))}


@functools.cache
def documented() -> str:
    """README.md and every docs/ page, for tests that check what the text says about an example."""
    return "\n".join([readme(), *docs_pages().values()])


def code_block(language: str, containing: str) -> str:
    """The one code block in `language` of README.md or a docs/ page that contains `containing`
    (a block shown word for word in both counts once)."""
    sources = [readme(), *docs_pages().values()]
    matches = sorted({b for text in sources for b in fenced_blocks(text, language) if containing in b})
    assert len(matches) == 1, f"expected one {language} block containing {containing!r}, found {len(matches)}"
    return matches[0]


def fenced_blocks(text: str, language: str) -> list[str]:
    """The code blocks of a Markdown text fenced exactly ```` ```language ```` (a fence with
    attributes, such as ```` ```python title="not run" ````, is not one of them)."""
    return re.findall(rf"^```{language}\n(.*?)^```", text, flags=re.S | re.M)


def blocks_run_by_tests() -> set[str]:
    """The `containing` strings the tests pass to `code_block`: the README and docs blocks run
    by a test of their own (with the servers or files they need) rather than as they stand."""
    found = set()
    for path in (ROOT / "tests").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "code_block"
                and len(node.args) == 2
                and isinstance(node.args[1], ast.Constant)
                and isinstance(node.args[1].value, str)
            ):
                found.add(node.args[1].value)
    return found
