"""The public API: three front doors and a few public modules, each `__all__` checked once.

In the style of httpx's `test_exported_members`: what a package exports is exactly its
`__all__` (sorted as ruff's RUF022, no name twice, every name resolving and owned by its
package); everything else lives in `_`-prefixed modules. The `__all__`s are the only list of
public names: README, the docs and the notebooks, which users read and copy, use only those
names (so a name they teach cannot be dropped without the docs changing too), while cli.py is
part of the house and may import the interior. Tests import private modules only where they
test a private unit (tests/private_imports.json).
"""

from __future__ import annotations

import ast
import importlib
import inspect
import json
import pkgutil
import re
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("rubrics", "envs", "harness")
# The public modules DESIGN.md names, besides the three packages.
PUBLIC_MODULES = (
    "envs.agents",
    "envs.hub",
    "envs.reference",
    "harness.proxy",
    "harness.runtimes",
    "harness.scripted",
    "rubrics.calibration",
    "rubrics.credit",
    "rubrics.judges",
    "rubrics.parsers",
)
PUBLIC = (*PACKAGES, *PUBLIC_MODULES)
# Exported objects defined in another package, on purpose (one object, several front doors).
SHARED = {
    ("rubrics", "Rollout"): "harness",
    ("rubrics", "ScoringError"): "harness",
    ("envs", "EnvironmentNotFoundError"): "harness",
}

# Test files that test a private unit directly (a parser, a statistic, a file format) import it
# from its private module; every other test goes through the front doors.
PRIVATE_IMPORTS_ALLOWED: frozenset[str] = frozenset(
    json.loads((ROOT / "tests" / "private_imports.json").read_text())
)


def _isort_order(name: str) -> tuple[int, str]:
    """Constants, then classes, then functions (ruff's RUF022 keeps `__all__` in this order)."""
    return (0 if name.isupper() else 1 if name[0].isupper() else 2, name)


def _public(name: str) -> types.ModuleType:
    return importlib.import_module(name)


def _private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


@pytest.mark.parametrize("module", PUBLIC)
def test_exported_members(module: str) -> None:
    imported = _public(module)
    exported = imported.__all__
    assert exported == sorted(exported, key=_isort_order), f"{module}.__all__ is not sorted"
    assert len(set(exported)) == len(exported), f"{module}.__all__ names something twice"
    top = module.split(".")[0]
    for name in exported:
        value = getattr(imported, name)  # complete: every listed name resolves
        if isinstance(value, types.ModuleType):
            assert value.__name__ in PUBLIC, f"{module}.{name} is a private module"
            continue
        if not (inspect.isclass(value) or inspect.isfunction(value)):
            continue  # constants and type aliases
        owner = value.__module__
        home = SHARED.get((module, name), top)
        assert owner == home or owner.startswith(home + "."), f"{module}.{name} comes from {owner}"


@pytest.mark.parametrize("package", PACKAGES)
def test_a_front_door_binds_nothing_of_ours_beyond_its_all(package: str) -> None:
    """A name taken out of `__all__` is taken out of the package too, not left reachable."""
    imported = _public(package)
    for name in imported.__all__:
        getattr(imported, name)  # the lazily loaded names land in the namespace
    extra = [
        name
        for name, value in vars(imported).items()
        if not name.startswith("_")
        and name not in imported.__all__
        and not isinstance(value, types.ModuleType)
        and getattr(value, "__module__", "").split(".")[0] in PACKAGES
    ]
    assert not extra, f"{package} binds {extra} without exporting them: export them or import them privately"


def _modules(package: str) -> list[str]:
    root = importlib.import_module(package)
    return [info.name for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}.")]


@pytest.mark.parametrize("package", PACKAGES)
def test_every_module_is_public_by_name_or_private(package: str) -> None:
    for name in _modules(package):
        if name in PUBLIC:
            continue
        parts = name.split(".")[1:]
        assert any(part.startswith("_") for part in parts) or any(
            name.startswith(p + ".") for p in PUBLIC_MODULES
        ), f"{name} is neither a public module named in DESIGN.md nor `_`-prefixed"


