"""The public names of rubrics, envs and harness: each is the documented object, never a submodule."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import types
from pathlib import Path

import pytest

PACKAGES = ("rubrics", "envs", "harness")
# Names that are public modules on purpose (documented in DESIGN.md as modules).
PUBLIC_MODULES = {("rubrics", "judges"), ("rubrics", "parsers")}

# Every import path the README, the notebooks and DESIGN.md show, and the names each package
# exports: users' code depends on them, so a module move must keep them working.
DOCUMENTED = {
    "rubrics": [
        "Rubric", "WeightedSum", "Sequential", "Gate", "RubricList", "RubricDict", "FunctionRubric",
        "reward", "LLMJudge", "JudgeConfig", "ScoringError", "ScoredBatch", "RemovableHandle",
        "IncompatibleKeys", "Rollout", "judges", "parsers", "GroupRubric", "Relative", "relative",
        "RankJudge", "PairwiseJudge",
    ],
    "rubrics.parsers": ["ThinkFormat", "XMLFormat", "extract_after", "extract_boxed", "extract_xml", "strip_think"],
    "rubrics.judge.calibration": ["Calibration", "acalibrate", "calibrate", "find_judge"],
    "rubrics.credit": ["assign_credit", "discounted", "fixed_horizon_advantages", "progress_delta"],
    "rubrics.verl": ["as_verl_reward", "grpo_advantages"],
    "envs": [
        "Environment", "SingleTurnEnv", "ToolEnv", "MultiTurnEnv", "tool", "Tool", "ToolResult",
        "call_tool", "stop", "mcp_server", "load_environment", "list_environments",
        "RegisteredEnvironment", "EnvironmentNotFoundError", "EnvironmentSpec", "TRLSpec", "VerlSpec",
        "audit", "aaudit", "from_verifiers", "from_openenv", "from_harbor", "serve_openenv",
    ],
    "envs.auditing": ["audit", "aaudit", "AuditReport", "Flag", "Cell", "ProbeInfo", "Probe", "PROBES"],
    "envs.interop.openenv": ["OpenEnvStepReward", "OpenEnvFinalReward", "OpenEnvConnectError", "from_openenv"],
    "harness": [
        "Client", "Completion", "rollout", "evaluate", "aevaluate", "EvaluateOptions", "EvalResults",
        "Summary", "load_results", "rescore", "arescore", "merge_results", "MergeReport",
        "write_report", "ScriptedEndpoint", "EnvironmentProtocol",
        "EnvironmentSource", "run_sync", "Message", "Rollout", "ToolCall", "FunctionCall", "Usage",
        "TurnTokens", "TreeNode", "RubricError", "ConfigError", "ConfigTypeError", "EndpointError",
        "EnvironmentNotFoundError", "NotScoreableError", "ResultsError", "ResultsNotFoundError",
        "ScoringError", "TooManyErrorsError", "UserCodeError", "WorkerError", "CaptureProxy", "ProxyBudgets",
        "ProxySession", "ProxyTurn", "RetokenizationSkew",
    ],
    "harness.types": ["Message", "Rollout", "ToolCall", "Usage", "TurnTokens"],
    "harness.errors": ["ResultsWarning"],
    "harness.evaluation": ["EvaluateOptions", "evaluate", "aevaluate"],
    "harness.text": ["escape_control"],
    "harness.scripted": ["ScriptedEndpoint", "ShellScript", "StatefulPolicy", "scripted_policy", "SCRIPTED_PREFIX"],
    "envs.agents": [
        "AGENTS", "AGENT_DIR", "DEFAULT_RUNTIME", "DEFAULT_TIMEOUT", "INSTRUCTION_FILE", "Agent", "AgentContext",
        "AgentEpisodes", "AgentError", "AgentSetup", "BashAgent", "ClaudeCodeAgent", "CodexAgent", "CommandAgent",
        "MiniSweAgent", "OracleAgent", "command_passes", "file_contains", "get_agent",
    ],
    "harness.runtimes": ["get_runtime", "Runtime", "Sandbox", "SyncSandbox", "ExecResult", "prune", "aprune"],
}  # fmt: skip


@pytest.mark.parametrize("module", sorted(DOCUMENTED))
def test_every_documented_import_path_works(module: str) -> None:
    imported = importlib.import_module(module)
    for name in DOCUMENTED[module]:
        assert hasattr(imported, name), f"from {module} import {name} no longer works"
        if module in PACKAGES:
            assert name in imported.__all__, f"{module}.{name} is documented but not in __all__"


@pytest.mark.parametrize("package", PACKAGES)
def test_the_list_above_is_the_whole_public_api(package: str) -> None:
    assert sorted(importlib.import_module(package).__all__) == sorted(DOCUMENTED[package])


def test_the_docs_show_only_documented_imports() -> None:
    from tests.helpers import DOCUMENTED as readme_and_docs

    root = Path(__file__).resolve().parents[1]
    texts = [readme_and_docs, *(p.read_text() for p in (root / "notebooks").glob("*.ipynb"))]
    shown = set()
    for text in texts:
        for module, names in re.findall(r"from ((?:rubrics|envs|harness)[\w.]*) import ([\w, ]+)", text):
            shown |= {(module, n.strip()) for n in names.split(",") if n.strip()}
    for module, name in sorted(shown):
        assert name in DOCUMENTED.get(module, ()), (
            f"the docs import {name} from {module}: add it to DOCUMENTED"
        )


def _import_every_submodule(package: str) -> list[str]:
    root = importlib.import_module(package)
    names = []
    for info in pkgutil.walk_packages(root.__path__, prefix=f"{package}."):
        importlib.import_module(info.name)
        names.append(info.name.rsplit(".", 1)[1])
    return names


@pytest.mark.parametrize("package", PACKAGES)
def test_no_public_name_is_shadowed_by_a_submodule(package: str) -> None:
    submodules = _import_every_submodule(package)
    root = importlib.import_module(package)
    for name in root.__all__:
        value = getattr(root, name)
        if (package, name) in PUBLIC_MODULES:
            assert isinstance(value, types.ModuleType), f"{package}.{name} should be the module"
            continue
        assert not isinstance(value, types.ModuleType), f"{package}.{name} is a module, not the API object"
        assert name not in submodules, f"{package}.{name} shares its name with the module {package}.{name}"
        home = importlib.import_module(value.__module__) if hasattr(value, "__module__") else root
        assert getattr(home, getattr(value, "__name__", name), value) is value


def test_harness_evaluate_and_rollout_are_the_functions() -> None:
    _import_every_submodule("harness")
    from harness import aevaluate, evaluate, rollout

    assert inspect.iscoroutinefunction(aevaluate) and aevaluate.__module__ == "harness.evaluation"
    assert not inspect.iscoroutinefunction(evaluate) and evaluate.__module__ == "harness.evaluation"
    assert callable(rollout) and rollout.__module__ == "harness.runner"


def test_every_error_is_a_rubric_error_with_its_builtin_base() -> None:
    import harness

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
    import envs
    import rubrics

    assert envs.EnvironmentNotFoundError is harness.EnvironmentNotFoundError
    assert rubrics.ScoringError is harness.ScoringError
