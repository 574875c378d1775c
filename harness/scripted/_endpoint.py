"""A real OpenAI-compatible HTTP endpoint on 127.0.0.1 whose replies come from a Python policy.

Tests, benchmarks and offline demos need an endpoint that behaves like a real one (HTTP,
keep-alive, status codes, Retry-After, timeouts, broken sockets) yet answers
deterministically. `ScriptedEndpoint` serves one, either in a background thread of this
process (cheap, lets the policy share state with the test) or in a forked child process
(`process=True`) so that a benchmark's client does not share the GIL with its server. The
HTTP server is uvicorn (`scripted_http`); this module owns only the thread/process lifecycle.

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
import socket
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any, Protocol, runtime_checkable

from harness._core.errors import ConfigError
from harness._core.protocol import HasScriptedPolicies
from harness.scripted._app import EndpointStats, Faults, Policy, ScriptedApp, ScriptedHTTPError
from harness.scripted._http import ScriptedASGI, ScriptedServer, listening_socket, new_event_loop

START_TIMEOUT = 15.0


@runtime_checkable
class StatefulPolicy(Protocol):
    """A policy that keeps state across requests (such as which attempt at a question this
    is): every endpoint serves a `fresh()` copy, so each run starts from the same state."""

    def __call__(self, messages: list[dict[str, Any]], tools: Any) -> Any: ...

    def fresh(self) -> StatefulPolicy: ...


class ScriptedEndpoint:
    """An OpenAI-compatible chat-completions server driven by `policy(messages, tools)`.

    A policy returns the assistant's text (str) or an assistant message dict, which may hold
    `tool_calls` (arguments as a JSON string or a dict) and `finish_reason`. A policy with a
    third positional parameter also gets the whole request body (model, response_format, ...).
    It may be sync or async; with `n > 1` it is called n times. Raising `ScriptedHTTPError`
    answers that status; any other exception answers 500 with the exception's message.

    Faults (rates in [0, 1], drawn from `random.Random(seed)`, one draw per request):
    `rate_drop`, `rate_hang`, `rate_429` and `rate_500` are exclusive outcomes of one
    request, so their sum must be <= 1.

    Args:
        policy: Answers each request: `policy(messages, tools)` (see above).
        host: The address to listen on.
        port: The port to listen on; 0 picks any free port.
        model: The model name the server reports and answers with.
        latency: Seconds before answering (or a (low, high) range); non-blocking.
        rate_429: Chance of a 429 with `Retry-After: retry_after`.
        rate_500: Chance of a 500.
        retry_after: The `Retry-After` seconds a 429 carries.
        rate_hang: Chance of staying silent for `hang_seconds`.
        hang_seconds: How long a hung request stays silent.
        rate_malformed_tool_json: Chance of cutting the JSON of tool-call arguments in half.
        rate_drop: Chance of closing the socket unanswered.
        seed: Seeds the `random.Random` the faults are drawn from.
        fail_first: Deterministic script for the first requests: an int N (N x 500) or a list
            of statuses and "drop" / "hang" / "malformed", consumed before any random fault.
        broken: Properties training needs that this endpoint gets wrong, for checking a
            checker (`rubric doctor`): any of "tool_calls", "token_ids", "prefix", "template",
            "logprobs", "stream", "model_version", "concurrency" (`harness.scripted._app.BREAKABLE`).
        record: Keep every request body in `stats.bodies` (for tests that inspect the client).
        process: Serve from a forked child process instead of a background thread.
        backlog: The listening socket's connection backlog.

    Raises:
        ValueError: `port` is not 0 or a port number.
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
        broken: Sequence[str] = (),
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
            broken=tuple(broken),
        )
        if isinstance(policy, StatefulPolicy):
            policy = policy.fresh()
        self._app = ScriptedApp(policy, model=model, faults=faults, seed=seed, record=record)
        self.host = host
        self.requested_port = port
        self.model = model
        self.process = process
        self.backlog = backlog
        self.port: int | None = None
        self._server_thread: tuple[ScriptedServer, threading.Thread] | None = None
        self._child: Any = None  # multiprocessing.Process when process=True
        self._forever: ScriptedServer | None = None

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

    def _listen(self) -> socket.socket:
        try:
            return listening_socket(self.host, self.requested_port, self.backlog)
        except OSError as exc:
            raise OSError(
                f"ScriptedEndpoint cannot listen on {self.host}:{self.requested_port}: {exc}"
            ) from exc

    def _server(self, *, signals: bool = False) -> ScriptedServer:
        return ScriptedServer(ScriptedASGI(self._app.handle), install_signal_handlers=signals)

    def start(self) -> ScriptedEndpoint:
        """Start serving in a background thread (or child process); returns once listening."""
        if self.running:
            raise RuntimeError(f"{self!r} is already running")
        sock = self._listen()
        if self.process:
            self._start_process(sock)
        else:
            self._start_thread(sock)
        return self

    def _start_thread(self, sock: socket.socket) -> None:
        server = self._server()
        loop = new_event_loop()

        def run() -> None:
            asyncio.set_event_loop(loop)
            try:
                loop.run_until_complete(server.serve(sockets=[sock]))
            finally:
                _cancel_all(loop)
                loop.close()

        thread = threading.Thread(target=run, name="scripted-endpoint", daemon=True)
        thread.start()
        deadline = time.monotonic() + START_TIMEOUT
        while not server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.002)
        if not server.started:
            server.should_exit = True
            thread.join(5)
            sock.close()
            raise RuntimeError(
                f"ScriptedEndpoint did not start serving on {self.host} within {START_TIMEOUT}s"
            )
        self._server_thread = (server, thread)
        self.port = sock.getsockname()[1]

    def _start_process(self, sock: socket.socket) -> None:
        context = multiprocessing.get_context("fork")  # fork: the policy need not be picklable
        parent_end, child_end = context.Pipe(duplex=False)
        child = context.Process(
            target=self._child_main,
            args=(sock, child_end, os.getpid()),
            name="scripted-endpoint",
            daemon=True,
        )
        child.start()
        child_end.close()
        port = sock.getsockname()[1]
        sock.close()  # the child serves it now
        if not parent_end.poll(START_TIMEOUT):
            child.kill()
            raise RuntimeError(f"ScriptedEndpoint child process did not start within {START_TIMEOUT}s")
        kind, value = parent_end.recv()
        parent_end.close()
        if kind == "error":
            child.join(5)
            raise RuntimeError(f"ScriptedEndpoint child process could not serve: {value}")
        self._child, self.port = child, port

    def _child_main(self, sock: socket.socket, pipe: Any, parent: int) -> None:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops us; no Ctrl-C traceback
        server = self._server()  # SIGTERM keeps its default: the parent's terminate() ends us

        async def main() -> None:
            orphaned = asyncio.ensure_future(_exit_when_orphaned(parent))  # even if the parent is SIGKILLed
            serving = asyncio.ensure_future(server.serve(sockets=[sock]))
            await _until_started(server, serving)
            pipe.send(("ok", None) if server.started else ("error", repr(serving.exception())))
            pipe.close()
            await serving
            orphaned.cancel()

        loop = new_event_loop()
        loop.run_until_complete(main())

    def stop(self) -> None:
        """Stop serving and close every connection; safe to call twice (and from another
        thread, to end `serve_forever`)."""
        if self._forever is not None:
            self._forever.should_exit = True
        if self._child is not None:
            child, self._child = self._child, None
            child.terminate()
            child.join(5)
            if child.is_alive():
                child.kill()
                child.join(5)
        if self._server_thread is not None:
            (server, thread), self._server_thread = self._server_thread, None
            server.should_exit = True
            thread.join(10)
        self.port = None

    def serve_forever(self, ready: Callable[[str], None] | None = None) -> None:
        """Serve in the calling thread until Ctrl-C or `stop()`; `ready(base_url)` once listening
        (with port=0 that is the only way to learn the port)."""
        if self.running:
            raise RuntimeError(f"{self!r} is already running")
        sock = self._listen()
        server = self._server(signals=threading.current_thread() is threading.main_thread())

        async def main() -> None:
            serving = asyncio.ensure_future(server.serve(sockets=[sock]))
            await _until_started(server, serving)
            if server.started and ready is not None:
                ready(self.base_url)
            await serving

        self._forever, self.port = server, sock.getsockname()[1]
        loop = new_event_loop()
        try:
            loop.run_until_complete(main())
        finally:
            self._forever = None
            self.port = None
            _cancel_all(loop)
            loop.close()

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


