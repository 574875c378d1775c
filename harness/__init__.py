"""Talking to OpenAI-compatible endpoints and running rollouts: the harness's front door.

Everything a user needs is exported here (`__all__`, checked by `tests/test_public_api.py`);
`harness.runtimes` (sandboxes), `harness.proxy` (the capture proxy) and `harness.scripted`
(a scripted endpoint for tests and offline demos) are its public modules. The rest is private:

- `_core`: the foundation (the data model, errors, async helpers, defaults, protocols, the run
  summary and statistics, the run directory, the score formatter); imports nothing else.
- `_endpoint`: the client and its transport, beside the foundation.
- `_engine`: the rollout runner, `evaluate` and the executors (workers, Ray).
- `_results` and `_views`: a run on disk, read back, compared, exported; and what people see.

`rubrics` and `envs` import the foundation directly and everything above it through this
package. So that `import rubrics` loads neither the engine nor the views, the names above the
foundation are loaded on first use (`__getattr__`); the foundation's names are plain imports.
Never imports `rubrics` or `envs`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from harness._core.aio import Stopped, run_sync
from harness._core.display import provide_html_views as _provide_html_views
from harness._core.errors import (
    ConfigError,
    ConfigTypeError,
    EndpointError,
    EnvironmentNotFoundError,
    NotScoreableError,
    ResultsError,
    ResultsNotFoundError,
    ResultsWarning,
    RubricError,
    ScoringError,
    TooManyErrorsError,
    UserCodeError,
    WorkerError,
    WorkersHint,
)
from harness._core.protocol import EnvironmentProtocol, EnvironmentSource
from harness._core.run.options import EvaluateOptions, Shard
from harness._core.run.summary import Summary
from harness._core.samples import TrainingSample, training_samples
from harness._core.tree import TreeNode
from harness._core.types import (
    FunctionCall,
    Message,
    ModelCall,
    RetokenizationSkew,
    Rollout,
    ToolCall,
    TurnTokens,
    Usage,
)

if TYPE_CHECKING:  # pragma: no cover
    from harness._endpoint.client import Client, Completion
    from harness._endpoint.doctor import DoctorCheck, DoctorReport, adoctor, doctor
    from harness._engine.evaluation import aevaluate, evaluate
    from harness._engine.runner import rollout
    from harness._results.compare import Comparison, compare
    from harness._results.eval_results import EvalResults, load_results
    from harness._results.rescoring import arescore, rescore
    from harness._results.sharding import MergeReport, merge_results
    from harness._views.report import write_report
    from harness.proxy import CaptureProxy, ProxyBudgets, ProxySession
    from harness.scripted import ScriptedEndpoint

# Above the foundation: loaded on first use (see the module docstring).
_LAZY = {
    "CaptureProxy": "harness.proxy",
    "Client": "harness._endpoint.client",
    "Comparison": "harness._results.compare",
    "Completion": "harness._endpoint.client",
    "DoctorCheck": "harness._endpoint.doctor",
    "DoctorReport": "harness._endpoint.doctor",
    "EvalResults": "harness._results.eval_results",
    "MergeReport": "harness._results.sharding",
    "ProxyBudgets": "harness.proxy",
    "ProxySession": "harness.proxy",
    "ScriptedEndpoint": "harness.scripted",
    "adoctor": "harness._endpoint.doctor",
    "aevaluate": "harness._engine.evaluation",
    "arescore": "harness._results.rescoring",
    "compare": "harness._results.compare",
    "doctor": "harness._endpoint.doctor",
    "evaluate": "harness._engine.evaluation",
    "load_results": "harness._results.eval_results",
    "merge_results": "harness._results.sharding",
    "rescore": "harness._results.rescoring",
    "rollout": "harness._engine.runner",
    "write_report": "harness._views.report",
}

# The views draw the foundation's objects in notebooks; they register themselves when first needed.
_provide_html_views("harness._views.html")
_provide_html_views("harness._views.compare_html")


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'harness' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "CaptureProxy",
    "Client",
    "Comparison",
    "Completion",
    "ConfigError",
    "ConfigTypeError",
    "DoctorCheck",
    "DoctorReport",
    "EndpointError",
    "EnvironmentNotFoundError",
    "EnvironmentProtocol",
    "EnvironmentSource",
    "EvalResults",
    "EvaluateOptions",
    "FunctionCall",
    "MergeReport",
    "Message",
    "ModelCall",
    "NotScoreableError",
    "ProxyBudgets",
    "ProxySession",
    "ResultsError",
    "ResultsNotFoundError",
    "ResultsWarning",
    "RetokenizationSkew",
    "Rollout",
    "RubricError",
    "ScoringError",
    "ScriptedEndpoint",
    "Shard",
    "Stopped",
    "Summary",
    "TooManyErrorsError",
    "ToolCall",
    "TrainingSample",
    "TreeNode",
    "TurnTokens",
    "Usage",
    "UserCodeError",
    "WorkerError",
    "WorkersHint",
    "adoctor",
    "aevaluate",
    "arescore",
    "compare",
    "doctor",
    "evaluate",
    "load_results",
    "merge_results",
    "rescore",
    "rollout",
    "run_sync",
    "training_samples",
    "write_report",
]
