"""An environment's Python tools served as an MCP server (`rubric mcp ENV`), any MCP client's to use.

Built on the official SDK's low-level `Server` (the `[mcp]` extra), not its decorator API: the
tools keep the schemas this project derives from type hints and docstrings, and each call
goes through `Tool.call`, so argument checks, timeouts, error text and, for the python
environment, its sandbox are exactly what a rollout gets. A tool error is an MCP result with
`isError` set and the same text the model would read.

Each client connection (an MCP session) gets a `state` dict of its own, passed to tools that
take `state`, as one rollout's state is passed during an evaluation. Over HTTP the server
binds 127.0.0.1 only.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Any

from envs._environment import Environment
from envs._tools.functions import ToolLike
from envs._tools.mcp import INSTALL_HINT, MCPTool
from harness._core.errors import ConfigError

HOST = "127.0.0.1"
PATH = "/mcp"


def _sdk() -> Any:
    try:
        import mcp.server.lowlevel
        import mcp.server.stdio
        import mcp.types
    except ImportError:
        raise ConfigError(f"rubric mcp needs the official mcp SDK: {INSTALL_HINT}") from None
    return mcp


def _served_tools(env: Environment) -> dict[str, ToolLike]:
    """The environment's own Python tools (tools it takes from MCP servers are not re-served)."""
    tools = {t.name: t for t in env.tools if not isinstance(t, MCPTool)}
    if not tools:
        raise ConfigError(
            f"environment {env.name!r} has no Python tools to serve over MCP; give it tools=[...] "
            f"(rubric mcp serves an environment's own functions)"
        )
    return tools


def mcp_app(env: Environment) -> Any:
    """The SDK's low-level `Server` offering `env`'s Python tools (list and call)."""
    mcp = _sdk()
    types = mcp.types
    tools = _served_tools(env)
    listing = types.ListToolsResult(
        tools=[
            types.Tool(name=t.name, description=t.description or None, input_schema=t.parameters)
            for t in tools.values()
        ]
    )
    states: weakref.WeakKeyDictionary[Any, dict[str, Any]] = weakref.WeakKeyDictionary()

    async def list_tools(ctx: Any, params: Any) -> Any:
        return listing

    async def call_tool(ctx: Any, params: Any) -> Any:
        tool = tools.get(params.name)
        if tool is None:
            text = f"Error: unknown tool {params.name!r}. Available tools: {', '.join(sorted(tools))}."
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)
        state = states.setdefault(ctx.session, {})
        result = await tool.call(dict(params.arguments or {}), state=state)
        content = [types.TextContent(type="text", text=result.content)]
        return types.CallToolResult(content=content, is_error=result.error is not None)

    return mcp.server.lowlevel.Server(
        env.name,
        instructions=f"Tools of the rubric environment {env.name!r}.",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
    )


async def aserve_mcp(
    env: Environment, *, port: int | None = None, ready: Callable[[str], None] | None = None
) -> None:
    """Serve an environment's Python tools as an MCP server until stopped.

    Args:
        env: The environment whose tools to serve.
        port: Serve streamable HTTP on 127.0.0.1:`port` (at /mcp) instead of stdio.
        ready: Told the server's URL (over HTTP) before it starts serving.
    """
    mcp = _sdk()
    server = mcp_app(env)
    if port is None:
        async with mcp.server.stdio.stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
        return
    import uvicorn

    app = server.streamable_http_app(streamable_http_path=PATH, host=HOST)
    if ready is not None:
        ready(f"http://{HOST}:{port}{PATH}")
    config = uvicorn.Config(app, host=HOST, port=port, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve()


def serve_mcp(
    env: Environment, *, port: int | None = None, ready: Callable[[str], None] | None = None
) -> None:
    """`aserve_mcp` on its own event loop, until stopped, as `rubric mcp` does.

    Args:
        env: The environment whose tools to serve.
        port: Serve streamable HTTP on 127.0.0.1:`port` (at /mcp) instead of stdio.
        ready: Told the server's URL (over HTTP) before it starts serving.
    """
    asyncio.run(aserve_mcp(env, port=port, ready=ready))


__all__ = [
    "HOST",
    "PATH",
    "aserve_mcp",
    "mcp_app",
    "serve_mcp",
]
