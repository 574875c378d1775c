"""envs.hub: `init_package` scaffolds a working package and `check_package` reports each check."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from envs import load_environment
from envs.hub import HubError, PackageName, Project, check_package, init_package, parse_card


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["single", "tool", "multi", pytest.param("mcp", marks=pytest.mark.interop)])
def test_each_kind_builds_runs_its_demo_and_passes_every_check(tmp_path: Path, kind: str) -> None:
    root = init_package(f"scaffold-{kind}", tmp_path, kind)  # type: ignore[arg-type]
    report = check_package(root)
    assert report.ok, report.text()
    names = [r.name for r in report.results]
    assert names == [
        "metadata",
        "entry point",
        "load_environment",
        "dataset",
        "columns",
        "policy demo",
        "card",
        "reward fixtures",
    ]
    card = parse_card((root / "README.md").read_text())
    assert card.kind == {"single": "single-turn", "tool": "tool", "multi": "multi-turn", "mcp": "tool"}[kind]
    if kind == "mcp":  # the tool is the package's own MCP server's, listed from it
        env = load_environment(str(root))
        assert [t.name for t in env.tools] == ["add"] and env.mcp_servers
        assert "rubric-rl[mcp]>=" in (root / "pyproject.toml").read_text()


@pytest.mark.slow
def test_the_scaffolded_packages_own_test_passes(tmp_path: Path) -> None:
    root = init_package("own-test", tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "2 passed" in proc.stdout


def test_hyphen_and_underscore_names_are_one_name(tmp_path: Path) -> None:
    assert PackageName.parse("My_Env") == PackageName.parse("my-env") == PackageName.parse("my.env")
    root = init_package("Under_Score", tmp_path)
    project = Project.load(root)
    assert project.name.distribution == "under-score" and project.name.module == "under_score"
    assert load_environment(str(root)).name == "under-score"


@pytest.mark.parametrize("name", ["", "bad name", "-lead", "trail-", "9lives", "a/b", "ünï"])
def test_invalid_names_are_one_clear_error(tmp_path: Path, name: str) -> None:
    with pytest.raises(HubError, match="invalid environment name"):
        init_package(name, tmp_path)


def test_init_refuses_a_non_empty_folder(tmp_path: Path) -> None:
    init_package("taken", tmp_path)
    with pytest.raises(HubError, match="already exists and is not empty"):
        init_package("taken", tmp_path)


def test_package_without_the_entry_point_fails_check_saying_so(tmp_path: Path) -> None:
    root = init_package("no-entry", tmp_path)
    text = (root / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(text.replace('[project.entry-points."rubric.environments"]', "[x]"))
    report = check_package(root)
    assert not report.ok
    assert report.results[-1].name == "entry point"
    assert "declares no entry point in group 'rubric.environments'" in report.results[-1].detail


def test_load_environment_that_raises_is_shown_by_check(tmp_path: Path) -> None:
    root = init_package("raises-env", tmp_path)
    module = root / "raises_env" / "environment.py"
    module.write_text(
        module.read_text().replace(
            '    """Additions of two numbers;', '    raise RuntimeError("no data today")\n    """Additions;'
        )
    )
    report = check_package(root)
    last = report.results[-1]
    assert (last.name, last.ok) == ("load_environment", False)
    assert "RuntimeError: no data today" in last.detail


def test_wrong_fixture_and_bad_card_fail_their_checks(tmp_path: Path) -> None:
    root = init_package("bad-parts", tmp_path)
    module = root / "bad_parts" / "environment.py"
    module.write_text(
        module.read_text().replace('"completion": "I do not know."', '"completion": "<answer>5</answer>"')
    )
    readme = root / "README.md"
    readme.write_text(readme.read_text().replace("kind: single-turn", "kind: solo"))
    report = check_package(root)
    failed = {r.name: r.detail for r in report.results if not r.ok}
    assert set(failed) == {"card", "reward fixtures"}
    assert "kind" in failed["card"] and "bad fixture 0 scored 1.0 instead of 0.0" in failed["reward fixtures"]


def test_depending_on_the_other_rubric_project_is_refused(tmp_path: Path) -> None:
    root = init_package("wrong-dep", tmp_path)
    text = (root / "pyproject.toml").read_text()
    (root / "pyproject.toml").write_text(text.replace('"rubric-rl>=', '"rubric>='))
    report = check_package(root)
    assert report.results[0].name == "metadata" and not report.results[0].ok
    assert "another project" in report.results[0].detail


def test_bump_rewrites_only_the_version_and_keeps_the_content_hash(tmp_path: Path) -> None:
    root = init_package("bumpy", tmp_path)
    project = Project.load(root)
    before = project.content_hash()
    assert str(project.bump_version("patch")) == "0.1.1"
    assert str(Project.load(root).bump_version("minor")) == "0.2.0"
    assert str(Project.load(root).bump_version("major")) == "1.0.0"
    again = Project.load(root)
    assert str(again.version) == "1.0.0" and again.content_hash() == before
    (root / "bumpy" / "data.jsonl").write_text('{"question": "1 + 1?", "answer": "2"}\n')
    assert Project.load(root).content_hash() != before


def test_the_scaffolded_package_declares_its_test_extra(tmp_path: Path) -> None:
    import tomllib

    root = init_package("with-tests", tmp_path)
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    assert project["optional-dependencies"]["test"] == ["pytest>=8"]
    assert 'pip install -e ".[test]" && python -m pytest' in (root / "README.md").read_text()
