"""A real MCP server that misbehaves on purpose, written with the official SDK's low-level API.

    python tests/envs/mcp_bad_server.py MODE        # stdio

MODE is one of:
- `silent-listing`: answers `initialize`, then never answers `tools/list`;
- `endless-listing`: every `tools/list` page holds one new tool and a new `next_cursor`;
- `same-cursor`: every `tools/list` page names the same `next_cursor`;
- `crowded-listing`: one `tools/list` page of 5000 tools.
"""

from __future__ import annotations

import sys

import anyio
from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server


def _tool(name: str) -> types.Tool:
    return types.Tool(name=name, description="A tool.", input_schema={"type": "object", "properties": {}})


async def _silent(ctx: object, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


async def _endless(ctx: object, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    page = int(params.cursor) if params is not None and params.cursor else 0
    return types.ListToolsResult(tools=[_tool(f"tool_{page}")], next_cursor=str(page + 1))


async def _same(ctx: object, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[_tool("again")], next_cursor="the-same-cursor")


async def _crowded(ctx: object, params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
    return types.ListToolsResult(tools=[_tool(f"tool_{i}") for i in range(5000)])


LISTINGS = {
    "silent-listing": _silent,
    "endless-listing": _endless,
    "same-cursor": _same,
    "crowded-listing": _crowded,
}


async def main(mode: str) -> None:
    server: Server[object] = Server("rubric-bad-server", on_list_tools=LISTINGS[mode])
    async with stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
