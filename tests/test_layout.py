"""The folders show the concepts (docs/layout.md): no package folder with more than 12 modules
flat, and tests/harness mirrors harness's subpackages."""

from __future__ import annotations

from pathlib import Path

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
