"""A real OpenAI-compatible HTTP endpoint on 127.0.0.1 whose replies come from a Python policy.

Tests, benchmarks and offline demos need an endpoint that behaves like a real one (HTTP,
keep-alive, status codes, Retry-After, timeouts, broken sockets) yet answers
deterministically. `ScriptedEndpoint` serves one, either in a background thread of this
process (cheap, lets the policy share state with the test) or in a forked child process
(`process=True`) so that a benchmark's client does not share the GIL with its server.

    with ScriptedEndpoint(lambda messages, tools: "4", latency=0.05, rate_429=0.1) as ep:
        client = Client("m", base_url=ep.base_url)
        ...
        assert ep.stats.responses[429] > 0
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import os
import signal
import threading
import urllib.request
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

from harness.scripted_app import EndpointStats, Faults, Policy, ScriptedApp, ScriptedHTTPError
from harness.scripted_http import MAX_HEADER_BYTES, serve_connection

START_TIMEOUT = 15.0


class ScriptedEndpoint:
    """An OpenAI-compatible chat-completions server driven by `policy(messages, tools)`.

    A policy returns the assistant's text (str) or an assistant message dict, which may hold
    `tool_calls` (arguments as a JSON string or a dict) and `finish_reason`. A policy with a
    third positional parameter also gets the whole request body (model, response_format, ...).
    It may be sync or async; with `n > 1` it is called n times. Raising `ScriptedHTTPError`
    answers that status; any other exception answers 500 with the exception's message.

    Faults (rates in [0, 1], drawn from `random.Random(seed)`, one draw per request):
      latency: seconds before answering (or a (low, high) range); non-blocking.
      rate_drop / rate_hang / rate_429 / rate_500: exclusive outcomes of one request: close
        the socket unanswered / stay silent `hang_seconds` / 429 with `Retry-After:
        retry_after` / 500. Their sum must be <= 1.
      rate_malformed_tool_json: cut the JSON of tool-call arguments in half.
      fail_first: deterministic script for the first requests: an int N (N x 500) or a list
        of statuses and "drop" / "hang" / "malformed", consumed before any random fault.
      record: keep every request body in `stats.bodies` (for tests that inspect the client).
    """

    def __init__(
        self,
        policy: Policy,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        model: str = "scripted",
        latency: float | tuple[float, float] = 0.0,
        rate_429: float = 0.0,
        rate_500: float = 0.0,
        retry_after: float = 0.0,
        rate_hang: float = 0.0,
        hang_seconds: float = 30.0,
        rate_malformed_tool_json: float = 0.0,
        rate_drop: float = 0.0,
        seed: int = 0,
        fail_first: int | Sequence[int | str] = (),
        record: bool = False,
        process: bool = False,
        backlog: int = 2048,
    ) -> None:
        if not isinstance(port, int) or not 0 <= port <= 65535:
            raise ValueError(f"ScriptedEndpoint port={port!r}: give 0 (any free port) or a port number")
        faults = Faults(
            latency=latency,
            rate_429=rate_429,
            rate_500=rate_500,
            retry_after=retry_after,
            rate_hang=rate_hang,
            hang_seconds=hang_seconds,
            rate_malformed_tool_json=rate_malformed_tool_json,
            rate_drop=rate_drop,
            fail_first=fail_first,
        )
        self._app = ScriptedApp(policy, model=model, faults=faults, seed=seed, record=record)
        self.host = host
        self.requested_port = port
        self.model = model
        self.process = process
        self.backlog = backlog
        self.port: int | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._child: Any = None  # multiprocessing.Process when process=True
        self._forever: tuple[asyncio.AbstractEventLoop, asyncio.Event] | None = None

    # -- addresses -----------------------------------------------------------------------

    @property
    def running(self) -> bool:
        return self.port is not None

    @property
    def url(self) -> str:
        """The server root, e.g. http://127.0.0.1:PORT."""
        if self.port is None:
            raise RuntimeError(
                "ScriptedEndpoint is not running; call start() or use it as `with ScriptedEndpoint(...)`"
            )
        return f"http://{self.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """What to pass as an OpenAI client's base_url, e.g. http://127.0.0.1:PORT/v1."""
        return self.url + "/v1"

    def __repr__(self) -> str:
        where = self.base_url if self.running else "stopped"
        return f"ScriptedEndpoint({where}, model={self.model!r}, process={self.process})"

    # -- stats ---------------------------------------------------------------------------

    @property
    def stats(self) -> EndpointStats:
        """A snapshot of the request counters (fetched from the child when process=True)."""
        if self._child is not None:
            with urllib.request.urlopen(self.url + "/_scripted/stats", timeout=10) as reply:
                return EndpointStats.from_dict(json.load(reply))
        return self._app.stats()

    def reset_stats(self) -> None:
        """Zero the counters and restart the fault script/RNG, e.g. between benchmark rounds."""
        if self._child is not None:
            request = urllib.request.Request(self.url + "/_scripted/reset", data=b"{}", method="POST")
            urllib.request.urlopen(request, timeout=10).close()
        else:
            self._app.reset()

    # -- lifecycle -----------------------------------------------------------------------

    async def _start_server(self) -> asyncio.Server:
        handle = self._app.handle

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                await serve_connection(reader, writer, handle)
            except asyncio.CancelledError:  # shutdown; asyncio 3.11 would log a cancelled
                writer.transport.abort()  # connection task as an error, so end it quietly

        return await asyncio.start_server(
            on_connect, self.host, self.requested_port, backlog=self.backlog, limit=MAX_HEADER_BYTES
        )

    def start(self) -> ScriptedEndpoint:
        """Start serving in a background thread (or child process); returns once listening."""
        if self.running:
            raise RuntimeError(f"{self!r} is already running")
        if self.process:
            self._start_process()
        else:
            self._start_thread()
        return self

    def _start_thread(self) -> None:
        loop = asyncio.new_event_loop()
        ready = threading.Event()
        outcome: dict[str, Any] = {}

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                server = loop.run_until_complete(self._start_server())
            except BaseException as exc:  # reported to start()'s caller
                outcome["error"] = exc
                ready.set()
                loop.close()
                return
            outcome["port"] = server.sockets[0].getsockname()[1]
            ready.set()
            try:
                loop.run_forever()
            finally:
                server.close()
                _cancel_all(loop)
                loop.close()

        thread = threading.Thread(target=run, name="scripted-endpoint", daemon=True)
        thread.start()
        if not ready.wait(START_TIMEOUT):
            raise RuntimeError(
                f"ScriptedEndpoint did not start listening on {self.host} within {START_TIMEOUT}s"
            )
        if "error" in outcome:
            thread.join()
            raise OSError(
                f"ScriptedEndpoint cannot listen on {self.host}:{self.requested_port}: {outcome['error']}"
            ) from outcome["error"]
        self._loop, self._thread, self.port = loop, thread, outcome["port"]

    def _start_process(self) -> None:
        context = multiprocessing.get_context("fork")  # fork: the policy need not be picklable
        parent_end, child_end = context.Pipe(duplex=False)
        child = context.Process(
            target=self._child_main, args=(child_end, os.getpid()), name="scripted-endpoint", daemon=True
        )
        child.start()
        child_end.close()
        if not parent_end.poll(START_TIMEOUT):
            child.kill()
            raise RuntimeError(f"ScriptedEndpoint child process did not start within {START_TIMEOUT}s")
        kind, value = parent_end.recv()
        parent_end.close()
        if kind == "error":
            child.join(5)
            raise OSError(f"ScriptedEndpoint cannot listen on {self.host}:{self.requested_port}: {value}")
        self._child, self.port = child, value

    def _child_main(self, pipe: Any, parent: int) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us; no Ctrl-C traceback

        async def main() -> None:
            try:
                server = await self._start_server()
            except BaseException as exc:
                pipe.send(("error", f"{type(exc).__name__}: {exc}"))
                return
            pipe.send(("ok", server.sockets[0].getsockname()[1]))
            pipe.close()
            await _exit_when_orphaned(parent)  # serve until the parent terminates us, or dies

        asyncio.run(main())

    def stop(self) -> None:
        """Stop serving and close every connection; safe to call twice (and from another
        thread, to end `serve_forever`)."""
        if self._forever is not None:
            loop, event = self._forever
            self._forever = None
            loop.call_soon_threadsafe(event.set)
        if self._child is not None:
            child, self._child = self._child, None
            child.terminate()
            child.join(5)
            if child.is_alive():
                child.kill()
                child.join(5)
        if self._loop is not None and self._thread is not None:
            loop, thread = self._loop, self._thread
            self._loop = self._thread = None
            loop.call_soon_threadsafe(loop.stop)
            thread.join(10)
        self.port = None

    def serve_forever(self, ready: Callable[[str], None] | None = None) -> None:
        """Serve in the calling thread until Ctrl-C or `stop()`; `ready(base_url)` once listening
        (with port=0 that is the only way to learn the port)."""
        if self.running:
            raise RuntimeError(f"{self!r} is already running")

        async def main() -> None:
            server = await self._start_server()
            finished = asyncio.Event()
            self._forever = (asyncio.get_running_loop(), finished)
            self.port = server.sockets[0].getsockname()[1]
            try:
                if ready is not None:
                    ready(self.base_url)
                await finished.wait()
            finally:
                server.close()
                self._forever = None
                self.port = None

        asyncio.run(main())

    def __enter__(self) -> ScriptedEndpoint:
        return self if self.running else self.start()

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def __del__(self) -> None:
        if getattr(self, "_child", None) is not None:
            self._child.terminate()


