"""The one retry policy for endpoint calls: what is worth retrying and how long to wait.

Kept separate from the client so the decisions (retry 408/429/5xx, timeouts and broken
connections; never other 4xx; honour Retry-After but cap it) are readable and testable on
their own. The errors are the transports' own (`harness._endpoint.transport`), whichever transport ran;
the `openai` SDK's retries are switched off so there is exactly one policy.
"""

from __future__ import annotations

import asyncio
import email.utils
import random
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception,
    stop_after_attempt,
)

from harness._endpoint.transport import HTTPStatusError, TransportConnectionError, TransportTimeout

T = TypeVar("T")

RETRYABLE_STATUSES = frozenset({408, 429})


def status_of(exc: BaseException) -> int | None:
    """The HTTP status an error answer carries, if any."""
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


class MalformedResponseError(Exception):
    """A 200 whose body is not valid JSON or not UTF-8 (cut off, a proxy's page): transient."""

    def __init__(self, cause: Exception) -> None:
        what = "not valid UTF-8" if isinstance(cause, UnicodeDecodeError) else "not valid JSON (cut off?)"
        super().__init__(f"HTTP 200 with a body that is {what}: {cause}")


def is_retryable(exc: BaseException) -> bool:
    """Timeouts, connection failures, 408, 429, 5xx and malformed 200 bodies are transient;
    anything else is not."""
    if isinstance(exc, (MalformedResponseError, TransportConnectionError, TransportTimeout)):
        return True
    if isinstance(exc, HTTPStatusError):
        return exc.status_code in RETRYABLE_STATUSES or exc.status_code >= 500
    return False


def _number(text: str | None) -> float | None:
    try:
        return float(text) if text is not None else None
    except ValueError:
        return None


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds to wait per `retry-after-ms` / `Retry-After` (seconds or HTTP date); None if absent/bad."""
    if not headers:
        return None
    millis = _number(headers.get("retry-after-ms"))
    if millis is not None:
        return max(0.0, millis / 1000.0)
    value = headers.get("retry-after")
    if value is None:
        return None
    seconds = _number(value)
    if seconds is not None:
        return max(0.0, seconds)
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _response_headers(exc: BaseException | None) -> Mapping[str, str] | None:
    return exc.headers if isinstance(exc, HTTPStatusError) else None


def backoff_delay(
    exc: BaseException | None,
    attempt: int,
    *,
    backoff_base: float,
    backoff_max: float,
    retry_after_max: float,
) -> float:
    """Seconds to wait after failed attempt number `attempt` (1-based).

    A positive Retry-After (capped at `retry_after_max`, so a hostile or buggy header cannot
    stall a run) is the server's explicit instruction and wins; otherwise exponential backoff
    with full jitter.
    """
    retry_after = parse_retry_after(_response_headers(exc))
    if retry_after:
        return min(retry_after, retry_after_max)
    return random.uniform(0.0, min(backoff_max, backoff_base * 2.0**attempt))


async def call_with_retries(
    send: Callable[[], Awaitable[T]],
    *,
    max_retries: int,
    backoff_base: float,
    backoff_max: float,
    retry_after_max: float,
    on_retry: Callable[[BaseException, int, float], Any] | None = None,
) -> T:
    """Await `send()`, retrying transient failures at most `max_retries` times.

    The first attempt runs bare: almost every call succeeds first time, and building
    tenacity's controller per call costs a measurable share of a fast endpoint's round trip.
    Only after a retryable failure does tenacity take over the remaining attempts.
    """
    delays = {"backoff_base": backoff_base, "backoff_max": backoff_max, "retry_after_max": retry_after_max}
    try:
        return await send()
    except Exception as exc:
        if max_retries < 1 or not is_retryable(exc):
            raise
        delay = backoff_delay(exc, 1, **delays)
        if on_retry is not None:
            on_retry(exc, 1, delay)
        await asyncio.sleep(delay)

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        return backoff_delay(exc, state.attempt_number + 1, **delays)

    def before_sleep(state: RetryCallState) -> None:
        if on_retry is not None and state.outcome is not None and state.next_action is not None:
            exc = state.outcome.exception()
            if exc is not None:  # tenacity only sleeps after a failed attempt
                on_retry(exc, state.attempt_number + 1, state.next_action.sleep)

    retrying = AsyncRetrying(
        stop=stop_after_attempt(max_retries),
        wait=wait,
        retry=retry_if_exception(is_retryable),
        before_sleep=before_sleep,
        reraise=True,
    )
    async for attempt in retrying:
        with attempt:
            result = await send()
    return result


__all__ = [
    "RETRYABLE_STATUSES",
    "MalformedResponseError",
    "backoff_delay",
    "call_with_retries",
    "is_retryable",
    "parse_retry_after",
    "status_of",
]
