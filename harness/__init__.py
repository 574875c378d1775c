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

_LAZY = {
    "Client": "harness.client",
    "Completion": "harness.client",
    "rollout": "harness.runner",
    "evaluate": "harness.evaluation",
    "rescore": "harness.rescoring",
    "arescore": "harness.rescoring",
    "EvalResults": "harness.results",
    "load_results": "harness.results",
    "ScriptedEndpoint": "harness.scripted",
    "EnvironmentProtocol": "harness.protocol",
    "run_sync": "harness.aio",
}

if TYPE_CHECKING:  # pragma: no cover
    from harness.aio import run_sync
    from harness.client import Client, Completion
    from harness.evaluation import evaluate
    from harness.protocol import EnvironmentProtocol
    from harness.rescoring import arescore, rescore
    from harness.results import EvalResults, load_results
    from harness.runner import rollout
    from harness.scripted import ScriptedEndpoint


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
