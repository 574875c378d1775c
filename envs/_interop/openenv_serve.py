"""Our environments served to OpenEnv clients (`rubric serve ENV`), through OpenEnv's own server library.

OpenEnv's `create_app` builds the server (its WebSocket sessions, HTTP routes, schema and
health endpoints); this module only gives it an OpenEnv `Environment` whose episode is one of
our rollouts, driven exactly as `harness.rollout` drives it:
- **reset** (`seed` or `example_id` picks the example) sets the rollout up and returns the
  rendered prompt (`messages`) and the tool schemas (`tools`);
- **step** takes the model's assistant message (`content` and/or OpenAI `tool_calls`), runs
  the tools through our `Tool.call` path (so argument checks, timeouts and, for `python`, the
  sandbox apply) or the environment's own reply, and returns the new `messages`;
- the **final step** (`done`) carries the rubric's reward and every node's score (`scores`,
  per-turn ones in `turn_scores`; an unscored node is null with its reason in `score_errors`).

Each client session gets its own rollout, so concurrent sessions never share state; the
rollout's resources are released when the episode ends or the session closes. Binds
127.0.0.1 unless told otherwise, and answers no web page of another origin (`openenv_guard`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections.abc import Callable, Sequence
from typing import Any

from envs._environment import Environment
from envs._interop.openenv import INSTALL_HINT
from envs._interop.openenv_guard import (
    IDLE_TIMEOUT,
    IdleSessions,
    OriginGuard,
    check_idle_timeout,
    check_origin,
)
from harness._core.aio import run_sync
from harness._core.errors import ConfigError
from harness._core.protocol import env_turn
from harness._core.types import Message, Rollout

HOST = "127.0.0.1"
DEFAULT_PORT = 8000
MAX_SESSIONS = 64
"""Concurrent OpenEnv sessions (one rollout each) a server allows by default."""


def _openenv() -> Any:
    """OpenEnv's server package, or one line saying how to install it."""
    try:
        import openenv.core.env_server as server  # the optional [openenv] extra
    except ImportError:
        raise ConfigError(f"rubric serve needs the openenv package: {INSTALL_HINT}") from None
    return server


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def _message_dicts(messages: Sequence[Message]) -> list[dict[str, Any]]:
    return [m.model_dump(mode="json", exclude_none=True) for m in messages]


def openenv_types(name: str) -> tuple[type, type]:
    """The OpenEnv Action and Observation classes of a served environment (built on use, so
    the pydantic models come from the installed `openenv`)."""
    from pydantic import Field, create_model

    server = _openenv()
    action = create_model(
        "AssistantAction",
        __base__=server.Action,
        __doc__=f"The model's assistant message for the rubric environment {name!r}: text and/or tool calls.",
        content=(str | None, Field(default=None, description="the assistant's text")),
        tool_calls=(
            list[dict[str, Any]],
            Field(default_factory=list, description="OpenAI tool calls: {id, function: {name, arguments}}"),
        ),
    )
    observation = create_model(
        "RubricObservation",
        __base__=server.Observation,
        messages=(list[dict[str, Any]], Field(default_factory=list, description="new messages, in order")),
        tools=(list[dict[str, Any]], Field(default_factory=list, description="the OpenAI tools= list")),
        stop_reason=(str | None, None),
        scores=(dict[str, float | None], Field(default_factory=dict, description="every node's score")),
        turn_scores=(dict[str, list[float | None]], Field(default_factory=dict)),
        score_errors=(dict[str, str], Field(default_factory=dict)),
    )
    return action, observation


class ServedEpisodes:
    """What every session of one server shares: our environment, its examples and the OpenEnv types."""

    def __init__(self, env: Environment) -> None:
        self.env = env
        self.examples = [dict(row) for row in env.get_dataset("eval")]
        if not self.examples:
            raise ConfigError(f"environment {env.name!r} has no examples to serve; give it a dataset")
        self.by_id = {str(row["example_id"]): row for row in self.examples}
        self.action_cls, self.observation_cls = openenv_types(env.name)
        self.releasing: set[asyncio.Task[None]] = set()

    def example(self, seed: int | None, example_id: Any) -> dict[str, Any]:
        """The example a reset asks for: by `example_id`, else the `seed`-th (wrapping), else the first."""
        if example_id is not None:
            row = self.by_id.get(str(example_id))
            if row is None:
                shown = ", ".join(list(self.by_id)[:10])
                raise ConfigError(
                    f"environment {self.env.name!r} has no example_id {example_id!r}; some it has: {shown}; "
                    "reset with one of them, or with seed=N for the N-th example"
                )
            return row
        return self.examples[(seed or 0) % len(self.examples)]


