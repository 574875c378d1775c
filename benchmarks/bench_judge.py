"""What does LLMJudge cost over making the same judge requests by hand?

    python benchmarks/bench_judge.py [--n 1000] [--concurrency 64] [--latency 0.0] [--rounds 2]

Judges N distinct rollouts (so the cache never answers) at the given concurrency against the
scripted endpoint (separate process, so the server does not share our GIL), three ways:

1. `LLMJudge.ascore_batch`: render the template, call, parse the verdict, record details.
2. `harness.Client.complete` on the same pre-rendered messages, no parsing (baseline).
3. a bare `openai.AsyncOpenAI` loop under a semaphore, same pool size (baseline).

Then the judge again over the same rollouts with the cache on (second pass: all hits).
Prints wall time, judgements/s and ratios (judge time / baseline time; ~1 = free).
"""

from __future__ import annotations

import argparse
import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import Any

from harness import Client, Rollout, ScriptedEndpoint
from harness._endpoint.client import _sdk_client
from rubrics import LLMJudge
from rubrics.judges import JudgeCache

PROMPT = (
    "Question: {{ prompt }}\n<response>\n{{ response }}\n</response>\n"
    "Reference: {{ answer }}\nEnd with 'Score: N' from 0 to 10."
)


def policy(messages: list[dict[str, Any]], tools: Any) -> str:
    return "The response matches the reference in most respects.\nScore: 7"


def make_rollouts(n: int) -> list[Rollout]:
    return [
        Rollout.model_validate(
            {
                "example_id": i,
                "prompt": f"What is {i} + {i}?",
                "completion": f"It is {2 * i}.",
                "answer": str(2 * i),
            }
        )
        for i in range(n)
    ]


async def timed(fn: Callable[[], Awaitable[Any]]) -> float:
    started = time.perf_counter()
    await fn()
    return time.perf_counter() - started


async def main(n: int, concurrency: int, latency: float, rounds: int) -> None:
    rollouts = make_rollouts(n)
    with ScriptedEndpoint(policy, latency=latency, process=True) as ep:
        judge_client = Client("judge", base_url=ep.base_url, max_concurrency=concurrency)
        judge = LLMJudge(PROMPT, client=judge_client, score_range=(0, 10), cache=False)
        messages = [judge.render(r) for r in rollouts]
        params = judge.request_params()
        base_client = Client("judge", base_url=ep.base_url, max_concurrency=concurrency)

        sdk = _sdk_client(ep.base_url, "x", {}, concurrency, 120.0)  # retries off, same pool size
        gate = asyncio.Semaphore(concurrency)

        async def via_judge() -> None:
            scores = await judge.ascore_batch(rollouts, concurrency=concurrency)
            assert all(s == 0.7 for s in scores), "judge failed to score"

        async def via_client() -> None:
            async def one(m: list[dict[str, str]]) -> str:
                return (await base_client.complete(m, **params)).message.text

            await asyncio.gather(*(one(m) for m in messages))

        async def via_sdk() -> None:
            async def one(m: list[dict[str, str]]) -> str | None:
                async with gate:
                    raw = await sdk.chat.completions.create(model="judge", messages=m, **params)  # type: ignore[arg-type]
                return raw.choices[0].message.content

            await asyncio.gather(*(one(m) for m in messages))

        await via_client()  # warm up connections and imports
        best = {"judge": float("inf"), "client": float("inf"), "sdk": float("inf")}
        for _ in range(rounds):
            for name, fn in (("judge", via_judge), ("client", via_client), ("sdk", via_sdk)):
                best[name] = min(best[name], await timed(fn))

        cached = LLMJudge(PROMPT, client=judge_client, score_range=(0, 10), cache=True)
        JudgeCache.shared.clear()
        first = await timed(lambda: cached.ascore_batch(rollouts, concurrency=concurrency))
        second = await timed(lambda: cached.ascore_batch(rollouts, concurrency=concurrency))
        stats = JudgeCache.shared.info()
        await sdk.close()
        await judge_client.aclose()
        await base_client.aclose()

    print(
        f"judging {n} distinct rollouts at concurrency {concurrency}, endpoint latency {latency * 1000:g} ms, "
        f"best of {rounds}"
    )
    for name, label in (
        ("judge", "LLMJudge.ascore_batch"),
        ("client", "harness.Client.complete"),
        ("sdk", "bare openai.AsyncOpenAI"),
    ):
        print(f"  {label:<26} {best[name]:7.3f} s  {n / best[name]:8.0f} judgements/s")
    print(f"  ratio judge / Client      {best['judge'] / best['client']:7.2f}x")
    print(f"  ratio judge / bare SDK    {best['judge'] / best['sdk']:7.2f}x")
    print(
        f"  cache: first pass {first:.3f} s, second pass {second:.4f} s "
        f"({first / max(second, 1e-9):.0f}x faster; hits={stats['hits']}, misses={stats['misses']})"
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--latency", type=float, default=0.0, help="endpoint latency in seconds")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    asyncio.run(main(args.n, args.concurrency, args.latency, args.rounds))
