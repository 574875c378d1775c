"""Harness speed: `env.evaluate` against bare client loops doing the same work.

Both sides run the same 2-turn tool conversation (turn 1: the model calls `add`; the tool
runs; turn 2: the model answers) for N rollouts against the scripted endpoint, which runs
in a separate process so the server's CPU is not charged to either side.

    python benchmarks/bench_harness.py                 # 1000 rollouts, 64 @ 0 ms and 256 @ 20 ms
    python benchmarks/bench_harness.py -n 300 --repeats 1
    python benchmarks/bench_harness.py --scale         # workers=1 vs workers=2 (and Ray), see below
    python benchmarks/bench_harness.py --memory        # driver peak RSS: 2,000 vs 200,000 rollouts

What is measured, per variant, each in a fresh Python process (so one variant's imports,
caches and memory high-water mark cannot flatter or penalise the next):
- wall: seconds for the N rollouts (after imports and one warm-up request).
- cpu: `time.process_time()` over the same span: this process's user+system CPU, all threads.
- RSS growth: `ru_maxrss` (peak resident set) at the end minus the RSS just before the run
  (MiB): how much memory the run itself needed. Imports (the harness loads `datasets`/pyarrow;
  the bare loop does not) are shown separately as "base RSS" (after imports, before the run)
  and are not part of the ratio.
Variants: "bare" (openai + semaphore + asyncio.gather, calling `add` inline: the baseline),
"lean" (the same loop over a bare aiohttp session and json: the physical limit of this
workload here), "harness" (env.evaluate with its default lean aiohttp transport and an `async
def` tool, which runs on the loop just as the bare loop's call does; nothing written),
"harness+sdk" (the same through the openai SDK transport, `transport="openai"`), "harness+disk" (the same with output_dir: every rollout appended to
results.jsonl), "harness+sync" (the same plain `def add` as the bare loop, as most users
write tools, with the default placement: timed in a worker thread until proven fast, then
inline; see envs/_tools/placement.py), "harness+thread" (the plain `def add` pinned to a worker
thread with blocking=True: what the thread hop per call costs on a CPU-saturated loop).
Each (config, variant) runs `--repeats` times, interleaved; the median is reported, with
rollouts/s and CPU per completion (each rollout is two completions).
Targets, at both configs: harness rollouts/s >= 5x the bare SDK loop's (stretch: >= half the
lean loop's); harness+sdk wall <= 1.15x of the bare loop (the SDK transport costs no more than
the SDK itself); harness+sync wall <= 1.10x of the harness row (a plain `def` tool as fast as
an async one).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
VARIANTS = ("bare", "lean", "harness", "harness+sdk", "harness+disk", "harness+sync", "harness+thread")
SYNC_TOOL_TARGET = 1.10  # harness+sync wall / harness wall, at every config
SPEEDUP_TARGET = 5.0  # harness rollouts/s / bare SDK loop rollouts/s, at every config
SDK_TARGET = 1.15  # harness+sdk wall / bare wall
CONFIGS = ((64, 0.0), (256, 0.020))
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }
]


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: the first addend
        b: the second addend
    """
    return a + b


async def add_inline(a: int, b: int) -> int:
    """Add two integers (an `async def` tool runs on the event loop, as the bare loop runs `add`).

    Args:
        a: the first addend
        b: the second addend
    """
    return a + b


def policy(messages: list[dict[str, Any]], tools: Any) -> Any:
    """Turn 1: call add(a, b) from the question; turn 2: answer with the tool's result."""
    last = messages[-1]
    if last["role"] == "tool":
        return last["content"]
    a, b = (int(x) for x in last["content"].removeprefix("What is ").removesuffix("?").split("+"))
    return {"tool_calls": [{"function": {"name": "add", "arguments": {"a": a, "b": b}}}]}


def _questions(n: int) -> list[dict[str, str]]:
    return [{"question": f"What is {i}+{i + 1}?", "answer": str(2 * i + 1)} for i in range(n)]


def _rss_mib() -> float:
    """Current resident set size (Linux /proc), MiB."""
    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20


# -- the two contestants (each runs inside a fresh worker process) ----------------------------


