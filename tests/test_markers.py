"""tests/helpers/markers.py: the areas a test uses, read from its path, fixtures, runtime and the helpers
its code calls, `slow` with every area; every test declares them; the heaviest files go first."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tests.helpers.markers import AREAS, areas, check_declared, helper_areas, order_heaviest_first, undeclared
from tests.helpers.processes import run


def _runs_rubric() -> None:
    run("--version", cwd=Path.cwd())


def _trains() -> None:
    from tests.helpers.training import tiny_chat_model

    tiny_chat_model()


def _pure() -> None:
    assert sorted([2, 1]) == [1, 2]


def _item(nodeid: str, function: Any = _pure, fixtures: tuple[str, ...] = (), **params: Any) -> Any:
    return SimpleNamespace(
        nodeid=nodeid,
        function=function,
        fixturenames=list(fixtures),
        callspec=SimpleNamespace(params=params) if params else None,
        get_closest_marker=lambda name: None,
    )


@pytest.mark.trl
@pytest.mark.slow
def test_the_helpers_a_function_calls_are_found_through_the_suites_own_functions() -> None:
    assert helper_areas(_runs_rubric) == {"slow"}
    assert helper_areas(_trains) == {"trl"}  # imported in the function's body
    assert helper_areas(_pure) == frozenset()

    def through_a_helper_of_the_module() -> None:
        _runs_rubric()

    def starting_a_process() -> None:
        subprocess.run(["true"], check=True)

    assert helper_areas(through_a_helper_of_the_module) == {"slow"}
    assert helper_areas(starting_a_process) == {"slow"}


@pytest.mark.trl
@pytest.mark.slow
def test_areas_come_from_path_fixtures_and_runtime_and_each_implies_slow() -> None:
    assert areas(_item("tests/rubrics/test_leaf.py::test_x")) == set()
    assert areas(_item("tests/harness/runtimes/test_docker.py::test_x")) == {"bwrap", "slow"}
    assert areas(_item("tests/harness/views/test_html.py::test_x", fixtures=("browser",))) == {
        "browser",
        "slow",
    }
    assert areas(_item("tests/envs/test_x.py::test_y[docker]", runtime="docker:img")) == {"docker", "slow"}
    assert areas(_item("tests/envs/test_x.py::test_y[bwrap]", runtime="bwrap")) == {"bwrap", "slow"}
    assert areas(_item("tests/envs/test_x.py::test_y", function=_trains)) == {"trl", "slow"}


def test_every_area_and_slow_are_the_markers_pyproject_registers() -> None:
    ini = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())["tool"]["pytest"]
    assert {line.split(":")[0] for line in ini["ini_options"]["markers"]} == {*AREAS, "slow"}
    assert "--strict-markers" in ini["ini_options"]["addopts"]


def test_the_heaviest_files_go_first_each_file_kept_together_in_its_order() -> None:
    def item(nodeid: str, *names: str) -> Any:
        return SimpleNamespace(nodeid=nodeid, iter_markers=lambda: [SimpleNamespace(name=n) for n in names])

    items = [
        item("tests/a.py::t1"),
        item("tests/b.py::t1", "slow", "bwrap"),
        item("tests/c.py::t1", "slow", "install"),
        item("tests/b.py::t2"),
        item("tests/d.py::t1"),
    ]
    order_heaviest_first(items)
    assert [i.nodeid for i in items] == [
        "tests/c.py::t1",
        "tests/b.py::t1",
        "tests/b.py::t2",
        "tests/a.py::t1",
        "tests/d.py::t1",
    ]


def test_a_test_must_declare_the_real_parts_it_uses() -> None:
    def declared(nodeid: str, *names: str, **params: Any) -> Any:
        item = _item(nodeid, **params)
        item.iter_markers = lambda: [SimpleNamespace(name=n) for n in names]
        item.get_closest_marker = lambda name: SimpleNamespace(name=name) if name in names else None
        return item

    bare = declared("tests/envs/test_x.py::test_y[docker]", runtime="docker:img")
    marked = declared("tests/envs/test_x.py::test_y[docker]", "docker", "slow", runtime="docker:img")
    half = declared("tests/harness/runtimes/test_x.py::test_y", "bwrap")
    assert undeclared([bare, marked, half]) == {bare.nodeid: ["docker", "slow"], half.nodeid: ["slow"]}
    with pytest.raises(pytest.UsageError, match=r"2 tests use real parts they do not declare"):
        check_declared([bare, half])
    check_declared([marked])


@pytest.mark.slow
def test_every_test_of_the_suite_declares_what_it_uses() -> None:
    """The check runs at every collection (tests/conftest.py): the suite collects, so it holds."""
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-n", "0", "-p", "no:cacheprovider"],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[1],
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
