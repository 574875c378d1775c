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
from envs.verl_bridge import VerlSpec

if TYPE_CHECKING:  # pragma: no cover
    from envs.auditing import aaudit, audit
    from envs.harbor import from_harbor
    from envs.interop.openenv import from_openenv
    from envs.interop.openenv_serve import serve_openenv
    from envs.interop.verifiers import from_verifiers

# The audit (the HTTP stack and the scripted endpoint) and other frameworks' environments and
# ours served to them (envs.interop: above the registry and the reference environments, which
# import this package) load only when first used.
_LAZY_ATTRS = {
    "audit": "envs.auditing",
    "aaudit": "envs.auditing",
    "from_harbor": "envs.harbor",
    "from_openenv": "envs.interop.openenv",
    "from_verifiers": "envs.interop.verifiers",
    "serve_openenv": "envs.interop.openenv_serve",
}


def __getattr__(name: str) -> Any:
    if name not in _LAZY_ATTRS:
        raise AttributeError(f"module 'envs' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY_ATTRS[name]), name)
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
    "VerlSpec",
    "aaudit",
    "audit",
    "call_tool",
    "from_harbor",
    "from_openenv",
    "from_verifiers",
    "list_environments",
    "load_environment",
    "mcp_server",
    "serve_openenv",
    "stop",
    "tool",
]
