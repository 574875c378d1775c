"""Tools: plain Python functions the model can call, with schemas derived from type hints.

`Tool.from_function(fn)` (or `@tool`) reads the signature, type hints and docstring once and
builds the OpenAI tool schema and a pydantic validator for the arguments. `await tool.call(...)`
never raises for anything the model did wrong or the tool did wrong: unknown tool, bad JSON,
missing or mistyped arguments, an exception inside the tool and a timeout each come back as a
`ToolResult` whose content tells the model what happened, so a rollout can carry on.

Return values become the tool message's text: a `str` as is, `None` as the empty string (a
tool run for its effect says nothing), `bytes` decoded as UTF-8, and anything else that is
JSON-like (dict, list, tuple, set, bool, pydantic model, dataclass, Enum, ...) as compact JSON;
other objects as `str(value)`. Numbers are their `str`.

Just over 500 lines: `Tool` and `call_tool` are one path (describe, validate, run, report)
that reads best whole; schemas, docstrings and placement are their own modules.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import enum
import functools
import inspect
import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol, overload

from pydantic import BaseModel, ValidationError
from pydantic_core import to_json

from envs._tools.docstrings import docs_of
from envs._tools.placement import CallTimedOut, Placement, Where, thread_pool
from envs._tools.schema import TOOL_INJECTED, build_arguments, callable_name, drop_null_defaults
from harness._core.aio import is_async_callable, maybe_await
from harness._core.errors import ConfigError, ConfigTypeError
from harness._core.types import Message, Rollout, ToolCall

DEFAULT_TIMEOUT: float = 60.0
"""Seconds a tool may run before its call is abandoned with a timeout message."""

OUTPUT_LIMIT = 4000
"""Bytes of a tool's output the model is shown by default (the python sandbox's run, an MCP
tool's result); the rest is counted and cut, with `truncation_note` saying so."""

_log = logging.getLogger(__name__)
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class ToolResult(BaseModel):
    """The outcome of one tool call: `content` is what the model sees; `error` is set on failure.

    Attributes:
        content: The text the model sees.
        name: The tool's name ("" when the call was too malformed to name one).
        error: Why the call failed, if it did.
        tool_call_id: The id of the call this answers.
        parts: The content blocks as the tool returned them (MCP tools); None for Python tools.
    """

    content: str
    name: str
    error: str | None = None
    tool_call_id: str | None = None
    #: The result's content blocks as the tool returned them (MCP tools: text, image, audio,
    #: resource blocks as JSON); None for Python tools, whose result is `content` alone.
    parts: list[dict[str, Any]] | None = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_message(self) -> Message:
        """The `tool` role message that answers the assistant's call."""
        return Message(role="tool", content=self.content, tool_call_id=self.tool_call_id)


def truncation_note(shown: int, total: int) -> str:
    """The note that tells the model a tool's output was cut, and by how much (in bytes)."""
    return f"[output truncated: showing the first {shown} of {total} bytes]"


def cap_output(text: str, limit: int = OUTPUT_LIMIT) -> str:
    """`text` cut to its first `limit` UTF-8 bytes (never inside a character), with the note."""
    data = text.encode("utf-8", errors="replace")
    if len(data) <= limit:
        return text
    kept = data[:limit].decode("utf-8", errors="ignore")
    return f"{kept.rstrip(chr(10))}\n{truncation_note(limit, len(data))}"


def serialize_result(value: Any) -> str:
    """The text of a tool's return value (rules in the module docstring)."""
    if isinstance(value, str):
        return value
    if value is None:
        return ""
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", errors="replace")
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, (dict, list, tuple, set, frozenset, bool, enum.Enum)) or (
        dataclasses.is_dataclass(value) and not isinstance(value, type)
    ):
        return to_json(value, fallback=str).decode()
    return str(value)


