"""Talking to OpenAI-compatible endpoints and running rollouts.

Names are imported lazily so that `rubric --help` does not pay for `openai`/`datasets`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from harness.errors import (
    ConfigError,
    ConfigTypeError,
    EndpointError,
    EnvironmentNotFoundError,
    NotScoreableError,
    ResultsError,
    ResultsNotFoundError,
    RubricError,
    ScoringError,
)
from harness.types import FunctionCall, Message, Rollout, ToolCall, Usage
from harness.views import html as _html

_LAZY = {
    "Client": "harness.client",
    "Completion": "harness.client",
    "rollout": "harness.runner",
    "evaluate": "harness.evaluation",
    "rescore": "harness.results.rescoring",
    "arescore": "harness.results.rescoring",
    "EvalResults": "harness.results.eval_results",
    "load_results": "harness.results.eval_results",
    "ScriptedEndpoint": "harness.scripted.endpoint",
    "EnvironmentProtocol": "harness.protocol",
    "run_sync": "harness.aio",
}

if TYPE_CHECKING:  # pragma: no cover
    from harness.aio import run_sync
    from harness.client import Client, Completion
    from harness.evaluation import evaluate
    from harness.protocol import EnvironmentProtocol
    from harness.results.eval_results import EvalResults, load_results
    from harness.results.rescoring import arescore, rescore
    from harness.runner import rollout
    from harness.scripted.endpoint import ScriptedEndpoint


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "ConfigError",
    "ConfigTypeError",
    "EndpointError",
    "EnvironmentNotFoundError",
    "FunctionCall",
    "Message",
    "NotScoreableError",
    "ResultsError",
    "ResultsNotFoundError",
    "Rollout",
    "RubricError",
    "ScoringError",
    "ToolCall",
    "Usage",
    *_LAZY,
]
