"""Environments: a dataset, a prompt format, optional tools and a rubric, run by `harness`.

`Environment` (and its presets `SingleTurnEnv`, `ToolEnv`, `MultiTurnEnv`) implements
`harness.protocol.EnvironmentProtocol`; `load_environment` finds installed environment
packages by name. `datasets` is imported only when a dataset is actually built.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

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

# Environments from other frameworks (envs.interop) sit above the registry that `envs`
# exports, so they are exported lazily: importing `envs` does not import them.
_LAZY = {"from_verifiers": "envs.interop.verifiers"}

if TYPE_CHECKING:  # pragma: no cover
    from envs.interop.verifiers import from_verifiers


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'envs' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


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
    "from_verifiers",
    "list_environments",
    "load_environment",
    "mcp_server",
    "stop",
    "tool",
]
