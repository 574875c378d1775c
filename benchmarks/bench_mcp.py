"""What does an MCP tool cost per call, against the same tool as a Python function?

Run: python benchmarks/bench_mcp.py [--calls N] [--concurrency C]

The same `add(a, b)` three ways, each through `await tool.call(json_args)` (argument checks,
timeout, result text: everything a rollout pays), measured in the same run:
- python: an `envs.Tool` (the baseline);
- mcp stdio: `mcp_server([python, server.py])`, the server a child process on stdin/stdout;
- mcp http: `mcp_server(url=...)`, the same server over streamable HTTP on 127.0.0.1.
Each is timed sequentially (latency per call) and with C calls in flight (throughput). The
servers are started before the clock; the first call of each is a warm-up.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from envs import Tool, mcp_server
from envs._tools.functions import ToolLike

SERVER = '''
import sys
from mcp.server.mcpserver import MCPServer

server = MCPServer("bench")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


if "--port" in sys.argv:
    server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[-1]))
else:
    server.run()
'''


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


async def _timed(call: Callable[[], Awaitable[object]], calls: int, concurrency: int) -> float:
    """Seconds per call: `calls` calls, at most `concurrency` in flight."""
    await call()  # warm-up (connects the server's client)
    limit = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with limit:
            result = await call()
            assert getattr(result, "content", None) == "5", result

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(calls)))
    return (time.perf_counter() - started) / calls


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait_for(port: int, proc: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit("the HTTP MCP server did not start") from None
            time.sleep(0.1)


async def _measure(
    tools: dict[str, ToolLike], calls: int, concurrency: int
) -> dict[str, tuple[float, float]]:
    rows = {}
    for name, tool in tools.items():

        def call(tool: ToolLike = tool) -> Awaitable[object]:
            return tool.call('{"a": 2, "b": 3}')

        rows[name] = (await _timed(call, calls, 1), await _timed(call, calls, concurrency))
    for tool in tools.values():
        server = getattr(tool, "server", None)
        if server is not None:
            await server.release()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=32)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        script = Path(tmp) / "server.py"
        script.write_text(SERVER)
        port = _free_port()
        http = subprocess.Popen(
            [sys.executable, str(script), "--port", str(port)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            _wait_for(port, http)
            tools: dict[str, ToolLike] = {
                "python": Tool(add, blocking=False),
                "mcp stdio": mcp_server([sys.executable, str(script)]).tools()[0],
                "mcp http": mcp_server(url=f"http://127.0.0.1:{port}/mcp").tools()[0],
            }
            rows = asyncio.run(_measure(tools, args.calls, args.concurrency))
        finally:
            http.terminate()
            http.wait(20)
    base_seq, base_par = rows["python"]
    print(f"{args.calls} calls of add(2, 3) through tool.call, sequential and {args.concurrency} in flight")
    print(f"{'tool':<12}{'µs/call seq':>14}{'x python':>10}{'µs/call par':>14}{'x python':>10}")
    for name, (seq, par) in rows.items():
        print(f"{name:<12}{seq * 1e6:>14.1f}{seq / base_seq:>10.1f}{par * 1e6:>14.1f}{par / base_par:>10.1f}")


if __name__ == "__main__":
    main()