class ServedEpisode:
    """One client session's side of the protocol: one rollout at a time, driven as `harness.rollout` drives it."""

    def __init__(self, episodes: ServedEpisodes) -> None:
        self.episodes = episodes
        self.env = episodes.env
        self.rollout: Rollout | None = None
        self.count = 0
        self.loop: asyncio.AbstractEventLoop | None = None

    async def reset(self, seed: int | None, example_id: Any) -> Any:
        """Set up a rollout for the example asked for; its prompt and tools are the first observation."""
        await self.release()
        self.loop = asyncio.get_running_loop()
        self.rollout = await self.env.setup_rollout(self.episodes.example(seed, example_id), self.count)
        self.count += 1
        return self.episodes.observation_cls(
            messages=_message_dicts(self.rollout.prompt),
            tools=self.env.tool_schemas,
            metadata={"example_id": self.rollout.example_id, "environment": self.env.name},
        )

    async def step(self, action: Any) -> Any:
        """Append the assistant message, run the environment's turn, and score when the episode ends."""
        rollout = self.rollout
        if rollout is None or rollout.stop_reason is not None:
            raise ConfigError("no episode is running; reset first (the last one ended)")
        message = Message(role="assistant", content=action.content, tool_calls=action.tool_calls or None)
        before = len(rollout.completion) + 1
        rollout.completion.append(message)
        rollout.turns += 1
        if await env_turn(self.env, rollout) and rollout.turns >= self.env.max_turns:
            rollout.stop_reason = "max_turns"
        new = _message_dicts(rollout.completion[before:])
        if rollout.stop_reason is None:
            return self.episodes.observation_cls(messages=new)
        await self.env.score(rollout)
        await self.release()
        return self.episodes.observation_cls(
            messages=new,
            done=True,
            reward=_finite(rollout.reward),
            stop_reason=rollout.stop_reason,
            scores={path: _finite(v) for path, v in rollout.scores.items()},
            turn_scores={p: [_finite(v) for v in vs] for p, vs in rollout.turn_scores.items()},
            score_errors=dict(rollout.score_errors),
            metadata={
                "example_id": rollout.example_id,
                **({"error": rollout.error} if rollout.error else {}),
            },
        )

    async def release(self) -> None:
        """Free what the current rollout holds (its own MCP servers)."""
        if self.rollout is not None:
            await self.env.release_rollout(self.rollout)

    def close(self) -> None:
        """The session ended: release a rollout left mid-episode, on the server's loop, without
        ever blocking that loop. OpenEnv calls this from a session's worker thread (which waits
        for the release) or, for its stateless HTTP routes, on the loop itself (which must not
        wait: the release is scheduled there and every other request goes on)."""
        rollout, loop, self.rollout = self.rollout, self.loop, None
        if rollout is None or rollout.stop_reason is not None or loop is None or loop.is_closed():
            return
        release = _release_quietly(self.env, rollout)
        if _running_loop() is loop:
            task = loop.create_task(release)
            self.episodes.releasing.add(task)  # held until done: the loop keeps only weak references
            task.add_done_callback(self.episodes.releasing.discard)
            return
        with contextlib.suppress(TimeoutError):
            asyncio.run_coroutine_threadsafe(release, loop).result(timeout=30)


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def _release_quietly(env: Environment, rollout: Rollout) -> None:
    """Release a rollout whose client is gone: nobody is left to tell of a failure."""
    with contextlib.suppress(Exception):
        await env.release_rollout(rollout)


def session_class(episodes: ServedEpisodes) -> type:
    """The OpenEnv `Environment` class whose instances (one per client session) each run an `ServedEpisode`."""
    server = _openenv()

    class RubricEpisode(server.Environment):  # type: ignore[misc,name-defined]
        SUPPORTS_CONCURRENT_SESSIONS = True

        def __init__(self) -> None:
            super().__init__()
            self.episode = ServedEpisode(episodes)

        async def reset_async(
            self, seed: int | None = None, episode_id: str | None = None, example_id: Any = None, **_: Any
        ) -> Any:
            return await self.episode.reset(seed, example_id)

        async def step_async(self, action: Any, timeout_s: float | None = None, **_: Any) -> Any:
            return await self.episode.step(action)

        def reset(self, seed: int | None = None, episode_id: str | None = None, **kwargs: Any) -> Any:
            return run_sync(self.reset_async(seed, episode_id, **kwargs))

        def step(self, action: Any, timeout_s: float | None = None, **kwargs: Any) -> Any:
            return run_sync(self.step_async(action, timeout_s, **kwargs))

        @property
        def state(self) -> Any:
            rollout = self.episode.rollout
            return server.State(
                episode_id=None if rollout is None else str(rollout.example_id),
                step_count=0 if rollout is None else rollout.turns,
            )

        def close(self) -> None:
            self.episode.close()

    RubricEpisode.__name__ = RubricEpisode.__qualname__ = f"RubricEpisode[{episodes.env.name}]"
    return RubricEpisode


