"""Environments: a dataset, a prompt format, optional tools and a rubric, run by `harness`.

Everything a user needs is exported here (`__all__`, checked by `tests/test_public_api.py`);
the public modules are `envs.hub` (sharing environments as packages), `envs.reference` (the
built-in environments) and `envs.agents` (CLI agents as policies). The rest is private:
`_environment` and `_presets` (the Environment and its kinds), `_registry` (finding one by
name), `_tools/` (tools from type hints, MCP servers), `_dataset`, `_auditing/`, `_harbor/`
(Harbor task folders), `_interop/` (OpenEnv and Verifiers), `_runs` (the `rubric eval` and
`rubric score` driver, which cli.py imports directly: from Python, `env.evaluate` and
`harness.rescore` do the same), `_mcp_serve` (an environment's tools as an MCP server).
Imports `rubrics`, the harness foundation, its client and runtimes, and the `harness` package.
"""

from __future__ import annotations

from envs._auditing import AuditReport, aaudit, audit
from envs._conditions import stop
from envs._environment import Environment, EnvironmentOptions
from envs._harbor import HarborVerifier, from_harbor
from envs._harbor.scaffold import init_harbor_task
from envs._harbor.task_audit import HarborTaskCheck, acheck_harbor_tasks, check_harbor_tasks
from envs._interop.openenv import OpenEnvFinalReward, OpenEnvStepReward, from_openenv
from envs._interop.openenv_serve import serve_openenv
from envs._interop.verifiers import from_verifiers
from envs._mcp_serve import aserve_mcp, serve_mcp
from envs._presets import MultiTurnEnv, SingleTurnEnv, ToolEnv
from envs._registry import (
    EnvironmentNotFoundError,
    EnvironmentSpec,
    RegisteredEnvironment,
    list_environments,
    load_environment,
)
from envs._tools.functions import Tool, ToolResult, call_tool, tool
from envs._tools.mcp import mcp_server
from envs._training.trl import TRLSpec
from envs._training.verl import VerlSpec

__all__ = [
    "AuditReport",
    "Environment",
    "EnvironmentNotFoundError",
    "EnvironmentOptions",
    "EnvironmentSpec",
    "HarborTaskCheck",
    "HarborVerifier",
    "MultiTurnEnv",
    "OpenEnvFinalReward",
    "OpenEnvStepReward",
    "RegisteredEnvironment",
    "SingleTurnEnv",
    "TRLSpec",
    "Tool",
    "ToolEnv",
    "ToolResult",
    "VerlSpec",
    "aaudit",
    "acheck_harbor_tasks",
    "aserve_mcp",
    "audit",
    "call_tool",
    "check_harbor_tasks",
    "from_harbor",
    "from_openenv",
    "from_verifiers",
    "init_harbor_task",
    "list_environments",
    "load_environment",
    "mcp_server",
    "serve_mcp",
    "serve_openenv",
    "stop",
    "tool",
]