async def _until_started(server: ScriptedServer, serving: asyncio.Future[None]) -> None:
    """Wait until uvicorn accepts connections, or its serve task ended without starting."""
    deadline = time.monotonic() + START_TIMEOUT
    while not server.started and not serving.done() and time.monotonic() < deadline:
        await asyncio.sleep(0.002)


def _cancel_all(loop: asyncio.AbstractEventLoop) -> None:
    """Cancel open connections and hung requests so the loop closes without warnings."""
    tasks = [t for t in asyncio.all_tasks(loop) if not t.done()]
    for task in tasks:
        task.cancel()
    if tasks:
        loop.run_until_complete(asyncio.gather(*tasks, return_exceptions=True))
    loop.run_until_complete(loop.shutdown_asyncgens())


SCRIPTED_PREFIX = "scripted:"


def scripted_policy(env: object, model: str) -> Policy:
    """The policy `model` names ("scripted:NAME" or "NAME") from `env.scripted_policies`.

    The one lookup behind `rubric eval ENV -m scripted:NAME`, `rubric endpoint` and
    `env.evaluate("scripted:NAME")`.

    Args:
        env: The environment (anything with `scripted_policies`).
        model: "scripted:NAME" or "NAME".

    Returns:
        The policy.

    Raises:
        ConfigError: the environment has no such policy (the ones it has are listed).
    """
    name = model.removeprefix(SCRIPTED_PREFIX)
    policies: Mapping[str, Policy] = env.scripted_policies if isinstance(env, HasScriptedPolicies) else {}
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
    "StatefulPolicy",
    "scripted_policy",
]