async def _bare(base_url: str, concurrency: int, n: int) -> dict[str, float]:
    import importlib

    import openai

    # The SDK's own HTTP client class with a pool as large as the concurrency (whichever
    # httpx package this SDK generation uses), as any careful hand-written loop would do.
    http_cls = openai.DefaultAsyncHttpxClient
    http = importlib.import_module(
        next(b.__module__.split(".")[0] for b in http_cls.__mro__ if b.__name__ == "AsyncClient")
    )
    limits = http.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    client = openai.AsyncOpenAI(
        base_url=base_url, api_key="x", max_retries=0, http_client=http_cls(limits=limits, timeout=120)
    )
    limit = asyncio.Semaphore(concurrency)
    tools = {"add": add}

    async def one(row: dict[str, str]) -> float:
        async with limit:
            messages: list[dict[str, Any]] = [{"role": "user", "content": row["question"]}]
            first = await client.chat.completions.create(model="scripted", messages=messages, tools=TOOLS)
            message = first.choices[0].message
            messages.append(message.model_dump(exclude_none=True))
            for call in message.tool_calls or []:
                result = tools[call.function.name](**json.loads(call.function.arguments))
                messages.append({"role": "tool", "tool_call_id": call.id, "content": str(result)})
            second = await client.chat.completions.create(model="scripted", messages=messages, tools=TOOLS)
            return float(second.choices[0].message.content == row["answer"])

    await client.chat.completions.create(
        model="scripted", messages=[{"role": "user", "content": "What is 1+2?"}]
    )
    rows = _questions(n)
    rss0, cpu0, t0 = _rss_mib(), time.process_time(), time.perf_counter()
    rewards = await asyncio.gather(*(one(row) for row in rows))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    await client.close()
    assert sum(rewards) == n, f"bare loop: only {sum(rewards)} of {n} rollouts answered correctly"
    return {"wall": wall, "cpu": cpu, "rss0": rss0}


async def _lean(base_url: str, concurrency: int, n: int) -> dict[str, float]:
    """The same loop over one aiohttp session with json: no SDK objects, the limit here."""
    import aiohttp

    session = aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=concurrency),
        headers={"Authorization": "Bearer x", "Content-Type": "application/json"},
    )
    url = f"{base_url}/chat/completions"
    limit = asyncio.Semaphore(concurrency)
    tools = {"add": add}

    async def post(messages: list[dict[str, Any]]) -> dict[str, Any]:
        body = json.dumps({"model": "scripted", "messages": messages, "tools": TOOLS}).encode()
        async with session.post(url, data=body) as response:
            return json.loads(await response.read())["choices"][0]["message"]

    async def one(row: dict[str, str]) -> float:
        async with limit:
            messages: list[dict[str, Any]] = [{"role": "user", "content": row["question"]}]
            message = await post(messages)
            messages.append({k: v for k, v in message.items() if v is not None})
            for call in message.get("tool_calls") or []:
                result = tools[call["function"]["name"]](**json.loads(call["function"]["arguments"]))
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": str(result)})
            return float((await post(messages))["content"] == row["answer"])

    await post([{"role": "user", "content": "What is 1+2?"}])
    rows = _questions(n)
    rss0, cpu0, t0 = _rss_mib(), time.process_time(), time.perf_counter()
    rewards = await asyncio.gather(*(one(row) for row in rows))
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    await session.close()
    assert sum(rewards) == n, f"lean loop: only {sum(rewards)} of {n} rollouts answered correctly"
    return {"wall": wall, "cpu": cpu, "rss0": rss0}


def _bench_tool(variant: str) -> Any:
    """The `add` tool a harness variant uses (see the module docstring)."""
    from envs import Tool

    if variant == "harness+sync":
        return Tool(add)  # default placement, exactly as `tools=[add]` would build it
    if variant == "harness+thread":
        return Tool(add, blocking=True)
    return Tool(add_inline, name="add")


