"""Environments: a dataset, a prompt format, optional tools and a rubric, run by `harness`.

`Environment` (and its presets `SingleTurnEnv`, `ToolEnv`, `MultiTurnEnv`) implements
`harness.protocol.EnvironmentProtocol`; `load_environment` finds installed environment
packages by name. `datasets` is imported only when a dataset is actually built.
"""

from __future__ import annotations

from envs.conditions import stop
from envs.environment import Environment
from envs.presets import MultiTurnEnv, SingleTurnEnv, ToolEnv
from envs.registry import (
    EnvironmentNotFoundError,
    EnvironmentSpec,
    RegisteredEnvironment,
    list_environments,
    load_environment,
)
from envs.tools.functions import Tool, ToolResult, call_tool, tool
from envs.tools.mcp import mcp_server
from envs.trl_bridge import TRLSpec

__all__ = [
    "Environment",
    "EnvironmentNotFoundError",
    "EnvironmentSpec",
    "MultiTurnEnv",
    "RegisteredEnvironment",
    "SingleTurnEnv",
    "TRLSpec",
    "Tool",
    "ToolEnv",
    "ToolResult",
    "call_tool",
    "list_environments",
    "load_environment",
    "mcp_server",
    "stop",
    "tool",
]
