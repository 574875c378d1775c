"""Asking a judge endpoint, once per distinct question.

Judging is the expensive part of many rubrics, and the same rollout is often judged again
(re-scoring saved results, two rubric trees sharing a judge, resumed runs). So identical
judge requests are answered once: a `JudgeCache` keyed by (base_url, model, full request
payload) holds the reply texts, and concurrent identical requests share one in-flight call.
Failures are never cached. Every judge uses `JudgeCache.shared` (one object, so judges of
different trees share answers) unless it is given its own (`LLMJudge(..., cache=JudgeCache())`).

`ask` also degrades gracefully on endpoints that reject `n=` or `response_format=`: it
retries without them and the cache remembers that for the endpoint.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, TypedDict

from harness._core.errors import EndpointError
from harness._core.types import Usage

if TYPE_CHECKING:  # pragma: no cover
    from harness._endpoint.client import Client
    from harness._endpoint.wire import Completion

Replies = tuple[str, ...]


@dataclass(frozen=True)
class Answer:
    """What one judge question got back: every sample's text and the tokens it cost."""

    replies: Replies
    usage: Usage
    cached: bool = False


class CacheInfo(TypedDict):
    """A `JudgeCache`'s counters.

    Attributes:
        hits: Questions answered from the cache.
        shared: Questions that joined an identical call already in flight.
        misses: Requests actually made.
        size: Answers held.
    """

    hits: int
    shared: int
    misses: int
    size: int


