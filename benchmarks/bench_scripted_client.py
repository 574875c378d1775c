"""How fast is the scripted endpoint, and what does harness.Client add over the bare SDK?

    python benchmarks/bench_scripted_client.py [--requests 2000] [--concurrency 64]

1. Server: requests/s a raw keep-alive socket client gets from `ScriptedEndpoint`
   (uvicorn with httptools and uvloop, separate process) vs the stdlib `ThreadingHTTPServer` answering a fixed
   completion (no policy at all, so the baseline is flattered). Ratio > 1 = ours is faster.
2. Client: client-side CPU time per completion through `harness.Client.complete` vs bare
   `openai.AsyncOpenAI.chat.completions.create` (same endpoint, concurrency and pool size;
   best of --rounds alternating runs). Ratio close to 1 = the semaphore, retry wrapper and
   mapping cost little next to the SDK itself.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from harness import Client, ScriptedEndpoint
from harness._endpoint.client import _sdk_client

MESSAGES = [{"role": "user", "content": "what is two plus two"}]
BODY = json.dumps({"model": "m", "messages": MESSAGES}).encode()
FIXED = json.dumps(
    {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "4"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 5, "completion_tokens": 1, "total_tokens": 6},
    }
).encode()


def policy(messages: list[dict], tools: list[dict] | None) -> str:
    return "4"


class _Fixed(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    wbufsize = 1 << 16  # one send per response; unbuffered, Nagle + delayed ACK cap it near 400 req/s

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(FIXED)))
        self.end_headers()
        self.wfile.write(FIXED)

    def log_message(self, format: str, *args: object) -> None:
        return


async def _raw_load(port: int, requests: int, connections: int) -> float:
    request = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(BODY)}\r\n\r\n"
    ).encode() + BODY

    async def one_connection(count: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        for _ in range(count):
            writer.write(request)
            await writer.drain()
            head = await reader.readuntil(b"\r\n\r\n")
            length = next(
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            )
            await reader.readexactly(length)
        writer.close()

    started = time.perf_counter()
    await asyncio.gather(*[one_connection(requests // connections) for _ in range(connections)])
    return (requests // connections) * connections / (time.perf_counter() - started)


async def _client_load(base_url: str, requests: int, concurrency: int, *, bare: bool) -> float:
    """Client-process CPU seconds per completion: the server runs in another process, and
    CPU time is far less disturbed than wall time by other work on a shared machine."""

    if bare:  # same pool size as Client uses, so the ratio isolates the harness's own work
        sdk = _sdk_client(base_url, "x", {}, concurrency, 600.0)
        semaphore = asyncio.Semaphore(concurrency)

        async def call() -> None:
            async with semaphore:
                await sdk.chat.completions.create(model="m", messages=MESSAGES)
    else:
        client = Client("m", base_url=base_url, max_concurrency=concurrency)

        async def call() -> None:
            await client.complete(MESSAGES)

    await asyncio.gather(*[call() for _ in range(min(requests, 50))])  # warm up pools
    cpu = time.process_time()
    await asyncio.gather(*[call() for _ in range(requests)])
    per_call = (time.process_time() - cpu) / requests
    await (sdk.close() if bare else client.aclose())
    return per_call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds; the best of each is shown")
    args = parser.parse_args()

    stdlib = ThreadingHTTPServer(("127.0.0.1", 0), _Fixed)
    stdlib.daemon_threads = True
    child = multiprocessing.get_context("fork").Process(target=stdlib.serve_forever, daemon=True)
    child.start()  # its own process, like ScriptedEndpoint(process=True): no shared GIL
    stdlib.socket.close()
    try:
        baseline = asyncio.run(_raw_load(stdlib.server_address[1], args.requests, args.connections))
    finally:
        child.terminate()
        child.join()
    with ScriptedEndpoint(policy, process=True) as endpoint:
        ours = asyncio.run(_raw_load(endpoint.port, args.requests, args.connections))
        print(f"server  stdlib ThreadingHTTPServer (fixed reply): {baseline:8.0f} req/s")
        print(
            f"server  ScriptedEndpoint (policy, process=True):  {ours:8.0f} req/s   ratio {ours / baseline:.2f}x"
        )

        bare = wrapped = float("inf")
        for _ in range(args.rounds):  # alternate so background load hits both alike
            bare = min(
                bare, asyncio.run(_client_load(endpoint.base_url, args.requests, args.concurrency, bare=True))
            )
            wrapped = min(
                wrapped,
                asyncio.run(_client_load(endpoint.base_url, args.requests, args.concurrency, bare=False)),
            )
        print(f"client  bare openai.AsyncOpenAI:                  {bare * 1e6:8.0f} us CPU/completion")
        print(
            f"client  harness.Client.complete:                  {wrapped * 1e6:8.0f} us CPU/completion   "
            f"ratio {wrapped / bare:.2f}x"
        )


if __name__ == "__main__":
    main()
