"""What does the capture proxy cost per model call, next to the bare transport it forwards through?

Run: python benchmarks/bench_proxy.py [--calls N] [--forged-history]

The scripted endpoint runs in its own process; the agent runs in another (a small aiohttp
script posting over the proxy's Unix socket), so this process does only what the proxy does.
The same second-turn conversation (system, user, the assistant's tool call, its result) is
sent N times in a row, for each dialect, whole and streamed; the engine answers with text and
a tool call, once with token ids (`return_token_ids`, so every call also chains token ids)
and once without, in the same run (the "ids/no ids" column is the proxy's cost ratio). The
engine's answer is the history's own assistant turn, so from the second call on the history
holds only replies the proxy gave, as a real agent's does; with `--forged-history` it answers
otherwise, so every call's history holds a turn the proxy never gave (checked, then marked).
Measured in the same run, CPU seconds of this process:
- transport: `Client.complete` alone, per call (the baseline: what the harness pays anyway);
- proxy process: per call, between one request's arrival and the next's (the HTTP server,
  the translation both ways, the recording, the SSE writing, and the transport itself);
- proxy own: the proxy process minus the transport (p50 of each, the best of `--rounds`);
- translate+record: the proxy's handler alone (`turn.timing["proxy_cpu"]`), which leaves
  out the HTTP server and the transport.
Target: proxy own < 1 ms p50 per call.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from harness import CaptureProxy, Client, ScriptedEndpoint

TARGET_MS = 1.0
SCHEMA = {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}}
CALL = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}
CHAT = {
    "model": "m",
    "messages": [
        {"role": "system", "content": "You add numbers."},
        {"role": "user", "content": "add 2 and 3"},
        {"role": "assistant", "content": "let me compute", "tool_calls": [CALL]},
        {"role": "tool", "tool_call_id": "call_1", "content": "5"},
    ],
    "tools": [{"type": "function", "function": {"name": "add", "description": "Add.", "parameters": SCHEMA}}],
}
RESPONSES = {
    "model": "m",
    "instructions": "You add numbers.",
    "input": [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "add 2 and 3"}]},
        {
            "type": "message",
            "role": "assistant",
            "content": [{"type": "output_text", "text": "let me compute"}],
        },
        {"type": "function_call", "call_id": "call_1", "name": "add", "arguments": '{"a": 2, "b": 3}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "5"},
    ],
    "tools": [{"type": "function", "name": "add", "description": "Add.", "parameters": SCHEMA}],
}
MESSAGES = {
    "model": "m",
    "max_tokens": 100,
    "system": [{"type": "text", "text": "You add numbers."}],
    "messages": [
        {"role": "user", "content": "add 2 and 3"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "let me compute"},
            {"type": "tool_use", "id": "call_1", "name": "add", "input": {"a": 2, "b": 3}},
        ]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1", "content": "5"}]},
    ],
    "tools": [{"name": "add", "description": "Add.", "input_schema": SCHEMA}],
}  # fmt: skip
DIALECTS = {"chat": ("/v1/chat/completions", CHAT), "responses": ("/v1/responses", RESPONSES), "messages": ("/v1/messages", MESSAGES)}  # fmt: skip

AGENT = """
import asyncio, json, sys
import aiohttp

async def main(socket, key, path, body, calls):
    async with aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=socket)) as http:
        for _ in range(calls):
            async with http.post("http://proxy" + path, data=body, headers={"Authorization": "Bearer " + key}) as r:
                assert r.status == 200, await r.text()
                await r.read()

asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].encode(), int(sys.argv[5])))
"""


def policy(messages: list[dict[str, Any]], tools: Any) -> dict[str, Any]:
    """The assistant turn every request's history holds: what a real agent sends back."""
    return {"content": "let me compute", "tool_calls": [{"function": CALL["function"]}]}


def forged_policy(messages: list[dict[str, Any]], tools: Any) -> dict[str, Any]:
    """Another answer: the history's assistant turn is then one the proxy never gave."""
    return {
        "content": "the answer is 5",
        "tool_calls": [{"function": {"name": "add", "arguments": '{"a": 5, "b": 1}'}}],
    }


def _p50_ms(values: list[float]) -> float:
    return statistics.median(values) * 1e3


async def _transport(client: Client, calls: int) -> list[float]:
    """CPU seconds per `Client.complete` call, one at a time."""
    messages, tools = CHAT["messages"], CHAT["tools"]
    await client.complete(messages, tools=tools)  # warm-up: opens the pool
    per_call = []
    for _ in range(calls):
        cpu = time.process_time()
        await client.complete(messages, tools=tools)
        per_call.append(time.process_time() - cpu)
    return per_call


