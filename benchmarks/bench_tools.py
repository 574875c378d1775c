"""How much do tools cost? Schema building once per tool, and the per-call overhead.

Run: python benchmarks/bench_tools.py [--calls N] [--builds N]

1. Schema generation: time of `Tool.from_function` for a few representative tools.
2. Call overhead: N sequential calls through `await tool.call(json_args)` against the baseline
   of calling the function directly in the same run (sync and async tools). For sync tools
   the parts are reported on their own (validation only, a bare run_in_executor) and the tool
   is called both with its default placement (inline once its calls proved fast, see
   envs/_tools/placement.py) and pinned to a worker thread with blocking=True, so the cost of the
   thread hop is visible.
"""

from __future__ import annotations

import argparse
import asyncio
import enum
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Literal

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from pydantic import BaseModel, Field

from envs import Tool
from envs._tools.placement import thread_pool


class Unit(enum.Enum):
    C = "celsius"
    F = "fahrenheit"


class Filter(BaseModel):
    """A search filter."""

    field: str
    op: Literal["eq", "lt", "gt"] = "eq"
    value: float | str


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


async def aadd(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def weather(city: str, days: int = 1, unit: Unit = Unit.C, hourly: bool = False, lang: str = "en") -> str:
    """Get the weather forecast.

    Args:
        city: Name of the city.
        days: How many days ahead.
        unit: Temperature unit.
        hourly: Hourly rather than daily figures.
        lang: Language of the summary.
    """
    return city


def search(
    query: str,
    filters: list[Filter] | None = None,
    limit: Annotated[int, Field(ge=1, le=100, description="Maximum hits.")] = 10,
    fields: dict[str, str] | None = None,
) -> list[dict]:
    """Search the index with optional structured filters.

    :param query: Free-text query.
    :param filters: Conditions every hit must meet.
    """
    return []


def strict_search(query: str, filters: list[Filter] | None = None, limit: int = 10) -> list[dict]:
    """Search (strict schema)."""
    return []


def per_call(seconds: float, n: int) -> float:
    return seconds / n * 1e6


def bench_build(builds: int) -> None:
    print(f"Schema generation (Tool.from_function, mean of {builds} builds)")
    cases: list[tuple[str, Callable[..., object], bool]] = [
        ("add(a, b)", add, False),
        ("weather: 5 params + Google docstring", weather, False),
        ("search: nested model, Annotated, dict", search, False),
        ("strict_search: strict=True", strict_search, True),
    ]
    for label, fn, strict in cases:
        Tool.from_function(fn, strict=strict)  # warm imports and caches
        start = time.perf_counter()
        for _ in range(builds):
            Tool.from_function(fn, strict=strict)
        elapsed = time.perf_counter() - start
        print(f"  {label:<42} {elapsed / builds * 1e3:8.3f} ms/tool")


async def timed(n: int, make: Callable[[], Awaitable[object]], rounds: int = 3) -> float:
    """Best of `rounds` timings of n sequential awaits (the best is the least disturbed by
    other processes on a shared machine)."""
    for _ in range(min(n, 200)):  # warm-up
        await make()
    best = float("inf")
    for _ in range(rounds):
        start = time.perf_counter()
        for _ in range(n):
            await make()
        best = min(best, time.perf_counter() - start)
    return best


async def bench_calls(n: int) -> None:
    args = {"a": 2, "b": 3}
    text = json.dumps(args)
    sync_tool, async_tool = Tool.from_function(add), Tool.from_function(aadd)
    pinned_tool = Tool.from_function(add, blocking=True)
    loop = asyncio.get_running_loop()

    async def direct_sync() -> object:
        return add(**args)

    async def direct_async() -> object:
        return await aadd(**args)

    async def validate_only() -> object:
        return sync_tool.validate(text)

    async def bare_thread_hop() -> object:
        return await loop.run_in_executor(thread_pool(), lambda: add(**args))

    async def through_sync_tool() -> object:
        return await sync_tool.call(text)

    async def through_pinned_tool() -> object:
        return await pinned_tool.call(text)

    async def through_async_tool() -> object:
        return await async_tool.call(text)

    base_sync = await timed(n, direct_sync)
    base_async = await timed(n, direct_async)
    rows = [
        ("sync: direct add(**args) [baseline]", base_sync, base_sync),
        ("sync: validate(json) only", await timed(n, validate_only), base_sync),
        ("sync: bare thread hop (run_in_executor)", await timed(n, bare_thread_hop), base_sync),
        ("sync: await tool.call(json)", await timed(n, through_sync_tool), base_sync),
        ("sync, blocking=True: await tool.call(json)", await timed(n, through_pinned_tool), base_sync),
        ("async: direct await aadd(**args) [baseline]", base_async, base_async),
        ("async: await tool.call(json)", await timed(n, through_async_tool), base_async),
    ]
    print(f"\nCall overhead (best of 3 runs of {n} sequential calls)")
    for label, seconds, base in rows:
        print(f"  {label:<44} {per_call(seconds, n):9.2f} us/call   x{seconds / base:8.1f} vs baseline")
    overhead_sync = per_call(rows[3][1] - base_sync, n)
    overhead_async = per_call(rows[6][1] - base_async, n)
    print(f"\n  added per call: sync tool {overhead_sync:.1f} us, async tool {overhead_async:.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--builds", type=int, default=200)
    options = parser.parse_args()
    bench_build(options.builds)
    asyncio.run(bench_calls(options.calls))


if __name__ == "__main__":
    main()
