"""The one retry policy for endpoint calls: what is worth retrying and how long to wait.

Kept separate from the client so the decisions (retry 408/429/5xx, timeouts and broken
connections; never other 4xx; honour Retry-After but cap it) are readable and testable on
their own. The `openai` SDK's own retries are switched off so there is exactly one policy.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Callable, Mapping
from typing import Any

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_random_exponential

RETRYABLE_STATUSES = frozenset({408, 429})


def status_of(exc: BaseException) -> int | None:
    """The HTTP status an openai exception carries, if any."""
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def is_retryable(exc: BaseException) -> bool:
    """Timeouts, connection failures, 408, 429 and 5xx are transient; anything else is not."""
    import openai

    if isinstance(exc, openai.APIConnectionError):  # includes APITimeoutError
        return True
    if isinstance(exc, openai.APIStatusError):
        return exc.status_code in RETRYABLE_STATUSES or exc.status_code >= 500
    return False


def parse_retry_after(headers: Mapping[str, str] | None, *, now: float | None = None) -> float | None:
    """Seconds to wait per `retry-after-ms` / `Retry-After` (seconds or HTTP date); None if absent/bad."""
    if not headers:
        return None
    millis = headers.get("retry-after-ms")
    if millis is not None:
        try:
            return max(0.0, float(millis) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError):
        return None
    if when is None:
        return None
    return max(0.0, when.timestamp() - (time.time() if now is None else now))


def _response_headers(exc: BaseException | None) -> Mapping[str, str] | None:
    response = getattr(exc, "response", None)
    return getattr(response, "headers", None)


def make_retrying(
    *,
    max_retries: int,
    backoff_base: float,
    backoff_max: float,
    retry_after_max: float,
    before_sleep: Callable[[RetryCallState], Any] | None = None,
) -> AsyncRetrying:
    """A tenacity controller: exponential backoff with full jitter, or the server's Retry-After.

    A positive Retry-After (capped at `retry_after_max`, so a hostile or buggy header cannot
    stall a run) replaces the computed backoff; it is a server's explicit instruction.
    """
    backoff = wait_random_exponential(multiplier=backoff_base, max=backoff_max)

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        retry_after = parse_retry_after(_response_headers(exc))
        if retry_after:
            return min(retry_after, retry_after_max)
        return float(backoff(state))

    return AsyncRetrying(
        stop=stop_after_attempt(max_retries + 1),
        wait=wait,
        retry=retry_if_exception(is_retryable),
        before_sleep=before_sleep,
        reraise=True,
    )


__all__ = ["RETRYABLE_STATUSES", "is_retryable", "make_retrying", "parse_retry_after", "status_of"]
