"""How fast do sandboxes start and answer, and how much does forking save a group's setup?

    python benchmarks/bench_runtimes.py [--runtimes bwrap docker:rubric-test-base:bookworm]
        [--starts 20] [--execs 50] [--group 8] [--setup-seconds 2]

Per runtime:
- start latency: open a sandbox (limits set) and close it, `--starts` times; p50 and p95 of the open;
- exec round trip: `true` in one open sandbox, `--execs` times; p50 and p95;
- group setup: a group of `--group` rollouts whose task setup takes `--setup-seconds` (a
  repository of 200 files written, then a wait standing in for installing dependencies). Without
  fork every rollout opens a sandbox and sets it up; with fork one sandbox is set up and forked
  `--group` times. Run one after the other, so the ratio measures work, not how many cores there
  are; both arms run in this same process, back to back. "fork x8 at once" forks the group
  concurrently, as a harness starting a group's rollouts together would;
- concurrency: `--concurrent` sandboxes (default 64 bwrap, 32 Docker) opened at once, each
  running a command, then closed; wall time, and what is left after (must be 0).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

from harness.runtimes import Sandbox, alist_sandboxes, get_runtime

SETUP = 'mkdir -p repo && for i in $(seq 200); do echo "line $i" > repo/file_$i.txt; done && sleep {seconds}'


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


async def start_latency(spec: str, starts: int) -> list[float]:
    runtime = get_runtime(spec)
    async with runtime.sandbox():  # warm: a build context is built, the image cache is hot
        pass
    times = []
    for _ in range(starts):
        began = time.perf_counter()
        box = await runtime.sandbox(memory_mb=512, pids=128, cpus=1)
        times.append(time.perf_counter() - began)
        await box.close()
    return times


async def exec_round_trip(spec: str, execs: int) -> list[float]:
    async with get_runtime(spec).sandbox() as box:
        times = []
        for _ in range(execs):
            began = time.perf_counter()
            await box.exec(["true"])
            times.append(time.perf_counter() - began)
    return times


async def setup(box: Sandbox, seconds: float) -> None:
    done = await box.exec(SETUP.format(seconds=seconds))
    assert done.ok, done


async def group_without_fork(spec: str, group: int, seconds: float) -> float:
    runtime = get_runtime(spec)
    began = time.perf_counter()
    boxes = []
    for _ in range(group):
        box = await runtime.sandbox()
        await setup(box, seconds)
        boxes.append(box)
    elapsed = time.perf_counter() - began
    for box in boxes:
        assert (await box.exec("ls repo | wc -l")).stdout.strip() == "200"
        await box.close()
    return elapsed


async def group_with_fork(spec: str, group: int, seconds: float, *, at_once: bool = False) -> float:
    runtime = get_runtime(spec)
    began = time.perf_counter()
    template = await runtime.sandbox()
    await setup(template, seconds)
    if at_once:
        copies = list(await asyncio.gather(*(template.fork() for _ in range(group))))
    else:
        copies = [await template.fork() for _ in range(group)]
    elapsed = time.perf_counter() - began
    for box in copies:
        assert (await box.exec("ls repo | wc -l")).stdout.strip() == "200"
        await box.close()
    await template.close()
    return elapsed


async def concurrent(spec: str, count: int) -> tuple[float, int]:
    """Open `count` sandboxes at once, run a command in each, close them; (seconds, leftovers)."""
    runtime = get_runtime(spec, run_id=f"bench-{time.time_ns()}")

    async def one() -> None:
        async with runtime.sandbox(memory_mb=256, pids=64) as box:
            assert (await box.exec("echo ok")).stdout == "ok\n"

    began = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(count)))
    elapsed = time.perf_counter() - began
    left = [r for r in await alist_sandboxes() if r["run"] == runtime.run_id]
    return elapsed, len(left)


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runtimes", nargs="+", default=["bwrap", "docker:rubric-test-base:bookworm"])
    parser.add_argument("--starts", type=int, default=20)
    parser.add_argument("--execs", type=int, default=50)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--setup-seconds", type=float, default=2.0)
    parser.add_argument("--concurrent", type=int, help="sandboxes at once (default: 64 bwrap, 32 Docker)")
    args = parser.parse_args()
    for spec in args.runtimes:
        starts = await start_latency(spec, args.starts)
        execs = await exec_round_trip(spec, args.execs)
        plain = await group_without_fork(spec, args.group, args.setup_seconds)
        forked = await group_with_fork(spec, args.group, args.setup_seconds)
        at_once = await group_with_fork(spec, args.group, args.setup_seconds, at_once=True)
        count = args.concurrent or (32 if spec.startswith("docker") else 64)
        wall, left = await concurrent(spec, count)
        print(f"{spec}")
        print(
            f"  start        p50 {percentile(starts, 0.5) * 1000:7.1f} ms   p95 {percentile(starts, 0.95) * 1000:7.1f} ms"
        )
        print(
            f"  exec `true`  p50 {statistics.median(execs) * 1000:7.1f} ms   p95 {percentile(execs, 0.95) * 1000:7.1f} ms"
        )
        print(
            f"  group of {args.group}, setup {args.setup_seconds:g} s: no fork {plain:.2f} s, fork {forked:.2f} s "
            f"({plain / forked:.1f}x), fork x{args.group} at once {at_once:.2f} s ({plain / at_once:.1f}x)"
        )
        print(f"  {count} sandboxes at once: {wall:.2f} s, {left} left after")


if __name__ == "__main__":
    asyncio.run(main())