@pytest.mark.parametrize("package", PACKAGES)
def test_no_public_name_is_shadowed_by_a_submodule(package: str) -> None:
    for name in _modules(package):
        importlib.import_module(name)
    root = importlib.import_module(package)
    submodules = {name.split(".")[1] for name in _modules(package)}
    for name in root.__all__:
        value = getattr(root, name)
        if isinstance(value, types.ModuleType):
            assert f"{package}.{name}" in PUBLIC_MODULES
            continue
        assert name not in submodules, f"{package}.{name} shares its name with the module {package}.{name}"


def _not_public(reference: str) -> str | None:
    """Why the dotted `reference` (`harness.evaluate`, `envs.hub.search`, `harness.Client.open_clients`)
    is not a public name, or None when it is: each step below a module is in its `__all__` (or
    a public module), each step below an object an attribute of it."""
    parts = reference.split(".")
    if _private(reference):
        return f"{reference} is private"
    where, value = parts[0], _public(parts[0])
    for part in parts[1:]:
        if isinstance(value, types.ModuleType):
            if f"{where}.{part}" in PUBLIC:
                where, value = f"{where}.{part}", _public(f"{where}.{part}")
                continue
            if part not in value.__all__:
                return f"{where}.{part} is not in {where}.__all__"
        elif not hasattr(value, part):
            return f"{where} has no attribute {part!r}"
        where, value = f"{where}.{part}", getattr(value, part)
    return None


def _dotted(node: ast.expr) -> str | None:
    """`a.b.c` for an attribute chain on a plain name, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _references(source: str) -> set[str]:
    """The names of ours that `source` (Python) imports or reaches through an imported module."""
    tree = ast.parse(source)
    found, modules = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found |= {node.module} | {f"{node.module}.{a.name}" for a in node.names if a.name != "*"}
        elif isinstance(node, ast.Import):
            for a in node.names:
                found.add(a.name)
                # `import envs.hub` binds `envs`; `import envs.hub as hub` binds `hub`.
                modules[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
    for node in ast.walk(tree):
        dotted = _dotted(node) if isinstance(node, ast.Attribute) else None
        head = dotted.split(".")[0] if dotted else ""
        if dotted and head in modules:
            found.add(modules[head] + dotted[len(head) :])
    return {m for m in found if m.split(".")[0] in PACKAGES}


def _python_blocks(markdown: str) -> list[str]:
    """Every Python block a reader sees, the ones fenced with attributes (shown, not run) too."""
    return re.findall(r"^```python[^\n]*\n(.*?)^```", markdown, flags=re.S | re.M)


def _users_code() -> dict[str, str]:
    """The Python that README, the docs and the notebooks show users, by where it is."""
    sources = {}
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for i, block in enumerate(_python_blocks(path.read_text())):
            sources[f"{path.relative_to(ROOT)} block {i + 1}"] = block
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for i, cell in enumerate(json.loads(path.read_text())["cells"]):
            if cell["cell_type"] == "code":
                text = "".join(cell["source"])
                sources[f"{path.relative_to(ROOT)} cell {i + 1}"] = "\n".join(
                    line for line in text.splitlines() if not line.lstrip().startswith(("%", "!"))
                )
    return sources


def _prose_references(markdown: str) -> set[str]:
    """The dotted names of ours written as inline code in a page's prose (`harness.evaluate`)."""
    prose = re.sub(r"^```.*?^```", "", markdown, flags=re.S | re.M)
    return {
        ref
        for span in re.findall(r"`([^`\n]+)`", prose)
        for ref in re.findall(r"(?<![\w.])((?:rubrics|envs|harness)(?:\.\w+)+)", span)
    }


