"""A sync call that blocks the loop its own endpoint runs on says so at once (Jupyter's case)."""

from __future__ import annotations

import asyncio
import math
import time

from harness import Client, Rollout
from harness._core.aio import blocked_loop_serves
from rubrics import LLMJudge


async def _silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    await reader.read(1)  # never answers: it could not anyway while its loop is blocked
    writer.close()


async def test_sync_judge_against_a_server_on_the_blocked_loop_fails_at_once() -> None:
    server = await asyncio.start_server(_silent, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        url = f"http://127.0.0.1:{port}/v1"
        judge = LLMJudge(
            "Grade {{ response }}. Score: N",
            client=Client("judge", base_url=url, timeout=600, max_retries=3),
            cache=False,
        )
        rollout = Rollout.model_validate({"completion": "42"})
        start = time.perf_counter()
        score = judge(rollout)  # synchronous, on this test's running loop: the notebook's situation
        assert time.perf_counter() - start < 5
        assert math.isnan(score)
        reason = rollout.score_errors[""]
        assert "served by the event loop that this synchronous call is blocking" in reason
        assert "await rubric.ascore(x)" in reason
        assert not blocked_loop_serves(url)  # outside a blocked sync call nothing is suspected
    finally:
        server.close()
        await server.wait_closed()


async def test_a_server_in_another_thread_is_not_suspected() -> None:
    from harness import ScriptedEndpoint

    with ScriptedEndpoint(lambda messages, tools: "Score: 1") as endpoint:
        judge = LLMJudge(
            "Grade {{ response }}", client=Client("judge", base_url=endpoint.base_url), cache=False
        )
        assert judge(Rollout.model_validate({"completion": "42"})) == 1.0
