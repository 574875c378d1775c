"""Where sync tools run: the adaptive placement rule, blocking= overrides, timeouts in every mode."""

from __future__ import annotations

import copy
import logging
import threading
import time
from typing import Any

import pytest

from envs import Tool, ToolEnv, tool
from envs._tools.placement import (
    INLINE_MAX_SECONDS,
    PIN_AFTER_SLOW_CALLS,
    PROMOTE_AFTER_CALLS,
    SLOW_WINDOW,
    Placement,
)
from harness import Client, ConfigError, ScriptedEndpoint
from tests.helpers.docs import code_block

FAST = INLINE_MAX_SECONDS / 10
SLOW = INLINE_MAX_SECONDS * 10


def where_it_ran() -> int:
    """Report the thread it ran in."""
    return threading.get_ident()


async def promote(t: Tool) -> None:
    """Call a fast tool until it runs inline (a call the machine slowed down may delay that)."""
    arguments = {"hang": False} if "hang" in t.parameters["properties"] else {}
    for _ in range(10 * PROMOTE_AFTER_CALLS):
        if t.placement == "inline":
            return
        assert (await t.call(arguments)).ok
    raise AssertionError(f"{t.name} was not promoted: {t.placement}")


# -- the rule, on Placement itself ------------------------------------------------------------


def test_promoted_after_enough_fast_calls_in_a_row() -> None:
    p = Placement("t", None)
    seen = [p.where]
    for _ in range(PROMOTE_AFTER_CALLS - 1):
        p.observe(FAST)
    seen.append(p.where)
    p.observe(SLOW)  # a slow call starts the count again
    for _ in range(PROMOTE_AFTER_CALLS - 1):
        p.observe(FAST)
    seen.append(p.where)
    p.observe(FAST)
    seen.append(p.where)
    assert seen == ["measuring", "measuring", "measuring", "inline"]


def test_slow_calls_close_together_pin_to_the_thread_pool_for_good() -> None:
    p = Placement("t", None)
    for _ in range(PIN_AFTER_SLOW_CALLS):
        p.observe(SLOW)
    assert p.where == "thread"
    for _ in range(5 * PROMOTE_AFTER_CALLS):
        p.observe(FAST)
    assert p.where == "thread"


def test_an_inline_tool_that_turns_slow_goes_back_to_threads() -> None:
    p = Placement("t", None)
    for _ in range(PROMOTE_AFTER_CALLS):
        p.observe(FAST)
    for _ in range(PIN_AFTER_SLOW_CALLS - 1):
        p.observe(SLOW)
        assert p.where == "inline"
    p.observe(SLOW)
    assert p.where == "thread"


def test_rare_slow_calls_far_apart_are_noise() -> None:
    p = Placement("t", None)
    for _ in range(PROMOTE_AFTER_CALLS):
        p.observe(FAST)
    for _ in range(4 * PIN_AFTER_SLOW_CALLS):
        p.observe(SLOW)
        for _ in range(SLOW_WINDOW):
            p.observe(FAST)
    assert p.where == "inline"


def test_explicit_blocking_is_never_overridden() -> None:
    pinned, inline = Placement("a", True), Placement("b", False)
    assert (pinned.where, inline.where) == ("thread", "inline")
    inline.demote("a call timed out")
    assert inline.where == "inline"


# -- the rule, through Tool.call ---------------------------------------------------------------


async def test_fast_sync_tool_starts_in_a_thread_then_runs_on_the_loop() -> None:
    loop_thread = threading.get_ident()
    t = Tool(where_it_ran)
    first = await t.call({})
    assert int(first.content) != loop_thread
    await promote(t)
    assert int((await t.call({})).content) == loop_thread


async def test_blocking_tool_is_never_promoted() -> None:
    nap = Tool(lambda: time.sleep(SLOW), name="nap")
    for _ in range(PIN_AFTER_SLOW_CALLS):
        assert (await nap.call({})).ok
    assert nap.placement == "thread"


async def test_blocking_true_always_uses_a_thread() -> None:
    loop_thread = threading.get_ident()
    t = tool(where_it_ran, blocking=True)
    for _ in range(3 * PROMOTE_AFTER_CALLS):
        assert int((await t.call({})).content) != loop_thread
    assert t.placement == "thread" and t.blocking is True
    assert repr(t) == "Tool(name='where_it_ran', parameters=(), timeout=60.0, strict=False, blocking=True)"


async def test_blocking_false_runs_inline_from_the_first_call_and_stays() -> None:
    loop_thread = threading.get_ident()

    @tool(blocking=False)
    def sleepy_but_trusted() -> int:
        time.sleep(SLOW)
        return threading.get_ident()

    for _ in range(PIN_AFTER_SLOW_CALLS + 1):
        assert int((await sleepy_but_trusted.call({})).content) == loop_thread
    assert sleepy_but_trusted.placement == "inline"


def test_async_tools_run_on_the_loop_and_reject_blocking_true() -> None:
    async def fetch() -> str:
        return "x"

    assert Tool(fetch).placement == "inline"
    with pytest.raises(ConfigError, match="async function.*blocking=True"):
        Tool(fetch, blocking=True)
    with pytest.raises(ConfigError, match="blocking must be True, False or None"):
        Tool(where_it_ran, blocking="yes")  # type: ignore[arg-type]
    assert Tool.from_function(Tool(where_it_ran), blocking=True).blocking is True


