"""What does isolating model code cost per `run_python` call?

Run: python benchmarks/bench_sandbox.py [--calls N] [--concurrency C]

Times N calls of a small program (`print(sum(range(1000)))`) three ways in the same run:
- baseline: the previous design, a plain `python -I` child process with rlimits
  (`Sandbox(unsafe=True)`, which also makes and deletes a scratch folder per call);
- bubblewrap: the sandbox as the python environment uses it (namespaces, private tmpfs,
  per-call cgroup when available);
then prints the per-call latency of each, sequential and with C calls in flight, and the
ratio bubblewrap / baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from envs.reference._sandbox import Sandbox

CODE = "print(sum(range(1000)))"


async def _sequential(box: Sandbox, calls: int) -> float:
    """Median seconds per call."""
    times = []
    for _ in range(calls):
        started = time.perf_counter()
        result = await box.run(CODE)
        times.append(time.perf_counter() - started)
        assert result.output.strip() == "499500", result.render()
    return statistics.median(times)


async def _concurrent(box: Sandbox, calls: int, concurrency: int) -> float:
    """Seconds per call (wall time / calls) with `concurrency` calls in flight."""
    limit = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with limit:
            await box.run(CODE)

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(calls)))
    return (time.perf_counter() - started) / calls


async def main(calls: int, concurrency: int) -> None:
    with contextlib.redirect_stderr(io.StringIO()):  # the unsafe build's warning
        baseline = Sandbox(unsafe=True)
    isolated = Sandbox()
    print(f"isolation: {isolated.describe()}")
    await _sequential(isolated, 3)  # warm caches of both
    await _sequential(baseline, 3)
    seq_base, seq_bwrap = await _sequential(baseline, calls), await _sequential(isolated, calls)
    par_base = await _concurrent(baseline, calls, concurrency)
    par_bwrap = await _concurrent(isolated, calls, concurrency)
    print(f"{'':28}{'baseline':>12}{'bubblewrap':>12}{'ratio':>8}")
    print(
        f"{'sequential, ms per call':28}{seq_base * 1e3:12.1f}{seq_bwrap * 1e3:12.1f}{seq_bwrap / seq_base:8.2f}"
    )
    label = f"{concurrency} in flight, ms per call"
    print(f"{label:28}{par_base * 1e3:12.1f}{par_bwrap * 1e3:12.1f}{par_bwrap / par_base:8.2f}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=8)
    options = parser.parse_args()
    asyncio.run(main(options.calls, options.concurrency))
