"""Tools from MCP servers: `Environment(tools=[mcp_server(command=[...])])` or `mcp_server(url=...)`.

Everything goes through the official `mcp` SDK (the `[mcp]` extra): its stdio and
streamable-HTTP clients, its session, its types. This module decides only what the harness
needs around them:
- **Schemas.** The server's tool listing is read once, when the environment is built, so the
  model (and a scripted policy) sees exactly the names, descriptions and JSON Schemas the
  server declares; a server that cannot start fails the build at once, with one line naming
  the command and the end of its stderr.
- **Calls.** Arguments are checked against the declared schema before the call (as Python
  tools' are against their signature); the tool timeout applies; whatever the server does
  (an error result, a crash, a hang, content the SDK cannot read) comes back to the model as
  a tool error and is recorded on the rollout, never raised out of it.
- **Lifetime.** One server per event loop for the whole run, started at the first call
  (`per_rollout=True`: a fresh one per rollout, for stateful servers); the environment stops
  them when the rollout or run ends (`release_rollout` / `release`), and stdio servers run
  under `harness._core.child`, so even a SIGKILL of `rubric eval` leaves no server behind.
- **Content.** Text content is what the model sees; images, audio and resources are
  summarised in that text, and every block is kept as MCP returned it on the tool result.
  Like the python sandbox's output, the text is cut at `output_limit` bytes with a note
  saying how much was cut (texts kept on the result too), and a binary block over the
  server's `block_limit` (`MAX_BLOCK_BYTES`) is kept as its summary: a huge result cannot
  swell the run's results.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import os
import re
import shlex
import tempfile
from collections.abc import Mapping, Sequence
from typing import IO, Any

import pydantic

from envs._tools.functions import (
    DEFAULT_TIMEOUT,
    OUTPUT_LIMIT,
    BadArguments,
    ToolResult,
    cap_output,
    check_tool_name,
    parse_arguments,
)
from harness._core.child import wrap
from harness._core.content import block_text
from harness._core.errors import ConfigError, ConfigTypeError
from harness._core.types import Rollout

INSTALL_HINT = "pip install 'rubric-rl[mcp]'"
START_TIMEOUT = 30.0
"""Seconds a server may take to start and answer its whole tool listing."""
MAX_LISTING_PAGES = 100
"""Pages of a server's tool listing read at most: a listing that never ends is an error."""
MAX_TOOLS = 1000
"""Tools one server may list (far more than a model can choose among)."""
MAX_BLOCK_BYTES = 8 << 20
"""Bytes of one binary content block (image, audio, blob) kept on a tool result; a larger one
is kept as its one-line summary."""
_STDERR_TAIL = 600
_PREFIX = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")


def _sdk() -> Any:
    """The `mcp` package, or a ConfigError saying how to install it."""
    try:
        import mcp.client
        import mcp.client.stdio
    except ImportError:
        raise ConfigError(f"MCP tools need the official mcp SDK: {INSTALL_HINT}") from None
    return mcp


class MCPStartError(ConfigError):
    """An MCP server could not be started or did not answer its tool listing."""


