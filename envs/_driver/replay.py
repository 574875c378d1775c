"""Replaying a run: each rollout again, in a fresh sandbox, its model served from the recording.

`rubric replay DIR` rebuilds the environment a run recorded (the `rubric eval --resume` rule:
what the folder records runs only when the user confirms or passes it), then plays each
chosen rollout again on its own: the same example, the same agent (or the chat loop), the
same sampling, against a `ReplayPolicy` served by a `harness.scripted.ScriptedEndpoint` on
127.0.0.1. The k-th model call gets the k-th recorded reply when its request (messages,
tools, sampling, as the capture proxy normalised them into Chat Completions terms) equals the
recorded one; the first that differs, an extra call, or calls left unmade end the match, with
a readable diff. Without a live model the diverging call is refused (HTTP 409), so the
rollout stops there; with one (`-m MODEL`) the rest of the rollout is played live.

The replay is scored with the rubric as usual and written as its own run folder whose
metadata names the original (`replay.of`) and each rollout's outcome, so `rubric view A B`
compares the two.
"""

from __future__ import annotations

import contextlib
import copy
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import harness
from envs._driver.runs import ORACLE_URL, Confirm, RunRequest, _complete, _episodes, _load
from envs._environment import Environment
from harness._core.aio import run_sync
from harness._core.errors import ConfigError, RubricError
from harness._core.run.dirs import new_run_dir
from harness._core.run.storage import METADATA_FILE, RESULTS_FILE, write_json_atomic
from harness._core.types import Message, Rollout
from harness._endpoint.client import Client
from harness._endpoint.connect import open_client
from harness.scripted import ScriptedEndpoint
from harness.scripted._app import ScriptedHTTPError

#: Body keys the client adds or owns, not the agent's sampling.
_CLIENT_KEYS = frozenset({"model", "messages", "tools", "logprobs", "return_token_ids", "stream"})
#: The status a diverging call gets when no live model continues the rollout.
DIVERGED_STATUS = 409


@dataclass(frozen=True)
class RecordedCall:
    """One model call as the run recorded it: the request the endpoint got, and its reply.

    Attributes:
        messages: The conversation, as Chat Completions messages.
        tools: The tool schemas (None: not recorded, as for the chat loop; not compared).
        params: The sampling parameters (None: not recorded; not compared).
        reply: The assistant message the endpoint answered.
        finish_reason: Why generation stopped.
    """

    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]] | None
    params: dict[str, Any] | None
    reply: dict[str, Any]
    finish_reason: str | None = None


def _wire(message: Message | Mapping[str, Any]) -> dict[str, Any]:
    """A message as the endpoint gets it, without the proxy's own marks (`forged`)."""
    data = (
        message.to_openai() if isinstance(message, Message) else Message.model_validate(message).to_openai()
    )
    data.pop("forged", None)
    return data


def recorded_calls(rollout: Rollout) -> list[RecordedCall]:
    """The calls a rollout made to its model endpoint, in order.

    An agent's are the capture proxy's records that reached the endpoint (a call the proxy
    refused, or the endpoint failed, got no reply and is not served again). A chat-loop
    rollout records no requests: its k-th call is the prompt and the completion up to its k-th
    assistant message, and that message its reply (tools and sampling are not compared).

    Args:
        rollout: The recorded rollout.

    Returns:
        Its calls.
    """
    if rollout.model_calls:
        return [
            RecordedCall(
                messages=[_wire(m) for m in call.messages],
                tools=list(call.tools),
                params=dict(call.params),
                reply=_wire(call.reply),
                finish_reason=call.finish_reason,
            )
            for call in rollout.model_calls
            if call.reply is not None
        ]
    calls = []
    history = [_wire(m) for m in rollout.prompt]
    for message in rollout.completion:
        if message.role == "assistant":
            calls.append(RecordedCall(messages=list(history), tools=None, params=None, reply=_wire(message)))
        history.append(_wire(message))
    return calls


