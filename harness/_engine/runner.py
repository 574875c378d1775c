"""One episode: prompt -> model -> tools / env feedback -> ... -> rubric score.

The loop is exactly the one in `harness._core.protocol`'s docstring. It never raises for a failure
inside the episode (an endpoint that keeps failing, an environment bug, a scoring crash): the
failure is recorded on the returned Rollout (`error`, `stop_reason="error"`) so one bad
rollout never kills a run of thousands. Only cancellation / Ctrl-C propagate.

With `episodes` (a run setting, `harness._core.protocol.Episodes`: an agent in a sandbox), the
episodes play instead of the loop, and each episode goes:

    setup_rollout -> episodes.play (the sandbox stays open) -> score once, its resources in
    the scoring scope -> episodes.release -> env.release_rollout

`rollout_group` plays the rollouts of one example that way and scores them together, each
member's resources open until the group is scored.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from harness._core.errors import EndpointError, describe_error
from harness._core.protocol import (
    EnvironmentProtocol,
    Episodes,
    HoldsResources,
    Resources,
    ScoresGroups,
    env_turn,
    scoring_scope,
)
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


@dataclass
class _Played:
    """A played (not yet scored) episode: its rollout, its live resources, its clock."""

    rollout: Rollout
    started: float
    resources: Resources | None = None
    timing: dict[str, float] = field(default_factory=lambda: {"generation": 0.0, "env": 0.0, "scoring": 0.0})

    def finish(self) -> Rollout:
        # An episode's own figures (its sandbox's start and close) are kept beside the clock's.
        self.rollout.timing = {
            **self.rollout.timing,
            **self.timing,
            "total": time.perf_counter() - self.started,
        }
        return self.rollout


async def rollout(
    env: EnvironmentProtocol,
    client: Client,
    example: Mapping[str, Any],
    rollout_index: int = 0,
    *,
    sampling: Mapping[str, Any] | None = None,
    score: bool = True,
    episodes: Episodes | None = None,
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
        score: Whether to score the rollout now (False leaves it for a group scorer; what
            the episode held is released first, so nodes reading a sandbox cannot score it).
        episodes: Who plays the episode instead of the chat loop (`envs.agents.AgentRun`):
            its sandbox stays open while the rollout is scored, then is released.

    Returns:
        The finished rollout; one that failed carries `stop_reason="error"` and NaN reward.
    """
    played = await _play(env, client, example, rollout_index, sampling, episodes)
    try:
        if score and played.rollout.error is None:
            await _score_one(env, played)
    finally:
        await _release(env, episodes, played)
    return played.finish()


async def rollout_group(
    env: EnvironmentProtocol,
    client: Client,
    example: Mapping[str, Any],
    indices: Sequence[int],
    *,
    sampling: Mapping[str, Any] | None = None,
    episodes: Episodes | None = None,
    limit: asyncio.Semaphore | None = None,
) -> list[Rollout]:
    """Play the rollouts `indices` of one example, score them together (`env.score_group`)
    with every member's resources still open, then release them.

    Args:
        env: An environment that scores groups (`harness._core.protocol.ScoresGroups`).
        client: The model endpoint.
        example: One row of the environment's dataset.
        indices: The rollout indices of the group.
        sampling: Sampling parameters merged over `env.sampling`.
        episodes: Who plays the episodes (see `rollout`).
        limit: Bounds the episodes played at once (the run's concurrency), shared by groups.

    Returns:
        The members, in `indices` order, scored (or failed, with the reason on each).
    """
    played: list[_Played] = []

    async def one(index: int) -> None:
        async with limit or contextlib.nullcontext():
            played.append(await _play(env, client, example, index, sampling, episodes))

    try:
        async with asyncio.TaskGroup() as group:
            for index in indices:
                group.create_task(one(index))
        played.sort(key=lambda p: p.rollout.rollout_index)
        await score_group(env, [p.rollout for p in played], [(p.rollout, p.resources) for p in played])
    finally:
        for member in played:
            await _release(env, episodes, member)
    return [p.finish() for p in played]


async def score_group(
    env: Any, members: list[Rollout], live: Sequence[tuple[Rollout, Resources | None]] = ()
) -> None:
    """Score one example's `members` together (`env.score_group`), the resources in `live` in
    the scoring scope; an environment that raises leaves every member NaN with the reason.
    The time it took is added to each member's `timing`."""
    assert isinstance(env, ScoresGroups)
    started = time.perf_counter()
    try:
        with scoring_scope((r, resources) for r, resources in live if resources is not None):
            await env.score_group(members)
    except Exception as exc:  # an environment bug: every member says so, the run goes on
        for r in members:
            if r.error is None:
                r.reward, r.stop_reason = math.nan, "error"
                r.error = f"group scoring failed: {describe_error(exc)}"
    elapsed = time.perf_counter() - started
    for r in members:
        r.timing = {**r.timing, "scoring": elapsed, "total": r.timing.get("total", 0.0) + elapsed}


async def _play(
    env: EnvironmentProtocol,
    client: Client,
    example: Mapping[str, Any],
    rollout_index: int,
    sampling: Mapping[str, Any] | None,
    episodes: Episodes | None,
) -> _Played:
    """Set the rollout up and play it, with the chat loop or `episodes`; failures recorded."""
    started = time.perf_counter()
    try:
        r = await env.setup_rollout(example, rollout_index)
    except Exception as exc:  # an environment bug: recorded, never raised out of a batch
        return _Played(_failed_setup(example, rollout_index, exc, started), started)
    played = _Played(r, started)
    params = {**env.sampling, **sampling} if sampling else dict(env.sampling)
    try:
        if episodes is not None:
            t0 = time.perf_counter()
            try:
                played.resources = await episodes.play(env, r, client, params)
            finally:
                played.timing["generation"] = time.perf_counter() - t0
        else:
            await _turns(env, client, r, params, played.timing)
    except (
        Exception
    ) as exc:  # env code (respond / env_response / stop conditions) or the episode's setup raised
        r.stop_reason, r.error = "error", describe_error(exc)
    return played


async def _score_one(env: EnvironmentProtocol, played: _Played) -> None:
    """Score a played rollout, its resources (an agent's sandbox) in the scoring scope."""
    r = played.rollout
    t0 = time.perf_counter()
    try:
        live = [(r, played.resources)] if played.resources is not None else []
        with scoring_scope(live):
            await env.score(r)
    except Exception as exc:
        r.stop_reason, r.error = "error", describe_error(exc)
    played.timing["scoring"] = time.perf_counter() - t0


async def _release(env: EnvironmentProtocol, episodes: Episodes | None, played: _Played) -> None:
    """Close what the episode held, then let the environment stop what this rollout held;
    a failure is noted on the rollout, never raised."""
    r = played.rollout
    resources, played.resources = played.resources, None
    if episodes is not None and resources is not None:
        try:
            await episodes.release(resources)
        except Exception as exc:
            r.state.setdefault("release_errors", []).append(describe_error(exc))
    if isinstance(env, HoldsResources):
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


__all__ = ["rollout", "rollout_group", "score_group"]