async def _exit_when_orphaned(parent: int) -> None:
    """Return never; end this process once `parent` is gone (killed, even by SIGKILL, which
    no cleanup code of the parent can see). A poll rather than PR_SET_PDEATHSIG, which fires
    when the forking *thread* ends and exists only on Linux."""
    while os.getppid() == parent:
        await asyncio.sleep(0.2)
    os._exit(0)


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel open connections and hung requests so the loop closes without warnings."""
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())


SCRIPTED_PREFIX = "scripted:"


def scripted_policy(env: Any, model: str) -> Policy:
    """The policy `model` names ("scripted:NAME" or "NAME") from `env.scripted_policies`.

    The one lookup behind `rubric eval ENV -m scripted:NAME`, `rubric endpoint` and
    `env.evaluate("scripted:NAME")`.

    Raises:
        ConfigError: the environment has no such policy (the ones it has are listed).
    """
    from harness.errors import ConfigError

    name = model.removeprefix(SCRIPTED_PREFIX)
    policies = getattr(env, "scripted_policies", None) or {}
    if name not in policies:
        available = ", ".join(sorted(policies)) or "none"
        raise ConfigError(
            f"environment {getattr(env, 'name', '?')!r} has no scripted policy {name!r} "
            f"(available: {available}); use scripted:<one of those> or a real model"
        )
    return policies[name]


__all__ = [
    "SCRIPTED_PREFIX",
    "EndpointStats",
    "Policy",
    "ScriptedEndpoint",
    "ScriptedHTTPError",
    "scripted_policy",
]
