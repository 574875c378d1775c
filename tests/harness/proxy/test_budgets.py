"""The capture proxy's budgets and caps: what each call costs a session, calls sent at once
against `max_turns`, request bodies over the cap, the clock over a slow upload, and what a
refused call keeps."""

from __future__ import annotations

import asyncio
import gc
import io
import json
import subprocess
import sys
import tracemalloc
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from harness import CaptureProxy, ProxyBudgets, Rollout
from harness.scripted._app import ScriptedHTTPError
from tests.harness.proxy.conftest import ProxyFactory

pytestmark = pytest.mark.timeout(120)
Start = ProxyFactory
HI = [{"role": "user", "content": "hi"}]
#: vLLM's words for a prompt longer than the model's context.
TOO_LONG = (
    "This model's maximum context length is 8192 tokens. However, you requested 1000003 tokens "
    "(1000000 in the messages, 3 in the completion). Please reduce the length of the messages or completion."
)
MiB = 1 << 20


def context_of_8k(messages: list[dict[str, Any]], tools: Any) -> str:
    """The engine: a 400 for a prompt past its context (as vLLM answers), else a short reply."""
    if sum(len(str(m.get("content") or "")) for m in messages) > 100_000:
        raise ScriptedHTTPError(400, TOO_LONG)
    return "it fits"


def chat_body(text: str, **extra: Any) -> dict[str, Any]:
    return {"model": "served-model", "messages": [{"role": "user", "content": text}], **extra}


BODIES = {
    "/v1/chat/completions": chat_body,
    "/v1/responses": lambda text: {"model": "served-model", "input": text},
    "/v1/messages": lambda text: {
        "model": "served-model",
        "max_tokens": 10,
        "messages": [{"role": "user", "content": text}],
    },
}


async def _post(
    proxy: CaptureProxy, path: str, key: str, body: bytes | dict[str, Any], *, chunked: bool = False
) -> tuple[int, dict[str, Any]]:
    """POST over real HTTP; the status and the JSON answer."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    payload: io.BytesIO | AsyncIterator[bytes] = io.BytesIO(data)  # sized: a Content-Length
    if chunked:  # no Content-Length: the body arrives in pieces

        async def pieces() -> AsyncIterator[bytes]:
            for start in range(0, len(data), 256 * 1024):
                yield data[start : start + 256 * 1024]

        payload = pieces()
    headers = {"Authorization": f"Bearer {key}", "x-api-key": key, "Content-Type": "application/json"}
    async with aiohttp.ClientSession() as http:
        async with http.post(f"{proxy.base_url}{path}", data=payload, headers=headers) as response:
            return response.status, await response.json()


def _message(answer: dict[str, Any]) -> str:
    error = answer["error"]
    return str(error["message"])


async def test_calls_the_engine_rejects_count_and_are_kept_as_a_summary(start_proxy: Start) -> None:
    """45.5: 30 MB calls the engine rejected were kept whole and spent no budget."""
    proxy = await start_proxy(context_of_8k, client={"max_retries": 0}, budgets=ProxyBudgets(max_turns=3))
    session = proxy.open_session()
    big = json.dumps(chat_body("x" * (4 * MiB))).encode()
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        answers = [await _post(proxy, "/v1/chat/completions", session.key, big) for _ in range(6)]
        gc.collect()
        kept = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    # Six 4 MiB calls: what the proxy still holds for them is their summaries, not their bodies.
    assert kept < MiB, f"the proxy kept {kept:,} bytes for six refused calls"
    assert [status for status, _ in answers] == [400] * 6, answers
    assert all("the model endpoint rejected the request" in _message(a) for _, a in answers[:3])
    assert all("max_turns: its budget of 3 model calls is spent" in _message(a) for _, a in answers[3:])
    assert start_proxy.endpoint_of(proxy).stats.requests == 3  # the rest never reached the engine
    assert session.stop_reason == "max_turns" and session.num_answered == 0
    for turn in session.turns:
        assert turn.messages == [] and turn.request_bytes == len(big)
        assert len(turn.model_dump_json()) < 4096
    for turn in session.turns[:3]:  # read, then refused: the start of what was sent
        assert turn.request_head is not None and turn.request_head.startswith('{"model": "served-model"')
        assert len(turn.request_head.encode()) <= 1024 and "maximum context length" in (turn.error or "")
    assert all(t.request_head is None for t in session.turns[3:])  # refused unread
    rollout = Rollout()
    session.record_into(rollout)
    assert rollout.stop_reason == "max_turns" and rollout.turns == 0 and rollout.completion == []


async def test_calls_the_proxy_refuses_count_too(start_proxy: Start) -> None:
    proxy = await start_proxy(budgets=ProxyBudgets(max_turns=2))
    session = proxy.open_session()
    malformed = await _post(proxy, "/v1/chat/completions", session.key, b'{"messages": [')
    answered = await _post(proxy, "/v1/chat/completions", session.key, chat_body("hi"))
    over = await _post(proxy, "/v1/chat/completions", session.key, chat_body("hi"))
    assert [malformed[0], answered[0], over[0]] == [400, 200, 400]
    assert "not valid JSON" in _message(malformed[1]) and "episode is over (max_turns" in _message(over[1])
    assert session.turns[0].request_head == '{"messages": ['
    assert session.stop_reason == "max_turns" and start_proxy.endpoint_of(proxy).stats.requests == 1


async def test_a_call_the_model_endpoint_failed_gives_its_call_back(start_proxy: Start) -> None:
    """An outage is not the agent's doing: its call is not counted, a retry is answered."""
    proxy = await start_proxy(
        endpoint={"fail_first": [500]}, client={"max_retries": 0}, budgets=ProxyBudgets(max_turns=1)
    )
    session = proxy.open_session()
    statuses = [
        (await _post(proxy, "/v1/chat/completions", session.key, chat_body("hi")))[0] for _ in range(3)
    ]
    assert statuses == [502, 200, 400]
    assert session.num_answered == 1 and session.num_calls == 1 and session.stop_reason == "max_turns"


