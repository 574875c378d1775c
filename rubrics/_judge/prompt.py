"""Rendering a judge prompt from a rollout, safely.

The judge prompt is a jinja2 template written by the user; the model's text only ever
enters it as a *variable*, never as template source, so braces in a response cannot break
rendering. Every value is also passed through `neutralise`, which defuses the template's own
delimiter tags (e.g. `</response>`) inside values: a response cannot close its block early
and smuggle "ignore previous instructions" into the structure the judge sees.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any

import jinja2
import jinja2.meta

from harness._core.errors import ConfigError, ScoringError
from harness._core.types import INJECTED, Message, Rollout

# Names a judge template gets from the rollout: its fields (harness._core.types.INJECTED) plus the
# prompt and completion as message lists; any other name a template uses is a dataset column.
TEMPLATE_FIELDS: frozenset[str] = frozenset(INJECTED) | {"prompt_messages", "completion_messages"}
_TAG = re.compile(r"<\s*/?\s*([A-Za-z_][\w\-]*)\s*>")


class MissingFieldError(ScoringError, LookupError):
    """A template names a field this rollout does not have; `reason` says which and what exists."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def conversation_text(messages: Sequence[Message]) -> str:
    """Messages as plain text for a judge: one message's text alone, else a role-labelled
    transcript that also shows tool calls."""
    if len(messages) == 1 and not messages[0].tool_calls:
        return messages[0].text
    lines: list[str] = []
    for message in messages:
        label = message.role if not message.name else f"{message.role} ({message.name})"
        parts = [message.text] if message.text else []
        parts += [f"[calls {call.name}({call.arguments})]" for call in message.tool_calls or []]
        lines.append(f"{label}: " + "\n".join(parts))
    return "\n\n".join(lines)


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Message):
        return conversation_text([value])
    if isinstance(value, (dict, list, tuple)):
        try:
            return json.dumps(value, ensure_ascii=False, default=str)
        except (TypeError, ValueError):
            return str(value)
    return "" if value is None else str(value)


def _rebuild_template(source: str, what: str) -> JudgeTemplate:
    return JudgeTemplate(source, what=what)


class JudgeTemplate:
    """A compiled judge template: knows its variables and the tags it uses as delimiters."""

    def __reduce__(self) -> tuple[Any, ...]:
        # Compiled jinja2 code cannot be pickled; a pickled judge (TRL workers) compiles again.
        return (_rebuild_template, (self.source, self.what))

    def __init__(self, source: str, *, what: str = "prompt"):
        if not isinstance(source, str) or not source.strip():
            raise ConfigError(f"LLMJudge {what} must be a non-empty jinja2 template string")
        self.source = source
        self.what = what
        environment = jinja2.Environment(
            undefined=jinja2.StrictUndefined,
            autoescape=False,
            keep_trailing_newline=True,
            finalize=self.neutralise,
        )
        try:
            parsed = environment.parse(source)
            self._template = environment.from_string(parsed)
        except jinja2.TemplateSyntaxError as exc:
            raise ConfigError(
                f"LLMJudge {what} template has a syntax error at line {exc.lineno}: {exc.message}"
            ) from exc
        self.variables: frozenset[str] = frozenset(jinja2.meta.find_undeclared_variables(parsed))
        literal = "".join(token[2] for token in environment.lex(source) if token[1] == "data")
        self.delimiters: frozenset[str] = frozenset(m.group(1).lower() for m in _TAG.finditer(literal))
        self._defuse = (
            re.compile(
                r"<(\s*/?\s*(?:" + "|".join(re.escape(d) for d in sorted(self.delimiters)) + r")\b[^<>]*)>",
                re.IGNORECASE,
            )
            if self.delimiters
            else None
        )

    def neutralise(self, value: Any) -> str:
        """`value` as text with this template's delimiter tags written as `&lt;tag&gt;`."""
        text = _as_text(value)
        if self._defuse is None:
            return text
        return self._defuse.sub(r"&lt;\1&gt;", text)

    def columns(self) -> set[str]:
        """Dataset columns the template needs (names that are not rollout fields)."""
        return set(self.variables - TEMPLATE_FIELDS)

    def render(self, fields: Mapping[str, Any]) -> str:
        missing = sorted(self.variables - set(fields))
        if missing:
            raise MissingFieldError(
                f"judge {self.what} needs field {', '.join(map(repr, missing))}, which this rollout lacks; "
                f"available: {', '.join(sorted(fields))}"
            )
        try:
            return self._template.render(fields)
        except jinja2.UndefinedError as exc:
            raise MissingFieldError(
                f"judge {self.what} could not be rendered: {exc.message}; available: {', '.join(sorted(fields))}"
            ) from exc


def _message_fields(message: Message) -> dict[str, Any]:
    """A message for a template: `content` is always text (multi-part content joined)."""
    fields: dict[str, Any] = {"role": message.role, "content": message.text, "name": message.name}
    fields["tool_calls"] = [
        {"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls or []
    ]
    return fields


def rollout_fields(rollout: Rollout, constants: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """Everything a judge template may name: dataset columns (from `info`), the judge's
    constants, then the rollout's own fields; `prompt`/`completion` as readable text and
    `prompt_messages`/`completion_messages` as lists of message dicts."""
    fields: dict[str, Any] = {key: value for key, value in rollout.info.items() if isinstance(key, str)}
    fields.update(constants or {})
    fields.update(
        rollout=rollout,
        prompt=conversation_text(rollout.prompt),
        completion=conversation_text(rollout.completion),
        prompt_messages=[_message_fields(m) for m in rollout.prompt],
        completion_messages=[_message_fields(m) for m in rollout.completion],
        response=rollout.response,
        answer=rollout.answer,
        info=rollout.info,
        task=rollout.task,
        state=rollout.state,
    )
    return fields


__all__ = ["JudgeTemplate", "MissingFieldError", "conversation_text", "rollout_fields"]
