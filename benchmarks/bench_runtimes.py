"""How fast do sandboxes start and answer, and how much does forking save a group's setup?

    python benchmarks/bench_runtimes.py [--runtimes bwrap docker:rubric-test-base:bookworm]
        [--starts 40] [--execs 50] [--group 8] [--setup-seconds 2]

Per runtime:
- start latency: open a sandbox with limits (memory, pids, CPUs: a cgroup on bwrap) and close
  it, `--starts` times; p50 and p95 of the open. On bwrap, against the start before (rebuilt
  below, interleaved in the same run): a shell wrote its pid to each controller's
  `cgroup.procs` (a cgroup move waits for an RCU grace period, 6-8 ms on a busy machine), then
  became bwrap, which made a cgroup for every controller whether capped or not. Now the shell
  moves itself through v1's `tasks` (no grace period) into the capped controllers only, and
  bwrap takes its options on a pipe while it gets its limits. Target: p50 under 20 ms;
- exec round trip: `true` in one open sandbox, `--execs` times; p50 and p95 (on bwrap with
  limits too, before and now: each command joins the cgroup the same way);
- one command: `runtime.run("true")` with limits, a sandbox made for one command, against
  opening a sandbox, one `exec`, closing it;
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
import json
import os
import statistics
import time
from collections.abc import Awaitable, Callable

from harness.runtimes import Runtime, Sandbox, SandboxConfig, alist_sandboxes, get_runtime
from harness.runtimes import _bwrap as bwrap
from harness.runtimes import _cgroups as cgroups
from harness.runtimes._bwrap_view import DEFAULT_DISK_MB, sandbox_args
from harness.runtimes._state import TOKEN_VAR, SandboxState

LIMITS = {"memory_mb": 512, "pids": 128, "cpus": 1.0}
_OLD_ENTER = 'for f; do shift; [ "$f" = -- ] && break; echo $$ > "$f" || exit 125; done; exec "$@"'


class _BeforeSandbox(bwrap.BwrapSandbox):
    """The bwrap sandbox as it started and joined its cgroup before (see the docstring)."""

    async def _start(self) -> None:
        config = self.config
        memory = (config.memory_mb + (config.disk_mb or DEFAULT_DISK_MB)) if config.memory_mb else None
        self._cgroup = cgroups.Cgroup(cgroups.parents(), pids=config.pids, memory_mb=memory, cpus=config.cpus)
        read_end, write_end = os.pipe()
        options = sandbox_args(self.runtime.rootfs, config, self.state.directory / "socket")
        command = ["bwrap", *options, "--setenv", "PATH", "/usr/bin:/bin", "--info-fd", str(write_end)]
        command = ["/bin/sh", "-c", _OLD_ENTER, "sh", *self._procs(), "--", *command, "--", *bwrap._KEEPER]
        try:
            self._process = await asyncio.create_subprocess_exec(
                *command, stdin=asyncio.subprocess.DEVNULL, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, pass_fds=(write_end,), start_new_session=True,
                env={"PATH": "/usr/bin:/bin", TOKEN_VAR: self.state.token},
            )  # fmt: skip
            os.close(write_end)
            write_end = -1
            assert self._process.stdout is not None
            assert (await self._process.stdout.readline()).strip() == b"ready"
            self._init_pid = int(json.loads(os.read(read_end, 65536).decode())["child-pid"])
        finally:
            os.close(read_end)
            if write_end >= 0:
                os.close(write_end)
        self.state.hold(self._process.pid)
        self.state.hold(self._init_pid)
        self.state.save()

    def _procs(self) -> list[str]:
        assert self._cgroup is not None
        return [str(d / "cgroup.procs") for d in self._cgroup.dirs]

    def _enter_args(self, cwd: str, user: str | None) -> list[str]:
        command = super()._enter_args(cwd, user)
        if self._cgroup is None:
            return command
        return ["/bin/sh", "-c", _OLD_ENTER, "sh", *self._procs(), *command[command.index("--", 4) :]]


class _BeforeRuntime(bwrap.BwrapRuntime):
    def _make(self, config: SandboxConfig, state: SandboxState) -> Sandbox:
        return _BeforeSandbox(config, state, self)


SETUP = 'mkdir -p repo && for i in $(seq 200); do echo "line $i" > repo/file_$i.txt; done && sleep {seconds}'


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def p50_p95(times: list[float]) -> str:
    return f"p50 {percentile(times, 0.5) * 1000:7.1f} ms   p95 {percentile(times, 0.95) * 1000:7.1f} ms"


async def interleaved(arms: dict[str, Callable[[], Awaitable[float]]], rounds: int) -> dict[str, list[float]]:
    """Each arm's timings, the arms taking turns so load on the machine falls on each alike."""
    times: dict[str, list[float]] = {name: [] for name in arms}
    for _ in range(rounds):
        for name, arm in arms.items():
            times[name].append(await arm())
    return times


