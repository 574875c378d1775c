"""An episode's model calls as training samples, by one rule (docs/guides/training.md).

The rule, call by call in the order the calls were made (failed calls carry nothing to train
on and are left out):

1. A call **continues** a sample when the messages it sent are that sample's last call's
   messages and reply, unchanged, followed by more (tool results, user replies); among the
   open samples (the last `CHAIN_WINDOW`), the latest one it continues. A harness chat loop's
   turns (token ids, no messages) continue the sample before them.
2. Otherwise it **starts a new sample**: the agent rewrote its history (a compaction, a
   summary, an edited message, a different system prompt), the call is a side call (a title,
   a summary beside the main line), or the tools it offers changed. A call on another step of
   a multi-step task starts a new sample too.
3. With token ids, a continuing call's prompt ids hold the previous call's prompt and sampled
   ids again, as the engine re-tokenised them; where that re-tokenisation differs, the
   difference is the **skew**, measured per join (`RetokenizationSkew`). The sample keeps the
   ids the model sampled, then the ids the engine added after that history (mask 0), then the
   call's completion (mask 1, with its logprobs). When the re-tokenised history cannot be found
   in the new prompt (the previous prompt itself re-tokenised differently, or the end-of-turn
   id never comes), the call starts a new sample.
4. Every sample carries the rollout's reward and per-node scores; a multi-step task's samples
   carry their step's reward when the rollout records one.

`link_call` is rules 1 and 3 for one call (the capture proxy records its skew with it);
`training_samples` applies the whole rule to a rollout.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import islice
from typing import Any

from pydantic import BaseModel, Field

from harness._core.errors import ResultsError
from harness._core.types import Message, ModelCall, RetokenizationSkew, Rollout, TurnTokens

#: How many of the latest samples a new call may continue: agents interleave side calls
#: (titles, summaries) with their main line, but not hundreds of them, and the search must not
#: grow with the length of the episode.
CHAIN_WINDOW = 16
#: How many ids longer than the sampled ids their re-tokenisation may be (re-tokenising
#: usually merges ids, so it is rarely longer at all).
RETOKENIZED_SLACK = 2
#: Where a multi-step task records its steps on the rollout (`state["steps"]`: each a dict
#: with its `name`, the `calls` it made as [first, end) positions in `model_calls`, and its
#: `reward` when its check gave one).
STEPS_KEY = "steps"


class TrainingSample(BaseModel):
    """One training sequence of an episode: the calls the rule merged, as ids with a loss mask.

    Attributes:
        example_id: The rollout's example.
        rollout_index: The rollout's index within its example.
        index: The sample's place among its episode's samples (0-based, by its first call).
        calls: The calls merged into it: positions in `rollout.model_calls` (for the
            harness's own chat loop, assistant turns).
        step: The step of a multi-step task its calls belong to, when the rollout records steps.
        reason: Why it starts a new sample (None for the episode's first).
        messages: Its last call's conversation and reply.
        message_mask: Per message, 1 on the assistant replies its calls sampled, else 0.
        prompt_ids: The first call's prompt ids (empty without token ids).
        completion_ids: Everything after them: sampled ids and the ids the environment added.
        logprobs: One per completion id: the sampled ids' logprobs, 0.0 elsewhere.
        mask: One per completion id: 1 on ids the model sampled (trainable), 0 on the tool and
            user ids between its calls.
        skew: Per call after its first that continued an earlier call, how the engine's ids of
            that history compare with the ids it had (also on the first call of a sample the
            ids split off).
        skew_tokens: The history ids the engine re-tokenised differently, summed over `skew`.
        reward: The episode's reward (its step's, when recorded); NaN when unscored.
        scores: Every rubric node's score, by dotted path.
    """

    example_id: int | str
    rollout_index: int
    index: int
    calls: list[int]
    step: str | None = None
    reason: str | None = None
    messages: list[Message] = Field(default_factory=list)
    message_mask: list[int] = Field(default_factory=list)
    prompt_ids: list[int] = Field(default_factory=list)
    completion_ids: list[int] = Field(default_factory=list)
    logprobs: list[float] = Field(default_factory=list)
    mask: list[int] = Field(default_factory=list)
    skew: list[RetokenizationSkew] = Field(default_factory=list)
    skew_tokens: int = 0
    reward: float = math.nan
    scores: dict[str, float] = Field(default_factory=dict)

    @property
    def has_token_ids(self) -> bool:
        """Whether the sample is made of token ids (every call of it had them)."""
        return bool(self.prompt_ids)


def link_call(
    messages: Sequence[Message] | None, tokens: TurnTokens | None, earlier: Sequence[ModelCall]
) -> tuple[ModelCall | None, RetokenizationSkew | None]:
    """The earlier call a call continues (rule 1), and the skew of its token ids (rule 3).

    Args:
        messages: The messages the call sent.
        tokens: Its token ids, when the engine returned them.
        earlier: The calls before it, in order.

    Returns:
        The latest answered call among the last `CHAIN_WINDOW` whose conversation `messages`
        extends (or None), and, when the call has ids, their skew against that call's (or,
        for a rewritten history, against the latest call with ids; None without ids).
    """
    recent = list(islice((c for c in reversed(earlier) if c.ok), CHAIN_WINDOW))  # newest first
    continued = next((c for c in recent if _extends(messages, c)), None)
    if tokens is None:
        return continued, None
    previous = continued if continued is not None and continued.tokens is not None else None
    if previous is None:
        previous = next((c for c in recent if c.tokens is not None), None)
    if previous is None or previous.tokens is None:
        return continued, None
    skew = _join(previous.tokens, tokens, previous.index)[0]
    return continued, skew.model_copy(update={"extends": previous is continued})


def training_samples(rollout: Rollout) -> list[TrainingSample]:
    """An episode as training samples, by the rule of this module's docstring.

    An agent rollout's samples come from its `model_calls` (token ids where recorded, the
    messages always); the harness's own chat loop's from its `turn_tokens`.

    Args:
        rollout: The episode, scored or not (an unscored one's samples have reward NaN).

    Returns:
        Its samples, ordered by their first call; none when it made no successful call.

    Raises:
        ResultsError: A call's logprobs do not match its completion ids one to one.
    """
    calls = _calls_of(rollout)
    steps = _steps_of(rollout)
    open_: list[_Open] = []
    for call in calls:
        step = steps.get(call.position)
        target = _continued(open_[-CHAIN_WINDOW:], call, step)
        refused = target.add(call, rollout) if target is not None else None
        if target is not None and refused is None:
            continue
        reason = refused or _why_new(open_, call, step)
        started = _Open(
            TrainingSample(
                example_id=rollout.example_id,
                rollout_index=rollout.rollout_index,
                index=len(open_),
                calls=[],
                step=step,
                reason=reason,
            )
        )
        if target is not None and target.last.tokens is not None and call.tokens is not None:
            skew, _, skewed = _join(target.last.tokens, call.tokens, target.last.position)
            started.note(skew, skewed)  # continued by its messages, split by its ids
        started.start(call, rollout)
        open_.append(started)
    rewards = _step_rewards(rollout)
    return [s.finish(rollout, rewards) for s in open_]


@dataclass
class _Call:
    """A call as the rule reads it: messages (None for a chat loop's turn), reply, ids."""

    position: int
    messages: list[Message] | None
    reply: Message | None
    tools: list[dict[str, Any]] | None
    tokens: TurnTokens | None

    @property
    def conversation(self) -> list[Message]:
        return [*(self.messages or []), *([self.reply] if self.reply is not None else [])]


@dataclass
class _Open:
    """A sample being built: its calls, and the sample its ids accumulate in."""

    sample: TrainingSample
    calls: list[_Call] = field(default_factory=list)

    @property
    def last(self) -> _Call:
        return self.calls[-1]

    @property
    def step(self) -> str | None:
        return self.sample.step

    def note(self, skew: RetokenizationSkew, skewed: int) -> None:
        self.sample.skew.append(skew)
        self.sample.skew_tokens += skewed

    def start(self, call: _Call, rollout: Rollout) -> None:
        self.calls.append(call)
        if call.tokens is not None:
            self.sample.prompt_ids = list(call.tokens.prompt_token_ids)
            self._sampled(call.tokens, rollout, call.position)

    def add(self, call: _Call, rollout: Rollout) -> str | None:
        """Append a call that continues this sample's messages (rule 3), or say why its ids
        cannot be joined (then it starts a new sample)."""
        before, now = self.last.tokens, call.tokens
        if (before is None) != (now is None):
            return "one of the call and the call it continues has token ids, the other not"
        if before is not None and now is not None:
            skew, end, skewed = _join(before, now, self.last.position)
            if end is None:
                return (
                    "its token ids do not continue the previous call's (the history re-tokenised differently)"
                )
            self.note(skew, skewed)
            added = now.prompt_token_ids[end:]
            self.sample.completion_ids += added
            self.sample.logprobs += [0.0] * len(added)
            self.sample.mask += [0] * len(added)
            self._sampled(now, rollout, call.position)
        self.calls.append(call)
        return None

    def _sampled(self, tokens: TurnTokens, rollout: Rollout, position: int) -> None:
        ids = tokens.completion_token_ids
        given = tokens.logprobs if tokens.logprobs is not None else [0.0] * len(ids)
        if len(given) != len(ids):
            raise ResultsError(
                f"rollout {rollout.example_id!r}/{rollout.rollout_index}: call {position} has "
                f"{len(given)} logprobs for {len(ids)} completion ids"
            )
        self.sample.completion_ids += ids
        self.sample.logprobs += [float(v) for v in given]
        self.sample.mask += [1] * len(ids)

    def finish(self, rollout: Rollout, step_rewards: Mapping[str, float]) -> TrainingSample:
        """The sample, with its calls, conversation and reward."""
        messages = self.last.conversation
        # Each call's reply sits right after the messages it sent, in the last call's conversation.
        sampled = {len(c.messages or []) for c in self.calls if c.reply is not None}
        step = self.sample.step
        return self.sample.model_copy(
            update={
                "calls": [c.position for c in self.calls],
                "messages": messages,
                "message_mask": [int(i in sampled) for i in range(len(messages))],
                "reward": rollout.reward if step is None else step_rewards.get(step, rollout.reward),
                "scores": dict(rollout.scores),
            }
        )


def _calls_of(rollout: Rollout) -> list[_Call]:
    """The answered calls of an agent rollout, or the chat loop's turns."""
    if rollout.model_calls:
        return [
            _Call(i, list(c.messages), c.reply, list(c.tools), c.tokens)
            for i, c in enumerate(rollout.model_calls)
            if c.ok
        ]
    return [_Call(t.turn, None, None, None, t) for t in sorted(rollout.turn_tokens, key=lambda t: t.turn)]


def _steps_of(rollout: Rollout) -> dict[int, str]:
    """Each call's step (by position in `model_calls`), from `state["steps"]` when recorded."""
    steps = rollout.state.get(STEPS_KEY)
    found: dict[int, str] = {}
    if not isinstance(steps, list):
        return found
    for number, entry in enumerate(steps):
        span = entry.get("calls") if isinstance(entry, dict) else None
        if isinstance(span, list) and len(span) == 2:
            name = str(entry.get("name", number))
            found.update(dict.fromkeys(range(int(span[0]), int(span[1])), name))
    return found


def _step_rewards(rollout: Rollout) -> dict[str, float]:
    """Each step's own reward, when its entry in `state["steps"]` records a finite one."""
    steps = rollout.state.get(STEPS_KEY)
    rewards: dict[str, float] = {}
    for number, entry in enumerate(steps if isinstance(steps, list) else []):
        value = entry.get("reward") if isinstance(entry, dict) else None
        if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
            rewards[str(entry.get("name", number))] = float(value)
    return rewards


def _continued(open_: Sequence[_Open], call: _Call, step: str | None) -> _Open | None:
    """The latest open sample of the same step whose last call `call` continues (rule 1)."""
    for sample in reversed(open_):
        if sample.step != step:
            continue
        last = sample.last
        if call.messages is None or last.messages is None:
            return sample if call.messages is None and last.messages is None else None
        if _same_tools(call.tools, last.tools) and _extends_conversation(call.messages, last.conversation):
            return sample
    return None


def _why_new(open_: Sequence[_Open], call: _Call, step: str | None) -> str | None:
    """Why `call`, which continues no open sample, starts a new one (None for the first)."""
    if not open_:
        return None
    last = open_[-1].last
    if open_[-1].step != step:
        return f"a new step ({step})"
    if call.messages and last.messages:
        head, before = call.messages[0], last.messages[0]
        instructions = ("system", "developer")  # Codex sends its instructions as a developer turn
        if (head.role in instructions or before.role in instructions) and not _same(head, before):
            return "a different system prompt"
        if not _same_tools(call.tools, last.tools) and _extends_conversation(
            call.messages, last.conversation
        ):
            return "the tools changed"
    return "the history was rewritten (it extends no earlier call's conversation)"


def _join(before: TurnTokens, now: TurnTokens, index: int) -> tuple[RetokenizationSkew, int | None, int]:
    """Compare `now`'s prompt ids with `before`'s prompt and sampled ids (rule 3): the skew,
    where the engine's re-tokenised history ends in `now`'s prompt (None: not found), and how
    many history ids the engine re-tokenised differently (those after the common prefix)."""
    seen, sampled = before.prompt_token_ids, before.completion_token_ids
    history = [*seen, *sampled]
    engine = now.prompt_token_ids
    common = _common_prefix(history, engine)
    end = _history_end(engine, common, len(seen), sampled)
    skew = RetokenizationSkew(
        previous_turn=index,
        extends=True,
        exact=common == len(history),
        common_prefix=common,
        length_delta=(end if end is not None else len(engine)) - len(history),
    )
    return skew, end, len(history) - common


def _extends(messages: Sequence[Message] | None, previous: ModelCall) -> bool:
    return messages is not None and _extends_conversation(messages, previous.conversation)


def _extends_conversation(messages: Sequence[Message], history: Sequence[Message]) -> bool:
    return len(messages) > len(history) and all(_same(a, b) for a, b in zip(history, messages))


def _same_tools(a: Sequence[dict[str, Any]] | None, b: Sequence[dict[str, Any]] | None) -> bool:
    return json.dumps(a or [], sort_keys=True) == json.dumps(b or [], sort_keys=True)


def _same(a: Message, b: Message) -> bool:
    """Two messages the model would see alike (None and "" content, argument spacing aside)."""
    if a.role != b.role or a.text != b.text or (a.tool_call_id or None) != (b.tool_call_id or None):
        return False
    calls_a, calls_b = a.tool_calls or [], b.tool_calls or []
    return len(calls_a) == len(calls_b) and all(
        x.name == y.name and _arguments(x.arguments) == _arguments(y.arguments)
        for x, y in zip(calls_a, calls_b)
    )


def _arguments(text: str) -> object:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    if list(a[:n]) == list(b[:n]):  # the usual case, compared in C
        return n
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _history_end(
    engine: Sequence[int], common: int, prompt_length: int, sampled: Sequence[int]
) -> int | None:
    """Where the engine's re-tokenised history ends in its prompt ids, or None if not found:
    the previous prompt itself re-tokenised differently, or the sampled ids' end-of-turn id
    does not come back within `RETOKENIZED_SLACK` ids of their length (a template that rewrites
    past turns: searching further would swallow the new messages)."""
    if common == prompt_length + len(sampled):
        return common
    if common < prompt_length or not sampled:
        return None
    last = sampled[-1]
    for i in range(common, min(len(engine), prompt_length + len(sampled) + RETOKENIZED_SLACK)):
        if engine[i] == last:
            return i + 1
    return None


__all__ = [
    "CHAIN_WINDOW",
    "RETOKENIZED_SLACK",
    "STEPS_KEY",
    "TrainingSample",
    "link_call",
    "training_samples",
]