class JudgeCache:
    """Judge answers by question: a bounded LRU plus the calls in flight, safe across threads
    and event loops.

    Every judge uses `JudgeCache.shared` unless given its own (`LLMJudge(..., cache=JudgeCache())`);
    `JudgeCache.shared.info()` reads its counters and `JudgeCache.shared.clear()` empties it.
    Copying a judge (or its tree) keeps its cache: a cache is shared, like a client; a pickled
    judge finds `JudgeCache.shared` of the process that loads it, or an empty cache of its own.

    Args:
        maxsize: The most answers kept; the least recently used go first.
    """

    #: The cache every judge of this process uses unless it was given its own.
    shared: ClassVar[JudgeCache]

    def __init__(self, maxsize: int = 100_000) -> None:
        self.maxsize = maxsize
        self._hits = 0
        self._misses = 0
        self._shared = 0  # callers that joined an identical call already in flight
        self._store: OrderedDict[str, Answer] = OrderedDict()
        self._inflight: dict[str, tuple[asyncio.AbstractEventLoop, asyncio.Future[Answer]]] = {}
        # (base_url, model) -> request features the endpoint rejected ("n", "response_format").
        self._rejected: dict[tuple[str | None, str], set[str]] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        which = "JudgeCache.shared" if self is JudgeCache.shared else "JudgeCache"
        return f"<{which} maxsize={self.maxsize} {self.info()}>"

    def __copy__(self) -> JudgeCache:
        return self

    def __deepcopy__(self, memo: dict[int, object]) -> JudgeCache:
        return self

    def __reduce__(self) -> tuple[Callable[..., JudgeCache], tuple[int, ...]]:
        # Answers and locks stay in this process; the shared cache is the loader's shared one.
        if self is JudgeCache.shared:
            return _shared_cache, ()
        return JudgeCache, (self.maxsize,)

    def rejected(self, client: Client) -> set[str]:
        """The request features `client`'s endpoint rejected (`ask` adds to it)."""
        with self._lock:
            return self._rejected.setdefault((client.base_url, client.model), set())

    @staticmethod
    def key(base_url: str | None, model: str, payload: Mapping[str, Any]) -> str:
        text = json.dumps([base_url, model, payload], sort_keys=True, default=str, ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()

    async def get(self, key: str, fetch: Callable[[], Awaitable[Answer]]) -> Answer:
        """The cached answer for `key`, else the in-flight one, else `fetch()`'s (then cached)."""
        loop = asyncio.get_running_loop()
        with self._lock:
            answer = self._store.get(key)
            if answer is not None:
                self._store.move_to_end(key)
                self._hits += 1
                return Answer(answer.replies, Usage(), cached=True)
            inflight = self._inflight.get(key)
            joined = inflight is not None and inflight[0] is loop
            future: asyncio.Future[Answer]
            if inflight is not None and joined:
                self._shared += 1
                future = inflight[1]
            else:
                self._misses += 1
                future = loop.create_task(self._fetch(key, fetch))
                self._inflight[key] = (loop, future)
        fetched = await asyncio.shield(future)
        return Answer(fetched.replies, Usage(), cached=True) if joined else fetched

    async def _fetch(self, key: str, fetch: Callable[[], Awaitable[Answer]]) -> Answer:
        try:
            answer = await fetch()
        finally:
            with self._lock:
                current = self._inflight.get(key)
                if current is not None and current[1] is asyncio.current_task():
                    del self._inflight[key]
        with self._lock:
            self._store[key] = answer
            while len(self._store) > self.maxsize:
                self._store.popitem(last=False)
        return answer

    def info(self) -> CacheInfo:
        """The counters: hits (answered from the cache), shared (joined an identical call in
        flight), misses (requests actually made), size (answers held)."""
        with self._lock:
            return {
                "hits": self._hits,
                "shared": self._shared,
                "misses": self._misses,
                "size": len(self._store),
            }

    def clear(self) -> None:
        """Forget every answer, zero the counters and forget which endpoints rejected `n=` /
        `response_format=` (they are probed again); calls in flight still finish."""
        with self._lock:
            self._store.clear()
            self._rejected.clear()
            self._hits = self._misses = self._shared = 0


JudgeCache.shared = JudgeCache()


def _shared_cache() -> JudgeCache:
    """`JudgeCache.shared` of this process (what a pickled shared cache loads as)."""
    return JudgeCache.shared


def _rejects(error: Exception, feature: str) -> bool:
    """Whether an endpoint error is a 400 complaining about `feature`."""
    status = getattr(error, "status", None)
    if status not in (400, 422):
        return False
    text = str(error).lower()
    if feature == "response_format":
        return "response_format" in text or "json_object" in text or "json" in text
    return True  # a 400 to an n>1 request: retry as single requests


async def _complete(
    client: Client, messages: Sequence[Mapping[str, Any]], params: dict[str, Any], unsupported: set[str]
) -> Completion:
    if "response_format" in unsupported:
        params.pop("response_format", None)
    try:
        return await client.complete(list(messages), **params)
    except EndpointError as error:
        if "response_format" in params and _rejects(error, "response_format"):
            unsupported.add("response_format")
            params.pop("response_format")
            return await client.complete(list(messages), **params)
        raise


async def ask(
    client: Client,
    messages: Sequence[Mapping[str, Any]],
    params: Mapping[str, Any],
    samples: int,
    cache: JudgeCache,
) -> Answer:
    """`samples` replies to one judge question: one request with `n=` where the endpoint
    honours it, topped up (or replaced) by concurrent single requests. `cache` remembers
    which of those features the endpoint rejected (the answer itself is cached by the caller)."""
    params = dict(params)
    replies: list[str] = []
    usage = Usage()
    unsupported = cache.rejected(client)
    if samples > 1 and "n" not in unsupported:
        try:
            completion = await _complete(client, messages, {**params, "n": samples}, unsupported)
        except EndpointError as error:
            if not _rejects(error, "n"):
                raise
            unsupported.add("n")
        else:
            replies.extend(choice.message.text for choice in completion.choices)
            usage = usage + completion.usage
            if len(completion.choices) < samples:
                unsupported.add("n")  # the endpoint ignored n; do not ask for it again
    missing = samples - len(replies)
    if missing == 1:  # the common case: no extra task per judgement
        completions = [await _complete(client, messages, dict(params), unsupported)]
    else:
        completions = await asyncio.gather(
            *(_complete(client, messages, dict(params), unsupported) for _ in range(missing))
        )
    for completion in completions:
        replies.append(completion.message.text)
        usage = usage + completion.usage
    return Answer(tuple(replies[:samples]), usage)


__all__ = ["Answer", "CacheInfo", "JudgeCache", "ask"]
