"""A Verifiers `Toolset` as an MCP server our environments call, served by Verifiers' own registration.

Verifiers runs each toolset as its own process (`python -m <its module>`, config in
`VF_CONFIG`) serving MCP over streamable HTTP, and its chat harness names each tool
`<server_name>_<tool>`. Here the process is `python -m envs._interop.verifiers_toolserver
MODULE:CLASS` with the same `VF_CONFIG`: it builds the toolset from its config as
`ServerBase.run` does, runs its `setup()`, lets the toolset register its `@vf.tool` methods
on the official SDK's `MCPServer` (`Toolset.register`, Verifiers' code) under the names
Verifiers' harness gives them, and serves it over stdio, so `envs.mcp_server` (the
official client) lists and calls it like any MCP server: started at the first call,
stopped with the run, never outliving it.

Taskset-scoped toolsets serve the whole run; task-scoped ones (`Task.toolsets`) get a fresh
server per rollout, as in Verifiers.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from envs._tools.mcp import MCPServer, mcp_server
from harness._core.errors import ConfigError

#: The server process's module (not imported by `envs`, so `python -m` runs it cleanly).
_MODULE = "envs._interop.verifiers_toolserver"


def _reference(toolset: Any) -> str:
    cls = type(toolset)
    if "<locals>" in cls.__qualname__ or cls.__module__ == "__main__":
        raise ConfigError(
            f"Verifiers toolset {cls.__qualname__} must be importable (defined at module level of an "
            "importable module), because its server runs in a process of its own, as in Verifiers"
        )
    return f"{cls.__module__}:{cls.__qualname__}"


def _server(toolset: Any, *, per_rollout: bool) -> MCPServer:
    if toolset.config.url:  # already running elsewhere: Verifiers passes its URL through too
        return mcp_server(url=toolset.config.url, per_rollout=per_rollout)
    # The child imports the toolset's module as this process does (a test's temp package too).
    path = os.pathsep.join(p for p in sys.path if p)
    return mcp_server(
        [sys.executable, "-m", _MODULE, _reference(toolset)],
        env={"VF_CONFIG": toolset.config.model_dump_json(), "PYTHONPATH": path},
        per_rollout=per_rollout,
    )


def toolset_servers(taskset: Any, task: Any) -> list[MCPServer]:
    """MCP servers for the toolsets of `taskset` (one per run) and of `task`'s class (one per rollout).

    Raises:
        ConfigError: A task-scoped toolset overrides `setup_task`, which needs the task channel
            of Verifiers' own rollout machinery; or a toolset class is not importable.
    """
    shared = type(taskset).toolsets(taskset.config)
    scoped = type(task).toolsets(task.config)
    from verifiers.v1.mcp import ServerBase  # the [verifiers] extra, checked by envs._interop.verifiers

    for toolset in scoped:
        if type(toolset).setup_task is not ServerBase.setup_task:
            raise ConfigError(
                f"Verifiers toolset {type(toolset).__name__} overrides setup_task, which runs through "
                "Verifiers' per-rollout task channel and does not carry over; set it up in setup() instead"
            )
    return [
        *(_server(t, per_rollout=False) for t in shared),
        *(_server(t, per_rollout=True) for t in scoped),
    ]


__all__ = ["toolset_servers"]