async def _harness(base_url: str, concurrency: int, n: int, variant: str) -> dict[str, float]:
    from envs import ToolEnv
    from harness import Client

    def correct(response: str, answer: str) -> float:
        return float(response == answer)

    tool = _bench_tool(variant)
    disk = variant == "harness+disk"
    env = ToolEnv(_questions(n), correct, tools=[tool], name="bench-add")
    transport = "openai" if variant == "harness+sdk" else "aiohttp"
    client = Client(
        "scripted", base_url=base_url, api_key="x", max_concurrency=concurrency, transport=transport
    )
    await client.complete([{"role": "user", "content": "What is 1+2?"}])
    with tempfile.TemporaryDirectory() as tmp:
        rss0, cpu0, t0 = _rss_mib(), time.process_time(), time.perf_counter()
        results = await env.aevaluate(
            client, concurrency=concurrency, progress=False, output_dir=Path(tmp) / "run" if disk else None
        )
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    await client.aclose()
    s = results.summary
    assert s.num_rollouts == n and s.mean_reward == 1.0 and s.num_errors == 0, f"harness run went wrong: {s}"
    # 1.0 when the tool ended the run inline on the loop (the median shows if most runs did)
    return {"wall": wall, "cpu": cpu, "rss0": rss0, "inline": float(tool.placement == "inline")}


def _worker(variant: str, base_url: str, concurrency: int, n: int) -> None:
    if variant.startswith("memory:"):  # memory:<scale variant>:<rollouts per example>
        name, per_example = variant.removeprefix("memory:").rsplit(":", 1)
        print(json.dumps(asyncio.run(_scale(name, base_url, n, int(per_example)))))
        return
    if variant.startswith("scale:"):
        print(json.dumps(asyncio.run(_scale(variant.removeprefix("scale:"), base_url, n))))
        return
    base = _rss_mib()
    if variant == "bare":
        out = asyncio.run(_bare(base_url, concurrency, n))
    elif variant == "lean":
        out = asyncio.run(_lean(base_url, concurrency, n))
    else:
        out = asyncio.run(_harness(base_url, concurrency, n, variant))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    out.update(start_rss=base, base_rss=out.pop("rss0"), peak_rss=peak)
    out["rss_growth"] = max(0.0, peak - out["base_rss"])
    print(json.dumps(out))


# -- the driver ----------------------------------------------------------------------------


