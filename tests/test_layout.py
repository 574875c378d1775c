"""The folders show the concepts (docs/layout.md): no package folder with more than 12 modules
flat, no import circle between the modules of a package (type-only imports included), and
tests/harness mirrors harness's subpackages."""

from __future__ import annotations

from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[1]
MOST_FLAT_MODULES = 12


def _packages() -> list[Path]:
    return [
        folder
        for top in ("rubrics", "envs", "harness")
        for folder in [ROOT / top, *(ROOT / top).rglob("*")]
        if folder.is_dir() and (folder / "__init__.py").is_file()
    ]


def test_no_package_folder_holds_more_than_12_modules_flat() -> None:
    crowded = {
        str(folder.relative_to(ROOT)): count
        for folder in _packages()
        if (count := len([m for m in folder.glob("*.py") if m.name != "__init__.py"])) > MOST_FLAT_MODULES
    }
    assert not crowded, f"group these modules into subpackages by concept: {crowded}"


def test_tests_of_harness_mirror_its_subpackages() -> None:
    subpackages = {p.name.lstrip("_") for p in (ROOT / "harness").iterdir() if (p / "__init__.py").is_file()}
    test_folders = {p.name for p in (ROOT / "tests" / "harness").iterdir() if (p / "__init__.py").is_file()}
    assert test_folders <= subpackages, f"test folders with no package: {test_folders - subpackages}"
    flat = sorted(p.name for p in (ROOT / "tests" / "harness").glob("test_*.py"))
    assert not flat, f"put these under the folder of the subpackage they test: {flat}"


def _circles(graph: grimp.ImportGraph) -> dict[str, set[tuple[str, str]]]:
    """For each package whose modules import each other in a circle, the imports that close it.

    `ImportGraph.nominate_cycle_breakers` is what import-linter's `acyclic_siblings` contract
    uses; it treats each child of the package as the subtree below it.
    """
    packages = {m for m in graph.modules if graph.find_children(m)}
    return {
        package: set(breakers)
        for package in sorted(packages)
        if (breakers := graph.nominate_cycle_breakers(package))
    }


def test_no_import_circle_inside_a_package_type_only_imports_included() -> None:
    # lint-imports' "no circles between sibling modules anywhere" skips the imports under
    # `if TYPE_CHECKING:` (exclude_type_checking_imports = true); this graph keeps them, so two
    # modules that need each other's types are a circle too: move the shared type down, or put
    # a Protocol below both (docs/layout.md).
    graph = grimp.build_graph(
        "rubrics", "envs", "harness", exclude_type_checking_imports=False, cache_dir=None
    )
    assert len(graph.modules) > 100  # the packages were read
    assert _circles(graph) == {}


def test_the_circle_check_finds_a_type_only_circle(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "planted"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "low.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from planted.high import High\n"
    )
    (package / "high.py").write_text("from planted.low import *\nclass High: ...\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with_types = grimp.build_graph("planted", exclude_type_checking_imports=False, cache_dir=None)
    without = grimp.build_graph("planted", exclude_type_checking_imports=True, cache_dir=None)
    assert _circles(with_types) == {"planted": {("planted.low", "planted.high")}}
    assert _circles(without) == {}