@pytest.mark.parametrize("where", ["README and docs", "notebooks"])
def test_users_code_uses_only_public_names(where: str) -> None:
    sources = {k: v for k, v in _users_code().items() if k.startswith("notebooks") == (where == "notebooks")}
    assert sources
    leaks = {k: sorted(filter(None, map(_not_public, _references(v)))) for k, v in sources.items()}
    leaks = {k: v for k, v in leaks.items() if v}
    assert not leaks, f"names that are not public, where users read: {leaks}"


def test_the_docs_prose_names_only_public_names() -> None:
    """A name the text calls public (`harness.rescore`) is one; the interior is named with its
    `_` (`harness._core`), as docs/layout.md does."""
    leaks = {}
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        refs = {r for r in _prose_references(path.read_text()) if not _private(r)}
        problems = sorted(filter(None, map(_not_public, refs)))
        if problems:
            leaks[str(path.relative_to(ROOT))] = problems
    assert not leaks, f"the docs call these public: {leaks}"


def test_the_checks_catch_an_interior_name() -> None:
    """The two checks above fail on what they guard against (so they cannot pass vacuously)."""
    assert _references("import harness\nharness.safe_text(x)\nfrom envs.hub import search") >= {
        "harness.safe_text",
        "envs.hub.search",
    }
    assert _not_public("harness.safe_text") == "harness.safe_text is not in harness.__all__"
    assert _not_public("envs._driver.runs.run") == "envs._driver.runs.run is private"
    assert _not_public("harness.Client.open_clients") is None
    assert _not_public("envs.hub.search") is None
    assert _prose_references("see `harness.rescore(harness.load_results(DIR))`") == {
        "harness.rescore",
        "harness.load_results",
    }


def test_tests_import_private_modules_only_where_allowed() -> None:
    users = set()
    for path in sorted((ROOT / "tests").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if any(_private(m) for m in _references(path.read_text())):
            users.add(rel)
    assert users <= PRIVATE_IMPORTS_ALLOWED, (
        f"add a front-door import instead: {sorted(users - PRIVATE_IMPORTS_ALLOWED)}"
    )
    stale = PRIVATE_IMPORTS_ALLOWED - users
    assert not stale, (
        f"these no longer import private modules; drop them from tests/private_imports.json: {stale}"
    )


def test_harness_evaluate_and_rollout_are_the_functions() -> None:
    from harness import aevaluate, evaluate, rollout

    assert inspect.iscoroutinefunction(aevaluate) and not inspect.iscoroutinefunction(evaluate)
    assert callable(rollout) and inspect.iscoroutinefunction(rollout)


def test_importing_rubrics_loads_no_engine_result_or_view() -> None:
    import subprocess
    import sys

    code = "import sys, rubrics; print('\\n'.join(sorted(sys.modules)))"
    loaded = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    upper = [
        m for m in loaded.split() if m.startswith(("harness._engine", "harness._results", "harness._views"))
    ]
    assert not upper, f"import rubrics loaded {upper}"


def test_every_error_is_a_rubric_error_with_its_builtin_base() -> None:
    import envs
    import harness
    import rubrics

    assert issubclass(harness.ConfigError, harness.RubricError) and issubclass(
        harness.ConfigError, ValueError
    )
    assert issubclass(harness.EnvironmentNotFoundError, LookupError)
    assert issubclass(harness.ConfigTypeError, harness.ConfigError) and issubclass(
        harness.ConfigTypeError, TypeError
    )
    assert issubclass(harness.NotScoreableError, TypeError) and issubclass(
        harness.NotScoreableError, NotImplementedError
    )
    assert issubclass(harness.ResultsNotFoundError, FileNotFoundError)
    for name in (
        "ScoringError",
        "EndpointError",
        "EnvironmentNotFoundError",
        "ResultsError",
        "NotScoreableError",
    ):
        assert issubclass(getattr(harness, name), harness.RubricError), name
    assert envs.EnvironmentNotFoundError is harness.EnvironmentNotFoundError
    assert rubrics.ScoringError is harness.ScoringError
