"""One rollout's side of the proxy: its key, its budgets, and every model call it made.

A `ProxySession` is what a sandboxed agent reaches with its secret key. Each call the agent
makes becomes a `ModelCall`, in order, failed calls included: the conversation it sent as
OpenAI chat messages (the agent's own tool calls and their outputs as assistant tool calls
and tool messages), the reply, token counts, timing and, when the engine returned them, its
token ids, exactly as it returned them. Each call's ids are compared with those of the call it
continues (`harness._core.samples.link_call`): where the engine's re-tokenisation of that
history differs, or the agent rewrote its history, the difference is measured
(`RetokenizationSkew`); `harness.training_samples` joins the calls for training. A call that failed
keeps no messages: its size, the start of its body and why.

Budgets are taken before a call is served, with no await between the check and the count
(the proxy serves on one event loop), so calls sent at once cannot pass them together:
- calls (`max_turns`): each call takes one when it arrives. It stays taken when the engine
  answered or rejected the request (a prompt too long for the context), or the proxy refused
  it (malformed, unknown model, too large, ...): those are the agent's doing. It is given
  back when the call failed through no doing of the agent: the model endpoint failed (502:
  an outage, a timeout, 5xx after retries) or the proxy itself did (500). A call that finds
  every call taken (counted, or held by calls still in flight) is refused and not recorded
  as taken; the session stops once the counted calls reach the limit.
- tokens (`max_tokens`): known only when the engine answers, so a call is served while the
  finished calls used fewer, and a completion limit the call carries (`max_tokens`,
  `max_completion_tokens`) is lowered to the tokens left. Calls in flight together may still
  pass the budget by their prompts and completions.
- time (`max_seconds`): the session's clock bounds the whole call, from reading its body to
  the engine's answer.
"""

from __future__ import annotations

import asyncio
import math
import secrets
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass

from harness._core.errors import ConfigError
from harness._core.samples import link_call
from harness._core.types import Message, ModelCall, Rollout, Usage
from harness.proxy._provenance import Replies

#: Stop reasons a budget gives the session (and its rollout).
BUDGET_STOPS = ("max_turns", "max_tokens", "timeout")
#: Largest request body a session takes by default: the Anthropic Messages API's own limit,
#: far above any conversation that fits a model's context, images included.
DEFAULT_MAX_REQUEST_BYTES = 32 * 1024 * 1024
#: Statuses of calls that failed through no doing of the agent (the proxy's own failure, the
#: model endpoint's): such a call gives its place in the call budget back.
UNCOUNTED_STATUSES = frozenset({500, 502})


