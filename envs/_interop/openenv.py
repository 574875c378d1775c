"""OpenEnv environments run by our harness: `envs.from_openenv(URL | "module:app")`.

Everything on the wire goes through OpenEnv's own library (the `[openenv]` extra): its
`GenericEnvClient` holds one WebSocket session per rollout (reset, step, close), and a local
environment is OpenEnv's own server app (`create_app(...)`) run by uvicorn (`openenv_local`).
This module decides only what the harness needs around them (the schema's translation lives
in `openenv_schema`, the reward nodes in `openenv_rewards`):
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
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, cast

from envs._environment import Environment
from envs._inputs import DatasetSource, RubricSource
from envs._interop.openenv_local import LocalServer
from envs._interop.openenv_rewards import OpenEnvFinalReward, OpenEnvStepReward, RewardMode, default_rubric
from envs._interop.openenv_schema import (
    OpenEnvConnectError,
    action_tool,
    read_schema,
    render_observation,
    text_field,
)
from envs._interop.openenv_wire import MAX_RESPONSE_BYTES, REQUEST_TIMEOUT, exchange, session_client
from envs._tools.functions import BadArguments, parse_arguments
from harness._core.errors import ConfigError, RubricError
from harness._core.types import Message, Rollout, ToolCall

INSTALL_HINT = "pip install 'rubric-rl[openenv]'"
STEP_TIMEOUT = 60.0
"""Seconds one reset or step may take before the rollout fails."""
AT_LIMIT = "lower the concurrency (-c) or raise the server's max_concurrent_envs"
DEFAULT_EPISODES = 100
"""Episodes (seeds 0, 1, ...) of the default dataset; `-n` / `num_examples=` at evaluation picks fewer."""
ActionMode = Literal["auto", "tool", "text"]


class OpenEnvSessionError(RubricError):
    """An OpenEnv session failed during a rollout (the server dropped, hung or returned an error)."""


def _client_class() -> Any:
    """OpenEnv's `GenericEnvClient`, or one line saying how to install it."""
    try:
        from openenv.core.generic_client import GenericEnvClient  # the optional [openenv] extra
    except ImportError:
        raise ConfigError(f"OpenEnv environments need the openenv package: {INSTALL_HINT}") from None
    return GenericEnvClient


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
        client = session_client(_client_class(), self.base_url, timeout=self.timeout)
        self._sessions[id(rollout)] = (asyncio.get_running_loop(), client)
        try:
            result = await self._call(client, "reset", lambda: client.reset(**kwargs))
        except BaseException:
            await self.release_rollout(rollout)
            raise
        system = [m for m in rollout.prompt if m.role == "system"]
        rollout.prompt = [*system, Message(role="user", content=self.observation_text(result.observation))]
        done = self._done(result, "reset")
        rollout.state["openenv"] = {"steps": [], "done": done, "reset": kwargs}
        return rollout

    async def _call(self, client: Any, what: str, request: Callable[[], Any]) -> Any:
        """One reset or step through OpenEnv's client, within `timeout` for all of it (connecting
        included); a server failure is an OpenEnvSessionError."""
        try:
            return await exchange(request, timeout=self.timeout)
        except TimeoutError:
            raise OpenEnvSessionError(
                f"the OpenEnv server at {self.base_url} did not answer {what} within {self.timeout:g}s; "
                "check the server, or raise timeout="
            ) from None
        except ConnectionError as exc:
            raise OpenEnvSessionError(
                f"could not open an OpenEnv session at {self.base_url} for {what}: {exc}; check that the server is running"
            ) from None
        except RuntimeError as exc:  # the server answered with an error; its session goes on
            if what == "step":
                raise ActionRejected(str(exc)) from None
            full = f"; the server is at its session limit: {AT_LIMIT}" if "CAPACITY" in str(exc) else ""
            raise OpenEnvSessionError(
                f"the OpenEnv server at {self.base_url} failed {what}: {exc}{full}"
            ) from None
        except Exception as exc:  # websockets' ConnectionClosed and the like: the server went away
            if _too_large(exc):
                raise OpenEnvSessionError(
                    f"the OpenEnv server at {self.base_url} answered {what} with a message larger than the "
                    f"{MAX_RESPONSE_BYTES:,} bytes read; make its observations smaller"
                ) from None
            if what == "reset":  # closed at once: OpenEnv refuses a session it has no room for this way
                raise OpenEnvSessionError(
                    f"the OpenEnv server at {self.base_url} closed the session before its reset "
                    f"({type(exc).__name__}); it may be at its session limit ({AT_LIMIT}), or its environment "
                    "failed to start (see the server's log)"
                ) from None
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
            action = {self.text_field: last.text}
            try:
                result = await self._step(rollout, action)
            except ActionRejected as exc:
                _note_error(rollout, self.text_field, None, f"the environment rejected the action: {exc}")
                text = (
                    f"the environment rejected your message ({exc}); its action schema: {self._schema_text()}"
                )
                return [Message(role="user", content=f"Error: {text}")]
            return [Message(role="user", content=self.observation_text(result.observation))]
        if not last.tool_calls:
            return None  # the model answered instead of acting: the episode is over
        return [await self._tool_step(rollout, call) for call in last.tool_calls]

    async def _tool_step(self, rollout: Rollout, call: ToolCall) -> Message:
        assert self._action_tool is not None
        name = self._action_tool["function"]["name"]

        def error(reason: str, text: str) -> Message:
            _note_error(rollout, call.name, call.id, reason)
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
        except ActionRejected as exc:
            return error(
                f"the environment rejected the action: {exc}",
                f"the environment rejected the action {json.dumps(action)} ({exc}); call {name!r} "
                f"with arguments matching its schema: {self._schema_text()}",
            )
        return Message(
            role="tool",
            content=self.observation_text(result.observation),
            tool_call_id=call.id,
            name=call.name,
        )

    def _schema_text(self) -> str:
        if self._action_tool is not None:
            return json.dumps(self._action_tool["function"]["parameters"], separators=(",", ":"))
        return json.dumps(self.action_schema, separators=(",", ":"))

    async def _step(self, rollout: Rollout, action: dict[str, Any]) -> Any:
        entry = self._sessions.get(id(rollout))
        if entry is None:
            raise OpenEnvSessionError(
                "this rollout has no OpenEnv session (it was closed); start a new rollout"
            )
        client = entry[1]
        result = await self._call(client, "step", lambda: client.step(action))
        done = self._done(result, "step")
        record: dict[str, Any] = {"turn": rollout.turns - 1, "action": action, "reward": None, "done": done}
        reward = result.reward
        if isinstance(reward, (int, float)) and not isinstance(reward, bool) and math.isfinite(reward):
            record["reward"] = float(reward)
        elif reward is not None:  # the reward nodes read this as the reason they are NaN
            record["reward_error"] = f"step {len(rollout.state['openenv']['steps']) + 1} " + _not_a_reward(
                reward
            )
        rollout.state["openenv"]["steps"].append(record)
        rollout.state["openenv"]["done"] = done
        return result

    def _done(self, result: Any, what: str) -> bool:
        """The answer's `done`, which must be true or false (a string "false" is not false)."""
        if not isinstance(result.done, bool):
            raise OpenEnvSessionError(
                f"the OpenEnv server at {self.base_url} answered {what} with done={result.done!r} "
                f"({type(result.done).__name__}); the field 'done' must be true or false, so the episode "
                "cannot go on; fix the server's observation"
            )
        return result.done

    async def stop_reason(self, rollout: Rollout) -> str | None:
        """ "done" once the environment says so; else the usual conditions."""
        if rollout.state.get("openenv", {}).get("done"):
            return "done"
        return await super().stop_reason(rollout)

    def config(self) -> dict[str, Any]:
        """What identifies the environment in metadata.json: ours plus the server and action schema."""
        where: dict[str, str] = {"url": self.base_url}
        if self.local is not None:
            where = {"app": self.local.app}
            if self.local.python != sys.executable:
                where["python"] = self.local.python
        return {**super().config(), "openenv": {**where, "action": self.action_schema.get("title")}}


