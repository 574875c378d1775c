"""OpenEnv environments run by our harness: `envs.from_openenv(URL | "module:app")`.

Everything on the wire goes through OpenEnv's own library (the `[openenv]` extra): its
`GenericEnvClient` holds one WebSocket session per rollout (reset, step, close), and a local
environment is OpenEnv's own server app (`create_app(...)`) run by uvicorn. This module decides
only what the harness needs around them:
- **Acting.** The model acts through one tool built from the environment's action schema
  (`GET /schema`, the server's own description), named after the action class (`GuessAction`
  -> `guess`); or, when the action is one text field (a chat message), its reply is the action.
  Each step's observation goes back to the model; `done` ends the episode (stop reason `done`).
- **Rewards.** Every step's reward is kept in `rollout.state["openenv"]["steps"]` and read by
  two rubric nodes: `OpenEnvStepReward` (per turn: the rewards of that turn's steps; the
  episode's score is their sum, the return) and `OpenEnvFinalReward` (the last reward the
  environment gave). Combine them with your own nodes like any others.
- **Lifetime.** One session per rollout, closed when the rollout ends, fails or the run is
  cancelled (`release_rollout` / `release`); a server that drops or hangs fails that rollout
  only. A rejected action is a tool error the model reads, recorded in `state["tool_errors"]`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Callable, Mapping
from typing import IO, Any, Literal

from envs.environment import Environment
from envs.tools.functions import BadArguments, parse_arguments
from harness.child import wrap
from harness.errors import ConfigError, RubricError, ScoringError
from harness.types import Message, Rollout, ToolCall
from rubrics import Rubric, WeightedSum
from rubrics.turns import Turn

INSTALL_HINT = "pip install 'rubric-rl[openenv]'"
CONNECT_TIMEOUT = 10.0
"""Seconds to open a session (and to read the server's schema)."""
STEP_TIMEOUT = 60.0
"""Seconds one reset or step may take before the rollout fails."""
START_TIMEOUT = 60.0
"""Seconds a local server (`openenv:module:app`) may take to answer /health."""
DEFAULT_EPISODES = 100
"""Episodes (seeds 0, 1, ...) of the default dataset; `-n` / `num_examples=` at evaluation picks fewer."""
ActionMode = Literal["auto", "tool", "text"]
RewardMode = Literal["sum", "final"]


class OpenEnvConnectError(ConfigError):
    """No OpenEnv environment server answers at the address, or what answers is something else."""


class OpenEnvSessionError(RubricError):
    """An OpenEnv session failed during a rollout (the server dropped, hung or returned an error)."""


def _client_class() -> Any:
    """OpenEnv's `GenericEnvClient`, or one line saying how to install it."""
    try:
        from openenv.core.generic_client import GenericEnvClient  # the optional [openenv] extra
    except ImportError:
        raise ConfigError(f"OpenEnv environments need the openenv package: {INSTALL_HINT}") from None
    return GenericEnvClient


# ----------------------------------------------------------------------------- the server's schema


def read_schema(base_url: str, timeout: float = CONNECT_TIMEOUT) -> dict[str, Any]:
    """The server's `GET /schema` answer (action, observation, state JSON Schemas).

    Raises:
        OpenEnvConnectError: Nothing answers at `base_url`, or it is not an OpenEnv server.
    """
    url = f"{base_url.rstrip('/')}/schema"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            body = response.read()
    except urllib.error.HTTPError as exc:
        raise OpenEnvConnectError(
            f"{base_url} does not speak OpenEnv's HTTP API: GET /schema answered HTTP {exc.code}; "
            "point at an OpenEnv environment server (openenv>=0.4, built with create_app(...))"
        ) from None
    except (urllib.error.URLError, OSError) as exc:
        why = getattr(exc, "reason", exc)
        raise OpenEnvConnectError(
            f"no OpenEnv server answers at {base_url} ({why}); start it (e.g. `uvicorn "
            "your_env.server.app:app --port 8000`) or fix the URL, or give openenv:module:app to start one here"
        ) from None
    try:
        schema = json.loads(body)
    except ValueError:
        schema = None
    if not isinstance(schema, dict) or not isinstance(schema.get("action"), dict):
        raise OpenEnvConnectError(
            f"{base_url} does not speak OpenEnv's HTTP API: GET /schema did not return its action, "
            f"observation and state schemas (got {body[:120]!r}); point at an OpenEnv environment server "
            "(openenv>=0.4, built with create_app(...))"
        )
    return schema


def action_tool(action_schema: Mapping[str, Any]) -> dict[str, Any]:
    """The OpenAI tool for an OpenEnv action schema: the action's fields (without `metadata`)."""
    title = str(action_schema.get("title") or "Action")
    stem = re.sub(r"Action$", "", title) or "step"
    name = re.sub(r"[^a-zA-Z0-9_-]", "_", re.sub(r"(?<!^)(?=[A-Z])", "_", stem).lower())[:64] or "step"
    properties = {k: v for k, v in dict(action_schema.get("properties") or {}).items() if k != "metadata"}
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    required = [r for r in action_schema.get("required") or [] if r != "metadata"]
    if required:
        parameters["required"] = required
    if "$defs" in action_schema:
        parameters["$defs"] = action_schema["$defs"]
    description = str(action_schema.get("description") or f"Take one step in the environment ({title}).")
    function = {"name": name, "description": " ".join(description.split()), "parameters": parameters}
    return {"type": "function", "function": function}


def text_field(action_schema: Mapping[str, Any]) -> str | None:
    """The action's one text field, when the action is just a message; else None."""
    properties = {k: v for k, v in dict(action_schema.get("properties") or {}).items() if k != "metadata"}
    if len(properties) == 1:
        ((field, spec),) = properties.items()
        if isinstance(spec, Mapping) and spec.get("type") == "string":
            return str(field)
    return None


def render_observation(observation: Mapping[str, Any]) -> str:
    """The text the model reads for an observation: its one text field, else its fields as JSON."""
    fields = {k: v for k, v in observation.items() if k != "metadata" and v not in (None, "", [], {})}
    if len(fields) == 1 and isinstance(next(iter(fields.values())), str):
        return str(next(iter(fields.values())))
    return json.dumps(fields, ensure_ascii=False, default=str)


# ----------------------------------------------------------------------------- the reward nodes


def _steps(rollout: Rollout) -> list[dict[str, Any]]:
    return list(rollout.state.get("openenv", {}).get("steps", []))


class OpenEnvStepReward(Rubric):
    """The OpenEnv environment's per-step rewards: a turn scores the sum of its steps' rewards
    (0.0 for a turn that took no step); the episode scores their sum (the return)."""

    reduce_turns = "sum"

    def forward_turn(self, rollout: Rollout, turn: Turn) -> float:
        steps = _steps(rollout)
        if not any(s.get("reward") is not None for s in steps):
            raise ScoringError(f"the OpenEnv environment gave no reward in {len(steps)} step(s)")
        return float(sum(s["reward"] for s in steps if s["turn"] == turn.index and s["reward"] is not None))


class OpenEnvFinalReward(Rubric):
    """The last reward the OpenEnv environment gave (its outcome, for environments that score at the end)."""

    def forward(self, rollout: Rollout) -> float:
        rewards = [s["reward"] for s in _steps(rollout) if s.get("reward") is not None]
        if not rewards:
            raise ScoringError(f"the OpenEnv environment gave no reward in {len(_steps(rollout))} step(s)")
        return float(rewards[-1])


def default_rubric(reward: RewardMode = "sum") -> Rubric:
    """Both reward nodes; the root's reward is the return (`"sum"`) or the final reward (`"final"`)."""
    if reward not in ("sum", "final"):
        raise ConfigError(f"reward={reward!r}; use 'sum' (the return) or 'final' (the last reward)")
    weights = [1.0, 0.0] if reward == "sum" else [0.0, 1.0]
    return WeightedSum({"step_reward": OpenEnvStepReward(), "final_reward": OpenEnvFinalReward()}, weights)


# ----------------------------------------------------------------------------- a local server


class LocalServer:
    """An OpenEnv server app (`module:app`, as OpenEnv's `server/app.py` defines it) run by
    uvicorn on 127.0.0.1 in a child process that never outlives this one (`harness.child`)."""

    def __init__(self, app: str, *, start_timeout: float = START_TIMEOUT) -> None:
        self.app = app
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = int(sock.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self._errlog: IO[bytes] = tempfile.TemporaryFile()
        command = [sys.executable, "-m", "uvicorn", app, "--host", "127.0.0.1", "--port", str(self.port)]
        self._process = subprocess.Popen(
            wrap([*command, "--log-level", "warning"]), stdout=subprocess.DEVNULL, stderr=self._errlog
        )
        self._finalizer = weakref.finalize(self, _stop, self._process, self._errlog)
        self._wait(start_timeout)

    def _wait(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while True:
            with contextlib.suppress(OSError):
                with urllib.request.urlopen(f"{self.url}/health", timeout=2) as response:
                    if response.status == 200:
                        return
            if self._process.poll() is not None or time.monotonic() > deadline:
                why = "it exited" if self._process.poll() is not None else f"no answer within {timeout:g}s"
                tail = self.stderr_tail()
                self.close()
                raise OpenEnvConnectError(
                    f"the OpenEnv server app {self.app!r} did not start: {why}"
                    + (f"; its stderr ends: {tail}" if tail else "")
                    + "; check that the module imports and defines an app built with create_app(...)"
                )
            time.sleep(0.1)

    def stderr_tail(self) -> str:
        with contextlib.suppress(ValueError, OSError):
            self._errlog.seek(0)
            return " ".join(self._errlog.read().decode(errors="replace").split())[-600:]
        return ""

    def close(self) -> None:
        """Stop the server (idempotent)."""
        self._finalizer()


def _stop(process: subprocess.Popen[bytes], errlog: IO[bytes]) -> None:
    if process.poll() is None:
        process.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(10)
    errlog.close()


# ----------------------------------------------------------------------------- the environment


class OpenEnvEnvironment(Environment):
    """An OpenEnv environment as ours: one OpenEnv session per rollout; see `from_openenv`."""

    default_max_turns = 20

    def __init__(
        self,
        base_url: str,
        schema: Mapping[str, Any],
        *,
        dataset: Any,
        rubric: Any,
        action: ActionMode,
        timeout: float,
        observation_text: Callable[[Mapping[str, Any]], str],
        local: LocalServer | None = None,
        **options: Any,
    ) -> None:
        self.base_url = base_url
        self.action_schema = dict(schema["action"])
        self.text_field = text_field(self.action_schema) if action != "tool" else None
        if action == "text" and self.text_field is None:
            raise ConfigError(
                f"action='text' needs an action that is one text field; {base_url}'s action has fields "
                f"{sorted(k for k in self.action_schema.get('properties', {}) if k != 'metadata')}; use action='tool'"
            )
        self.timeout = timeout
        self.observation_text = observation_text
        self.local = local
        self._sessions: dict[int, tuple[asyncio.AbstractEventLoop, Any]] = {}
        super().__init__(dataset, rubric, **options)
        self._action_tool = action_tool(self.action_schema) if self.text_field is None else None

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        """The action tool (none when the action is the model's text)."""
        return [self._action_tool] if self._action_tool is not None else []

    # -- one session per rollout --------------------------------------------------------------

    async def setup_rollout(self, example: Mapping[str, Any], rollout_index: int = 0) -> Rollout:
        """Open the rollout's session and reset it; the first observation is the user turn."""
        rollout = await super().setup_rollout(example, rollout_index)
        reset = rollout.info.get("reset")
        kwargs = dict(reset) if isinstance(reset, Mapping) else {}
        if "seed" in rollout.info and "seed" not in kwargs:
            kwargs["seed"] = rollout.info["seed"]
        client = _client_class()(
            base_url=self.base_url, connect_timeout_s=CONNECT_TIMEOUT, message_timeout_s=self.timeout
        )
        self._sessions[id(rollout)] = (asyncio.get_running_loop(), client)
        try:
            result = await self._call(client, "reset", lambda: client.reset(**kwargs))
        except BaseException:
            await self.release_rollout(rollout)
            raise
        system = [m for m in rollout.prompt if m.role == "system"]
        rollout.prompt = [*system, Message(role="user", content=self.observation_text(result.observation))]
        rollout.state["openenv"] = {"steps": [], "done": bool(result.done), "reset": kwargs}
        return rollout

    async def _call(self, client: Any, what: str, request: Callable[[], Any]) -> Any:
        """One reset or step through OpenEnv's client; a server failure is an OpenEnvSessionError."""
        try:
            return await request()
        except TimeoutError:
            raise OpenEnvSessionError(
                f"the OpenEnv server at {self.base_url} did not answer {what} within {self.timeout:g}s; "
                "check the server, or raise timeout="
            ) from None
        except ConnectionError as exc:
            raise OpenEnvSessionError(
                f"could not open an OpenEnv session at {self.base_url} for {what}: {exc}; check that the server is running"
            ) from None
        except RuntimeError as exc:
            if "VALIDATION_ERROR" in str(exc):
                raise
            raise OpenEnvSessionError(f"the OpenEnv server at {self.base_url} failed {what}: {exc}") from None
        except Exception as exc:  # websockets' ConnectionClosed and the like: the server went away
            raise OpenEnvSessionError(
                f"the OpenEnv session at {self.base_url} broke during {what}: {type(exc).__name__}: {exc}; "
                "check the server (its log)"
            ) from None

    async def release_rollout(self, rollout: Rollout) -> None:
        """Close the rollout's OpenEnv session (the server ends its environment instance)."""
        entry = self._sessions.pop(id(rollout), None)
        if entry is not None:
            await _close(entry[1])
        await super().release_rollout(rollout)

    async def release(self) -> None:
        """Close the sessions still open on this loop (a cancelled or interrupted run)."""
        loop = asyncio.get_running_loop()
        mine = [key for key, (owner, _) in self._sessions.items() if owner is loop]
        for key in mine:
            await _close(self._sessions.pop(key)[1])
        await super().release()

    def close(self) -> None:
        """Stop the local server, if this environment started one."""
        if self.local is not None:
            self.local.close()

    # -- the episode --------------------------------------------------------------------------

    async def respond(self, rollout: Rollout) -> list[Message] | None:
        """Step with the model's text or tool calls; each observation goes back to the model."""
        last = rollout.completion[-1]
        if self.text_field is not None:
            result = await self._step(rollout, {self.text_field: last.text})
            return [Message(role="user", content=self.observation_text(result.observation))]
        if not last.tool_calls:
            return None  # the model answered instead of acting: the episode is over
        return [await self._tool_step(rollout, call) for call in last.tool_calls]

    async def _tool_step(self, rollout: Rollout, call: ToolCall) -> Message:
        assert self._action_tool is not None
        name = self._action_tool["function"]["name"]

        def error(reason: str, text: str) -> Message:
            rollout.state.setdefault("tool_errors", []).append(
                {"turn": rollout.turns, "tool": call.name, "tool_call_id": call.id, "error": reason}
            )
            return Message(role="tool", content=f"Error: {text}", tool_call_id=call.id, name=call.name)

        if rollout.state["openenv"]["done"]:
            return error("episode over", "not run: the episode is over.")
        if call.name != name:
            return error(
                f"unknown tool {call.name!r}", f"unknown tool {call.name!r}; the only tool is {name!r}."
            )
        try:
            action = parse_arguments(call.arguments)
        except BadArguments as exc:
            return error(exc.reason, f"tool {name!r} was not run: {exc.detail}")
        try:
            result = await self._step(rollout, action)
        except RuntimeError as exc:  # the server's validation error: the session goes on
            schema = json.dumps(self._action_tool["function"]["parameters"], separators=(",", ":"))
            return error(
                f"the environment rejected the action: {exc}",
                f"the environment rejected the action {json.dumps(action)} ({exc}); call {name!r} "
                f"with arguments matching its schema: {schema}",
            )
        return Message(
            role="tool",
            content=self.observation_text(result.observation),
            tool_call_id=call.id,
            name=call.name,
        )

    async def _step(self, rollout: Rollout, action: dict[str, Any]) -> Any:
        entry = self._sessions.get(id(rollout))
        if entry is None:
            raise OpenEnvSessionError(
                "this rollout has no OpenEnv session (it was closed); start a new rollout"
            )
        client = entry[1]
        result = await self._call(client, "step", lambda: client.step(action))
        reward = result.reward
        record = {
            "turn": rollout.turns - 1,
            "action": action,
            "reward": None if reward is None else float(reward),
            "done": bool(result.done),
        }
        rollout.state["openenv"]["steps"].append(record)
        rollout.state["openenv"]["done"] = bool(result.done)
        return result

    async def stop_reason(self, rollout: Rollout) -> str | None:
        """ "done" once the environment says so; else the usual conditions."""
        if rollout.state.get("openenv", {}).get("done"):
            return "done"
        return await super().stop_reason(rollout)

    def config(self) -> dict[str, Any]:
        """What identifies the environment in metadata.json: ours plus the server and action schema."""
        where = {"app": self.local.app} if self.local is not None else {"url": self.base_url}
        return {**super().config(), "openenv": {**where, "action": self.action_schema.get("title")}}


async def _close(client: Any) -> None:
    """Close a session; one that is already gone is fine."""
    with contextlib.suppress(Exception):
        await asyncio.wait_for(client.close(), 10)


def _episodes(dataset: Any, num_examples: int) -> Any:
    if dataset is not None:
        return dataset
    if isinstance(num_examples, bool) or not isinstance(num_examples, int) or num_examples < 1:
        raise ConfigError(f"num_examples must be an integer >= 1, got {num_examples!r}")
    return [
        {"id": f"episode-{i}", "question": f"OpenEnv episode {i}", "seed": i} for i in range(num_examples)
    ]


def from_openenv(
    target: str,
    *,
    rubric: Any = None,
    reward: RewardMode = "sum",
    dataset: Any = None,
    num_examples: int = DEFAULT_EPISODES,
    action: ActionMode = "auto",
    system_prompt: str | None = None,
    max_turns: int | None = None,
    timeout: float = STEP_TIMEOUT,
    observation_text: Callable[[Mapping[str, Any]], str] = render_observation,
    name: str | None = None,
    sampling: Mapping[str, Any] | None = None,
) -> OpenEnvEnvironment:
    """An OpenEnv environment, run by our harness through OpenEnv's own client.

    Args:
        target: the URL of a running OpenEnv server ("http://127.0.0.1:8000"), or
            "module:app", an installed OpenEnv server app to start on 127.0.0.1 for this
            environment's lifetime (`env.close()` stops it sooner).
        rubric: the rubric tree; default: `default_rubric(reward)`, the environment's step and
            final rewards. Put `OpenEnvStepReward()` / `OpenEnvFinalReward()` in your own tree
            to combine them with other nodes.
        reward: with the default rubric, "sum" (the return) or "final" (the last reward).
        dataset: rows, one episode each: `reset` (a dict of reset arguments) or `seed`;
            default: `num_examples` episodes with seeds 0, 1, ...
        num_examples: how many episodes the default dataset has (evaluate's `num_examples`,
            `rubric eval -n`, runs the first n of them).
        action: "tool" (the action schema as a tool), "text" (the model's reply is the
            action's one text field) or "auto" (text when the action is one text field).
        system_prompt: a system message before the first observation.
        max_turns: the most assistant turns per episode (default 20).
        timeout: seconds a reset or step may take.
        observation_text: how an observation (a dict) becomes the text the model reads.
        name: the environment's name in results (default "openenv:" + target).
        sampling: default sampling arguments for the endpoint.

    Raises:
        OpenEnvConnectError: No OpenEnv server answers at the URL, it is something else, or
            the app did not start.
    """
    if not isinstance(target, str) or not target.strip():
        raise ConfigError(f"from_openenv takes a URL or module:app, got {target!r}")
    if action not in ("auto", "tool", "text"):
        raise ConfigError(f"action={action!r}; use 'auto', 'tool' or 'text'")
    if not (isinstance(timeout, (int, float)) and timeout > 0 and math.isfinite(timeout)):
        raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
    _client_class()
    local = None if target.startswith(("http://", "https://", "ws://", "wss://")) else LocalServer(target)
    base_url = local.url if local is not None else target.rstrip("/")
    try:
        schema = read_schema(base_url)
        return OpenEnvEnvironment(
            base_url,
            schema,
            dataset=_episodes(dataset, num_examples),
            rubric=default_rubric(reward) if rubric is None else rubric,
            action=action,
            timeout=float(timeout),
            observation_text=observation_text,
            local=local,
            system_prompt=system_prompt,
            max_turns=max_turns,
            name=name or f"openenv:{target}",
            sampling=sampling,
        )
    except BaseException:
        if local is not None:
            local.close()
        raise


__all__ = [
    "INSTALL_HINT",
    "LocalServer",
    "OpenEnvConnectError",
    "OpenEnvEnvironment",
    "OpenEnvFinalReward",
    "OpenEnvSessionError",
    "OpenEnvStepReward",
    "action_tool",
    "default_rubric",
    "from_openenv",
    "read_schema",
    "render_observation",
    "text_field",
]