@dataclass(frozen=True)
class ProxyBudgets:
    """Limits on one session: model calls, tokens (prompt + completion, summed over calls),
    wall-clock seconds since it opened, and the size of one request. None means no limit.

    Args:
        max_turns: Most model calls in the session (an integer >= 1): answered, rejected by
            the engine or refused by the proxy; a call the model endpoint failed is not counted.
        max_tokens: Most prompt + completion tokens, summed over its calls (an integer >= 1).
        max_seconds: Most wall-clock seconds since the session opened (positive, finite).
        max_request_bytes: Largest request body, in bytes (an integer >= 1; 32 MiB by
            default); a larger one is refused with 413 before it is read whole.

    Raises:
        ConfigError: A limit is neither None nor a valid value.
    """

    max_turns: int | None = None
    max_tokens: int | None = None
    max_seconds: float | None = None
    max_request_bytes: int | None = DEFAULT_MAX_REQUEST_BYTES

    def __post_init__(self) -> None:
        for name in ("max_turns", "max_tokens", "max_request_bytes"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                raise ConfigError(
                    f"proxy budget {name}={value!r} must be an integer >= 1, or None for no limit"
                )
        seconds = self.max_seconds
        if seconds is not None and (
            not isinstance(seconds, (int, float)) or not seconds > 0 or math.isinf(seconds)
        ):
            raise ConfigError(f"proxy budget max_seconds={seconds!r} must be a positive number, or None")


class ProxySession:
    """One rollout's calls through the proxy, under its own secret key and budgets.

    Read `turns` while or after the agent runs; `num_calls` counts the calls the budget
    counted, `num_answered` those the engine answered; `stop_reason` is set when a budget ended
    the episode (`max_turns`, `max_tokens`, `timeout`), and `wait_stopped()` returns then.
    `record_into(rollout)` copies the calls onto a rollout.

    Args:
        name: The session's name (its rollout's), shown in its repr.
        budgets: The limits that end the session's episode.
    """

    def __init__(self, name: str, budgets: ProxyBudgets) -> None:
        self.name = name
        self.key = f"rubric-{secrets.token_urlsafe(24)}"
        self.budgets = budgets
        self.turns: list[ModelCall] = []
        #: Responses-dialect answers by id ("resp_..."): the conversation each one ended, for
        #: a later call's `previous_response_id`.
        self.responses: dict[str, list[Message]] = {}
        self.num_answered = 0  # calls the engine answered (turns that are `ok`)
        self.num_calls = 0  # calls counted against `max_turns` (see the module's docstring)
        self.in_flight = 0  # calls that took their place in the budget and are not finished
        #: The replies given in this session, to tell a history's assistant turns apart.
        self.replies = Replies()
        self.usage = Usage()
        self.stop_reason: str | None = None
        self.started = time.monotonic()
        self._stopped = asyncio.Event()
        #: Called with each call as it finishes (the run's call log: `harness._core.run.calls`).
        self.on_finish: Callable[[ModelCall], None] | None = None

    def __repr__(self) -> str:
        # Never the key: it is the sandbox's credential.
        return f"ProxySession({self.name!r}, turns={len(self.turns)}, stop_reason={self.stop_reason!r})"

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def remaining_seconds(self) -> float | None:
        limit = self.budgets.max_seconds
        return None if limit is None else limit - self.elapsed

    def tokens_left(self) -> int | None:
        """Tokens the finished calls left of the token budget (None: no token budget)."""
        limit = self.budgets.max_tokens
        return None if limit is None else limit - self.usage.total_tokens

    def exhausted(self) -> str | None:
        """The budget this session has used up (naming the stop reason), or None."""
        b = self.budgets
        if self.stop_reason is not None:
            return self.stop_reason
        if b.max_turns is not None and self.num_calls >= b.max_turns:
            return "max_turns"
        if b.max_tokens is not None and self.usage.total_tokens >= b.max_tokens:
            return "max_tokens"
        remaining = self.remaining_seconds()
        if remaining is not None and remaining <= 0:
            return "timeout"
        return None

    def stop(self, reason: str) -> None:
        """End the episode: every further call is refused with this named reason."""
        if self.stop_reason is None:
            self.stop_reason = reason
        self._stopped.set()

    async def wait_stopped(self) -> str:
        """Wait until a budget (or `stop`) ends the episode; the stop reason."""
        await self._stopped.wait()
        return self.stop_reason or "stopped"

    def reserve(self) -> str | None:
        """Take a call's place in the budgets before it is served, or name the budget spent
        (then the call is refused, and the session stops if the spent budget is final)."""
        spent = self.exhausted()
        if spent is not None:
            self.stop(spent)
            return spent
        limit = self.budgets.max_turns
        if limit is not None and self.num_calls + self.in_flight >= limit:
            return "max_turns"  # held by calls in flight; the session stops if they count
        self.in_flight += 1
        return None

    def begin(self, dialect: str) -> ModelCall:
        """A new call's turn, in its place in the order calls were made (calls of one session
        may overlap: an agent's side call beside its main line)."""
        turn = ModelCall(index=len(self.turns), dialect=dialect)
        turn.timing["start"] = self.elapsed
        self.turns.append(turn)
        return turn

    def finish(self, turn: ModelCall, *, reserved: bool) -> None:
        """Account a finished call: measure its token ids' skew, count it (when it `reserved` its
        place), remember its reply, stop the session if it spent a budget."""
        if turn.tokens is not None:
            turn.skew = link_call(turn.messages, turn.tokens, self.turns[: turn.index])[1]
        if reserved:
            self.in_flight -= 1
            self.num_calls += turn.status not in UNCOUNTED_STATUSES
        if turn.ok and turn.reply is not None:
            self.num_answered += 1
            self.replies.add(turn.reply)
        self.usage = self.usage + turn.usage
        if self.on_finish is not None:
            self.on_finish(turn)
        reason = self.exhausted()
        if reason is not None:
            self.stop(reason)

    def conversation(self) -> list[Message]:
        """The last successful call's conversation and reply: the episode as the agent ended it."""
        for turn in reversed(self.turns):
            if turn.ok:
                return turn.conversation
        return []

    def record_into(self, rollout: Rollout) -> None:
        """Put the calls on `rollout`: the final conversation (prompt = the messages before its
        first reply), the answered calls as `turns`, usage, the budget's stop reason, every
        call (failed ones too) as `rollout.model_calls`, and the main
        line's token ids as `turn_tokens`, each numbered by its assistant turn in the
        conversation, so a token export joins them into one sequence."""
        conversation = self.conversation()
        first_reply = next(
            (i for i, m in enumerate(conversation) if m.role == "assistant"), len(conversation)
        )
        if not rollout.prompt:
            rollout.prompt = conversation[:first_reply]
        rollout.completion = conversation[first_reply:]
        rollout.turns = self.num_answered
        rollout.usage = rollout.usage + self.usage
        if self.stop_reason is not None:
            rollout.stop_reason = self.stop_reason
        rollout.model_calls = list(self.turns)


def new_sessions_name(existing: Collection[str], name: str | None) -> str:
    """A session name: the one given (unique), else the next free `s{N}`."""
    if name is not None:
        if name in existing:
            raise ConfigError(f"a proxy session named {name!r} is already open; pick another name")
        return name
    n = len(existing)
    while f"s{n}" in existing:
        n += 1
    return f"s{n}"


__all__ = [
    "BUDGET_STOPS",
    "DEFAULT_MAX_REQUEST_BYTES",
    "UNCOUNTED_STATUSES",
    "ModelCall",
    "ProxyBudgets",
    "ProxySession",
    "new_sessions_name",
]