def openenv_app(
    env: Environment,
    *,
    max_sessions: int = MAX_SESSIONS,
    host: str = HOST,
    allow_origins: Sequence[str] = (),
    idle_timeout: float = IDLE_TIMEOUT,
) -> Any:
    """OpenEnv's FastAPI app (`create_fastapi_app`) serving `env`: one rollout per session,
    behind the Host and Origin checks of `openenv_guard` (`host` is the address it is bound to;
    `allow_origins`, web origins besides its own whose pages may use it); a session idle for
    `idle_timeout` seconds is closed."""
    if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
        raise ConfigError(f"max_sessions must be an integer >= 1, got {max_sessions!r}")
    origins = sorted({check_origin(o) for o in allow_origins})
    idle = check_idle_timeout(idle_timeout)
    episodes = ServedEpisodes(env)
    app = _openenv().create_fastapi_app(
        session_class(episodes),
        episodes.action_cls,
        episodes.observation_cls,
        max_concurrent_envs=max_sessions,
        env_name=env.name,
    )
    _answer_http_step(app)
    app.add_middleware(IdleSessions, timeout=idle)
    if origins:  # pages there may read the answers too
        from starlette.middleware.cors import CORSMiddleware  # comes with openenv's server

        app.add_middleware(
            CORSMiddleware, allow_origins=origins, allow_methods=["GET", "POST"], allow_headers=["*"]
        )
    app.add_middleware(OriginGuard, bind=host, allow_origins=origins)  # added last: runs first
    return app


STEP_OVER_HTTP = (
    "no episode is running for HTTP POST /step: OpenEnv's HTTP routes give every request a fresh "
    "environment, so an HTTP /reset starts nothing a later /step could continue. Reset first and step "
    "over one WebSocket session at /ws (ws://HOST:PORT/ws; OpenEnv's EnvClient or GenericEnvClient does this)"
)


def _answer_http_step(app: Any) -> None:
    """Replace OpenEnv's HTTP `POST /step`, which can only fail here (no episode outlives an HTTP
    request), by a 409 saying how to play instead of a 500 and a traceback in the log."""
    from fastapi.responses import JSONResponse  # comes with openenv's server

    app.router.routes[:] = [r for r in app.router.routes if getattr(r, "path", None) != "/step"]

    async def step_over_http() -> JSONResponse:
        return JSONResponse({"detail": STEP_OVER_HTTP}, status_code=409)

    app.add_api_route(
        "/step", step_over_http, methods=["POST"], status_code=409, tags=["Environment Control"]
    )


async def aserve_openenv(
    env: Environment,
    *,
    host: str = HOST,
    port: int = DEFAULT_PORT,
    max_sessions: int = MAX_SESSIONS,
    allow_origins: Sequence[str] = (),
    idle_timeout: float = IDLE_TIMEOUT,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve `env` to OpenEnv clients on http://host:port (WebSocket sessions at /ws) until stopped.

    The arguments are `serve_openenv`'s; `ready` is told the URL once they are checked.
    """
    import uvicorn  # comes with openenv's server

    app = openenv_app(
        env, max_sessions=max_sessions, host=host, allow_origins=allow_origins, idle_timeout=idle_timeout
    )
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", lifespan="on")
    if ready is not None:
        ready(f"http://{host}:{port}")
    quiet = _ClientLeft()
    logging.getLogger("uvicorn.error").addFilter(quiet)
    try:
        await uvicorn.Server(config).serve()
    finally:
        logging.getLogger("uvicorn.error").removeFilter(quiet)


class _ClientLeft(logging.Filter):
    """Drops the traceback OpenEnv 0.4's server logs whenever a client ends its session: it
    closes a WebSocket the client already closed, which starlette raises as WebSocketDisconnect
    ("Exception in ASGI application", some 60 lines per session). A client leaving is no error."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return type(error).__name__ != "WebSocketDisconnect"


def serve_openenv(
    env: Environment,
    *,
    host: str = HOST,
    port: int = DEFAULT_PORT,
    max_sessions: int = MAX_SESSIONS,
    allow_origins: Sequence[str] = (),
    idle_timeout: float = IDLE_TIMEOUT,
    ready: Callable[[str], None] | None = None,
) -> None:
    """Serve `env` to OpenEnv clients until stopped (`rubric serve ENV`).

    Args:
        env: any of our environments.
        host: the address to bind; 127.0.0.1 (this machine only) unless you mean otherwise.
        port: the TCP port.
        max_sessions: the most concurrent client sessions (one rollout each).
        allow_origins: web origins ("http://127.0.0.1:3000") whose pages may use the server
            besides its own; a browser page from any other origin is refused (403).
        idle_timeout: seconds a session's client may stay silent before the server closes
            the session (its rollout released, its slot freed).
        ready: Told the server's URL once the arguments are checked, before it serves.

    Raises:
        ConfigError: An argument is out of range (`max_sessions`, an origin, `idle_timeout`).
    """
    served = aserve_openenv(
        env,
        host=host,
        port=port,
        max_sessions=max_sessions,
        allow_origins=allow_origins,
        idle_timeout=idle_timeout,
        ready=ready,
    )
    asyncio.run(served)


__all__ = [
    "DEFAULT_PORT",
    "HOST",
    "IDLE_TIMEOUT",
    "MAX_SESSIONS",
    "ServedEpisode",
    "ServedEpisodes",
    "aserve_openenv",
    "openenv_app",
    "openenv_types",
    "serve_openenv",
]
