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

A run may hand the episodes to someone else instead (`Episodes`, an agent in a sandbox); the
environment then stays the task (its prompt, its rubric) and scoring is the same.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator, Mapping
from contextvars import ContextVar
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
    """Optional: an environment that holds processes or connections while it runs (MCP servers,
    its judges' HTTP pools).

    `harness.rollout` calls `release_rollout(rollout)` once a rollout is finished (scored or
    failed), and the process that ran a run's rollouts calls `release()` when the run ends,
    fails or is interrupted, on the same event loop. Both must not raise for a resource that
    is already gone.
    """

    async def release_rollout(self, rollout: Rollout) -> None: ...

    async def release(self) -> None: ...


#: What `Episodes.play` hands to scoring: the episode's live resources by name (an agent's
#: sandbox under `SANDBOX`), open until `Episodes.release` is given them back.
Resources = Mapping[str, Any]
#: The name of an episode's sandbox among its resources: what a reward function's `sandbox`
#: parameter receives.
SANDBOX = "sandbox"


@runtime_checkable
class Episodes(Protocol):
    """A run setting: who plays the episodes, instead of the chat loop above. An agent program
    in a sandbox (`envs.agents.AgentRun`) plays each one, its model calls reaching `client`
    through a capture proxy. The environment stays the task; this is how it is played.

    `harness.evaluate(..., episodes=...)` and `harness.rollout(..., episodes=...)` drive it:

        episodes.plan(rollouts_per_example)         # the run's -r, before any rollout
        await episodes.check(env)                   # before any rollout, in the driver
        resources = await episodes.play(env, rollout, client, sampling)
        with scoring_scope([(rollout, resources)]):  # rubric nodes reach them by name
            await env.score(rollout)                 # or env.score_group(members): each
        await episodes.release(resources)            #   member's stay open until then
        ...
        await episodes.close()                      # the run ended, failed or was interrupted

    Members:
      plan(rollouts_per_example): the run's rollouts per example, told in the driver and in
        each worker before any rollout (an agent sets up one sandbox per example and forks it
        for each rollout of the group).
      check(env): fail now, with the fix, when no episode of `env` can be played (no Docker
        daemon, no bubblewrap); awaited once, in the driver, before anything is written.
      play(env, rollout, client, sampling): play one episode into the set-up `rollout`: its
        conversation, `turns`, `usage`, `turn_tokens`, `model_calls` and `stop_reason` (or
        `error`). Returns the episode's live resources by name, kept open for scoring. A
        failure inside the episode is recorded on the rollout, not raised; when it raises
        (its sandbox could not be made), it has closed what it opened.
      release(resources): close what `play` returned, once the rollout is scored (or failed);
        must not raise for what is already gone.
      close(): close everything the run still holds, on the event loop that played.
      config(): a JSON-serialisable description (the agent, its runtime and limits), recorded
        in metadata.json and compared when a run resumes.
      source: how to build it again in a worker process or Ray actor (plain, picklable data),
        or None when it cannot be (then the run takes no workers).
    """

    def plan(self, rollouts_per_example: int) -> None: ...

    async def check(self, env: EnvironmentProtocol) -> None: ...

    async def play(
        self, env: EnvironmentProtocol, rollout: Rollout, client: Any, sampling: Mapping[str, Any]
    ) -> Resources: ...

    async def release(self, resources: Resources) -> None: ...

    async def close(self) -> None: ...

    def config(self) -> dict[str, Any]: ...

    @property
    def source(self) -> EpisodesSource | None: ...


@runtime_checkable
class EpisodesSource(Protocol):
    """How to build an `Episodes` again in another process: picklable, plain data (the
    agent's name, the runtime, the limits), never the live object."""

    def load(self) -> Episodes: ...


#: The rollouts being scored and their episodes' resources: id(rollout) -> (rollout, resources).
_SCOPE: ContextVar[Mapping[int, tuple[Rollout, Resources]] | None] = ContextVar(
    "rubric_scoring_scope", default=None
)


@contextlib.contextmanager
def scoring_scope(live: Iterable[tuple[Rollout, Resources]]) -> Iterator[None]:
    """Give rubric nodes the live resources of the rollouts scored inside the block (as Inspect's
    `sandbox()`): `scoring_resource(rollout, "sandbox")` finds a member's sandbox while its
    group is scored. Nested scopes see the outer one's rollouts too."""
    inner = {**(_SCOPE.get() or {}), **{id(r): (r, resources) for r, resources in live}}
    token = _SCOPE.set(inner)
    try:
        yield
    finally:
        _SCOPE.reset(token)


def scoring_resource(rollout: Rollout, name: str) -> Any | None:
    """The live resource `name` (e.g. "sandbox") of `rollout`'s episode while it is being
    scored, or None: no episode held one (the chat loop), or scoring happens elsewhere."""
    found = (_SCOPE.get() or {}).get(id(rollout))
    if found is None or found[0] is not rollout:
        return None
    return found[1].get(name)


@runtime_checkable
class Preflight(Protocol):
    """Optional: an environment that can tell, before any rollout, that it cannot run at all
    (its rubric's judge has no API key or no endpoint). `evaluate` awaits `preflight()` before
    it writes anything; it raises a ConfigError naming the fix."""

    async def preflight(self) -> None: ...


@runtime_checkable
class ScoresGroups(Protocol):
    """Optional: an environment whose rubric compares the rollouts of one example (group nodes).

    When `needs_groups` is true, `evaluate` runs the episodes unscored and, when the last
    rollout of an example finishes, awaits `score_group(rollouts)` with all of them (in any
    order; a member whose episode errored is among them, and the environment leaves it out
    of the comparison). It scores every member in place and must not raise for a rubric
    failure. Groups are never split: a shard holds whole examples, and a resumed run re-runs
    an example whose group was only partly saved. With `Episodes` (an agent's sandboxes), a
    group is played and scored in one place, the driver or one worker, and its members'
    resources stay open until the group is scored.
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


def plays_groups(env: object, episodes: object) -> bool:
    """Whether a run plays and scores each example's group in one place (the driver, one
    worker): its `episodes` hold what scoring reads (an agent's sandboxes) and `env` scores
    groups, so every member's resources must be open when its group is scored."""
    return episodes is not None and scores_groups(env)


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
    "SANDBOX",
    "EnvironmentProtocol",
    "EnvironmentSource",
    "Episodes",
    "EpisodesSource",
    "HasScriptedPolicies",
    "HoldsResources",
    "Preflight",
    "Reloadable",
    "RescoresFailed",
    "Resources",
    "ScoresGroups",
    "env_turn",
    "plays_groups",
    "protocol_members",
    "scores_groups",
    "scoring_resource",
    "scoring_scope",
]