def _run_worker(variant: str, base_url: str, concurrency: int, n: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    proc = subprocess.run(
        [sys.executable, __file__, "--worker", variant, base_url, str(concurrency), str(n)],
        capture_output=True,
        text=True,
        env=env,
        timeout=1800,
    )
    if proc.returncode != 0:
        raise SystemExit(f"{variant} worker failed:\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


Medians = dict[str, dict[str, float]]  # variant -> measure -> median over the repeats
Verdict = tuple[str, str, bool]  # config, target, met


def _measure(concurrency: int, latency: float, variants: list[str], repeats: int, n: int) -> Medians:
    from harness import ScriptedEndpoint

    with ScriptedEndpoint(policy, latency=latency, process=True, model="scripted") as endpoint:
        runs: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
        for _ in range(repeats):
            for variant in variants:
                runs[variant].append(_run_worker(variant, endpoint.base_url, concurrency, n))
    return {v: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for v, rs in runs.items()}


def _print_config(config: str, variants: list[str], med: Medians, n: int) -> None:
    print()
    print(
        f"{'config':<14}{'variant':<16}{'wall s':>8}{'rollouts/s':>12}{'cpu s':>8}{'ms cpu/compl':>14}"
        f"{'base RSS':>10}{'RSS growth':>12}"
    )
    for variant in variants:
        m = med[variant]
        print(
            f"{config:<14}{variant:<16}{m['wall']:>8.2f}{n / m['wall']:>12.0f}{m['cpu']:>8.2f}"
            f"{1000 * m['cpu'] / (2 * n):>14.2f}{m['base_rss']:>8.0f}MB{m['rss_growth']:>10.0f}MB"
        )
    bare = med["bare"]
    for variant in variants[1:]:
        m = med[variant]
        growth = f"{m['rss_growth'] / bare['rss_growth']:.2f}x" if bare["rss_growth"] > 1 else "n/a"
        print(
            f"  {variant} / bare: rollouts/s {bare['wall'] / m['wall']:.2f}x, "
            f"cpu {m['cpu'] / bare['cpu']:.2f}x, RSS growth {growth}"
        )
    if "lean" in med and "harness" in med:
        print(f"  harness / lean: rollouts/s {med['lean']['wall'] / med['harness']['wall']:.2f}x")


def _harness_verdicts(config: str, med: Medians) -> list[Verdict]:
    """The lean harness >= SPEEDUP_TARGET x the bare SDK loop; the SDK transport within SDK_TARGET."""
    verdicts: list[Verdict] = []
    bare = med["bare"]
    if "harness" in med:
        speedup = bare["wall"] / med["harness"]["wall"]
        verdicts.append(
            (config, f"harness rollouts/s >= {SPEEDUP_TARGET:g}x bare", speedup >= SPEEDUP_TARGET)
        )
        if "lean" in med:
            half = med["lean"]["wall"] / med["harness"]["wall"] >= 0.5
            verdicts.append((config, "harness rollouts/s >= 0.5x lean (stretch)", half))
    if "harness+sdk" in med:
        ratio = med["harness+sdk"]["wall"] / bare["wall"]
        verdicts.append((config, f"harness+sdk wall <= {SDK_TARGET:.2f}x bare", ratio <= SDK_TARGET))
    return verdicts


def _sync_tool_verdicts(config: str, med: Medians) -> list[Verdict]:
    """The plain `def` tool row at every config: wall <= SYNC_TOOL_TARGET x the harness row."""
    if "harness+sync" not in med or "harness" not in med:
        return []
    m = med["harness+sync"]
    if m["inline"] < 1.0:
        print(f"  note: in most harness+sync runs at {config} the tool did not end the run inline")
    ratio = m["wall"] / med["harness"]["wall"]
    return [(config, f"harness+sync wall <= {SYNC_TOOL_TARGET:.2f}x", ratio <= SYNC_TOOL_TARGET)]


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min)"


# -- scale: worker processes and Ray actors against one process ------------------------------
#
#     python benchmarks/bench_harness.py --scale            # 2000 rollouts at 256 @ 20 ms
#
# Rows: "workers=1" (evaluate in one process, the baseline), "workers=2" (two local worker
# processes) and "ray x2" (the same two workers as actors of a local Ray with 2 CPUs, started
# before the clock). Every row writes results.jsonl (only the driver writes) and runs in a fresh
# process, against the scripted endpoint in its own process. "rate" is rollouts/s from the
# first finished rollout to the last, so the one-off worker start (imports, loading the
# environment from its spec) is shown apart as "start s" and not charged to the throughput.
# Targets: workers=2 rate >= 1.5x workers=1 on a 2-core machine; Ray >= 0.9x local workers
# (jobs go to each actor in batches and come back through one long-polling call).

SCALE_VARIANTS = ("workers=1", "workers=2", "ray x2")
SCALE_CONFIG = (256, 0.020)
SCALE_TARGET = 1.5
RAY_TARGET = 0.9  # Ray actors / local worker processes, rollouts/s


def load_environment(n: int = 1000) -> Any:
    """The benchmark's environment, loadable by path so worker processes can build it."""
    from envs import Tool, ToolEnv

    def correct(response: str, answer: str) -> float:
        return float(response == answer)

    return ToolEnv(_questions(n), correct, tools=[Tool(add_inline, name="add")], name="bench-add")


def _first_line_watch(path: Path) -> tuple[Any, dict[str, float]]:
    """A thread noting when `path` first holds a rollout (a stat every 5 ms, off the loop)."""
    import threading

    seen: dict[str, float] = {}
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            with contextlib.suppress(OSError):
                if path.stat().st_size > 0:
                    seen["first"] = time.perf_counter()
                    return
            time.sleep(0.005)

    threading.Thread(target=watch, daemon=True).start()
    return done, seen


async def _scale(variant: str, base_url: str, n: int, per_example: int = 1) -> dict[str, float]:
    from envs import load_environment as load
    from harness import Client, aevaluate
    from harness._engine.executors.workers import peak_rss_mib

    concurrency = SCALE_CONFIG[0]
    env = load(str(Path(__file__).resolve()), n=n // per_example)
    client = Client("scripted", base_url=base_url, api_key="x", max_concurrency=concurrency)
    await client.complete([{"role": "user", "content": "What is 1+2?"}])
    if variant == "ray x2":
        import ray

        ray.init(num_cpus=2, include_dashboard=False, logging_level="warning")
    workers = 1 if variant == "workers=1" else 2
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run"
        done, seen = _first_line_watch(out / "results.jsonl")
        t0, cpu0 = time.perf_counter(), time.process_time()
        results = await aevaluate(
            env,
            client,
            concurrency=concurrency,
            rollouts_per_example=per_example,
            workers=workers,
            executor="ray" if variant.startswith("ray") else "local",
            output_dir=out,
            progress=False,
        )
        end, cpu = time.perf_counter(), time.process_time() - cpu0
        done.set()
    await client.aclose()
    s = results.summary
    assert s.num_rollouts == n and s.mean_reward == 1.0 and s.num_errors == 0, (
        f"{variant} run went wrong: {s}"
    )
    first = seen.get("first", t0)
    report = (results.metadata["sessions"][-1].get("workers") or {}).get("workers") or []
    return {
        "wall": end - t0,
        "start": first - t0,
        "rate": (n - 1) / (end - first),
        "driver_rss": peak_rss_mib(),
        "worker_rss": max((w.get("peak_rss_mib") or 0.0 for w in report), default=0.0),
        "driver_cpu": cpu,
        "worker_cpu": sum(w.get("cpu_seconds") or 0.0 for w in report),
    }


def _scale_main(n: int, repeats: int) -> None:
    from harness import ScriptedEndpoint

    concurrency, latency = SCALE_CONFIG
    variants = list(SCALE_VARIANTS)
    try:
        import ray  # noqa: F401
    except ImportError:
        variants.remove("ray x2")
        print("ray is not installed (pip install 'rubric-rl[ray]'): the Ray row is skipped")
    print(
        f"scale: {n} rollouts x 2 requests at {concurrency} @ {latency * 1000:.0f} ms, endpoint in its own "
        f"process, median of {repeats}; {os.cpu_count()} CPUs; {_load()}"
    )
    with ScriptedEndpoint(policy, latency=latency, process=True, model="scripted") as endpoint:
        runs: dict[str, list[dict[str, float]]] = {v: [] for v in variants}
        for _ in range(repeats):
            for variant in variants:
                runs[variant].append(_run_worker(f"scale:{variant}", endpoint.base_url, concurrency, n))
    med = {v: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for v, rs in runs.items()}
    print(
        f"\n{'variant':<12}{'wall s':>8}{'start s':>9}{'rollouts/s':>12}{'driver RSS':>12}{'worker RSS':>12}"
        f"{'driver cpu':>12}{'workers cpu':>13}"
    )
    for variant in variants:
        m = med[variant]
        worker = f"{m['worker_rss']:>10.0f}MB" if m["worker_rss"] else f"{'-':>12}"
        print(
            f"{variant:<12}{m['wall']:>8.2f}{m['start']:>9.2f}{m['rate']:>12.0f}{m['driver_rss']:>10.0f}MB{worker}"
            f"{m['driver_cpu']:>11.1f}s{m['worker_cpu']:>12.1f}s"
        )
    one, two = med["workers=1"]["rate"], med["workers=2"]["rate"]
    print(f"\nworkers=2 / workers=1 rollouts/s: {two / one:.2f}x")
    if "ray x2" in med:
        ray_rate = med["ray x2"]["rate"]
        print(
            f"ray x2 / workers=2 rollouts/s: {ray_rate / two:.2f}x (Ray overhead {100 * (1 - ray_rate / two):+.0f}%)"
        )
    print(f"afterwards: {_load()}")
    verdict = "met" if two / one >= SCALE_TARGET else "MISSED"
    print(
        f"target at {concurrency} @ {latency * 1000:.0f} ms, workers=2 >= {SCALE_TARGET}x workers=1: {verdict}"
        " (on 2 cores the endpoint's own process needs one: with the lean transport one harness"
        " process already keeps it busy)"
    )
    if "ray x2" in med:
        verdict = "met" if med["ray x2"]["rate"] / two >= RAY_TARGET else "MISSED"
        print(f"target, ray x2 >= {RAY_TARGET}x workers=2: {verdict}")


# -- memory: the driver's peak RSS does not grow with the number of rollouts ---------------------
#
#     python benchmarks/bench_harness.py --memory          # 2,000 and 200,000 rollouts
#
# Both runs use the same 2,000 examples (1 and 100 rollouts each), write results.jsonl, and run
# in a fresh process against the scripted endpoint (256 @ 0 ms); "workers=2" is the same with
# two worker processes (the driver only schedules, writes and summarises). The driver keeps a
# running summary and at most `harness._engine.evaluation.KEPT_IN_MEMORY` rollouts, and reads the
# rollouts back from results.jsonl when asked. Target: peak RSS at 200,000 within 50 MB of 2,000.
MEMORY_SIZES = (2_000, 200_000)
MEMORY_EXAMPLES = 2_000
MEMORY_TARGET_MB = 50.0


def _memory_main() -> None:
    from harness import ScriptedEndpoint

    print(
        f"memory: driver peak RSS, {MEMORY_EXAMPLES:,} examples, 256 @ 0 ms, endpoint in its own process; {_load()}"
    )
    print(f"\n{'variant':<12}{'rollouts':>10}{'wall s':>9}{'rollouts/s':>12}{'driver peak RSS':>17}")
    verdicts = []
    with ScriptedEndpoint(policy, process=True, model="scripted") as endpoint:
        for variant in ("workers=1", "workers=2"):
            peaks = []
            for n in MEMORY_SIZES:
                per_example = n // MEMORY_EXAMPLES
                m = _run_worker(f"memory:{variant}:{per_example}", endpoint.base_url, 256, n)
                peaks.append(m["driver_rss"])
                print(f"{variant:<12}{n:>10,}{m['wall']:>9.1f}{m['rate']:>12.0f}{m['driver_rss']:>15.0f}MB")
            grew = peaks[-1] - peaks[0]
            verdicts.append((variant, grew))
    print()
    for variant, grew in verdicts:
        verdict = "met" if grew <= MEMORY_TARGET_MB else "MISSED"
        print(
            f"target, {variant}: peak at {MEMORY_SIZES[-1]:,} rollouts within {MEMORY_TARGET_MB:.0f} MB of "
            f"{MEMORY_SIZES[0]:,}: {grew:+.0f} MB, {verdict}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("-n", "--rollouts", type=int, default=1000)
    parser.add_argument(
        "--repeats", type=int, default=3, help="runs per (config, variant); the median is shown"
    )
    parser.add_argument(
        "--variants",
        default=",".join(VARIANTS),
        help=f"comma-separated subset of {','.join(VARIANTS)} (bare is always run)",
    )
    parser.add_argument(
        "--worker", nargs=4, metavar=("VARIANT", "BASE_URL", "CONCURRENCY", "N"), help=argparse.SUPPRESS
    )
    parser.add_argument(
        "--scale", action="store_true", help="workers=1 vs workers=2 (and Ray) at 256 @ 20 ms instead"
    )
    parser.add_argument(
        "--memory", action="store_true", help="the driver's peak RSS at 2,000 and 200,000 rollouts instead"
    )
    args = parser.parse_args()
    if args.worker:
        variant, base_url, concurrency, n = args.worker
        _worker(variant, base_url, int(concurrency), int(n))
        return
    if args.memory:
        sys.path.insert(0, str(ROOT))
        _memory_main()
        return
    if args.scale:
        sys.path.insert(0, str(ROOT))
        _scale_main(args.rollouts if args.rollouts != 1000 else 2000, args.repeats)
        return
    chosen = {v.strip() for v in args.variants.split(",") if v.strip()}
    if chosen - set(VARIANTS):
        parser.error(
            f"unknown variant(s) {sorted(chosen - set(VARIANTS))}; choose from {', '.join(VARIANTS)}"
        )
    variants = [v for v in VARIANTS if v == "bare" or v in chosen]

    sys.path.insert(0, str(ROOT))
    print(
        f"{args.rollouts} rollouts x 2 requests each, scripted endpoint in its own process, "
        f"median of {args.repeats}; {os.cpu_count()} CPUs; {_load()}"
    )
    verdicts: list[Verdict] = []
    for concurrency, latency in CONFIGS:
        med = _measure(concurrency, latency, variants, args.repeats, args.rollouts)
        config = f"{concurrency} @ {latency * 1000:.0f} ms"
        _print_config(config, variants, med, args.rollouts)
        verdicts += _harness_verdicts(config, med)
        verdicts += _sync_tool_verdicts(config, med)
    print(f"\nafterwards: {_load()}")
    for config, name, ok in verdicts:
        print(f"target at {config}, {name}: {'met' if ok else 'MISSED'}")


if __name__ == "__main__":
    main()