class ActionRejected(RuntimeError):
    """The server answered a step with an error (an invalid action, or the environment raised)."""


def _not_a_reward(reward: object) -> str:
    shown = repr(reward) if len(repr(reward)) <= 60 else repr(reward)[:57] + "..."
    return f"gave reward={shown} ({type(reward).__name__}), not a finite real number (true/false and strings are not rewards)"


def _note_error(rollout: Rollout, tool: str, call_id: str | None, reason: str) -> None:
    rollout.state.setdefault("tool_errors", []).append(
        {"turn": rollout.turns, "tool": tool, "tool_call_id": call_id, "error": reason}
    )


def _too_large(exc: Exception) -> bool:
    """Whether websockets ended the session for a message over the size cap (close code 1009)."""
    return any(getattr(getattr(exc, side, None), "code", None) == 1009 for side in ("sent", "rcvd"))


async def _close(client: Any) -> None:
    """Close a session; one that is already gone is fine."""
    with contextlib.suppress(Exception):
        await exchange(client.close, timeout=REQUEST_TIMEOUT)


def _episodes(dataset: DatasetSource | None, num_examples: int) -> DatasetSource:
    if dataset is not None:
        return dataset
    if isinstance(num_examples, bool) or not isinstance(num_examples, int) or num_examples < 1:
        raise ConfigError(f"num_examples must be an integer >= 1, got {num_examples!r}")
    return [
        {"id": f"episode-{i}", "question": f"OpenEnv episode {i}", "seed": i} for i in range(num_examples)
    ]


