"""The small interface through which the harness drives an environment.

`harness` never imports `envs`: anything that has these members can be evaluated, which keeps
the rollout loop readable and testable on its own. `envs.Environment` implements it.

The loop `harness.rollout` runs with it::

    rollout = await env.setup_rollout(example, rollout_index)   # prompt, answer, info, state
    while True:
        if rollout.turns >= env.max_turns: stop_reason = "max_turns"; break
        reply = await client.complete(rollout.messages, tools=env.tool_schemas or None,
                                      **env.sampling)
        rollout.completion.append(reply.message); rollout.turns += 1
        if reply.finish_reason == "length": stop_reason = "length"; break
        if reason := await env.stop_reason(rollout): stop_reason = reason; break
        new_messages = await env.respond(rollout)    # tool results or env feedback
        if new_messages is None: stop_reason = "completed"; break
        rollout.completion.extend(new_messages)
        if reason := await env.stop_reason(rollout): stop_reason = reason; break
    await env.score(rollout)                          # fills reward, scores, score_errors
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol, runtime_checkable

from harness._core.types import Message, Rollout


@runtime_checkable
class EnvironmentProtocol(Protocol):
    """What `harness.rollout` / `harness.evaluate` need from an environment.

    Members:
      name: a short identifier, written to `metadata.json` and compared on resume.
      max_turns: the most assistant turns one rollout may take (>= 1).
      sampling: default sampling arguments for the endpoint (e.g. `max_tokens`); the
        client's own sampling and per-call arguments are merged over these.
      tool_schemas: the OpenAI `tools=` list; empty when the environment has no tools.
      get_dataset(split, n, seed): the examples to run, each a mapping with at least a
        stable `example_id`; iterable more than once.
      setup_rollout(example, rollout_index): a fresh Rollout for one episode, with the
        formatted prompt, `answer`, `info`, `task`, and per-rollout `state` already set up.
        Never shares mutable state between rollouts.
      respond(rollout): called after each assistant turn that did not end the episode. Runs
        the assistant's tool calls (concurrently) or the environment's own feedback and
        returns the messages to append, or None when the episode is over because the model
        answered (stop_reason "completed").
      stop_reason(rollout): the name of the stop condition that holds now, or None.
      score(rollout): scores the finished rollout with the rubric, setting `reward`,
        `scores` and `score_errors`. Must not raise for a rubric failure: that is recorded
        on the rollout.
      config(): a JSON-serialisable description (name, arguments) used to check that a
        resumed run is the same environment.
    """

    name: str
    max_turns: int

    @property
    def sampling(self) -> Mapping[str, Any]: ...

    @property
    def tool_schemas(self) -> list[dict[str, Any]]: ...

    def get_dataset(
        self, split: str = "eval", n: int | None = None, seed: int | None = None
    ) -> Iterable[Mapping[str, Any]]: ...

    async def setup_rollout(self, example: Mapping[str, Any], rollout_index: int = 0) -> Rollout: ...

    async def respond(self, rollout: Rollout) -> list[Message] | None: ...

    async def stop_reason(self, rollout: Rollout) -> str | None: ...

    async def score(self, rollout: Rollout) -> None: ...

    def config(self) -> dict[str, Any]: ...


@runtime_checkable
class HoldsResources(Protocol):
    """Optional: an environment that holds processes or connections while it runs (MCP servers).

    `harness.rollout` calls `release_rollout(rollout)` once a rollout is finished (scored or
    failed), and the process that ran a run's rollouts calls `release()` when the run ends,
    fails or is interrupted, on the same event loop. Both must not raise for a resource that
    is already gone.
    """

    async def release_rollout(self, rollout: Rollout) -> None: ...

    async def release(self) -> None: ...


@runtime_checkable
class RunsEpisodes(Protocol):
    """Optional: an environment that plays its episodes itself (an agent program in a sandbox,
    whose model calls reach `client` through a capture proxy) instead of the loop above.

    When `runs_episodes` is true, `harness.rollout` awaits `run_episode(rollout, client,
    sampling)` in place of the model/environment turns: it fills the conversation, `turns`,
    `usage`, `turn_tokens` and `stop_reason` (or `error`), and must not raise for a failure
    inside the episode. Scoring and `release_rollout` follow as for any rollout, so reward
    nodes may read what the episode left (its sandbox) before it is released.
    """

    @property
    def runs_episodes(self) -> bool: ...

    async def run_episode(self, rollout: Rollout, client: Any, sampling: Mapping[str, Any]) -> None: ...


def runs_episodes(env: object) -> bool:
    """Whether `env` plays its episodes itself (see `RunsEpisodes`)."""
    return isinstance(env, RunsEpisodes) and bool(env.runs_episodes)


@runtime_checkable
class Preflight(Protocol):
    """Optional: an environment that can tell, before any rollout, that it cannot run at all
    (its rubric's judge has no API key or no endpoint). `evaluate` awaits `preflight()` before
    it writes anything; it raises a ConfigError naming the fix."""

    async def preflight(self) -> None: ...


@runtime_checkable
class PlansGroups(Protocol):
    """Optional: an environment told how many rollouts of each example the run makes (`-r`),
    before any rollout runs (in the driver and in each worker), e.g. to set up a sandbox once
    per example and fork it for each rollout of the group."""

    def plan_groups(self, rollouts_per_example: int) -> None: ...


@runtime_checkable
class ScoresGroups(Protocol):
    """Optional: an environment whose rubric compares the rollouts of one example (group nodes).

    When `needs_groups` is true, `evaluate` runs the episodes unscored and, when the last
    rollout of an example finishes, awaits `score_group(rollouts)` with all of them (in any
    order; a member whose episode errored is among them, and the environment leaves it out
    of the comparison). It scores every member in place and must not raise for a rubric
    failure. Groups are never split: a shard holds whole examples, and a resumed run re-runs
    an example whose group was only partly saved.
    """

    @property
    def needs_groups(self) -> bool: ...

    async def score_group(self, rollouts: list[Rollout]) -> None: ...


@runtime_checkable
class RescoresFailed(Protocol):
    """Optional: an environment that can score again only what failed on saved rollouts
    (`rubric score --failed-only`): in place, keeping every node that scored, and never
    raising for a rubric failure (it is recorded on the rollout)."""

    async def rescore_failed(self, rollouts: list[Rollout], *, concurrency: int) -> None: ...


def scores_groups(env: object) -> bool:
    """Whether `env` scores the rollouts of an example together (see `ScoresGroups`)."""
    return isinstance(env, ScoresGroups) and bool(env.needs_groups)


def protocol_members(protocol: type) -> list[str]:
    """The members a Protocol class declares (attributes and methods), in declaration order."""
    names = [*getattr(protocol, "__annotations__", {}), *vars(protocol)]
    return list(dict.fromkeys(n for n in names if not n.startswith("_")))


@runtime_checkable
class EnvironmentSource(Protocol):
    """How to build an environment again, in another process: picklable, plain data.

    `load(worker=True)` is what a worker process of `evaluate(..., workers=N)` calls: the
    driver sends each worker its examples, so the environment may defer its dataset.
    (`envs._registry.EnvironmentSpec` implements it.)"""

    def load(self, *, worker: bool = False) -> EnvironmentProtocol: ...


@runtime_checkable
class Reloadable(Protocol):
    """Optional: an environment that knows where it came from.

    Members:
      source: how to build it again (None when it was built directly in Python); workers
        and TRL's worker processes rebuild it from this instead of pickling it.
      provenance: where the registry found it (distribution and version, or a source hash),
        recorded in metadata.json; None when unknown.
    """

    source: EnvironmentSource | None
    provenance: dict[str, Any] | None


@runtime_checkable
class HasScriptedPolicies(Protocol):
    """Optional: an environment that ships policies for the scripted endpoint, so
    `-m scripted:NAME` can demo it offline (`scripted_policies[NAME]` is a `Policy`)."""

    scripted_policies: Mapping[str, Any]


async def env_turn(env: EnvironmentProtocol, r: Rollout) -> bool:
    """Stop checks, then tool results or feedback from the environment; False when the episode ends.

    The environment's half of a turn, after the assistant message is appended: also what
    `rubric serve` runs for each step an OpenEnv client takes (`envs._interop.openenv_serve`).
    """
    reason = await env.stop_reason(r)
    if reason:
        r.stop_reason = reason
        return False
    new_messages = await env.respond(r)
    if new_messages is None:
        r.stop_reason = "completed"
        return False
    r.completion.extend(new_messages)
    reason = await env.stop_reason(r)
    if reason:
        r.stop_reason = reason
        return False
    return True


__all__ = [
    "EnvironmentProtocol",
    "EnvironmentSource",
    "HasScriptedPolicies",
    "HoldsResources",
    "PlansGroups",
    "Preflight",
    "Reloadable",
    "RescoresFailed",
    "RunsEpisodes",
    "ScoresGroups",
    "env_turn",
    "protocol_members",
    "runs_episodes",
    "scores_groups",
]