class _Connection:
    """One running server and its SDK client, owned by one task of one event loop.

    The SDK's client must be entered and exited in the same task (anyio cancel scopes), and
    a shared server outlives the rollout that started it, so a task of its own holds it open
    until `close`; any task of the loop may call tools through it meanwhile.
    """

    def __init__(self, server: MCPServer) -> None:
        self.server = server
        self.client: Any = None
        self.failure: BaseException | None = None
        self._errlog: IO[str] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    @property
    def alive(self) -> bool:
        return self.client is not None and self.failure is None

    async def open(self) -> _Connection:
        self._ready = asyncio.get_running_loop().create_future()
        self._task = asyncio.create_task(self._hold(), name=f"mcp server {self.server.label}")
        try:
            await asyncio.wait_for(asyncio.shield(self._ready), self.server.start_timeout)
        except Exception as exc:
            why = (
                f"no answer within {self.server.start_timeout:g}s" if isinstance(exc, TimeoutError) else None
            )
            if self._task is not None:
                self._task.cancel()  # never ready, nothing to close gracefully: no 10 s wait
            await self.close(keep_stderr=True)
            if not self._ready.cancelled() and self._ready.done():
                self._ready.exception()  # set as the holding task stopped: retrieved, so asyncio logs nothing
            error = self.server.start_error(why or _describe(exc), self)
            self._close_stderr()
            raise error from None
        return self

    def _transport(self, sdk: Any) -> Any:
        spec = self.server
        if spec.url is not None:
            return spec.url
        assert spec.command is not None
        self._errlog = tempfile.TemporaryFile("w+", encoding="utf-8", errors="replace")
        command = wrap(spec.command)
        params = sdk.client.stdio.StdioServerParameters(
            command=command[0], args=command[1:], env=dict(spec.env) or None, cwd=spec.cwd
        )
        return sdk.client.stdio.stdio_client(params, errlog=self._errlog)

    async def _hold(self) -> None:
        assert self._ready is not None
        try:
            sdk = _sdk()
            async with sdk.client.Client(self._transport(sdk)) as client:
                self.client = client
                self._ready.set_result(None)
                await self._stop.wait()
        except BaseException as exc:
            self.failure = exc
            if not self._ready.done():
                self._ready.set_exception(exc if isinstance(exc, Exception) else RuntimeError(repr(exc)))
            if not isinstance(exc, Exception):
                raise
        finally:
            self.client = None

    def stderr_tail(self) -> str:
        if self._errlog is None:
            return ""
        with contextlib.suppress(ValueError, OSError):
            self._errlog.flush()
            self._errlog.seek(0, os.SEEK_END)
            size = self._errlog.tell()
            self._errlog.seek(max(0, size - 4 * _STDERR_TAIL))
            text = " ".join(self._errlog.read().split())
            return text[-_STDERR_TAIL:]
        return ""

    async def close(self, *, keep_stderr: bool = False) -> None:
        """Stop the server (its process exits with the SDK client) and wait for that."""
        self._stop.set()
        if self._task is not None and not self._task.done():
            await asyncio.wait({self._task}, timeout=10)  # never raises the task's own end
            if not self._task.done():
                self._task.cancel()
                with contextlib.suppress(BaseException):
                    await self._task
        if not keep_stderr:
            self._close_stderr()

    def _close_stderr(self) -> None:
        if self._errlog is not None:
            self._errlog.close()
            self._errlog = None


