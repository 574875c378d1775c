"""One episode: prompt -> model -> tools / env feedback -> ... -> rubric score.

The loop is exactly the one in `harness._core.protocol`'s docstring. It never raises for a failure
inside the episode (an endpoint that keeps failing, an environment bug, a scoring crash): the
failure is recorded on the returned Rollout (`error`, `stop_reason="error"`) so one bad
rollout never kills a run of thousands. Only cancellation / Ctrl-C propagate.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from harness._core.errors import EndpointError, describe_error
from harness._core.protocol import EnvironmentProtocol, HoldsResources, RunsEpisodes, env_turn, runs_episodes
from harness._core.types import Rollout
from harness._endpoint.client import Client, is_context_length_error


def _failed_setup(example: Mapping[str, Any], rollout_index: int, exc: Exception, started: float) -> Rollout:
    example_id = example.get("example_id", example.get("id", 0)) if isinstance(example, Mapping) else 0
    return Rollout(
        example_id=example_id,
        rollout_index=rollout_index,
        stop_reason="error",
        error=describe_error(exc),
        timing={"generation": 0.0, "env": 0.0, "scoring": 0.0, "total": time.perf_counter() - started},
    )


async def rollout(
    env: EnvironmentProtocol,
    client: Client,
    example: Mapping[str, Any],
    rollout_index: int = 0,
    *,
    sampling: Mapping[str, Any] | None = None,
    score: bool = True,
) -> Rollout:
    """Run one episode of `env` against `client` and score it (unless `score=False`: the
    caller scores it later, with the other rollouts of its example, `harness._core.protocol.ScoresGroups`).

    `sampling` is merged over `env.sampling` and passed to `client.complete` (whose own
    `client.sampling` is the lowest layer). Rollouts that end in an error are not scored:
    their reward stays NaN so an outage never reads as a wrong answer.
    Timing (seconds) lands in `rollout.timing`: generation, env (tools, feedback and stop
    checks), scoring, total.

    Args:
        env: The environment that sets up, runs and scores the episode.
        client: The model endpoint the assistant turns come from.
        example: One row of the environment's dataset.
        rollout_index: Which rollout of this example this is (0-based).
        sampling: Sampling parameters merged over `env.sampling` for this episode.
        score: Whether to score the rollout now (False leaves it for a group scorer).

    Returns:
        The finished rollout; one that failed carries `stop_reason="error"` and NaN reward.
    """
    started = time.perf_counter()
    try:
        r = await env.setup_rollout(example, rollout_index)
    except Exception as exc:  # an environment bug: recorded, never raised out of a batch
        return _failed_setup(example, rollout_index, exc, started)

    params = {**env.sampling, **sampling} if sampling else dict(env.sampling)
    timing = {"generation": 0.0, "env": 0.0, "scoring": 0.0}
    try:
        if runs_episodes(env):
            assert isinstance(env, RunsEpisodes)
            t0 = time.perf_counter()
            try:
                await env.run_episode(r, client, params)
            finally:
                timing["generation"] = time.perf_counter() - t0
        else:
            await _turns(env, client, r, params, timing)
    except Exception as exc:  # env code (respond / env_response / stop conditions) raised
        r.stop_reason, r.error = "error", describe_error(exc)
    if r.error is None and score:
        t0 = time.perf_counter()
        try:
            await env.score(r)
        except Exception as exc:
            r.stop_reason, r.error = "error", describe_error(exc)
        timing["scoring"] = time.perf_counter() - t0
    if isinstance(env, HoldsResources):
        await _release(env, r)
    r.timing = {**timing, "total": time.perf_counter() - started}
    return r


async def _release(env: HoldsResources, r: Rollout) -> None:
    """Let the environment stop what this rollout held; a failure is noted, never raised."""
    try:
        await env.release_rollout(r)
    except Exception as exc:
        r.state.setdefault("release_errors", []).append(describe_error(exc))


async def _turns(
    env: EnvironmentProtocol,
    client: Client,
    r: Rollout,
    params: dict[str, Any],
    timing: dict[str, float],
) -> None:
    """Alternate model and environment turns until one of them sets `r.stop_reason`."""
    tools = env.tool_schemas or None
    max_turns = env.max_turns
    while True:
        if r.turns >= max_turns:
            r.stop_reason = "max_turns"
            return
        t0 = time.perf_counter()
        try:
            if not await _model_turn(client, r, tools, params):
                return
        finally:
            timing["generation"] += time.perf_counter() - t0
        t1 = time.perf_counter()
        try:
            if not await env_turn(env, r):
                return
        finally:
            timing["env"] += time.perf_counter() - t1


async def _model_turn(
    client: Client, r: Rollout, tools: list[dict[str, Any]] | None, params: dict[str, Any]
) -> bool:
    """Ask the model for the next assistant message; False when that ends the episode."""
    try:
        reply = await client.complete(r.messages, tools=tools, **params)
    except EndpointError as exc:
        if is_context_length_error(exc):
            r.stop_reason = "length"
            r.state["context_error"] = str(exc)
        else:
            r.stop_reason, r.error = "error", describe_error(exc)
        return False
    r.completion.append(reply.message)
    tokens = reply.turn_tokens(r.turns)
    if tokens is not None:  # the endpoint's own token ids, kept for training exports
        r.turn_tokens.append(tokens)
    r.turns += 1
    r.usage = r.usage + reply.usage
    if reply.finish_reason == "length":
        r.stop_reason = "length"
        return False
    return True


__all__ = ["rollout"]
