"""The data model every layer shares: chat messages and the Rollout record.

A `Rollout` is the one thing a rubric scores and the one thing written to disk, so it is
forgiving on input (plain dicts, a bare string completion, unknown keys kept in `info`)
and exact on output (NaN rewards survive a JSON round trip as `null`).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any, ClassVar, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from harness._core.display import HtmlRepr, fmt

Role = Literal["system", "user", "assistant", "tool", "developer"]

# The names a reward function parameter or a judge template variable gets from the rollout
# itself (in this order in messages); every other name is a dataset column. Tools may ask for
# two of them (`state`, `rollout`), see `envs._tools.functions.TOOL_INJECTED`.
INJECTED: tuple[str, ...] = ("rollout", "prompt", "completion", "response", "answer", "info", "task", "state")


class _ReadByKey(BaseModel):
    """Read access by key, so code written for OpenAI message dicts (`message["content"]`,
    `call["function"]["name"]`, as Verifiers users write it) works on our models too.

    A declared field is always a key (its value may be None, as in the SDK's dicts); a
    provider's extra field is a key when present. Writing by key is not offered: a message is
    a record, and assignment would bypass validation.
    """

    def __getitem__(self, key: str) -> Any:
        if key in type(self).model_fields or key in (self.model_extra or {}):
            return getattr(self, key)
        raise KeyError(f"{key!r}: a {type(self).__name__} has the keys {sorted(self.keys())}")

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and (key in type(self).model_fields or key in (self.model_extra or {}))

    def get(self, key: str, default: Any = None) -> Any:
        """The value under `key`, or `default` when there is no such key (as `dict.get`)."""
        return self[key] if key in self else default

    def keys(self) -> list[str]:
        """The declared fields, then any extra fields the provider sent."""
        return [*type(self).model_fields, *(self.model_extra or {})]


class FunctionCall(_ReadByKey):
    """The function part of an OpenAI tool call; `arguments` is the raw JSON text.

    Attributes:
        name: The tool's name.
        arguments: The arguments as JSON text (a dict or list given is dumped to JSON).
    """

    model_config = ConfigDict(extra="allow")

    name: str
    arguments: str = "{}"

    @field_validator("arguments", mode="before")
    @classmethod
    def _arguments_as_text(cls, value: Any) -> Any:
        if isinstance(value, (dict, list)):
            import json

            return json.dumps(value)
        return "" if value is None else value


class ToolCall(_ReadByKey):
    """One tool call made by the assistant (OpenAI shape).

    Attributes:
        id: The call's id, which the tool's reply message refers to.
        type: The call's type (always "function" in OpenAI's shape).
        function: The tool's name and arguments.
    """

    model_config = ConfigDict(extra="allow")

    id: str = ""
    type: str = "function"
    function: FunctionCall

    @property
    def name(self) -> str:
        return self.function.name

    @property
    def arguments(self) -> str:
        return self.function.arguments


class Message(_ReadByKey):
    """An OpenAI chat message. Extra provider fields (e.g. `reasoning_content`) are kept.

    Read it as attributes (`message.content`) or, like an OpenAI message dict, by key
    (`message["content"]`, `message.get("reasoning_content")`).

    Attributes:
        role: Who speaks: "system", "user", "assistant", "tool" or "developer".
        content: The text, or a list of content parts; None for a tool-call-only turn.
        tool_calls: The assistant's tool calls, if any.
        tool_call_id: For a tool message, the id of the call it answers.
        name: For a tool message, the tool's name.
    """

    model_config = ConfigDict(extra="allow")

    role: Role
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None
    name: str | None = None

    @property
    def text(self) -> str:
        """The message's text, joining the text parts of multi-part content."""
        if self.content is None:
            return ""
        if isinstance(self.content, str):
            return self.content
        return "".join(str(p.get("text", "")) for p in self.content if isinstance(p, dict))

    def to_openai(self) -> dict[str, Any]:
        """The dict to send to an OpenAI-compatible endpoint (no null fields)."""
        return self.model_dump(exclude_none=True)


class Usage(BaseModel):
    """Token counts; add two with `+`.

    Attributes:
        prompt_tokens: Tokens in the prompts sent.
        completion_tokens: Tokens generated.
    """

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            prompt_tokens=self.prompt_tokens + other.prompt_tokens,
            completion_tokens=self.completion_tokens + other.completion_tokens,
        )