def _describe(exc: BaseException) -> str:
    """One line for an SDK failure: exception groups (anyio) unwrapped to their first cause."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class MCPServer:
    """An MCP server whose tools an environment offers; made by `mcp_server(...)`.

    Holds the listing (`tools`, read once) and the running connections: one per event loop
    (shared by every rollout of a run), or one per rollout with `per_rollout=True`.
    `block_limit` (default `MAX_BLOCK_BYTES`) is the largest binary content block kept on a
    result; a larger one is kept as its summary.
    """

    def __init__(
        self,
        *,
        command: Sequence[str] | None,
        url: str | None,
        per_rollout: bool,
        env: Mapping[str, str] | None,
        cwd: str | None,
        timeout: float | None,
        start_timeout: float,
        output_limit: int = OUTPUT_LIMIT,
        prefix: str | None = None,
        block_limit: int = MAX_BLOCK_BYTES,
    ) -> None:
        self.command = list(command) if command is not None else None
        self.url = url
        self.per_rollout = per_rollout
        self.env = dict(env or {})
        self.cwd = cwd
        self.timeout = timeout
        self.start_timeout = start_timeout
        self.output_limit = output_limit
        self.block_limit = block_limit
        self.prefix = prefix
        self.label = url if url is not None else shlex.join(self.command or [])
        self._listing: list[MCPTool] | None = None
        self._shared: dict[asyncio.AbstractEventLoop, _Connection] = {}
        self._opening: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}
        self._own: dict[int, _Connection] = {}

    def __repr__(self) -> str:
        extra = (f", prefix={self.prefix!r}" if self.prefix else "") + (
            ", per_rollout=True" if self.per_rollout else ""
        )
        return f"mcp_server({'url' if self.url else 'command'}={self.label!r}{extra})"

    def __getstate__(self) -> dict[str, Any]:
        # Connections belong to this process's event loops; a copy starts its own.
        state = dict(self.__dict__)
        state.update(_shared={}, _opening={}, _own={})
        return state

    def config(self) -> dict[str, Any]:
        """What identifies the server in metadata.json (never its environment variables)."""
        where = {"url": self.url} if self.url is not None else {"command": self.command}
        named = {"prefix": self.prefix} if self.prefix else {}
        return {**where, **named, "per_rollout": self.per_rollout, "tools": [t.name for t in self.tools()]}

    def start_error(self, why: str, connection: _Connection | None = None) -> MCPStartError:
        stderr = connection.stderr_tail() if connection is not None else ""
        said = f"; its stderr ends: {stderr}" if stderr else ""
        fix = (
            "check the URL and that the server is running"
            if self.url
            else "check the command (run it by hand)"
        )
        return MCPStartError(f"MCP server {self.label!r} did not start: {why}{said}; {fix}")

    # -- the listing ---------------------------------------------------------------------------

    def tools(self) -> list[MCPTool]:
        """The server's tools, listed once (starting the server for the listing, then stopping it).

        On a thread and event loop of its own: an environment may be built anywhere, inside
        a running loop too (a notebook cell, `rubric check`, a worker).
        """
        if self._listing is None:
            with concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="mcp-listing") as pool:
                self._listing = pool.submit(asyncio.run, self._list()).result()
        return self._listing

    async def _list(self) -> list[MCPTool]:
        # One deadline for the whole start: opening the session and every page of the listing.
        deadline = asyncio.get_running_loop().time() + self.start_timeout
        connection = await _Connection(self).open()
        try:
            async with asyncio.timeout_at(deadline):
                listing = await _all_tools(connection.client)
        except TimeoutError:
            why = f"its tool listing did not finish within start_timeout={self.start_timeout:g}s"
            raise self.start_error(why, connection) from None
        except _ListingError as exc:
            raise MCPStartError(f"MCP server {self.label!r} {exc}; fix the server's tool listing") from None
        except Exception as exc:
            raise self.start_error(f"its tool listing failed: {_describe(exc)}", connection) from None
        finally:
            await connection.close()
        if not listing:
            raise MCPStartError(
                f"MCP server {self.label!r} lists no tools; an environment needs at least one"
            )
        return [MCPTool.from_listing(self, item) for item in listing]

    # -- connections ---------------------------------------------------------------------------

    async def connection(self, rollout: Rollout | None) -> _Connection:
        """The live connection for this rollout: its own (per_rollout) or the loop's shared one."""
        if self.per_rollout and rollout is not None:
            own = self._own.get(id(rollout))
            if own is None or not own.alive:
                own = self._own[id(rollout)] = await _Connection(self).open()
            return own
        loop = asyncio.get_running_loop()
        async with self._opening.setdefault(loop, asyncio.Lock()):
            shared = self._shared.get(loop)
            if shared is None or not shared.alive:  # first call, or the server died: a new one
                if shared is not None:
                    await shared.close()
                shared = self._shared[loop] = await _Connection(self).open()
        return shared

    async def release_rollout(self, rollout: Rollout) -> None:
        """Stop the rollout's own server (per_rollout)."""
        own = self._own.pop(id(rollout), None)
        if own is not None:
            await own.close()

    async def release(self) -> None:
        """Stop every server this object started on the running loop."""
        loop = asyncio.get_running_loop()
        self._opening.pop(loop, None)
        shared = self._shared.pop(loop, None)
        owned = [c for c in self._own.values() if c._task is not None and c._task.get_loop() is loop]
        self._own = {k: c for k, c in self._own.items() if c not in owned}
        for connection in [*([shared] if shared else []), *owned]:
            await connection.close()


class _ListingError(Exception):
    """A tool listing that breaks the bounds: too many pages or tools, or a cursor loop."""


async def _all_tools(client: Any) -> list[Any]:
    """Every page of the server's tool listing, within `MAX_LISTING_PAGES` and `MAX_TOOLS`."""
    tools: list[Any] = []
    seen: set[str] = set()
    cursor = None
    for _ in range(MAX_LISTING_PAGES):
        page = await client.list_tools(cursor=cursor) if cursor else await client.list_tools()
        tools.extend(page.tools)
        if len(tools) > MAX_TOOLS:
            raise _ListingError(f"lists more than {MAX_TOOLS} tools")
        cursor = getattr(page, "next_cursor", None)
        if not cursor:
            return tools
        if cursor in seen:
            raise _ListingError(f"repeats the tool listing cursor {cursor[:80]!r} (the listing never ends)")
        seen.add(cursor)
    raise _ListingError(f"lists tools on more than {MAX_LISTING_PAGES} pages")