def _check_options(action: object, timeout: object) -> None:
    if action not in ("auto", "tool", "text"):
        raise ConfigError(f"action={action!r}; use 'auto', 'tool' or 'text'")
    if not (isinstance(timeout, (int, float)) and timeout > 0 and math.isfinite(timeout)):
        raise ConfigError(f"timeout must be a positive number of seconds, got {timeout!r}")
    _client_class()


def _server(target: object, python: object) -> tuple[str, LocalServer | None]:
    """The server's base URL, and the local server started for a "module:app" target."""
    if not isinstance(target, str) or not target.strip():
        raise ConfigError(f"from_openenv takes a URL or module:app, got {target!r}")
    url = re.sub(r"^ws(s?)://", r"http\1://", target)  # OpenEnv's client takes either form
    remote = url.startswith(("http://", "https://"))
    if python is not None and (not isinstance(python, str) or not python.strip()):
        raise ConfigError(f"python must be the path of a python executable, got {python!r}")
    if python is not None and remote:
        raise ConfigError(
            f"python={python!r} starts a module:app target; {target!r} is a URL (its server runs elsewhere): "
            "drop python=, or give module:app"
        )
    if remote:
        return url.rstrip("/"), None
    local = LocalServer(target, python=python)
    return local.url, local


def from_openenv(
    target: str,
    *,
    rubric: RubricSource | None = None,
    reward: RewardMode = "sum",
    dataset: DatasetSource | None = None,
    num_examples: int = DEFAULT_EPISODES,
    action: ActionMode = "auto",
    system_prompt: str | None = None,
    max_turns: int | None = None,
    timeout: float = STEP_TIMEOUT,
    observation_text: Callable[[Mapping[str, Any]], str] = render_observation,
    name: str | None = None,
    sampling: Mapping[str, Any] | None = None,
    success: str | tuple[str, float] | list[str | float] | None = None,
    credit: Callable[[Rollout], Sequence[float]] | None = None,
    python: str | None = None,
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
        success: what counts as a pass for pass@k, as for `Environment` (e.g. ("final_reward", 1.0)).
        credit: credit assignment into `rollout.turn_rewards`, as for `Environment`.
        python: the python that starts a "module:app" target (default: this one); another
            venv's runs an app built with the OpenEnv version installed there (e.g. 0.10,
            which cannot be installed beside our extras).

    Raises:
        OpenEnvConnectError: No OpenEnv server answers at the URL, it is something else, or
            the app did not start.
    """
    _check_options(action, timeout)
    base_url, local = _server(target, python)
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
            success=cast("tuple[str, float]", tuple(success))
            if isinstance(success, list)
            else success,  # JSON from -a; Environment checks it
            credit=credit,
        )
    except BaseException:
        if local is not None:
            local.close()
        raise


__all__ = [
    "INSTALL_HINT",
    "OpenEnvConnectError",
    "OpenEnvEnvironment",
    "OpenEnvFinalReward",
    "OpenEnvSessionError",
    "OpenEnvStepReward",
    "default_rubric",
    "from_openenv",
]