class TurnTokens(BaseModel):
    """What the model saw and generated in one assistant turn, as the endpoint's token ids.

    Kept exactly as returned (never re-tokenized from text), so training sees the tokens the
    policy sampled. `turn` is the index among the rollout's assistant turns.

    Attributes:
        turn: The index of the turn among the rollout's assistant turns.
        prompt_token_ids: The token ids of the prompt the model saw.
        completion_token_ids: The token ids the model generated.
        logprobs: The log-probability of each generated token, when returned.
    """

    turn: int
    prompt_token_ids: list[int]
    completion_token_ids: list[int]
    logprobs: list[float] | None = None


class RetokenizationSkew(BaseModel):
    """How the engine's own token ids for a turn's history compare with the ids it sampled.

    `extends` is True when the agent sent back the previous turn's conversation and reply
    unchanged (then the prompt ids are chained); `exact` when the engine re-tokenised that
    history into exactly the ids it had produced. `common_prefix` counts the leading ids the
    two agree on; `length_delta` is the re-tokenised history's length minus the chained one's.

    Attributes:
        previous_turn: The index of the turn whose history is compared.
        extends: The agent sent back that turn's conversation and reply unchanged.
        exact: The re-tokenised history equals the ids the engine had produced.
        common_prefix: How many leading ids the two agree on.
        length_delta: The re-tokenised history's length minus the chained one's.
    """

    previous_turn: int
    extends: bool
    exact: bool
    common_prefix: int
    length_delta: int


class ModelCall(BaseModel):
    """One model call an agent made through the capture proxy (`harness.proxy`), as it made
    it and as the engine answered: an agent rollout's `Rollout.model_calls`, in order, failed
    calls included.

    Attributes:
        index: The call's position in its session (0-based).
        dialect: The wire format the agent spoke ("chat", "responses" or "anthropic").
        model: The model the agent asked for.
        stream: Whether the agent asked for a streamed answer.
        messages: The conversation sent, as chat messages.
        tools: The tool schemas sent.
        params: The sampling and other parameters passed on.
        reply: The engine's answer, once it came.
        finish_reason: Why generation stopped.
        usage: The tokens the call used.
        tokens: The turn's token ids, when the engine returned them.
        served_by: The model version that answered (`Completion.served_by`: the response's
            `model`, with `@system_fingerprint` when sent), to tell stale samples.
        skew: How the engine's ids for the history compare with those it sampled.
        status: The HTTP status the agent got; 0 while the call is in flight.
        error: Why the call failed, if it did. A failed call keeps no `messages` or `tools`,
            only `request_bytes`, `request_head` and this reason.
        dropped: Provider hints left out of the call upstream.
        forged: Positions in `messages` of assistant turns the proxy never gave in this
            session (the agent wrote them); each such message carries `"forged": true`.
        request_bytes: The size of the request body (as declared, for one refused unread).
        request_head: For a failed call, the first KiB of its body as text (None when the
            body was not read: refused for a spent budget or a declared size over the cap).
        timing: Seconds: `start` (since the session began), `total`, `upstream`, `proxy_cpu`.
    """

    index: int
    dialect: str
    model: str | None = None
    stream: bool = False
    messages: list[Message] = Field(default_factory=list)
    tools: list[dict[str, Any]] = Field(default_factory=list)
    params: dict[str, Any] = Field(default_factory=dict)
    reply: Message | None = None
    finish_reason: str | None = None
    usage: Usage = Field(default_factory=Usage)
    tokens: TurnTokens | None = None
    served_by: str | None = None
    skew: RetokenizationSkew | None = None
    status: int = 0  # the HTTP status the agent got; 0 while the call is in flight
    error: str | None = None
    dropped: list[str] = Field(default_factory=list)
    forged: list[int] = Field(default_factory=list)
    request_bytes: int = 0
    request_head: str | None = None
    # Seconds: `start` since the session began, `total` for the call, `upstream` waiting for
    # the engine, `proxy_cpu` of this process's CPU spent translating and recording.
    timing: dict[str, float] = Field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None and self.reply is not None

    @property
    def conversation(self) -> list[Message]:
        """The messages sent, then the reply (when there was one)."""
        return [*self.messages, self.reply] if self.reply is not None else list(self.messages)