class MCPTool:
    """One tool of an MCP server, called like an `envs.Tool` (`await tool.call(arguments)`)."""

    def __init__(
        self, server: MCPServer, name: str, description: str | None, parameters: dict[str, Any]
    ) -> None:
        self.remote_name = name  # what the server calls it
        name = f"{server.prefix}_{name}" if server.prefix else name
        check_tool_name(name, f"MCP server {server.label!r}")
        self.server = server
        self.name = name
        self.description = description
        self.parameters = parameters
        self.timeout = server.timeout
        function: dict[str, Any] = {"name": name, "parameters": parameters}
        if description:
            function["description"] = description
        self.schema: dict[str, Any] = {"type": "function", "function": function}
        self._validator: Any = None

    @classmethod
    def from_listing(cls, server: MCPServer, item: Any) -> MCPTool:
        schema = item.input_schema if isinstance(item.input_schema, dict) else {}
        parameters = {"type": "object", "properties": {}, **schema}
        return cls(server, item.name, item.description, parameters)

    def __repr__(self) -> str:
        return f"MCPTool(name={self.name!r}, server={self.server.label!r})"

    def validate(self, arguments: str | Mapping[str, Any] | None) -> dict[str, Any]:
        """The arguments as a dict, checked against the server's JSON Schema (ValueError if not)."""
        try:
            return self._validate(arguments)
        except BadArguments as exc:
            raise ValueError(f"tool {self.name!r}: {exc.detail}") from None

    def _validate(self, arguments: str | Mapping[str, Any] | None) -> dict[str, Any]:
        data = parse_arguments(arguments)
        problems = self._problems(data)
        if problems:
            raise BadArguments(
                "invalid arguments: " + "; ".join(line[2:] for line in problems),
                "invalid arguments:\n" + "\n".join(problems),
            )
        return data

    def _problems(self, data: dict[str, Any]) -> list[str]:
        if self._validator is None:
            import jsonschema  # type: ignore[import-untyped]  # comes with the mcp SDK

            validator_class = jsonschema.validators.validator_for(self.parameters)
            self._validator = validator_class(self.parameters)
        return [
            f"- {'.'.join(str(p) for p in error.absolute_path) or '(arguments)'}: {error.message[:300]}"
            for error in sorted(self._validator.iter_errors(data), key=lambda e: list(e.absolute_path))
        ]

    def _failure(self, reason: str, content: str) -> ToolResult:
        return ToolResult(content=f"Error: {content}", name=self.name, error=reason)

    async def call(
        self,
        arguments: str | Mapping[str, Any] | None = None,
        *,
        state: dict[str, Any] | None = None,
        rollout: Rollout | None = None,
    ) -> ToolResult:
        """Check the arguments, call the server, return its result; never raises for a failure."""
        try:
            data = self._validate(arguments)
        except BadArguments as exc:
            return exc.result(self.name, json.dumps(self.parameters, separators=(",", ":")))
        try:
            connection = await self.server.connection(rollout)
        except MCPStartError as exc:
            return self._failure(f"server did not start: {exc}", f"tool {self.name!r} is unavailable: {exc}")
        try:
            async with asyncio.timeout(self.timeout):
                result = await connection.client.call_tool(self.remote_name, data)
        except TimeoutError:
            return self._failure(
                f"timed out after {self.timeout:g} s",
                f"tool {self.name!r} did not finish within {self.timeout:g} seconds and was abandoned.",
            )
        except Exception as exc:  # the server crashed, closed the connection or sent junk
            if not isinstance(exc, pydantic.ValidationError):  # junk leaves the connection usable
                connection.failure = connection.failure or exc
            why = _describe(exc)[:500]
            return self._failure(
                f"MCP server failed: {why}", f"tool {self.name!r} failed: its MCP server failed ({why})"
            )
        return _tool_result(self.name, result, self.server.output_limit, self.server.block_limit)


def _tool_result(name: str, result: Any, limit: int, block_limit: int) -> ToolResult:
    """The model's text for an MCP CallToolResult (cut at `limit` bytes, saying so), with every
    content block kept as JSON (texts cut alike, binary blocks over `block_limit` summarised)."""
    blocks = [b.model_dump(mode="json", by_alias=True, exclude_none=True) for b in result.content or []]
    text = "\n".join(block_text(block) for block in blocks)
    if not blocks and result.structured_content is not None:
        text = json.dumps(result.structured_content, ensure_ascii=False)
    text = cap_output(text, limit)
    # Text-only results are their text; other blocks are kept beside the summary.
    parts = (
        [_capped(block, limit, block_limit) for block in blocks]
        if any(b.get("type") != "text" for b in blocks)
        else None
    )
    if result.is_error:
        return ToolResult(
            content=f"Error: {text}", name=name, error=f"MCP tool error: {text[:300]}", parts=parts
        )
    return ToolResult(content=text, name=name, parts=parts)


