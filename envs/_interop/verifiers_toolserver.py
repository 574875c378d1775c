"""The server process of a Verifiers toolset: `python -m envs._interop.verifiers_toolserver MODULE:CLASS`.

Started by `envs._interop.verifiers_tools` (which explains the mapping); it serves MCP over
stdio, so nothing else may write to stdout here.
"""

from __future__ import annotations

import asyncio
import importlib
import os
import sys
from typing import Any


class _Named:
    """What `Toolset.register` adds tools to: the real `MCPServer`, with Verifiers' harness names."""

    def __init__(self, mcp: Any, prefix: str) -> None:
        self.mcp = mcp
        self.prefix = prefix

    def add_tool(self, fn: Any, name: str | None = None, **options: Any) -> Any:
        name = name or fn.__name__
        return self.mcp.add_tool(fn, name=f"{self.prefix}_{name}" if self.prefix else name, **options)


async def _serve(reference: str) -> None:
    import verifiers  # the [verifiers] extra and the official mcp SDK, in the server process only
    from mcp.server.mcpserver import MCPServer as SDKServer

    module_name, _, qualname = reference.partition(":")
    cls: Any = importlib.import_module(module_name)
    for part in qualname.split("."):
        cls = getattr(cls, part)
    config = cls._config_cls().model_validate_json(os.environ.get("VF_CONFIG") or "{}")
    toolset = cls(config)
    async with toolset._exit_stack:  # what ServerBase._serve holds open around setup and serving
        await toolset.setup()
        sdk = SDKServer(toolset.server_name or cls.__name__, version=verifiers.__version__)
        toolset.register(_Named(sdk, toolset.server_name))
        await sdk.run_stdio_async()


def main() -> None:
    """`python -m envs._interop.verifiers_toolserver MODULE:CLASS`: serve one toolset over stdio."""
    if len(sys.argv) != 2 or ":" not in sys.argv[1]:
        sys.exit(
            "usage: python -m envs._interop.verifiers_toolserver MODULE:TOOLSET_CLASS (config in VF_CONFIG)"
        )
    asyncio.run(_serve(sys.argv[1]))


if __name__ == "__main__":
    main()
