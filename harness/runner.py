"""One episode: prompt -> model -> tools / env feedback -> ... -> rubric score.

The loop is exactly the one in `harness.protocol`'s docstring. It never raises for a failure
inside the episode (an endpoint that keeps failing, an environment bug, a scoring crash): the
failure is recorded on the returned Rollout (`error`, `stop_reason="error"`) so one bad
rollout never kills a run of thousands. Only cancellation / Ctrl-C propagate.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any

from harness.client import EndpointError
from harness.protocol import EnvironmentProtocol
from harness.types import Rollout

# How OpenAI-compatible servers (OpenAI, vLLM, llama.cpp, SGLang, TGI...) word a 400 for a
# prompt that no longer fits the context window. Such a rollout ran out of room, which is
# a "length" stop, not an infrastructure error.
_CONTEXT_TOO_LONG = re.compile(
    r"context[ _-]?(length|window)|maximum context|max_model_len|prompt is too long|input is too long"
    r"|too many (input )?tokens|exceeds? the (model'?s? )?(maximum|max)|reduce the length",
    re.IGNORECASE,
)


def describe_error(exc: BaseException) -> str:
    """'ExcType: message' — the form stored in `Rollout.error`."""
    message = str(exc).strip()
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def is_context_length_error(exc: BaseException) -> bool:
    """True for an endpoint 400 saying the conversation is longer than the model's context."""
    return getattr(exc, "status", None) == 400 and bool(_CONTEXT_TOO_LONG.search(str(exc)))


def _failed_setup(example: Mapping[str, Any], rollout_index: int, exc: Exception) -> Rollout:
    example_id = example.get("example_id", example.get("id", 0)) if isinstance(example, Mapping) else 0
    return Rollout(
        example_id=example_id, rollout_index=rollout_index, stop_reason="error", error=describe_error(exc)
    )


async def rollout(
    env: EnvironmentProtocol,
    client: Any,
    example: Mapping[str, Any],
    rollout_index: int = 0,
    *,
    sampling: Mapping[str, Any] | None = None,
) -> Rollout:
    """Run one episode of `env` against `client` and score it.

    `sampling` is merged over `env.sampling` and passed to `client.complete` (whose own
    `client.sampling` is the lowest layer). Rollouts that end in an error are not scored:
    their reward stays NaN so an outage never reads as a wrong answer.
    Timing (seconds) lands in `rollout.timing`: generation, env (tools, feedback and stop
    checks), scoring, total.
    """
    started = time.perf_counter()
    try:
        r = await env.setup_rollout(example, rollout_index)
    except Exception as exc:  # an environment bug: recorded, never raised out of a batch
        failed = _failed_setup(example, rollout_index, exc)
        failed.timing = {
            "generation": 0.0,
            "env": 0.0,
            "scoring": 0.0,
            "total": time.perf_counter() - started,
        }
        return failed

    params = {**env.sampling, **sampling} if sampling else dict(env.sampling)
    generation = env_seconds = scoring = 0.0
    try:
        tools = env.tool_schemas or None
        max_turns = env.max_turns
        while True:
            if r.turns >= max_turns:
                r.stop_reason = "max_turns"
                break
            t0 = time.perf_counter()
            try:
                reply = await client.complete(r.messages, tools=tools, **params)
            except EndpointError as exc:
                generation += time.perf_counter() - t0
                if is_context_length_error(exc):
                    r.stop_reason = "length"
                    r.state["context_error"] = str(exc)
                else:
                    r.stop_reason, r.error = "error", describe_error(exc)
                break
            t1 = time.perf_counter()
            generation += t1 - t0
            r.completion.append(reply.message)
            r.turns += 1
            r.usage = r.usage + reply.usage
            if reply.finish_reason == "length":
                r.stop_reason = "length"
                break
            try:
                reason = await env.stop_reason(r)
                if reason:
                    r.stop_reason = reason
                    break
                new_messages = await env.respond(r)
                if new_messages is None:
                    r.stop_reason = "completed"
                    break
                r.completion.extend(new_messages)
                reason = await env.stop_reason(r)
                if reason:
                    r.stop_reason = reason
                    break
            finally:
                env_seconds += time.perf_counter() - t1
    except Exception as exc:  # env code (respond / env_response / stop conditions) raised
        r.stop_reason, r.error = "error", describe_error(exc)

    if r.error is None:
        t0 = time.perf_counter()
        try:
            await env.score(r)
        except Exception as exc:
            r.stop_reason, r.error = "error", describe_error(exc)
        scoring = time.perf_counter() - t0
    r.timing = {
        "generation": generation,
        "env": env_seconds,
        "scoring": scoring,
        "total": time.perf_counter() - started,
    }
    return r


__all__ = ["describe_error", "is_context_length_error", "rollout"]