@pytest.mark.parametrize("path", list(BODIES))
async def test_a_body_over_the_cap_is_a_413_in_the_agents_dialect(start_proxy: Start, path: str) -> None:
    proxy = await start_proxy(budgets=ProxyBudgets(max_request_bytes=MiB))
    session = proxy.open_session()
    body = json.dumps(BODIES[path]("y" * (2 * MiB))).encode()
    for chunked in (False, True):  # a declared length, and a body that only shows its size as it comes
        status, answer = await _post(proxy, path, session.key, body, chunked=chunked)
        assert status == 413
        if path == "/v1/messages":
            assert answer["type"] == "error" and answer["error"]["type"] == "request_too_large"
        else:
            assert answer["error"]["type"] == "request_too_large"
        says = _message(answer)
        assert "over this proxy's limit of 1,048,576 bytes (max_request_bytes)" in says, says
    declared, streamed = session.turns
    assert declared.status == streamed.status == 413 and declared.messages == streamed.messages == []
    assert declared.request_bytes == len(body) and MiB < streamed.request_bytes <= MiB + 256 * 1024
    assert declared.request_head is None  # refused by its declared length, unread
    assert streamed.request_head is not None and len(streamed.request_head.encode()) <= 1024
    assert start_proxy.endpoint_of(proxy).stats.requests == 0
    # Under the cap, the same session is served.
    assert (await _post(proxy, path, session.key, BODIES[path]("small")))[0] == 200


async def test_the_default_cap_is_32_mib(start_proxy: Start) -> None:
    assert ProxyBudgets().max_request_bytes == 32 * MiB
    proxy = await start_proxy()
    session = proxy.open_session()
    status, answer = await _post(
        proxy, "/v1/chat/completions", session.key, json.dumps(chat_body("z" * (33 * MiB))).encode()
    )
    assert status == 413 and "limit of 33,554,432 bytes" in _message(answer)


# Thirty threads of a separate process post at once, each on its own connection.
AT_ONCE = r"""
import json, sys, threading, urllib.request, urllib.error
url, key, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
body = json.dumps({"model": "served-model", "messages": [{"role": "user", "content": "hi"}]}).encode()
start, results = threading.Barrier(n), []
def call():
    request = urllib.request.Request(url, data=body, headers={"Authorization": "Bearer " + key, "Content-Type": "application/json"})
    start.wait()
    try:
        results.append(urllib.request.urlopen(request, timeout=60).status)
    except urllib.error.HTTPError as exc:
        results.append(exc.code)
threads = [threading.Thread(target=call) for _ in range(n)]
for t in threads: t.start()
for t in threads: t.join()
print(json.dumps(sorted(results)))
"""


@pytest.mark.slow
async def test_calls_sent_at_once_cannot_pass_max_turns(start_proxy: Start) -> None:
    """45.6: with max_turns=2, 30 calls sent at once were all answered."""
    proxy = await start_proxy(endpoint={"latency": 0.3}, budgets=ProxyBudgets(max_turns=2))
    session = proxy.open_session()
    agent = await asyncio.create_subprocess_exec(
        sys.executable, "-c", AT_ONCE, f"{proxy.base_url}/v1/chat/completions", session.key, "30",
        stdout=subprocess.PIPE,
    )  # fmt: skip
    out, _ = await agent.communicate()
    assert json.loads(out) == [200, 200] + [400] * 28
    assert start_proxy.endpoint_of(proxy).stats.requests == 2
    assert session.num_answered == 2 and session.stop_reason == "max_turns"
    refused = [t for t in session.turns if t.status == 400]
    assert len(refused) == 28 and all(
        "its budget of 2 model calls is spent" in (t.error or "") for t in refused
    )


async def test_each_call_may_generate_at_most_the_tokens_left(start_proxy: Start) -> None:
    proxy = await start_proxy(endpoint={"record": True}, budgets=ProxyBudgets(max_tokens=40))
    session = proxy.open_session()
    for _ in range(2):
        status, _ = await _post(proxy, "/v1/chat/completions", session.key, chat_body("hi", max_tokens=1000))
        assert status == 200
    first, second = start_proxy.endpoint_of(proxy).stats.bodies
    assert first["max_tokens"] == 40
    assert second["max_tokens"] == 40 - session.turns[0].usage.total_tokens
    assert session.turns[1].params["max_tokens"] == second["max_tokens"]


async def test_the_clock_runs_while_a_request_is_still_arriving(start_proxy: Start) -> None:
    proxy = await start_proxy(budgets=ProxyBudgets(max_seconds=0.5))
    session = proxy.open_session()
    reader, writer = await asyncio.open_connection("127.0.0.1", proxy.port)
    try:
        writer.write(
            b"POST /v1/chat/completions HTTP/1.1\r\nHost: proxy\r\nContent-Type: application/json\r\n"
            + f"Authorization: Bearer {session.key}\r\nContent-Length: 1000\r\n\r\n".encode()
            + b'{"messages": ['  # and then nothing more
        )
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(65536), 5)
    finally:
        writer.close()
        await writer.wait_closed()
    assert answer.startswith(b"HTTP/1.1 400") and b"the episode is over (timeout" in answer
    assert session.stop_reason == "timeout" and session.turns[0].timing["total"] < 2
