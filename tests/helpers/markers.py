"""Which real parts a test uses: each test declares them as markers, and this reads its code to
check that it does (tests/conftest.py refuses a collection with an undeclared one).

A test needs an area marker (registered in pyproject.toml) by where it lives (`AREAS_BY_PATH`),
by the fixtures it requests (`AREAS_BY_FIXTURE`), by the runtime it is parametrized with
(`bwrap...`, `docker:...`), or by the test helpers its code calls (`AREAS_BY_HELPER`: the
test's own code, its module's functions it calls and its fixtures' code are read, not run).
Every area marker implies `slow`, and so does a test that starts a process itself
(`subprocess`); `pytest -m "not slow"` is then the quick loop.

The areas also order the run: under pytest-xdist the files that hold the heaviest tests go
first (`order_heaviest_first`), so that no long file starts when the other worker has nothing
left to do.
"""

from __future__ import annotations

import functools
import inspect
import multiprocessing
import subprocess
import sys
import types
from collections.abc import Iterator
from typing import Any

import pytest

from tests.helpers import browser, hub, install, processes, training

#: Areas of whole folders or files (paths relative to the repository root, prefix match);
#: `slow` alone for files whose tests start processes in ways the code reading cannot see.
AREAS_BY_PATH: dict[str, tuple[str, ...]] = {
    "tests/cli/test_hub_end_to_end.py": ("hub", "install"),
    "tests/cli/test_hub_commands.py": ("hub",),
    "tests/envs/hub/test_hub_text.py": ("hub",),
    "tests/envs/hub/test_publish_search.py": ("hub",),
    "tests/envs/agents/": ("agents",),
    "tests/envs/harbor/": ("agents",),
    "tests/envs/interop/": ("interop",),
    "tests/envs/interop/test_openenv_serve.py": ("serve",),
    "tests/envs/interop/test_openenv_versions.py": ("serve",),
    "tests/envs/test_mcp.py": ("interop",),
    "tests/envs/test_mcp_serve.py": ("interop", "serve"),
    "tests/envs/reference/test_sandbox.py": ("bwrap",),
    "tests/envs/reference/test_python.py": ("bwrap",),  # the python environment's sandbox
    "tests/harness/runtimes/": ("bwrap",),
    "tests/harness/engine/test_ray_executor.py": ("ray",),
    # worker processes (harness executors), each importing the project
    "tests/harness/engine/test_workers.py": ("slow",),
    "tests/envs/test_workers.py": ("slow",),
    "tests/harness/endpoint/test_transformers_serve.py": ("serve", "trl"),
    "tests/rubrics/test_credit.py": ("trl",),
    "tests/rubrics/test_trl_failure_contract.py": ("trl",),
    "tests/rubrics/test_verl.py": ("verl",),
    "tests/envs/test_verl_bridge.py": ("verl",),
    "tests/test_extras_install.py": ("install", "interop"),
    "tests/test_notebooks.py": ("kernel",),
}

#: Areas of the fixtures a test requests.
AREAS_BY_FIXTURE: dict[str, tuple[str, ...]] = {
    "browser": ("browser",),
    "hub_server": ("hub",),
    "local_ray": ("ray",),
}

#: Areas of the helpers a test's code calls (found by reading the code, not by running it).
AREAS_BY_HELPER: list[tuple[Any, tuple[str, ...]]] = [
    (browser.chromium, ("browser",)),
    (training.tiny_chat_model, ("trl",)),
    (training.grpo_config, ("trl",)),
    (hub.serve_pypiserver, ("hub",)),
    (install.build_rubric_wheel, ("install",)),
    (processes.rubric_serve, ("serve",)),
    (processes.serving, ("serve",)),
    (install.ensure_openenv_side_python, ("interop",)),
    # A test that starts a process (the `rubric` executable, a python, a server) is slow.
    (subprocess, ("slow",)),
    (multiprocessing, ("slow",)),
    (processes.run, ("slow",)),
    (processes.at_a_terminal, ("slow",)),
    (processes.Reaped, ("slow",)),
]

#: Every area; each implies `slow`.
AREAS = ("agents", "browser", "bwrap", "docker", "hub", "install", "interop", "kernel", "ray", "serve", "trl", "verl")  # fmt: skip

#: Rough seconds a test of an area takes, to start the heaviest files first (an order, not a
#: promise; a test counts as its heaviest area).
WEIGHT = {"install": 60, "ray": 5, "agents": 4, "kernel": 4, "serve": 4, "trl": 3, "hub": 3,
          "slow": 1.5, "interop": 1.5, "verl": 1, "docker": 1, "browser": 1, "bwrap": 0.3}  # fmt: skip


