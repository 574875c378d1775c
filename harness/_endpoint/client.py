"""`Client`: chat completions from any OpenAI-compatible endpoint, bounded and retried.

The client builds each request body and reads each answer as plain JSON; a transport
(`harness._endpoint.transport`: lean aiohttp by default, or the `openai` SDK) moves the bytes, one per
event loop, with an HTTP pool exactly as large as the concurrency limit (so requests never
queue inside the pool where timeouts would fire spuriously), and one tenacity policy
(`harness._endpoint.retry`) retries. Failures become `EndpointError`, whose text says what the
endpoint answered and never holds the key.

Over 500 lines for one class read top to bottom: settings, the request path (build, send,
retry, count, name the failure) and reading the answer; the wire format itself is in
`harness._endpoint.wire`.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import os
from collections.abc import Mapping, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import ValidationError

from harness._core.aio import blocked_loop_serves
from harness._core.defaults import DEFAULT_BASE_URL, DEFAULT_CONCURRENCY, DEFAULT_TRANSPORT, TRANSPORTS
from harness._core.errors import ConfigError, ConfigTypeError, EndpointError
from harness._core.types import Message, Usage
from harness._endpoint.retry import MalformedResponseError, call_with_retries, is_retryable, status_of
from harness._endpoint.transport import (
    MAX_BODY_BYTES,
    AiohttpTransport,
    SDKTransport,
    Transport,
    TransportError,
    TransportTimeout,
)
from harness._endpoint.wire import (
    HARNESS_OWNED,
    HINTS,
    PLACEHOLDER_KEY,
    PLACEHOLDER_KEYS,
    REFUSED_STATUSES,
    REJECTED_STATUSES,
    REJECTED_STREAK,
    Choice,
    Completion,
    check_params,
    check_sampling,
    error_text,
    int_list,
    is_context_length_error,
    logprobs_of,
    message_from_json,
    text_or_none,
    token_count,
)

if TYPE_CHECKING:  # pragma: no cover
    from openai import AsyncOpenAI

logger = logging.getLogger(__name__)


class _Secret:
    """Holds the API key so that no repr, vars() dump or log line can show it."""

    __slots__ = ("value",)

    def __init__(self, value: str) -> None:
        self.value = value

    def __repr__(self) -> str:
        return "'***'"

    def scrub(self, text: str) -> str:
        """`text` with the key masked; a placeholder the harness supplied ("scripted",
        "EMPTY") is no secret, and masking it would hide the words it spells (a model name)."""
        if self.value in PLACEHOLDER_KEYS or len(self.value) < 3:
            return text
        return text.replace(self.value, "***")


def _check_share(index: int, count: int) -> None:
    if not 0 <= index < count:
        raise ValueError(f"concurrency share {index}/{count}: index must be in 0..{count - 1}")


def _sdk_client(
    base_url: str, api_key: str, headers: Mapping[str, str], max_connections: int, timeout: float
) -> Any:
    """An `openai.AsyncOpenAI` with its retries off and a pool sized to the concurrency.

    Works with both SDK generations (httpx for 1.x, httpx2 later) by taking `Limits` from
    the package that defines the SDK's own client class.
    """
    import openai  # deferred: heavy, and only transport="openai" needs it

    cls = openai.DefaultAsyncHttpxClient
    package = next(base.__module__.split(".")[0] for base in cls.__mro__ if base.__name__ == "AsyncClient")
    http = importlib.import_module(package)
    limits = http.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
    return openai.AsyncOpenAI(
        api_key=api_key,
        base_url=base_url,
        max_retries=0,
        timeout=timeout,
        default_headers=dict(headers) or None,
        http_client=cls(limits=limits, timeout=timeout),
    )


def _check_settings(
    model: str,
    *,
    max_concurrency: int,
    max_retries: int,
    seconds: Mapping[str, float],
    backoff_base: float,
    sampling: Mapping[str, Any] | None,
    headers: Mapping[str, str] | None,
) -> None:
    """Reject a bad Client setting at construction, naming it and what it must be."""
    if not isinstance(model, str) or not model.strip():
        raise ConfigError(f"Client model must be a non-empty model name, got {model!r}")
    if isinstance(max_concurrency, bool) or not isinstance(max_concurrency, int) or max_concurrency < 1:
        raise ConfigError(f"Client max_concurrency={max_concurrency!r} must be an integer >= 1")
    if isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0:
        raise ConfigError(f"Client max_retries={max_retries!r} must be an integer >= 0 (0 = no retries)")
    for name, value in seconds.items():
        if not isinstance(value, (int, float)) or value <= 0:
            raise ConfigError(f"Client {name}={value!r} must be a positive number of seconds")
    if not isinstance(backoff_base, (int, float)) or backoff_base < 0:
        raise ConfigError(f"Client backoff_base={backoff_base!r} must be >= 0 seconds")
    if sampling is not None and not isinstance(sampling, Mapping):
        raise TypeError(
            f"Client sampling must be a mapping like {{'temperature': 0.7}}, got {type(sampling).__name__}"
        )
    if headers is not None and (
        not isinstance(headers, Mapping)
        or not all(isinstance(k, str) and isinstance(v, str) for k, v in headers.items())
    ):
        raise TypeError("Client headers must be a mapping of header names to string values")


class Client:
    """An OpenAI-compatible chat endpoint with a concurrency limit, retries and token accounting.

    `sampling` holds default request arguments (temperature, max_tokens, ...); per-call
    arguments override them and a None value removes one; `model=` overrides the model for
    one call. Arguments the installed SDK does not know (e.g. vLLM's `top_k`) are sent in the
    request body unchanged. `return_token_ids=True` asks for token ids and logprobs the vLLM
    way (`logprobs=True`, `return_token_ids` in the body); a `Completion` then carries
    `prompt_token_ids` and each choice its `token_ids` and `logprobs`.

    `transport` moves the bytes (`harness._endpoint.transport`): "aiohttp" (the default, lean: plain
    JSON, no SDK objects), "openai" (the SDK's own HTTP stack), or your own
    `openai.AsyncOpenAI` (for example one configured for Azure; its base_url, key and headers
    are used, and it is yours to close). Requests, answers, retries and errors are the same
    with each.

    Counters: `usage` (tokens of every successful call), `requests` (HTTP requests sent,
    retries included), `retries`, `failures` (calls that ended in EndpointError), `successes`.
    `refused` is the first 401/403/404 when it came before any success, or the
    `REJECTED_STREAK`-th 400/422 before any success: the endpoint will not serve this key,
    model or request shape, and `evaluate` stops the run on it.
    Test knobs: `backoff_base`/`backoff_max` (seconds) shape the jittered exponential backoff;
    `retry_after_max` caps how long a server's Retry-After may make us wait. An answer over
    `max_response_bytes` (64 MiB) is refused unread, like a malformed one.

    The HTTP pool belongs to the event loop that opened it, and the client opens a new one
    on another loop. Close it before its loop ends (`async with client:` or `await
    client.aclose()`), e.g. at the end of each `asyncio.run`: a pool whose loop is gone can
    no longer close its sockets. Sync calls all share one loop, so they need no closing.

    Args:
        model: The model name sent with each request.
        base_url: The endpoint's base URL (default: OPENAI_BASE_URL, else OpenAI's).
        api_key: The endpoint's key (default: OPENAI_API_KEY).
        max_concurrency: Most requests in flight at once.
        max_retries: Retries of a failed request (429, 5xx, timeouts, dropped connections).
        timeout: Seconds a request may take in all.
        sampling: Default request arguments (see above).
        headers: Extra HTTP headers sent with each request.
        backoff_base: First retry's backoff, in seconds (test knob).
        backoff_max: Longest backoff between retries, in seconds (test knob).
        retry_after_max: Longest wait a server's Retry-After may ask for, in seconds.
        return_token_ids: Ask for token ids and logprobs the vLLM way (see above).
        transport: "aiohttp" (default), "openai", or your own `openai.AsyncOpenAI`.
    """

    #: The largest answer body read (a runaway or hostile server's bigger one is refused, not
    #: read into memory); set it on a client before its first request to change it.
    max_response_bytes: int = MAX_BODY_BYTES
    # This process's share of every Client's max_concurrency: (worker index, number of workers).
    # A run with worker processes sets it in each worker, so a limit stays one limit for the run.
    _share: ClassVar[tuple[int, int]] = (0, 1)
    # Clients whose pool is open (`open_clients`), held until closed: a pool dropped unclosed
    # would leak its sockets anyway, and this way whoever ends the event loop can still close it.
    _open: ClassVar[set[Client]] = set()

    @classmethod
    def open_clients(cls) -> list[Client]:
        """Every Client of this process whose HTTP pool is open now (a test harness or a
        notebook closes them with `client.close()` before their event loop ends)."""
        return list(Client._open)

    @classmethod
    def set_concurrency_share(cls, index: int, count: int) -> None:
        """Make every Client of this process use worker `index`'s share of `count` of its limit.

        Called by the worker executor in each worker process before the environment is
        loaded, so the policy client and every judge's client split their run-wide limit
        across the workers instead of multiplying it.

        Args:
            index: This worker's index, in 0..count-1.
            count: How many workers share each limit.
        """
        _check_share(index, count)
        Client._share = (index, count)

    @classmethod
    def concurrency_share(cls, limit: int) -> int:
        """This process's part of a run-wide `limit` (the parts of all workers add up to it).

        Args:
            limit: A run-wide concurrency limit.
        """
        index, count = Client._share
        return max(1, limit // count + (1 if index < limit % count else 0))

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        max_concurrency: int = DEFAULT_CONCURRENCY,
        max_retries: int = 5,
        timeout: float = 120.0,
        sampling: Mapping[str, Any] | None = None,
        headers: Mapping[str, str] | None = None,
        backoff_base: float = 0.5,
        backoff_max: float = 30.0,
        retry_after_max: float = 60.0,
        return_token_ids: bool = False,
        transport: str | AsyncOpenAI | None = None,
    ) -> None:
        transport = DEFAULT_TRANSPORT if transport is None else transport
        _check_transport(transport)
        _check_settings(
            model,
            max_concurrency=max_concurrency,
            max_retries=max_retries,
            seconds={"timeout": timeout, "backoff_max": backoff_max, "retry_after_max": retry_after_max},
            backoff_base=backoff_base,
            sampling=sampling,
            headers=headers,
        )
        check_params(dict(sampling or {}), "sampling")

        self.model = model
        self.base_url = (base_url or os.environ.get("OPENAI_BASE_URL") or DEFAULT_BASE_URL).rstrip("/")
        key = api_key or os.environ.get("OPENAI_API_KEY")
        self._has_key = bool(key)
        self._key = _Secret(key or PLACEHOLDER_KEY)
        self.max_concurrency = max_concurrency
        self.max_retries = max_retries
        self.timeout = float(timeout)
        self.sampling: dict[str, Any] = dict(sampling or {})
        self.headers: dict[str, str] = dict(headers or {})
        self.backoff_base = float(backoff_base)
        self.backoff_max = float(backoff_max)
        self.retry_after_max = float(retry_after_max)
        self.return_token_ids = bool(return_token_ids)
        # "aiohttp" (lean, the default), "openai" (the SDK), or the user's own openai.AsyncOpenAI.
        self.transport: str | AsyncOpenAI = transport

        self.usage = Usage()
        self.requests = 0
        self.retries = 0
        self.failures = 0
        self.successes = 0
        # The endpoint refused us before anything succeeded (bad key, no access, unknown
        # model): every further request would fail the same way, so a run stops early.
        self.refused: EndpointError | None = None
        self._rejections = 0  # 400/422 answers before any success

        self._transport: Transport | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._semaphore: asyncio.Semaphore | None = None

    def check_credentials(self) -> None:
        """Raise ConfigError when the endpoint is OpenAI's and no key was given: called by
        `evaluate` before its first rollout and before this client's first request, so the
        mistake is one clear error instead of 401s and retries."""
        if not self._has_key and self.base_url == DEFAULT_BASE_URL:
            raise ConfigError(
                f"no API key for {DEFAULT_BASE_URL} (model {self.model!r}): set OPENAI_API_KEY or pass "
                f"api_key=...; for a local OpenAI-compatible server pass base_url= (or set "
                f"OPENAI_BASE_URL); offline, env.evaluate('scripted:POLICY') serves an environment's own policy"
            )

    def __repr__(self) -> str:
        return (
            f"Client(model={self.model!r}, base_url={self.base_url!r}, "
            f"max_concurrency={self.max_concurrency}, max_retries={self.max_retries}, timeout={self.timeout:g})"
        )

    def __getstate__(self) -> dict[str, Any]:
        # The transport and semaphore belong to one event loop; a copy (e.g. a pickled TRL
        # reward holding a judge) reconnects on first use. A user's own SDK client stays here.
        state = dict(self.__dict__)
        state.update(_transport=None, _loop=None, _semaphore=None)
        if not isinstance(self.transport, str):
            state["transport"] = "openai"
        return state

    def config(self) -> dict[str, Any]:
        """A JSON-serialisable description for results metadata; never the key or header values."""
        return {
            "model": self.model,
            "base_url": self.base_url,
            "sampling": dict(self.sampling),
            "max_retries": self.max_retries,
            "timeout": self.timeout,
            "max_concurrency": self.max_concurrency,
            "headers": sorted(self.headers),
            "transport": self.transport if isinstance(self.transport, str) else "openai",
            "return_token_ids": self.return_token_ids,
        }

    def replica_kwargs(self) -> dict[str, Any]:
        """Keyword arguments that build an equal Client in another process (worker processes).

        Holds the API key: pass it to a process, never write it anywhere. A user's own
        `openai.AsyncOpenAI` cannot cross processes: the replica builds an SDK client alike.
        """
        return {
            "transport": self.transport if isinstance(self.transport, str) else "openai",
            "model": self.model,
            "base_url": self.base_url,
            "api_key": self._key.value,
            "max_concurrency": self.max_concurrency,
            "max_retries": self.max_retries,
            "timeout": self.timeout,
            "sampling": dict(self.sampling),
            "headers": dict(self.headers),
            "backoff_base": self.backoff_base,
            "backoff_max": self.backoff_max,
            "retry_after_max": self.retry_after_max,
            "return_token_ids": self.return_token_ids,
        }

    # -- connection ---------------------------------------------------------------------

    def _connection(self) -> tuple[Transport, asyncio.Semaphore]:
        """The transport and semaphore for the running loop (pools cannot cross loops)."""
        loop = asyncio.get_running_loop()
        if self._transport is None or self._loop is not loop:
            self.check_credentials()
            old, old_loop = self._transport, self._loop
            if (
                old is not None
                and old_loop is not None
                and old_loop.is_running()
                and not old_loop.is_closed()
            ):
                asyncio.run_coroutine_threadsafe(old.aclose(), old_loop)  # its pool belongs to that loop
            self._transport = self._open_transport()
            Client._open.add(self)
            self._semaphore = asyncio.Semaphore(Client.concurrency_share(self.max_concurrency))
            self._loop = loop
        assert self._semaphore is not None
        return self._transport, self._semaphore

    def _open_transport(self) -> Transport:
        connections = Client.concurrency_share(self.max_concurrency)
        limit = self.max_response_bytes
        if self.transport == "aiohttp":
            return AiohttpTransport(
                self.base_url,
                self._key.value,
                self.headers,
                max_connections=connections,
                timeout=self.timeout,
                max_body_bytes=limit,
            )
        if self.transport == "openai":
            sdk = _sdk_client(self.base_url, self._key.value, self.headers, connections, self.timeout)
            return SDKTransport(sdk, owned=True, max_body_bytes=limit)
        return SDKTransport(self.transport, owned=False, max_body_bytes=limit)

    async def aclose(self) -> None:
        """Close the HTTP pool; the client reconnects if used again."""
        transport, self._transport, self._loop = self._transport, None, None
        Client._open.discard(self)
        if transport is not None:
            await transport.aclose()

    def close(self) -> None:
        """`aclose`, from synchronous code: on the event loop that owns the pool (a pool
        belongs to one loop), whether that loop runs in another thread (`run_sync`'s) or is
        open and idle (a test's, a notebook's); nothing to do when the loop is gone."""
        loop = self._loop
        if loop is None or loop.is_closed():
            self._transport, self._loop = None, None
            Client._open.discard(self)
        elif loop.is_running():
            asyncio.run_coroutine_threadsafe(self.aclose(), loop).result(10)
        else:
            loop.run_until_complete(self.aclose())

    async def __aenter__(self) -> Client:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- the call -----------------------------------------------------------------------

    async def complete(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        *,
        tools: list[dict[str, Any]] | None = None,
        **params: Any,
    ) -> Completion:
        """One chat completion (retried per the policy); raises EndpointError when it cannot.

        `params` are sampling arguments for this call, merged over the client's `sampling`;
        any the installed SDK does not name (e.g. vLLM's `top_k`) go in the request body.
        """
        body = self._request(messages, tools, params)
        self._refuse_blocked_loop()
        transport, semaphore = self._connection()
        attempts = 0

        async def send() -> Any:
            nonlocal attempts
            async with semaphore:
                attempts += 1
                self.requests += 1
                try:
                    # A deadline for the whole request: httpx's timeout is per read, so a
                    # server dribbling a byte at a time would otherwise hold it forever.
                    async with asyncio.timeout(self.timeout):
                        return await transport.chat(body)
                except TimeoutError:
                    raise TransportTimeout(f"no answer within {self.timeout:g}s") from None
                except ValueError as exc:  # bad JSON, bad UTF-8, an oversized body
                    raise MalformedResponseError(exc) from None

        try:
            raw = await call_with_retries(
                send,
                max_retries=self.max_retries,
                backoff_base=self.backoff_base,
                backoff_max=self.backoff_max,
                retry_after_max=self.retry_after_max,
                on_retry=self._on_retry,
            )
        except Exception as exc:
            if not isinstance(exc, (TransportError, MalformedResponseError)):
                raise
            raise self._failed(exc, attempts) from None
        return self._completion(raw)

    def _request(
        self,
        messages: Sequence[Message | Mapping[str, Any]],
        tools: list[dict[str, Any]] | None,
        params: Mapping[str, Any],
    ) -> dict[str, Any]:
        """The JSON body of one call: model, messages as dicts, sampling, tools."""
        if isinstance(messages, (str, bytes, Mapping, Message)) or not isinstance(messages, Sequence):
            raise ConfigTypeError(
                "Client.complete(messages=...) takes a list of messages "
                "(harness.Message or {'role': ..., 'content': ...} dicts), "
                f"got {type(messages).__name__}"
            )
        payload = [m.to_openai() if isinstance(m, Message) else dict(m) for m in messages]
        merged = {k: v for k, v in {**self.sampling, **params}.items() if v is not None}
        check_params(merged, "complete()")
        if self.return_token_ids:  # asked the vLLM way: logprobs=True, return_token_ids in the body
            merged.setdefault("logprobs", True)
            merged.setdefault("return_token_ids", True)
        body = {"model": merged.pop("model", self.model), "messages": payload}
        body.update(merged.pop("extra_body", None) or {})  # the SDK's spelling of "in the body"
        body.update(merged)
        if tools:
            body["tools"] = tools
        return body

    def _refuse_blocked_loop(self) -> None:
        """Fail at once when a sync call blocks the very loop that serves this endpoint."""
        if blocked_loop_serves(self.base_url):
            raise EndpointError(
                f"the endpoint at {self.base_url} is served by the event loop that this synchronous "
                f"call is blocking (in Jupyter: a server started in the notebook), so it can never "
                f"answer; use the async form there (await rubric.ascore(x) / await env.aevaluate(...)) "
                f"or run the server in its own thread or process"
            )

    def _failed(self, exc: Exception, attempts: int) -> EndpointError:
        """Count a call that failed for good; the first refusals are kept for the early stop."""
        self.failures += 1
        error = self._endpoint_error(exc, attempts)
        if self.successes or self.refused is not None:
            return error
        if error.status in REJECTED_STATUSES and not is_context_length_error(error):
            self._rejections += 1
        if error.status in REFUSED_STATUSES or self._rejections >= REJECTED_STREAK:
            self.refused = error
        return error

    def _on_retry(self, exc: BaseException, failed_attempt: int, wait: float) -> None:
        self.retries += 1
        logger.info(
            "retrying %s in %.2fs (attempt %d failed: %s)",
            self.model,
            wait,
            failed_attempt,
            self._key.scrub(error_text(exc)),
        )

    def _completion(self, raw: Any) -> Completion:
        """The endpoint's JSON answer as a Completion; an answer with no choices is named."""
        raw_choices = raw.get("choices") if isinstance(raw, dict) else None
        if not raw_choices or not isinstance(raw_choices, list):
            self.failures += 1
            raise EndpointError(
                self._key.scrub(
                    f"{self.model} at {self.base_url} answered without any choices: {str(raw)[:300]}"
                ),
                status=200,
            )
        counts = raw.get("usage")
        counts = counts if isinstance(counts, dict) else {}
        usage = Usage(
            prompt_tokens=token_count(counts.get("prompt_tokens")),
            completion_tokens=token_count(counts.get("completion_tokens")),
        )
        choices = [self._choice(index, c) for index, c in enumerate(raw_choices)]
        self.usage = self.usage + usage
        self.successes += 1
        return Completion(
            choices=choices,
            usage=usage,
            model=text_or_none(raw.get("model")),
            id=text_or_none(raw.get("id")),
            prompt_token_ids=int_list(raw.get("prompt_token_ids")),
            system_fingerprint=text_or_none(raw.get("system_fingerprint")),
        )

    def _choice(self, index: int, choice: Any) -> Choice:
        """One choice of a 200 answer; a null or mistyped field is an error naming it."""
        where = f"choices[{index}].message"
        try:
            if not isinstance(choice, dict):
                where = f"choices[{index}]"
                raise TypeError(f"is not an object (got {type(choice).__name__})")
            message = choice.get("message")
            if message is None:
                raise ValueError("is null")
            finish = choice.get("finish_reason")
            return Choice(
                message=message_from_json(message),
                finish_reason=finish if isinstance(finish, str) else None,
                token_ids=int_list(choice.get("token_ids")),
                logprobs=logprobs_of(choice.get("logprobs")),
            )
        except ValidationError as exc:
            first = exc.errors()[0]
            field = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in first["loc"])
            problem = f"{where}{field}: {first['msg']} (got {str(first.get('input'))[:60]!r})"
        except (TypeError, ValueError, AttributeError) as exc:
            problem = f"{where} {exc}"
        self.failures += 1
        text = f"{self.model} at {self.base_url} answered HTTP 200 with a malformed message: {problem}"
        raise EndpointError(self._key.scrub(text), status=200)

    def _endpoint_error(self, exc: BaseException, attempts: int) -> EndpointError:
        status = status_of(exc)
        after = f" after {attempts} attempt{'s' if attempts != 1 else ''}" if is_retryable(exc) else ""
        text = f"{self.model} at {self.base_url}: {error_text(exc, self.timeout)}{after}"
        if status in HINTS:
            text += f" ({HINTS[status]})"
        return EndpointError(self._key.scrub(text), status=status, attempts=attempts)


def _check_transport(transport: object) -> None:
    """Accept "aiohttp", "openai" or an `openai.AsyncOpenAI`-like client, naming the choices."""
    if isinstance(transport, str):
        if transport not in TRANSPORTS:
            raise ConfigError(
                f"Client transport={transport!r} is not one of {', '.join(map(repr, TRANSPORTS))}; "
                f"or pass your own openai.AsyncOpenAI(...)"
            )
        return
    completions = getattr(getattr(transport, "chat", None), "completions", None)
    if not callable(getattr(completions, "create", None)):
        raise ConfigTypeError(
            f"Client transport must be 'aiohttp', 'openai' or an openai.AsyncOpenAI client, "
            f"got {type(transport).__name__}"
        )


__all__ = [
    "DEFAULT_CONCURRENCY",
    "HARNESS_OWNED",
    "Choice",
    "Client",
    "Completion",
    "EndpointError",
    "check_sampling",
    "is_context_length_error",
]
