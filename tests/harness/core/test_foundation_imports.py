"""The foundation and the engine never import a runtime or the proxy, not even for types.

`lint-imports` checks the imports that run (pyproject.toml sets
`exclude_type_checking_imports = true`), so this test reads the source for the others: an
import under `if TYPE_CHECKING:` of `harness.runtimes` or `harness.proxy` in `harness._core` or
`harness._engine` would let the data record or the engine lean on a sandbox again (a live
sandbox reaches scoring through `harness._core.protocol.scoring_scope`, never the record).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
GUARDED = ("harness/_core", "harness/_engine")
FORBIDDEN = ("harness.runtimes", "harness.proxy")


def _type_checking_imports(tree: ast.Module) -> list[tuple[int, str]]:
    """(line, module) of every import inside an `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`) block."""
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        test = node.test
        name = test.id if isinstance(test, ast.Name) else test.attr if isinstance(test, ast.Attribute) else ""
        if name != "TYPE_CHECKING":
            continue
        for inner in (n for statement in node.body for n in ast.walk(statement)):
            if isinstance(inner, ast.ImportFrom) and inner.module:
                found.append((inner.lineno, inner.module))
            elif isinstance(inner, ast.Import):
                found += [(inner.lineno, alias.name) for alias in inner.names]
    return found


def _offending(files: list[Path]) -> list[str]:
    return [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for path in files
        for line, module in _type_checking_imports(ast.parse(path.read_text(), str(path)))
        if any(module == f or module.startswith(f + ".") for f in FORBIDDEN)
    ]


def test_no_type_only_import_of_a_runtime_or_the_proxy_below_the_engine() -> None:
    files = sorted(p for folder in GUARDED for p in (ROOT / folder).rglob("*.py"))
    assert len(files) > 20  # the folders are there: the test reads something
    assert _offending(files) == []


def test_the_check_finds_a_type_only_import(tmp_path: Path) -> None:
    planted = tmp_path / "planted.py"
    planted.write_text(
        "from typing import TYPE_CHECKING\nimport typing\n"
        "if TYPE_CHECKING:\n    from harness.runtimes import Sandbox\n"
        "if typing.TYPE_CHECKING:\n    import harness.proxy._server\n"
    )
    found = [(line, module) for line, module in _type_checking_imports(ast.parse(planted.read_text()))]
    assert found == [(4, "harness.runtimes"), (6, "harness.proxy._server")]
