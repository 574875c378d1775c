"""Tools the model can call: plain Python functions, and the tools of MCP servers.

- `functions`: `tool` / `Tool` (a function as a tool), `call_tool` (validate, run, report).
- `schema`: JSON Schema from type hints (pydantic), the parameters that are injected.
- `docstrings`: descriptions from Google / NumPy / reST docstrings.
- `placement`: where a call runs (event loop, thread pool, process) and its timeout.
- `mcp`: the tools of an MCP server (the official `mcp` SDK, the `[mcp]` extra).

May import the harness core (types, errors, aio, child); nothing of `rubrics` or the rest of
`envs`, which builds on it.
"""

from envs._tools.functions import (
    DEFAULT_TIMEOUT,
    TOOL_INJECTED,
    BadArguments,
    Tool,
    ToolLike,
    ToolResult,
    call_tool,
    serialize_result,
    tool,
)

__all__ = [
    "DEFAULT_TIMEOUT",
    "TOOL_INJECTED",
    "BadArguments",
    "Tool",
    "ToolLike",
    "ToolResult",
    "call_tool",
    "serialize_result",
    "tool",
]