def _code_objects(code: types.CodeType) -> Iterator[types.CodeType]:
    """`code` and the code of every function, lambda and comprehension nested in it."""
    yield code
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            yield from _code_objects(const)


def referenced(function: Any) -> list[Any]:
    """The global objects the code of `function` names, following the functions of the test
    suite itself (tests.*) that it calls, so a module's helper that runs `rubric` counts."""
    found: list[Any] = []
    todo = [function]
    seen: set[types.CodeType] = set()
    while todo:
        function = todo.pop()
        if function.__code__ in seen:
            continue
        seen.add(function.__code__)
        for code in _code_objects(function.__code__):
            # A name is a global of the function's module, or one imported in its body
            # (`from tests.helpers.processes import run`: the module and the name are both in co_names).
            imported = [sys.modules[n] for n in code.co_names if n in sys.modules]
            for name in code.co_names:
                if name in function.__globals__:
                    obj = function.__globals__[name]
                else:
                    obj = next((getattr(m, name) for m in imported if hasattr(m, name)), None)
                    if obj is None:
                        continue
                found.append(obj)
                if inspect.isfunction(obj) and obj.__module__.startswith("tests."):
                    todo.append(obj)
    return found


@functools.cache
def helper_areas(function: Any) -> frozenset[str]:
    """The areas of the helpers (`AREAS_BY_HELPER`) that `function`'s code calls; once per
    function (a fixture or a parametrized test serves many tests)."""
    function = inspect.unwrap(function)
    if not inspect.isfunction(function):
        return frozenset()
    code = referenced(function)
    return frozenset(a for helper, names in AREAS_BY_HELPER if any(o is helper for o in code) for a in names)


def _fixture_functions(item: pytest.Item) -> list[Any]:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return []
    return [defs[-1].func for name in item.fixturenames for defs in [info.name2fixturedefs.get(name)] if defs]


def areas(item: pytest.Item) -> set[str]:
    """The area markers (and `slow`) that `item` gets."""
    found = {area for path, names in AREAS_BY_PATH.items() if item.nodeid.startswith(path) for area in names}
    found |= {area for name in item.fixturenames for area in AREAS_BY_FIXTURE.get(name, ())}
    callspec = getattr(item, "callspec", None)
    for value in callspec.params.values() if callspec else ():
        if isinstance(value, str) and value.startswith("bwrap"):
            found.add("bwrap")
        elif isinstance(value, str) and value.startswith("docker:"):
            found.add("docker")
    for function in [getattr(item, "function", None), *_fixture_functions(item)]:
        found |= helper_areas(function)
    if found or item.get_closest_marker("slow") or any(item.get_closest_marker(a) for a in AREAS):
        found.add("slow")
    return found


def undeclared(items: list[pytest.Item]) -> dict[str, list[str]]:
    """The area markers (and `slow`) each test uses but does not declare, by test id: empty when
    every test declares what it uses (`pytestmark` in its file, or a decorator or a
    `pytest.param(..., marks=...)` on the test)."""
    missing: dict[str, list[str]] = {}
    for item in items:
        declared = {marker.name for marker in item.iter_markers()}
        if lacking := sorted(areas(item) - declared):
            missing[item.nodeid] = lacking
    return missing


def check_declared(items: list[pytest.Item]) -> None:
    """Refuse a collection in which a test uses a real part it does not declare."""
    missing = undeclared(items)
    if not missing:
        return
    shown = [f"  {nodeid}: {', '.join(names)}" for nodeid, names in list(missing.items())[:20]]
    more = f"\n  ... and {len(missing) - 20} more" if len(missing) > 20 else ""
    raise pytest.UsageError(
        f"{len(missing)} tests use real parts they do not declare (tests/helpers/markers.py reads "
        "their code); add the markers to the test (`@pytest.mark.docker`) or its file "
        "(`pytestmark = [pytest.mark.docker, pytest.mark.slow]`):\n" + "\n".join(shown) + more
    )


def order_heaviest_first(items: list[pytest.Item]) -> None:
    """Reorder `items` in place: files by the weight of their tests' areas, heaviest first,
    each file's tests kept together and in their order (xdist hands tests out in this order,
    with --no-loadscope-reorder; under --dist worksteal an idle worker then takes from the other)."""
    files: dict[str, list[pytest.Item]] = {}
    for item in items:
        files.setdefault(item.nodeid.split("::")[0], []).append(item)

    def weight(file_items: list[pytest.Item]) -> float:
        return sum(
            max((WEIGHT.get(m.name, 0) for m in item.iter_markers()), default=0) for item in file_items
        )

    ordered = sorted(files.values(), key=weight, reverse=True)  # stable: ties keep collection order
    items[:] = [item for file_items in ordered for item in file_items]
