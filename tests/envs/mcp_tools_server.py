"""A real MCP server for the tests, written with the official SDK's server API (`MCPServer`).

    python tests/envs/mcp_tools_server.py                  # stdio
    python tests/envs/mcp_tools_server.py --port 8123      # streamable HTTP on 127.0.0.1

With `MCP_PID_DIR` set, it writes `<pid>` there at start, so tests can see whether the
process is still alive after its client is gone.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path

from mcp.server.mcpserver import Context, Image, MCPServer
from mcp.types import EmbeddedResource, TextResourceContents

server = MCPServer("rubric-test-tools")
_calls = {"count": 0}
# A 1x1 PNG: enough for an image content block.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000001e221bc330000000049454e44ae426082"
)


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


@server.tool()
def count() -> int:
    """How many times this server's count tool was called, this call included."""
    _calls["count"] += 1
    return _calls["count"]


@server.tool()
def crash() -> str:
    """End the server process at once, mid-call."""
    os._exit(3)


@server.tool()
def spawn(marker: str, detach: bool = False) -> int:
    """Start a child that sleeps for 5 minutes with `marker` on its command line; its pid.

    Args:
        marker: A word to find the child by.
        detach: Put the child in a session of its own (`setsid`), out of this server's group.
    """
    code = "import sys, time; time.sleep(300)"
    quiet = subprocess.DEVNULL
    child = subprocess.Popen(
        [sys.executable, "-c", code, marker],
        stdin=quiet,
        stdout=quiet,
        stderr=quiet,
        start_new_session=detach,
    )
    return child.pid


@server.tool()
async def sleep(seconds: float) -> str:
    """Sleep, then say so."""
    await asyncio.sleep(seconds)
    return f"slept {seconds}"


@server.tool()
def fail(reason: str) -> str:
    """Raise an error with the given reason."""
    raise ValueError(reason)


@server.tool()
def big(size: int) -> str:
    """`size` bytes of text, in lines of 99 characters."""
    line = "x" * 98 + "\n"
    return (line * (size // len(line) + 1))[:size]


@server.tool()
def garble(ctx: Context) -> str:
    """Answer this call with a result that breaks the protocol's schema (content not a list)."""
    from mcp.server import stdio  # the SDK moves the wire off fd 1; write where it put it

    request_id = int(ctx.request_id) if ctx.request_id.isdigit() else ctx.request_id
    reply = {"jsonrpc": "2.0", "id": request_id, "result": {"content": "not a list of blocks"}}
    os.write(stdio._claims[1].private_fd or 1, (json.dumps(reply) + "\n").encode())
    return "the real answer, sent after the broken one"


@server.tool()
def picture():  # type: ignore[no-untyped-def]  # the SDK reads an unannotated return as content
    """A caption, an image and an embedded text resource."""
    resource = TextResourceContents(uri="file:///notes.txt", text="the notes", mime_type="text/plain")
    return ["a red dot", Image(data=PNG, format="png"), EmbeddedResource(type="resource", resource=resource)]


if __name__ == "__main__":
    pid_dir = os.environ.get("MCP_PID_DIR")
    if pid_dir:
        (Path(pid_dir) / str(os.getpid())).write_text("")
    if "--port" in sys.argv:
        port = int(sys.argv[sys.argv.index("--port") + 1])
        server.run("streamable-http", host="127.0.0.1", port=port)
    else:
        server.run()
