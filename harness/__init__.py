"""Talking to OpenAI-compatible endpoints and running rollouts: the engine.

Here: the data model (`types`), the error tree (`errors`), the rollout loop (`runner`), a
whole run (`evaluation`), what an environment must provide (`protocol`) and the limits of a
run's settings (`limits`). Around it: `endpoint/` (the client and the wire format),
`proxy/` (the capture proxy agents call instead of a provider), `results/` (a run on disk),
`views/` (what people look at), `executors/` (workers, Ray) and `scripted/` (a fake endpoint).
Never imports `rubrics` or `envs`. Names are imported lazily so that `rubric --help` does not
pay for `openai`/`datasets`.
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
    TooManyErrorsError,
    UserCodeError,
    WorkerError,
)
from harness.types import FunctionCall, Message, Rollout, ToolCall, TreeNode, TurnTokens, Usage
from harness.views import compare_html as _compare_html
from harness.views import html as _html

_LAZY = {
    "Client": "harness.endpoint.client",
    "Completion": "harness.endpoint.client",
    "rollout": "harness.runner",
    "evaluate": "harness.evaluation",
    "aevaluate": "harness.evaluation",
    "EvaluateOptions": "harness.evaluation",
    "rescore": "harness.results.rescoring",
    "arescore": "harness.results.rescoring",
    "EvalResults": "harness.results.eval_results",
    "load_results": "harness.results.eval_results",
    "Summary": "harness.results.summary",
    "merge_results": "harness.results.sharding",
    "MergeReport": "harness.results.sharding",
    "write_report": "harness.views.report",
    "ScriptedEndpoint": "harness.scripted.endpoint",
    "EnvironmentProtocol": "harness.protocol",
    "EnvironmentSource": "harness.protocol",
    "run_sync": "harness.aio",
    "CaptureProxy": "harness.proxy.server",
    "ProxyBudgets": "harness.proxy.session",
    "ProxySession": "harness.proxy.session",
    "ProxyTurn": "harness.proxy.session",
    "RetokenizationSkew": "harness.proxy.session",
}

if TYPE_CHECKING:  # pragma: no cover
    from harness.aio import run_sync
    from harness.endpoint.client import Client, Completion
    from harness.evaluation import EvaluateOptions, aevaluate, evaluate
    from harness.protocol import EnvironmentProtocol, EnvironmentSource
    from harness.proxy.server import CaptureProxy
    from harness.proxy.session import ProxyBudgets, ProxySession, ProxyTurn, RetokenizationSkew
    from harness.results.eval_results import EvalResults, load_results
    from harness.results.rescoring import arescore, rescore
    from harness.results.sharding import MergeReport, merge_results
    from harness.results.summary import Summary
    from harness.runner import rollout
    from harness.scripted.endpoint import ScriptedEndpoint
    from harness.views.report import write_report


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
    "TooManyErrorsError",
    "ToolCall",
    "TreeNode",
    "TurnTokens",
    "Usage",
    "UserCodeError",
    "WorkerError",
    *_LAZY,
]