def as_messages(value: Any, default_role: Role = "user") -> list[Message]:
    """Accept a string, one message dict, or a list of them, and return validated messages."""
    if value is None:
        return []
    if isinstance(value, str):
        return [Message(role=default_role, content=value)]
    if isinstance(value, (Message, dict)):
        value = [value]
    return [m if isinstance(m, Message) else Message.model_validate(m) for m in value]


CONVERSATION_COLUMNS = ("response", "answer", "task", "info", "prompt", "completion")


def conversation_columns(r: Rollout) -> dict[str, Any]:
    """A rollout's data-frame columns for what was asked and answered: the final text, the
    answer as it was, task, info, and prompt / completion as lists of message dicts."""
    return {
        "response": r.response,
        "answer": r.answer,
        "task": r.task,
        "info": r.info,
        "prompt": [m.model_dump(exclude_none=True) for m in r.prompt],
        "completion": [m.model_dump(exclude_none=True) for m in r.completion],
    }


def jsonable(value: Any) -> Any:
    """`value` as it reads back from a JSON file (metadata.json): objects JSON cannot hold
    become their text, so what is compared on resume is compared like for like."""
    return json.loads(json.dumps(value, default=str))


def text_messages(messages: Iterable[Message]) -> list[dict[str, Any]]:
    """Messages as OpenAI dicts whose `content` is always text (parts joined): the form
    training datasets take (SFT rows, GRPO prompts)."""
    rows = []
    for m in messages:
        row = m.to_openai()
        if not isinstance(row.get("content"), str):
            row["content"] = m.text
        rows.append(row)
    return rows


def _nan_if_none(value: Any) -> Any:
    return math.nan if value is None else value


