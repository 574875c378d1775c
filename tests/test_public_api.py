"""The public API: three front doors and a few public modules, each `__all__` sorted, complete and owned.

In the style of httpx's `test_exported_members`: what a package exports is exactly its
`__all__`; everything else lives in `_`-prefixed modules, which cli.py, README, the docs and
the notebooks never import (and tests only where they test a private unit, listed below).
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

# The names users build on (README, the docs, DESIGN.md): a move must keep each one working.
PROMISED = {
    "rubrics": [
        "Rubric", "WeightedSum", "Sequential", "Gate", "RubricList", "RubricDict", "FunctionRubric",
        "reward", "LLMJudge", "JudgeConfig", "ScoringError", "ScoredBatch", "RemovableHandle",
        "IncompatibleKeys", "Rollout", "judges", "parsers", "credit", "GroupRubric", "Relative",
        "relative", "RankJudge", "PairwiseJudge", "register_advantage_estimator",
    ],
    "envs": [
        "Environment", "EnvironmentOptions", "SingleTurnEnv", "ToolEnv", "MultiTurnEnv", "tool", "Tool", "ToolResult",
        "call_tool", "stop", "mcp_server", "OpenEnvStepReward", "OpenEnvFinalReward", "load_environment", "list_environments",
        "RegisteredEnvironment", "EnvironmentNotFoundError", "EnvironmentSpec", "TRLSpec", "VerlSpec",
        "audit", "aaudit", "AuditReport", "from_verifiers", "from_openenv", "from_harbor", "serve_openenv",
        "serve_mcp", "aserve_mcp", "RunRequest", "PreparedRun", "prepare_run", "run", "arun", "resume",
        "rescoring_environment", "describe_provenance", "init_harbor_task", "is_harbor_task",
        "check_harbor_tasks", "acheck_harbor_tasks", "HarborTaskCheck", "HarborVerifier",
    ],
    "harness": [
        "Client", "Completion", "rollout", "evaluate", "aevaluate", "EvaluateOptions", "EvalResults",
        "Summary", "load_results", "rescore", "arescore", "merge_results", "MergeReport", "Shard",
        "write_report", "ScriptedEndpoint", "EnvironmentProtocol", "EnvironmentSource", "run_sync",
        "Message", "Rollout", "ToolCall", "FunctionCall", "Usage", "TurnTokens", "TreeNode",
        "RubricError", "ConfigError", "ConfigTypeError", "EndpointError", "EnvironmentNotFoundError",
        "NotScoreableError", "ResultsError", "ResultsNotFoundError", "ScoringError",
        "TooManyErrorsError", "UserCodeError", "WorkerError", "CaptureProxy", "ProxyBudgets",
        "ProxySession", "ModelCall", "RetokenizationSkew", "Stopped", "DEFAULT_CONCURRENCY",
        "DEFAULT_TRANSPORT", "TRANSPORTS", "check_limits", "escape_control", "newest_rescored",
        "rescore_to", "report_path", "show_run", "compare", "Comparison", "ResultsWarning", "WorkersHint",
    ],
}  # fmt: skip

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
def test_the_promised_names_are_the_whole_front_door(package: str) -> None:
    assert sorted(_public(package).__all__) == sorted(PROMISED[package])


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


def _imports(source: str) -> set[str]:
    """Modules of ours that `source` (Python) imports from."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in PUBLIC}
        elif isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
    return {m for m in found if m.split(".")[0] in PACKAGES}


def _private(module: str) -> bool:
    return any(part.startswith("_") for part in module.split("."))


def _code_blocks(markdown: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", markdown, flags=re.S)


def _front_door_sources() -> dict[str, str]:
    sources = {"cli.py": (ROOT / "cli.py").read_text()}
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for i, block in enumerate(_code_blocks(path.read_text())):
            sources[f"{path.relative_to(ROOT)} block {i + 1}"] = block
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for i, cell in enumerate(json.loads(path.read_text())["cells"]):
            if cell["cell_type"] == "code":
                text = "".join(cell["source"])
                sources[f"{path.relative_to(ROOT)} cell {i + 1}"] = "\n".join(
                    line for line in text.splitlines() if not line.lstrip().startswith(("%", "!"))
                )
    return sources


@pytest.mark.parametrize("where", ["cli.py", "README and docs", "notebooks"])
def test_users_code_imports_only_public_modules(where: str) -> None:
    sources = {
        k: v
        for k, v in _front_door_sources().items()
        if (where == "cli.py") == (k == "cli.py") and (where != "notebooks") != k.startswith("notebooks")
    }
    assert sources
    leaks = {k: sorted(m for m in _imports(v) if _private(m)) for k, v in sources.items()}
    leaks = {k: v for k, v in leaks.items() if v}
    assert not leaks, f"private modules imported where users read: {leaks}"


def test_tests_import_private_modules_only_where_allowed() -> None:
    users = set()
    for path in sorted((ROOT / "tests").rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        if any(_private(m) for m in _imports(path.read_text())):
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