class BadArguments(ValueError):
    """The model's arguments cannot be used; `reason` is short, `detail` is for the model."""

    def result(self, tool: str, parameters_json: str) -> ToolResult:
        """What the model is told: the call was not run, why, and the schema to follow."""
        return ToolResult(
            content=f"Error: tool {tool!r} was not run: {self.detail}\nExpected parameters (JSON Schema): {parameters_json}",
            name=tool,
            error=self.reason,
        )

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


def _format_validation(error: ValidationError) -> str:
    lines = []
    for item in error.errors(include_url=False):
        where = ".".join(str(part) for part in item["loc"]) or "(arguments)"
        line = f"- {where}: {item['msg']}"
        if item["type"] not in {"missing", "extra_forbidden"}:
            got = json.dumps(item.get("input"), default=repr)
            line += f" (got {got[:200]})"
        lines.append(line)
    return "\n".join(lines)


class ToolLike(Protocol):
    """What an environment needs of a tool: an `envs.Tool` (Python) or an `envs._tools.mcp.MCPTool`."""

    @property
    def name(self) -> str: ...

    @property
    def description(self) -> str | None: ...

    @property
    def parameters(self) -> dict[str, Any]: ...

    @property
    def schema(self) -> dict[str, Any]: ...

    @property
    def timeout(self) -> float | None: ...

    async def call(
        self,
        arguments: str | Mapping[str, Any] | None = None,
        *,
        state: dict[str, Any] | None = None,
        rollout: Rollout | None = None,
    ) -> ToolResult: ...


def check_tool_name(name: object, source: str) -> str:
    """`name` if OpenAI accepts it as a tool name, else a ConfigError naming `source`."""
    if not isinstance(name, str) or not _NAME.match(name):
        raise ConfigError(
            f"tool name {name!r} (from {source}) is invalid: OpenAI needs 1-64 "
            "characters of letters, digits, '_' or '-'; pass name=... to choose one"
        )
    return name


def parse_arguments(arguments: str | Mapping[str, Any] | None) -> dict[str, Any]:
    """The model's arguments (JSON text or a dict; "" and null mean {}) as a dict, or BadArguments."""
    if arguments is None:
        return {}
    if isinstance(arguments, (str, bytes, bytearray)):
        text = arguments.decode() if isinstance(arguments, (bytes, bytearray)) else arguments
        if not text.strip():
            return {}
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise BadArguments(
                f"arguments are not valid JSON ({exc})",
                f"the arguments are not valid JSON ({exc}). Send one JSON object.",
            ) from None
    else:
        data = arguments
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise BadArguments(
            f"arguments are a JSON {type(data).__name__}, not an object",
            f"the arguments must be a JSON object of named parameters, got {json.dumps(data, default=repr)[:200]}.",
        )
    return dict(data)


def _check_blocking(name: str, blocking: object, is_async: bool) -> None:
    if blocking is not None and not isinstance(blocking, bool):
        raise ConfigError(
            f"tool {name!r}: blocking must be True, False or None (decide from timed calls), got {blocking!r}"
        )
    if blocking and is_async:
        raise ConfigError(
            f"tool {name!r} is an async function, which always runs on the event loop; blocking=True "
            "is for plain `def` tools: drop blocking=True, or make the tool a plain def"
        )