class _Probe:
    """The proxy's entry point, timed: this process's CPU clock at each request's arrival."""

    def __init__(self, proxy: CaptureProxy) -> None:
        self.arrivals: list[float] = []
        self._handle = proxy._handle
        proxy._handle = self  # type: ignore[method-assign]  # before astart binds the route

    async def __call__(self, request: Any) -> Any:
        self.arrivals.append(time.process_time())
        return await self._handle(request)


async def _through_proxy(
    proxy: CaptureProxy, probe: _Probe, socket: str, path: str, body: dict[str, Any], calls: int
) -> tuple[list[float], list[float]]:
    """CPU seconds of this process per call (arrival to arrival), and the handler's own. The
    session is bound to its socket, as an agent run's is (its key checked against the listener)."""
    session = proxy.open_session(socket_path=socket)
    probe.arrivals.clear()
    agent = await asyncio.create_subprocess_exec(
        sys.executable, "-c", AGENT, socket, session.key, path, json.dumps(body), str(calls + 2)
    )
    await agent.wait()
    assert agent.returncode == 0 and all(t.ok for t in session.turns), session.turns[-1].error
    per_call = [b - a for a, b in itertools.pairwise(probe.arrivals[1:])]  # the first call warms up
    return per_call, [t.timing["proxy_cpu"] for t in session.turns[1:]]


async def _run(base_url: str, calls: int, rounds: int) -> None:
    """Every row twice in the same run: token ids asked for (and chained) and not."""
    clients = {ids: Client("m", base_url=base_url, return_token_ids=ids) for ids in (False, True)}
    best: dict[tuple[str, bool], tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        proxies = {ids: CaptureProxy(client) for ids, client in clients.items()}
        probes = {ids: _Probe(proxy) for ids, proxy in proxies.items()}
        sockets = {ids: str(Path(tmp) / f"proxy-{ids}.sock") for ids in clients}
        for ids, proxy in proxies.items():
            await proxy.astart(socket_path=sockets[ids])
        try:
            for _ in range(rounds):  # alternate, so background load on a shared machine hits all alike
                for ids in (False, True):
                    bare = _p50_ms(await _transport(clients[ids], calls))
                    key = ("transport", ids)
                    best[key] = min(best.get(key, (bare, 0.0)), (bare, 0.0))
                    for name, (path, body) in DIALECTS.items():
                        for stream in (False, True):
                            process, handler = await _through_proxy(
                                proxies[ids],
                                probes[ids],
                                sockets[ids],
                                path,
                                {**body, "stream": stream},
                                calls,
                            )
                            row = (_p50_ms(process) - bare, _p50_ms(handler))
                            label = (f"{name}{' stream' if stream else ''}", ids)
                            best[label] = min(best.get(label, row), row)
        finally:
            for proxy in proxies.values():
                await proxy.aclose()
            for client in clients.values():
                await client.aclose()
    _print(best, calls, rounds)


def _print(best: dict[tuple[str, bool], tuple[float, float]], calls: int, rounds: int) -> None:
    bare = {ids: best.pop(("transport", ids))[0] for ids in (False, True)}
    print(
        f"{calls} calls in a row per row, best p50 of {rounds} rounds; CPU ms per call of the proxy's process"
    )
    print(f"(target: proxy own < {TARGET_MS:g} ms; the transport row is the bare Client.complete)")
    print(
        f"transport: {bare[False]:.3f} ms without token ids, {bare[True]:.3f} ms with (x{bare[True] / bare[False]:.2f})"
    )
    head = f"{'path':<20}{'own, no ids':>13}{'own, ids':>11}{'ids/no ids':>12}{'translate+record':>18}{'x transport':>13}"
    print(head)
    for label in dict.fromkeys(name for name, _ in best):
        off, on = best[(label, False)], best[(label, True)]
        print(
            f"{label:<20}{off[0]:>13.3f}{on[0]:>11.3f}{on[0] / off[0]:>12.2f}{on[1]:>18.3f}{on[0] / bare[True]:>13.2f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--forged-history", action="store_true", help="the history's assistant turn is not the proxy's"
    )
    args = parser.parse_args()
    with ScriptedEndpoint(forged_policy if args.forged_history else policy, process=True) as endpoint:
        asyncio.run(_run(endpoint.base_url, args.calls, args.rounds))


if __name__ == "__main__":
    main()
