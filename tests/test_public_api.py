"""The public names of rubrics, envs and harness: each is the documented object, never a submodule."""

from __future__ import annotations

import importlib
import pkgutil
import types

import pytest

PACKAGES = ("rubrics", "envs", "harness")
# Names that are public modules on purpose (documented in DESIGN.md as modules).
PUBLIC_MODULES = {("rubrics", "judges"), ("rubrics", "parsers")}


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
    from harness import evaluate, rollout

    assert callable(evaluate) and evaluate.__module__ == "harness.evaluation"
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