class Rollout(HtmlRepr, BaseModel):
    """The record of one episode: the conversation, how it ended, and how it scored.

    In Jupyter it draws as the conversation, tool calls and results, and the reward tree with
    reasons (`harness._views.html.rollout_html`).

    Attributes:
        example_id: The id of the dataset example the episode ran.
        rollout_index: Which rollout of that example this is (0-based).
        prompt: The messages the model was first given.
        completion: Everything after the prompt: the model's turns, tool results, replies.
        answer: The example's reference answer, if it has one.
        info: The example's extra columns.
        task: The example's task label, if any.
        state: Per-episode state the environment and tools keep.
        turns: How many assistant turns ran.
        stop_reason: Why the episode ended (e.g. "completed", "max_turns", "error").
        error: What went wrong, when the episode failed.
        usage: Tokens the policy model used.
        judge_usage: Tokens the rubric's judges spent on this rollout.
        timing: Seconds spent: generation, env, scoring, total.
        reward: The root score; NaN while unscored.
        scores: Every node's score by dotted path.
        score_errors: Why a node is unscored, by dotted path.
        score_details: Per-node extras, such as a judge's raw reply.
        turn_scores: Per-turn scores by node path (the root under "").
        turn_rewards: The credit-assigned reward per assistant turn.
        turn_tokens: Token ids and logprobs per assistant turn, when the endpoint returns them.
        model_calls: An agent's every model call through the capture proxy, in the order it
            made them, failed ones too (empty for the harness's own loop).
    """

    html_kind: ClassVar[str] = "rollout"

    model_config = ConfigDict(validate_assignment=False)

    example_id: int | str = 0
    rollout_index: int = 0
    prompt: list[Message] = Field(default_factory=list)
    completion: list[Message] = Field(default_factory=list)
    answer: Any = None
    info: dict[str, Any] = Field(default_factory=dict)
    task: str | None = None
    state: dict[str, Any] = Field(default_factory=dict)
    turns: int = 0
    stop_reason: str | None = None
    error: str | None = None
    usage: Usage = Field(default_factory=Usage)
    # Tokens the rubric's judges spent on this rollout, kept apart from the policy's `usage`
    # (a cached judge answer costs nothing and adds nothing).
    judge_usage: Usage = Field(default_factory=Usage)
    timing: dict[str, float] = Field(default_factory=dict)
    reward: float = math.nan
    scores: dict[str, float] = Field(default_factory=dict)
    # Why a node is unscored (dotted path -> reason), and per-node extras such as a judge's
    # raw reply, so a user can see why a rollout scored what it scored.
    score_errors: dict[str, str] = Field(default_factory=dict)
    score_details: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # Per-turn scoring: node path -> one score per assistant turn (the root under ""), and the
    # credit-assigned reward per assistant turn (rubrics.credit).
    turn_scores: dict[str, list[float]] = Field(default_factory=dict)
    turn_rewards: list[float] = Field(default_factory=list)
    # Token ids and logprobs per assistant turn, when the endpoint returns them.
    turn_tokens: list[TurnTokens] = Field(default_factory=list)
    # An agent's every model call through the capture proxy, in order (failed ones too).
    model_calls: list[ModelCall] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _coerce(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if "completion" in data:
            data["completion"] = as_messages(data["completion"], default_role="assistant")
        if "prompt" in data:
            data["prompt"] = as_messages(data["prompt"], default_role="user")
        unknown = [k for k in data if k not in cls.model_fields]
        if unknown:
            info = dict(data.get("info") or {})
            for key in unknown:
                info.setdefault(key, data.pop(key))
            data["info"] = info
        if data.get("info") is None:
            data["info"] = {}
        if data.get("state") is None:
            data["state"] = {}
        elif "model_calls" in data["state"] and "model_calls" not in data:
            # Results written before `model_calls` was a field kept the calls in state.
            state = dict(data["state"])
            data["model_calls"], data["state"] = state.pop("model_calls"), state
        return data

    @field_validator("reward", mode="before")
    @classmethod
    def _reward_null_is_nan(cls, value: Any) -> Any:
        return _nan_if_none(value)

    @field_validator("scores", mode="before")
    @classmethod
    def _scores_null_is_nan(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {k: _nan_if_none(v) for k, v in value.items()}
        return value

    @field_validator("turn_scores", mode="before")
    @classmethod
    def _turn_scores_null_is_nan(cls, value: Any) -> Any:
        if isinstance(value, dict):
            return {
                k: [_nan_if_none(v) for v in vs] if isinstance(vs, list) else vs for k, vs in value.items()
            }
        return value

    @field_validator("turn_rewards", mode="before")
    @classmethod
    def _turn_rewards_null_is_nan(cls, value: Any) -> Any:
        return [_nan_if_none(v) for v in value] if isinstance(value, list) else value

    @property
    def messages(self) -> list[Message]:
        """The whole conversation: prompt then completion."""
        return [*self.prompt, *self.completion]

    @property
    def response(self) -> str:
        """Text of the last assistant message ("" if the model never answered)."""
        for message in reversed(self.completion):
            if message.role == "assistant":
                return message.text
        return ""

    @property
    def tool_calls(self) -> list[ToolCall]:
        """Every tool call the assistant made, in order."""
        return [call for m in self.completion if m.role == "assistant" for call in (m.tool_calls or [])]

    @property
    def key(self) -> tuple[str, int]:
        """(example_id, rollout_index) as used for resume; ids compare as text."""
        return (str(self.example_id), self.rollout_index)

    @property
    def scored(self) -> bool:
        return not math.isnan(self.reward)

    def __repr__(self) -> str:
        # One short line: the full record is in `model_dump()`; the notebook draws it whole.
        response = self.response
        shown = response if len(response) <= 60 else response[:57] + "..."
        reward = fmt(self.reward)
        error = f", error={self.error[:60]!r}" if self.error else ""
        return (
            f"Rollout(example_id={self.example_id!r}, rollout_index={self.rollout_index}, reward={reward}, "
            f"stop_reason={self.stop_reason!r}, turns={self.turns}, response={shown!r}{error})"
        )

    __str__ = __repr__


__all__ = [
    "CONVERSATION_COLUMNS",
    "INJECTED",
    "FunctionCall",
    "Message",
    "ModelCall",
    "RetokenizationSkew",
    "Role",
    "Rollout",
    "ToolCall",
    "TurnTokens",
    "Usage",
    "as_messages",
    "conversation_columns",
    "jsonable",
    "text_messages",
]