class Tool:
    """A function the model can call: its OpenAI schema, a validator, a timeout, a placement.

    Attributes: `name`, `description`, `timeout` (seconds, None = no limit), `strict`, `fn`,
    `blocking` (as given), `placement` (where the next call runs), `parameters` (the JSON
    Schema of the arguments) and `schema` (the OpenAI tool dict).
    Calling the Tool object directly calls the function, so decorating does not change how
    Python code uses it.

    Where a call runs: an `async def` tool runs on the event loop. A plain `def` tool with
    `blocking=None` (the default) starts in a worker thread, moves onto the event loop once
    its calls have proven fast, and goes back to the thread pool for good if they turn slow
    (the rule and its trade-off: `envs._tools.placement`). `blocking=True` always uses a worker
    thread (for tools that wait on I/O, locks or processes, or may hang); `blocking=False`
    always runs inline (for tools known to be fast; an inline call cannot be abandoned at its
    timeout, so an overrun is reported as a timeout when the call returns).

    Args:
        fn: the function (sync or `async def`); its type hints and Google-style docstring
            make the JSON schema the model sees.
        name: the name the model calls it by (default: the function's name).
        description: what the model reads about it (default: the docstring's summary).
        timeout: seconds a call may take before it is reported as a timeout (None: no limit).
        strict: ask for OpenAI's strict schema mode (every argument required, no extras).
        blocking: True: always in a worker thread; False: always on the event loop; None
            (default): measured, then placed (see above).
    """

    def __init__(
        self,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        strict: bool = False,
        blocking: bool | None = None,
    ) -> None:
        if not callable(fn):
            raise ConfigTypeError(f"a tool must be a function, got {type(fn).__name__}: {fn!r}")
        name = check_tool_name(
            name if name is not None else getattr(fn, "__name__", None), repr(callable_name(fn))
        )
        if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
            raise ConfigError(
                f"tool {name!r}: timeout must be a positive number of seconds or None, got {timeout!r}"
            )
        self._is_async = is_async_callable(fn)
        _check_blocking(name, blocking, self._is_async)
        self.blocking = blocking
        self._placement = Placement(name, blocking)
        docs = docs_of(fn)
        self.fn = fn
        self.name = name
        self.description = description if description is not None else docs.description
        self.timeout = None if timeout is None else float(timeout)
        self.strict = bool(strict)
        self._spec = build_arguments(fn, param_docs=docs.params, strict=self.strict)
        self.parameters: dict[str, Any] = self._spec.parameters
        function: dict[str, Any] = {"name": name}
        if self.description:
            function["description"] = self.description
        function["parameters"] = self.parameters
        if self.strict:
            function["strict"] = True
        self.schema: dict[str, Any] = {"type": "function", "function": function}
        self._parameters_json = json.dumps(self.parameters, separators=(",", ":"))
        functools.update_wrapper(self, fn, updated=())

    @classmethod
    def from_function(
        cls,
        fn: Callable[..., Any],
        *,
        name: str | None = None,
        description: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        strict: bool = False,
        blocking: bool | None = None,
    ) -> Tool:
        """Build a Tool from a function (a Tool passed in is re-built with these options)."""
        if isinstance(fn, Tool):
            fn = fn.fn
        return cls(fn, name=name, description=description, timeout=timeout, strict=strict, blocking=blocking)

    @property
    def placement(self) -> Where:
        """Where the next call runs: "inline" (on the event loop), "thread" (a worker thread), or
        "measuring" (a worker thread, timed, until the placement rule decides)."""
        return "inline" if self._is_async else self._placement.where

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.fn(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, ...]:
        # The argument model is a class made at runtime (not importable by name), so a Tool
        # pickles as its function and options and is rebuilt (TRL's async trainer pickles).
        # Placement state travels as state, so a copy keeps where its calls run.
        options = {"name": self.name, "description": self.description, "timeout": self.timeout}
        options["blocking"] = self.blocking
        return (_rebuild_tool, (self.fn, options, self.strict), {"_placement": self._placement})

    def __repr__(self) -> str:
        params = ", ".join(self.parameters.get("properties", {}))
        blocking = "" if self.blocking is None else f", blocking={self.blocking}"
        return (
            f"Tool(name={self.name!r}, parameters=({params}), timeout={self.timeout}, "
            f"strict={self.strict}{blocking})"
        )

    def validate(self, arguments: str | Mapping[str, Any] | None) -> dict[str, Any]:
        """Parse and validate the model's arguments into the function's keyword arguments.

        Raises ValueError with a readable message on bad input (used directly by tests and
        by anyone who wants to check a call without running it).
        """
        try:
            return self._validate(arguments)
        except BadArguments as exc:
            raise ValueError(f"tool {self.name!r}: {exc.detail}") from None

    def _validate(self, arguments: str | Mapping[str, Any] | None) -> dict[str, Any]:
        data = parse_arguments(arguments)
        if self.strict:
            data = drop_null_defaults(data, self._spec.loose_parameters)
        try:
            values = self._spec.model.model_validate(data)
        except ValidationError as exc:
            problems = _format_validation(exc)
            raise BadArguments(
                "invalid arguments: " + "; ".join(line[2:] for line in problems.splitlines()),
                "invalid arguments:\n" + problems,
            ) from None
        return {param: getattr(values, field) for field, param in self._spec.fields}

    def _failure(self, reason: str, content: str) -> ToolResult:
        return ToolResult(content=f"Error: {content}", name=self.name, error=reason)

    async def call(
        self,
        arguments: str | Mapping[str, Any] | None = None,
        *,
        state: dict[str, Any] | None = None,
        rollout: Rollout | None = None,
    ) -> ToolResult:
        """Validate `arguments` (JSON text or a dict; "" means {}), run the tool, return its result.

        Never raises for a bad call or a failing tool: the ToolResult's content explains the
        problem to the model and `error` records it. `state` defaults to `rollout.state`.
        A sync function runs where `placement` says (see the class docstring). A thread cannot
        be killed, so a timed-out call in a thread is abandoned but runs on in the background;
        an inline call that finishes past its timeout is reported as timed out all the same.
        """
        try:
            kwargs = self._validate(arguments)
        except BadArguments as exc:
            return exc.result(self.name, self._parameters_json)
        if state is None and rollout is not None:
            state = rollout.state
        injected = {"state": state, "rollout": rollout}
        for name in self._spec.injected:
            if injected[name] is not None or name not in self._spec.injected_defaults:
                kwargs[name] = injected[name]
        try:
            value = await self._run(kwargs)
        except CallTimedOut:
            return self._failure(
                f"timed out after {self.timeout:g} s",
                f"tool {self.name!r} did not finish within {self.timeout:g} seconds and was abandoned.",
            )
        except Exception as exc:
            return self._raised(exc)
        try:
            content = serialize_result(value)
        except Exception as exc:
            return self._failure(
                f"result not serialisable: {type(exc).__name__}: {exc}",
                f"tool {self.name!r} ran but its result could not be turned into text.",
            )
        return ToolResult(content=content, name=self.name)

    async def _run(self, kwargs: dict[str, Any]) -> Any:
        """Run the function where it belongs; CallTimedOut if it ran past `timeout`."""
        args = [kwargs.pop(name) for name in self._spec.positional_only]
        if self._is_async:
            return await self._within_timeout(maybe_await(self.fn(*args, **kwargs)))
        if self._placement.where == "inline":
            # Fast path for proven-fast sync tools: no thread hop and no timer handle, which on
            # a busy loop cost more than the tool. The call runs in a copy of the context, as
            # a thread's would, so both places behave the same.
            run = contextvars.copy_context().run
            value = self._placement.run_inline(run, (self.fn, *args), kwargs, self.timeout)
            return await self._within_timeout(value) if inspect.isawaitable(value) else value
        return await self._within_timeout(self._in_thread(args, kwargs))

    async def _in_thread(self, args: list[Any], kwargs: dict[str, Any]) -> Any:
        loop = asyncio.get_running_loop()
        call = functools.partial(
            contextvars.copy_context().run, self._placement.run_measured, self.fn, args, kwargs
        )
        return await maybe_await(await loop.run_in_executor(thread_pool(), call))

    async def _within_timeout(self, awaitable: Awaitable[Any]) -> Any:
        try:
            async with asyncio.timeout(self.timeout) as deadline:
                return await awaitable
        except TimeoutError:
            if not deadline.expired():
                raise  # the tool itself raised TimeoutError: an ordinary failure
            if not self._is_async:
                self._placement.demote(f"a call timed out after {self.timeout:g} s")
            raise CallTimedOut from None

    def _raised(self, exc: BaseException) -> ToolResult:
        # The model gets one line; the developer can still see the traceback in the log.
        _log.debug("tool %r raised", self.name, exc_info=exc)
        text = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
        return self._failure(text, f"tool {self.name!r} raised {text}")