def _capped(block: dict[str, Any], limit: int, block_limit: int) -> dict[str, Any]:
    """A content block as kept on the rollout: its text cut at `limit` bytes, a binary payload over
    `block_limit` bytes replaced by a text block with its summary."""
    if isinstance(block.get("text"), str):
        return {**block, "text": cap_output(block["text"], limit)}
    resource = block.get("resource")
    if isinstance(resource, dict) and isinstance(resource.get("text"), str):
        return {**block, "resource": {**resource, "text": cap_output(resource["text"], limit)}}
    payload = block.get("data") or (resource.get("blob") if isinstance(resource, dict) else None)
    if isinstance(payload, str) and len(payload) * 3 // 4 > block_limit:
        return {"type": "text", "text": f"{block_text(block)} (not kept: over {block_limit:,} bytes)"}
    return block


def mcp_server(
    command: str | Sequence[str] | None = None,
    *,
    url: str | None = None,
    per_rollout: bool = False,
    env: Mapping[str, str] | None = None,
    cwd: str | None = None,
    timeout: float | None = DEFAULT_TIMEOUT,
    start_timeout: float = START_TIMEOUT,
    output_limit: int = OUTPUT_LIMIT,
    prefix: str | None = None,
) -> MCPServer:
    """The tools of an MCP server, for `Environment(tools=[...])` beside Python tools.

    Args:
        command: a stdio server's command line, as a list (`["npx", "-y", "@x/server"]`) or
            one string split like a shell would.
        url: a streamable-HTTP server's URL instead (e.g. "http://127.0.0.1:8000/mcp").
        per_rollout: start a fresh server for every rollout (stateful servers) instead of
            one for the whole run.
        env: extra environment variables for the server process.
        cwd: the server process's working directory.
        timeout: seconds a tool call may take (None: no limit), as for Python tools.
        start_timeout: seconds the server may take to start and list its tools.
        output_limit: bytes of a tool result the model is shown (as the python sandbox's
            output); the rest is cut, with a note saying how much.
        prefix: offer the server's tools as `PREFIX_NAME` (its `add` as `calc_add` with
            prefix="calc"), when their names clash with other tools'.
    """
    if (command is None) == (url is None):
        raise ConfigError(
            "mcp_server takes a command (a stdio server) or url= (a streamable-HTTP server), not both"
        )
    if isinstance(command, str):
        command = shlex.split(command)
    if command is not None:
        if not isinstance(command, Sequence) or not command or not all(isinstance(c, str) for c in command):
            raise ConfigTypeError(f"mcp_server command must be a non-empty list of strings, got {command!r}")
    if url is not None and (not isinstance(url, str) or not url.startswith(("http://", "https://"))):
        raise ConfigError(f"mcp_server url must be an http:// or https:// URL, got {url!r}")
    if timeout is not None and not (isinstance(timeout, (int, float)) and timeout > 0):
        raise ConfigError(f"mcp_server timeout must be a positive number of seconds or None, got {timeout!r}")
    if not (isinstance(start_timeout, (int, float)) and start_timeout > 0):
        raise ConfigError(
            f"mcp_server start_timeout must be a positive number of seconds, got {start_timeout!r}"
        )
    if isinstance(output_limit, bool) or not isinstance(output_limit, int) or output_limit < 1:
        raise ConfigError(f"mcp_server output_limit must be a positive number of bytes, got {output_limit!r}")
    if prefix is not None and (not isinstance(prefix, str) or not _PREFIX.fullmatch(prefix)):
        raise ConfigError(
            f"mcp_server prefix must be letters, digits, '_' or '-' (at most 32, a letter first), got {prefix!r}"
        )
    _sdk()
    return MCPServer(
        command=command,
        url=url,
        per_rollout=bool(per_rollout),
        env=env,
        cwd=cwd,
        timeout=None if timeout is None else float(timeout),
        start_timeout=float(start_timeout),
        output_limit=output_limit,
        prefix=prefix,
    )


def server_from_text(text: str) -> MCPServer:
    """`mcp_server` from one string (`rubric eval --mcp`): an http(s) URL, else a stdio command
    line; `PREFIX=` before either gives its tools that prefix (`calc=npx -y @x/calculator`)."""
    if not isinstance(text, str) or not text.strip():
        raise ConfigError(f"an MCP server is a command line or an http(s) URL, got {text!r}")
    prefix, named, rest = text.partition("=")
    if named and _PREFIX.fullmatch(prefix) and rest.strip():
        text = rest.strip()
    else:
        prefix = ""
    if text.startswith(("http://", "https://")):
        return mcp_server(url=text, prefix=prefix or None)
    return mcp_server(text, prefix=prefix or None)


__all__ = ["INSTALL_HINT", "MCPServer", "MCPStartError", "MCPTool", "mcp_server", "server_from_text"]
