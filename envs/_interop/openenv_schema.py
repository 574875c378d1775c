"""What an OpenEnv server offers, in our harness's terms: its schemas (`GET /schema`), its
action as one tool or one text field, its observations as the text a model reads."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from envs._interop.openenv_wire import REQUEST_TIMEOUT, RequestFailed, ResponseTooLarge, aget, get
from harness._core.errors import ConfigError


class OpenEnvConnectError(ConfigError):
    """No OpenEnv environment server answers at the address, or what answers is something else."""


def read_schema(base_url: str, timeout: float = REQUEST_TIMEOUT) -> dict[str, Any]:
    """The server's `GET /schema` answer (action, observation, state JSON Schemas), within
    `timeout` seconds for the whole request (`openenv_wire`).

    Raises:
        OpenEnvConnectError: Nothing answers at `base_url` in time, or it is not an OpenEnv server.
    """
    try:
        reply = get(f"{base_url.rstrip('/')}/schema", timeout=timeout)
    except RequestFailed as exc:
        raise _unreachable(base_url, exc) from None
    return _schema(base_url, reply.status, reply.body)


async def aread_schema(base_url: str, timeout: float = REQUEST_TIMEOUT) -> dict[str, Any]:
    """`read_schema`, from async code."""
    try:
        reply = await aget(f"{base_url.rstrip('/')}/schema", timeout=timeout)
    except RequestFailed as exc:
        raise _unreachable(base_url, exc) from None
    return _schema(base_url, reply.status, reply.body)


def _unreachable(base_url: str, why: RequestFailed) -> OpenEnvConnectError:
    if isinstance(why, ResponseTooLarge):
        return OpenEnvConnectError(
            f"{base_url} does not speak OpenEnv's HTTP API: GET /schema: {why}; point at an OpenEnv "
            "environment server (openenv>=0.4, built with create_app(...))"
        )
    return OpenEnvConnectError(
        f"no OpenEnv server answers at {base_url} (GET /schema: {why}); start it (e.g. `uvicorn "
        "your_env.server.app:app --port 8000`) or fix the URL, or give openenv:module:app to start one here"
    )


def _schema(base_url: str, status: int, body: bytes) -> dict[str, Any]:
    if status != 200:
        raise OpenEnvConnectError(
            f"{base_url} does not speak OpenEnv's HTTP API: GET /schema answered HTTP {status}; "
            "point at an OpenEnv environment server (openenv>=0.4, built with create_app(...))"
        )
    try:
        schema = json.loads(body)
    except (ValueError, RecursionError):
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


__all__ = [
    "OpenEnvConnectError",
    "action_tool",
    "aread_schema",
    "read_schema",
    "render_observation",
    "text_field",
]