def _rebuild_tool(fn: Callable[..., Any], options: dict[str, Any], strict: bool) -> Tool:
    return Tool(fn, strict=strict, **options)


@overload
def tool(
    fn: Callable[..., Any],
    /,
    *,
    name: str | None = ...,
    description: str | None = ...,
    timeout: float | None = ...,
    strict: bool = ...,
    blocking: bool | None = ...,
) -> Tool: ...
@overload
def tool(
    fn: None = None,
    /,
    *,
    name: str | None = ...,
    description: str | None = ...,
    timeout: float | None = ...,
    strict: bool = ...,
    blocking: bool | None = ...,
) -> Callable[[Callable[..., Any]], Tool]: ...
def tool(
    fn: Callable[..., Any] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
    strict: bool = False,
    blocking: bool | None = None,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Decorator form of `Tool.from_function`: `@tool`, `@tool(name=..., timeout=..., blocking=...)`
    or `tool(fn, blocking=True)`.

    Args:
        fn: the function; without it, `tool(...)` returns a decorator (sync or `async def`); its type hints and Google-style docstring
            make the JSON schema the model sees.
        name: the name the model calls it by (default: the function's name).
        description: what the model reads about it (default: the docstring's summary).
        timeout: seconds a call may take before it is reported as a timeout (None: no limit).
        strict: ask for OpenAI's strict schema mode (every argument required, no extras).
        blocking: True: always in a worker thread; False: always on the event loop; None
            (default): measured, then placed (see `Tool`).

    Returns:
        The `Tool`, or a decorator making one when `fn` is not given.
    """
    options: dict[str, Any] = {
        "name": name,
        "description": description,
        "timeout": timeout,
        "strict": strict,
        "blocking": blocking,
    }
    if fn is not None:
        return Tool.from_function(fn, **options)

    def decorate(function: Callable[..., Any]) -> Tool:
        return Tool.from_function(function, **options)

    return decorate


async def call_tool(
    tools: Mapping[str, ToolLike],
    tool_call: ToolCall | Mapping[str, Any],
    *,
    state: dict[str, Any] | None = None,
    rollout: Rollout | None = None,
) -> ToolResult:
    """Run one assistant tool call against `tools`; never raises for the model's mistakes.

    The result carries the call's id, so `result.to_message()` is the reply to send back.

    Args:
        tools: The available tools by name.
        tool_call: The assistant's tool call (a `ToolCall` or its dict).
        state: The rollout's state, passed to a tool that takes `state` (default: `rollout.state`).
        rollout: The rollout, passed to a tool that takes `rollout`.

    Returns:
        The tool's output, or an error result the model can read.
    """
    if not isinstance(tool_call, ToolCall):
        try:
            tool_call = ToolCall.model_validate(tool_call)
        except ValidationError as exc:
            reason = f"malformed tool call ({exc.error_count()} problem(s))"
            raw = tool_call.get("id") if isinstance(tool_call, Mapping) else None
            return ToolResult(
                content=f"Error: the tool call is malformed:\n{_format_validation(exc)}",
                name="",
                error=reason,
                tool_call_id=raw if isinstance(raw, str) else None,
            )
    found = tools.get(tool_call.name)
    if found is None:
        available = ", ".join(sorted(tools)) or "(none)"
        result = ToolResult(
            content=f"Error: unknown tool {tool_call.name!r}. Available tools: {available}. "
            "Call one of them by its exact name.",
            name=tool_call.name,
            error=f"unknown tool {tool_call.name!r}",
        )
    else:
        result = await found.call(tool_call.arguments, state=state, rollout=rollout)
    result.tool_call_id = tool_call.id or None
    return result


__all__ = [
    "DEFAULT_TIMEOUT",
    "OUTPUT_LIMIT",
    "TOOL_INJECTED",
    "BadArguments",
    "Tool",
    "ToolLike",
    "ToolResult",
    "call_tool",
    "cap_output",
    "serialize_result",
    "tool",
    "truncation_note",
]