async def test_a_tool_can_still_be_deep_copied() -> None:
    t = Tool(where_it_ran)
    await promote(t)
    twin = copy.deepcopy(t)
    assert twin.placement == "inline" and twin._placement is not t._placement
    assert (await twin.call({})).ok


# -- timeouts in every mode --------------------------------------------------------------------


@pytest.mark.parametrize("blocking", [None, True])
async def test_hanging_sync_tool_times_out_in_a_thread(blocking: bool | None) -> None:
    release = threading.Event()

    def hang() -> str:
        release.wait(5)
        return "late"

    t = Tool(hang, timeout=0.2, blocking=blocking)
    started = time.perf_counter()
    result = await t.call({})
    release.set()
    assert time.perf_counter() - started < 2
    assert result.error == "timed out after 0.2 s"
    assert t.placement == "thread"  # a timed-out adaptive tool never runs inline


async def test_promoted_tool_that_hangs_inline_is_reported_and_moved_to_threads(
    caplog: pytest.LogCaptureFixture,
) -> None:
    @tool(timeout=0.3)
    def maybe_hang(hang: bool) -> str:
        if hang:
            time.sleep(1.0)  # inline, this blocks the event loop: the documented trade-off
        return "done"

    await promote(maybe_hang)
    with caplog.at_level(logging.WARNING, logger="envs._tools.functions"):
        result = await maybe_hang.call({"hang": True})
    assert result.error == "timed out after 0.3 s"  # its late result is dropped
    assert "'maybe_hang' has blocked the event loop" in caplog.text and "blocking=True" in caplog.text
    assert maybe_hang.placement == "thread"
    started = time.perf_counter()
    assert (await maybe_hang.call({"hang": True})).error == "timed out after 0.3 s"
    assert time.perf_counter() - started < 0.9  # now abandoned in its thread at the timeout


async def test_inline_call_past_its_timeout_reads_as_a_timeout_even_when_it_raises() -> None:
    @tool(timeout=0.05, blocking=False)
    def slow_then_raise() -> str:
        time.sleep(0.1)
        raise RuntimeError("too late to matter")

    result = await slow_then_raise.call({})
    assert result.error == "timed out after 0.05 s"
    assert (
        result.content
        == "Error: tool 'slow_then_raise' did not finish within 0.05 seconds and was abandoned."
    )
    assert slow_then_raise.placement == "inline"  # blocking=False is the user's word


async def test_tool_raising_fast_inline_is_an_ordinary_failure() -> None:
    @tool(blocking=False)
    def boom() -> str:
        raise TimeoutError("upstream")

    assert (await boom.call({})).error == "TimeoutError: upstream"


# -- the others' progress, end to end over loopback HTTP ---------------------------------------


NAP = 2.0


def nap(seconds: float) -> str:
    """Block the calling thread.

    Args:
        seconds: how long
    """
    time.sleep(seconds)
    return "rested"


def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


def nap_or_add(messages: list[dict[str, Any]], tools: Any) -> Any:
    last = messages[-1]
    if last["role"] == "tool":
        return last["content"]
    if last["content"].startswith("nap"):
        return {"tool_calls": [{"function": {"name": "nap", "arguments": {"seconds": NAP}}}]}
    a = int(last["content"].split()[-1])
    return {"tool_calls": [{"function": {"name": "add", "arguments": {"a": a, "b": a}}}]}


@pytest.mark.slow  # a tool blocks for real
async def test_blocking_tool_in_some_rollouts_does_not_delay_the_others() -> None:
    rows = [{"question": "nap please", "answer": "rested"} for _ in range(4)]
    rows += [{"question": f"double {i}", "answer": str(2 * i)} for i in range(24)]
    env = ToolEnv(rows, lambda response, answer: float(response == answer), tools=[nap, add])
    with ScriptedEndpoint(nap_or_add) as endpoint:
        async with Client("scripted", base_url=endpoint.base_url, max_concurrency=32) as client:
            started = time.perf_counter()
            results = await env.aevaluate(client, concurrency=32, progress=False)
            wall = time.perf_counter() - started
    napped = [r for r in results.rollouts if r.answer == "rested"]
    others = [r for r in results.rollouts if r.answer != "rested"]
    assert all(r.reward == 1.0 for r in results.rollouts), [r.error for r in results.rollouts]
    assert all(r.timing["total"] >= NAP for r in napped)
    # Were `nap` ever run on the loop, every other rollout would wait out at least one nap.
    slowest = max(r.timing["total"] for r in others)
    assert slowest < 0.75 * NAP, f"a rollout without naps took {slowest:.2f}s: the loop was blocked"
    assert wall < 2.5 * NAP, f"4 naps of {NAP} s took {wall:.2f}s in all: they did not overlap"
    assert next(t for t in env.tools if t.name == "nap").placement == "thread"


def test_readme_placement_example_runs_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    exec(compile(code_block("python", "@tool(blocking=True"), "<docs>", "exec"), {})
    assert capsys.readouterr().out.strip() == "thread inline"