async def one_start(runtime: Runtime) -> float:
    began = time.perf_counter()
    box = await runtime.sandbox(**LIMITS)  # type: ignore[arg-type]
    elapsed = time.perf_counter() - began
    await box.close()
    return elapsed


async def exec_round_trips(runtime: Runtime, execs: int, limits: dict[str, float]) -> list[float]:
    async with runtime.sandbox(**limits) as box:  # type: ignore[arg-type]
        times = []
        for _ in range(execs):
            began = time.perf_counter()
            await box.exec(["true"])
            times.append(time.perf_counter() - began)
    return times


async def one_command(runtime: Runtime, *, once: bool) -> float:
    config = SandboxConfig(memory_mb=512, pids=128)
    began = time.perf_counter()
    if once:
        assert (await runtime.run("true", config=config)).ok
    else:
        async with runtime.sandbox(memory_mb=512, pids=128) as box:
            assert (await box.exec("true")).ok
    return time.perf_counter() - began


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


async def measure(spec: str, args: argparse.Namespace) -> None:
    runtime = get_runtime(spec)
    async with runtime.sandbox():  # warm: a build context is built, the image cache is hot
        pass
    print(f"{spec}")
    if spec == "bwrap":
        before = _BeforeRuntime(spec, runtime.run_id)
        await before.check()
        starts = await interleaved(
            {"before": lambda: one_start(before), "now": lambda: one_start(runtime)}, args.starts
        )
        ratio = percentile(starts["now"], 0.5) / percentile(starts["before"], 0.5)
        print(f"  start        before {p50_p95(starts['before'])}")
        print(f"  start        now    {p50_p95(starts['now'])}   p50 now/before {ratio:.2f}")
        limited = {
            k: await exec_round_trips(r, args.execs, LIMITS)
            for k, r in (("before", before), ("now", runtime))
        }
        ratio = statistics.median(limited["now"]) / statistics.median(limited["before"])
        print(f"  exec, limits before {p50_p95(limited['before'])}")
        print(f"  exec, limits now    {p50_p95(limited['now'])}   p50 now/before {ratio:.2f}")
    else:
        starts = await interleaved({"now": lambda: one_start(runtime)}, args.starts)
        print(f"  start        {p50_p95(starts['now'])}")
    execs = await exec_round_trips(runtime, args.execs, {})
    print(f"  exec `true`  {p50_p95(execs)}")
    single = await interleaved(
        {
            "open+exec": lambda: one_command(runtime, once=False),
            "run": lambda: one_command(runtime, once=True),
        },
        args.starts,
    )
    ratio = statistics.median(single["run"]) / statistics.median(single["open+exec"])
    print(f"  one command  open+exec+close {p50_p95(single['open+exec'])}")
    print(f"  one command  runtime.run     {p50_p95(single['run'])}   p50 run/open+exec {ratio:.2f}")
    plain = await group_without_fork(spec, args.group, args.setup_seconds)
    forked = await group_with_fork(spec, args.group, args.setup_seconds)
    at_once = await group_with_fork(spec, args.group, args.setup_seconds, at_once=True)
    print(
        f"  group of {args.group}, setup {args.setup_seconds:g} s: no fork {plain:.2f} s, fork {forked:.2f} s "
        f"({plain / forked:.1f}x), fork x{args.group} at once {at_once:.2f} s ({plain / at_once:.1f}x)"
    )
    count = args.concurrent or (32 if spec.startswith("docker") else 64)
    wall, left = await concurrent(spec, count)
    print(f"  {count} sandboxes at once: {wall:.2f} s, {left} left after")


async def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runtimes", nargs="+", default=["bwrap", "docker:rubric-test-base:bookworm"])
    parser.add_argument("--starts", type=int, default=40)
    parser.add_argument("--execs", type=int, default=50)
    parser.add_argument("--group", type=int, default=8)
    parser.add_argument("--setup-seconds", type=float, default=2.0)
    parser.add_argument("--concurrent", type=int, help="sandboxes at once (default: 64 bwrap, 32 Docker)")
    args = parser.parse_args()
    for spec in args.runtimes:
        await measure(spec, args)


if __name__ == "__main__":
    asyncio.run(main())