def _short(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _message_diff(index: int, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """What differs in one message, field by field (a tool result named by its call id)."""
    role = old.get("role")
    what = f"tool result {old.get('tool_call_id')!r}" if role == "tool" else f"{role} message"
    lines = []
    for key in sorted(set(old) | set(new)):
        if old.get(key) != new.get(key):
            lines.append(
                f"message {index} ({what}) {key}: recorded {_short(old.get(key))} / now {_short(new.get(key))}"
            )
    return lines


def _names(tools: Iterable[Mapping[str, Any]]) -> list[Any]:
    """The tool schemas' names, for a diff."""
    return [tool.get("function", tool).get("name") for tool in tools]


def request_diff(recorded: RecordedCall, body: Mapping[str, Any]) -> list[str]:
    """How a request differs from the recorded one, one readable line per difference.

    Args:
        recorded: The recorded call.
        body: The Chat Completions request body the endpoint got.

    Returns:
        The differences (empty: the same request): which message and field, which tool
        result, which tool schema, which sampling field.
    """
    messages = [_wire(m) for m in body.get("messages") or []]
    lines = []
    for i, (old, new) in enumerate(zip(recorded.messages, messages, strict=False)):
        if old != new:
            lines += _message_diff(i, old, new)
    for i, extra in enumerate(recorded.messages[len(messages) :], len(messages)):
        lines.append(f"message {i} ({extra.get('role')}) missing: recorded {_short(extra.get('content'))}")
    for i, extra in enumerate(messages[len(recorded.messages) :], len(recorded.messages)):
        lines.append(f"message {i} ({extra.get('role')}) added: {_short(extra.get('content'))}")
    if recorded.tools is not None and recorded.tools != list(body.get("tools") or []):
        lines.append(f"tools: recorded {_names(recorded.tools)} / now {_names(body.get('tools') or [])}")
    if recorded.params is not None:
        params = {k: v for k, v in body.items() if k not in _CLIENT_KEYS}
        old_params = {k: v for k, v in recorded.params.items() if k not in _CLIENT_KEYS}
        for key in sorted(set(old_params) | set(params)):
            if old_params.get(key) != params.get(key):
                lines.append(f"sampling {key}: recorded {old_params.get(key)!r} / now {params.get(key)!r}")
    return lines


@dataclass
class Divergence:
    """Where a replayed rollout first left its recording.

    Attributes:
        call: The call's index (0-based) among the rollout's model calls.
        kind: "request" (the request differs), "extra" (a call the run did not make) or
            "missing" (calls the run made and the replay did not).
        diff: The readable differences.
    """

    call: int
    kind: str
    diff: list[str] = field(default_factory=list)

    def describe(self) -> str:
        """One line: where and what."""
        head = {"request": "request differs", "extra": "extra call", "missing": "missing calls"}[self.kind]
        return f"diverged at call {self.call} ({head})" + (f": {'; '.join(self.diff)}" if self.diff else "")


class ReplayPolicy:
    """A `ScriptedEndpoint` policy serving one rollout's recorded replies in order.

    The k-th request gets the k-th recorded reply while it matches its recorded request. The
    first one that does not (or one past the recording) is the divergence: answered by
    `live` when given, else refused with 409 and the diff, as is every call after it.

    Args:
        calls: The recorded calls.
        live: A client for the model that continues from the divergence (`-m MODEL`).
    """

    def __init__(self, calls: Sequence[RecordedCall], live: Client | None = None) -> None:
        self.calls = list(calls)
        self.live = live
        self.served = 0
        self.divergence: Divergence | None = None

    async def __call__(self, messages: list[dict[str, Any]], tools: Any, body: dict[str, Any]) -> Any:
        index = self.served
        self.served += 1
        if self.divergence is None:
            if index >= len(self.calls):
                self.divergence = Divergence(index, "extra", [f"the run made {len(self.calls)} calls"])
            else:
                diff = request_diff(self.calls[index], body)
                if not diff:
                    call = self.calls[index]
                    return {**call.reply, "finish_reason": call.finish_reason}
                self.divergence = Divergence(index, "request", diff)
        if self.live is None:
            raise ScriptedHTTPError(DIVERGED_STATUS, f"rubric replay: {self.divergence.describe()}")
        params = {k: v for k, v in body.items() if k not in _CLIENT_KEYS}
        completion = await self.live.complete(messages, tools=tools or None, **params)
        return completion.message

    def finish(self) -> Divergence | None:
        """The divergence, once the rollout is over (calls left unmade count too)."""
        if self.divergence is None and self.served < len(self.calls):
            made = f"the replay made {self.served} of the {len(self.calls)} recorded calls"
            self.divergence = Divergence(self.served, "missing", [made])
        return self.divergence


@dataclass
class ReplayOutcome:
    """How one rollout's replay went.

    Attributes:
        example_id: The example.
        rollout_index: Which rollout of it.
        status: "identical", "diverged", "reward changed" or "could not replay".
        divergence: Where it left the recording, if it did.
        old_reward: The recorded reward.
        new_reward: The replay's reward (None when it could not run).
        changed_scores: Nodes whose score changed, as {path: [old, new]}.
        reason: Why it could not replay.
    """

    example_id: int | str
    rollout_index: int
    status: str
    divergence: Divergence | None = None
    old_reward: float | None = None
    new_reward: float | None = None
    changed_scores: dict[str, list[float | None]] = field(default_factory=dict)
    reason: str | None = None

    def describe(self) -> str:
        """What happened, in a few words (the summary table's last column)."""
        if self.status == "could not replay":
            return f"could not replay ({self.reason})"
        if self.divergence is not None:
            return self.divergence.describe()
        if self.status == "reward changed":
            nodes = ", ".join(f"{k} {_num(o)} → {_num(n)}" for k, (o, n) in self.changed_scores.items())
            return f"reward changed ({_num(self.old_reward)} → {_num(self.new_reward)})" + (
                f"; {nodes}" if nodes else ""
            )
        return "identical"

    def to_dict(self) -> dict[str, Any]:
        """As metadata.json records it."""
        return {
            "example_id": self.example_id,
            "rollout_index": self.rollout_index,
            "status": self.status,
            "call": self.divergence.call if self.divergence else None,
            "diff": self.divergence.diff if self.divergence else [],
            "old_reward": _json_number(self.old_reward),
            "new_reward": _json_number(self.new_reward),
            "changed_scores": {k: [_json_number(x) for x in v] for k, v in self.changed_scores.items()},
            "reason": self.reason,
            "summary": self.describe(),
        }


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:g}"


def _json_number(value: float | None) -> float | None:
    return None if value is None or math.isnan(value) else value


def _same(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return a is b
    return (math.isnan(a) and math.isnan(b)) or a == b


def _changed_scores(old: Rollout, new: Rollout) -> dict[str, list[float | None]]:
    return {
        path: [old.scores.get(path), new.scores.get(path)]
        for path in sorted(set(old.scores) | set(new.scores))
        if not _same(old.scores.get(path), new.scores.get(path))
    }


@dataclass
class ReplayReport:
    """A replay's outcome: the rollouts, their outcomes, and where they were written.

    Attributes:
        original: The replayed run's folder.
        folder: The replay's own run folder.
        outcomes: One per replayed rollout, in run order.
        results: The replay's results.
    """

    original: Path
    folder: Path
    outcomes: list[ReplayOutcome]
    results: harness.EvalResults

    @property
    def identical(self) -> bool:
        """Whether every rollout made exactly the recorded calls and got the recorded scores."""
        return all(o.status == "identical" for o in self.outcomes)

    def table(self) -> list[str]:
        """The summary table, one line per rollout."""
        width = max([len(f"{o.example_id}:{o.rollout_index}") for o in self.outcomes] + [7])
        lines = [f"{'rollout':<{width}}  outcome"]
        lines += [f"{f'{o.example_id}:{o.rollout_index}':<{width}}  {o.describe()}" for o in self.outcomes]
        return lines


def _one_example(env: Environment, example_id: int | str, split: str) -> Environment:
    """A copy of `env` whose `split` holds only the example `example_id`."""
    data = env.get_dataset(split)
    one = data.filter(lambda row: row["example_id"] == example_id)
    if len(one) != 1:
        raise ConfigError(f"example {example_id!r} is not in the environment's {split} split now")
    single = copy.copy(env)
    single.dataset = one
    single.eval_dataset = one if split == "eval" else None
    return single


async def _replay_one(
    env: Environment, request: RunRequest, old: Rollout, live: Client | None
) -> tuple[ReplayOutcome, Rollout | None]:
    """Play `old` again against its recording; its outcome and the new rollout."""
    split = request.options.get("split", "eval")
    outcome = ReplayOutcome(old.example_id, old.rollout_index, "could not replay", old_reward=old.reward)
    policy = ReplayPolicy(recorded_calls(old), live)
    try:
        single = _one_example(env, old.example_id, split)
        with ScriptedEndpoint(policy, model=request.model or "replay") as endpoint:
            client = Client(endpoint.model, base_url=endpoint.base_url, api_key="replay", max_retries=0)
            try:
                results = await harness.aevaluate(
                    single, client, concurrency=1, progress=False, split=split,
                    sampling=request.sampling or None, episodes=_episodes(request),
                )  # fmt: skip
            finally:
                await client.aclose()
    except RubricError as exc:  # the example is gone, the sandbox would not start, ...
        outcome.reason = str(exc)
        return outcome, None
    new = results.rollouts[0].model_copy(update={"rollout_index": old.rollout_index})
    outcome.new_reward = new.reward
    outcome.divergence = policy.finish()
    outcome.changed_scores = _changed_scores(old, new)
    if outcome.divergence is not None:
        outcome.status = "diverged"
    elif not _same(old.reward, new.reward) or outcome.changed_scores:
        outcome.status = "reward changed"
    else:
        outcome.status = "identical"
    return outcome, new


def _chosen(rollouts: Iterable[Rollout], picks: Sequence[str], failed_only: bool) -> list[Rollout]:
    """The rollouts `--rollouts` (EXAMPLE or EXAMPLE:INDEX) and `--failed-only` name."""
    chosen = []
    for rollout in rollouts:
        names = {str(rollout.example_id), f"{rollout.example_id}:{rollout.rollout_index}"}
        if picks and not names & set(picks):
            continue
        if failed_only and rollout.error is None and not math.isnan(rollout.reward) and rollout.reward >= 1:
            continue
        chosen.append(rollout)
    return chosen


@dataclass
class ReplayRequest:
    """What `rubric replay` is asked.

    Attributes:
        folder: The run to replay.
        spec: The environment, when not the recorded one.
        env_args: Its arguments (the recorded ones are used only when confirmed).
        agent: The agent (the recorded one is used only when confirmed).
        agent_files: Its files folder.
        runtime: Its sandboxes' runtime.
        rollouts: Rollouts to replay, as EXAMPLE or EXAMPLE:INDEX (default: all).
        failed_only: Only the rollouts that errored or scored below 1.
        live_model: A model that continues a rollout live from its divergence (`-m`).
        base_url: That model's endpoint.
        api_key_var: The variable holding its key.
        output_dir: The replay's run folder (default DIR.replay-N beside the original).
    """

    folder: str | Path
    spec: str | None = None
    env_args: dict[str, Any] | None = None
    agent: str | None = None
    agent_files: str | None = None
    runtime: str | None = None
    rollouts: Sequence[str] = ()
    failed_only: bool = False
    live_model: str | None = None
    base_url: str | None = None
    api_key_var: str = "OPENAI_API_KEY"
    output_dir: str | Path | None = None


def _rebuild(what: ReplayRequest, confirm: Confirm | None) -> tuple[Environment, RunRequest]:
    """The environment and run settings the folder records, under the resume rule."""
    request = RunRequest(
        resume=what.folder, spec=what.spec, env_args=what.env_args, agent=what.agent,
        agent_files=what.agent_files, runtime=what.runtime, base_url=ORACLE_URL,
    )  # fmt: skip  # the recorded endpoint is never called (nor asked about): the recording answers
    request = _complete(request, confirm, command="rubric replay")
    return _load(request), request


def _output_folder(original: Path, given: str | Path | None) -> Path:
    if given is not None:
        return new_run_dir(given)
    n = 1
    while (original.parent / f"{original.name}.replay-{n}").exists():
        n += 1
    return new_run_dir(original.parent / f"{original.name}.replay-{n}")


async def areplay(what: ReplayRequest, *, confirm: Confirm | None = None) -> ReplayReport:
    """Replay a run, as `rubric replay DIR` does.

    Args:
        what: The run and what to replay.
        confirm: Asked before the folder's environment arguments or agent are used (the
            `rubric eval --resume` rule); None refuses them with the flags to pass.

    Returns:
        The report; the replay's run folder is written.

    Raises:
        ConfigError: the folder records no run, or what it records was not agreed to.
    """
    original = Path(what.folder)
    env, request = _rebuild(what, confirm)
    old = harness.load_results(original)
    chosen = _chosen(old.rollouts, what.rollouts, what.failed_only)
    if not chosen:
        raise ConfigError(f"no rollout of {original} matches --rollouts/--failed-only; nothing to replay")
    outcomes, rollouts = [], []
    with contextlib.ExitStack() as stack:
        live = None
        if what.live_model is not None:
            live = open_client(
                stack, what.live_model, env=env, base_url=what.base_url, api_key_var=what.api_key_var
            )
        for rollout in chosen:
            outcome, new = await _replay_one(env, request, rollout, live)
            outcomes.append(outcome)
            rollouts += [new] if new is not None else []
        if live is not None:
            await live.aclose()
    folder = _output_folder(original, what.output_dir)
    metadata = dict(old.metadata)
    metadata.pop("summary", None)
    metadata["replay"] = {"of": str(original), "outcomes": [o.to_dict() for o in outcomes]}
    results = harness.EvalResults(rollouts, metadata=metadata)
    results.to_jsonl(folder / RESULTS_FILE)
    write_json_atomic(folder / METADATA_FILE, metadata)
    return ReplayReport(original, folder, outcomes, results)


def replay(what: ReplayRequest, *, confirm: Confirm | None = None) -> ReplayReport:
    """`areplay`, synchronously (works inside a running event loop too)."""
    return run_sync(areplay(what, confirm=confirm))


__all__ = [
    "DIVERGED_STATUS",
    "Divergence",
    "RecordedCall",
    "ReplayOutcome",
    "ReplayPolicy",
    "ReplayReport",
    "ReplayRequest",
    "areplay",
    "recorded_calls",
    "replay",
    "request_diff",
]
