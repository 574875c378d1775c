"""What does a `run_python` call cost on `harness.runtimes`, against the sandbox it replaced?

Run: python benchmarks/bench_sandbox.py [--calls N] [--concurrency C]

Times N calls of a small program (`print(sum(range(1000)))`) with the python environment's
default limits, three ways, interleaved in the same run:
- before: the python environment's own bubblewrap sandbox as it was (rebuilt below from the
  removed `envs/reference/_sandbox.py`): a per-call cgroup (pids, memory) joined by a shell
  that then execs bwrap with its own argument list, the interpreter reading the code on stdin;
- open+exec: a `harness.runtimes` bwrap sandbox opened, the program run in it with `exec`,
  the sandbox closed (what `runtime.run` does on a runtime that cannot start around one
  command, and what the python environment did with `runtime="bwrap"`);
- now: `CodeRunner` (the python environment's `run_python`): `runtime.run`, one bwrap held by
  its `--args` pipe until it is in its cgroup, the program as the namespace's first process.
Prints the median per-call latency of each (sequential) and the wall time per call with C in
flight, and the ratios now / before and now / open+exec.
"""

from __future__ import annotations

import argparse
import asyncio
import glob
import os
import statistics
import sys
import sysconfig
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from envs.reference._sandbox import _BOOTSTRAP, CodeRunner
from harness.runtimes import Runtime
from harness.runtimes import _cgroups as cgroups
from harness.runtimes._base import Capture
from harness.runtimes._bwrap_view import masks

CODE = "print(sum(range(1000)))"
EXPECTED = "499500"

# ----------------------------------------------------------------------------- before, rebuilt

_OLD_BOOTSTRAP = r"""
import resource, sys, traceback
cpu, mem, fsize, nproc = (int(a) for a in sys.argv[1:5])
for kind, value, extra in ((resource.RLIMIT_CPU, cpu, 1), (resource.RLIMIT_AS, mem, 0),
                           (resource.RLIMIT_FSIZE, fsize, 0), (resource.RLIMIT_NPROC, nproc, 0),
                           (resource.RLIMIT_CORE, 0, 0)):
    if value > 0 or kind == resource.RLIMIT_CORE:
        resource.setrlimit(kind, (value, value + extra))
source = sys.stdin.read()
sys.stdin = open("/dev/null")
sys.argv = ["<cell>"]
try:
    exec(compile(source, "<cell>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
except SystemExit:
    raise
except BaseException as exc:
    traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
    sys.stdout.flush()
    sys.exit(1)
"""
_ENTER = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'


def _old_bwrap_args() -> list[str]:
    """The removed sandbox's command line up to the interpreter (no network, 64 MB scratch)."""
    prefix = os.path.realpath(sys.base_prefix)
    candidate = Path(prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    executable = str(candidate) if candidate.exists() else os.path.realpath(sys.executable)
    stdlib = os.path.realpath(os.path.dirname(os.__file__))
    libdir = sysconfig.get_config_var("LIBDIR") or os.path.join(prefix, "lib")
    shared = sorted(glob.glob(os.path.join(glob.escape(libdir), "libpython*.so*")))
    args = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", "--ro-bind", "/usr", "/usr"]
    for name in ("/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"):
        if os.path.islink(name):
            args += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            args += ["--ro-bind", name, name]
    for name in ("/etc/ld.so.cache", "/etc/localtime"):
        args += ["--ro-bind-try", name, name]
    for path in [executable, stdlib, *shared]:
        if not path.startswith("/usr/"):
            args += ["--ro-bind", path, path]
    for path in masks([("/usr", "/usr"), (stdlib, stdlib)]):
        args += ["--tmpfs", path]
    args += [
        "--proc",
        "/proc",
        "--dev",
        "/dev",
        "--size",
        str(64 << 20),
        "--tmpfs",
        "/tmp",
        "--chdir",
        "/tmp",
    ]
    args += ["--hostname", "sandbox", "--clearenv"]
    for key, value in {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": "/tmp", "TMPDIR": "/tmp"}.items():
        args += ["--setenv", key, value]
    return [*args, "--setenv", "LANG", "C.UTF-8", "--", executable]


async def before(code: str) -> str:
    """One call the way the removed sandbox made it (default limits: 512 MB, 32 processes)."""
    where = {c: p for c, p in cgroups.parents().items() if c in ("pids", "memory", "")}
    cgroup = cgroups.Cgroup(where, pids=32, memory_mb=512 + 64, cpus=None) if where else None
    numbers = [str(n) for n in (10, 512 << 20, 64 << 20, 0 if cgroup else 32)]
    command = [*_old_bwrap_args(), "-I", "-c", _OLD_BOOTSTRAP, *numbers]
    if cgroup is not None:
        command = [
            "/bin/sh",
            "-c",
            _ENTER,
            "sh",
            *(str(d / "cgroup.procs") for d in cgroup.dirs),
            "--",
            *command,
        ]
    try:
        process = await asyncio.create_subprocess_exec(
            *command, env={"PATH": "/usr/bin:/bin"}, stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        output, _ = await asyncio.wait_for(process.communicate(code.encode()), 10)
    finally:
        if cgroup is not None:
            cgroup.remove()
    return output.decode()


# ----------------------------------------------------------------------------- the arms


async def open_and_exec(runner: CodeRunner, code: str) -> str:
    """One call through a sandbox opened, exec'd into and closed (the generic `run`)."""
    limits = runner.limits
    argv = [runner.python, "-I", "-c", _BOOTSTRAP, str(limits.cpu_seconds), str(limits.memory_mb << 20)]
    raw = await Runtime._run_once(
        runner.runtime, runner.config, argv, stdin=code.encode(), timeout=limits.timeout, user=None,
        out=Capture(), err=Capture(),
    )  # fmt: skip
    return raw.stdout.decode()


async def now(runner: CodeRunner, code: str) -> str:
    return (await runner.run(code)).output


Arm = Callable[[str], Awaitable[str]]


async def _one(arm: Arm) -> float:
    started = time.perf_counter()
    output = await arm(CODE)
    elapsed = time.perf_counter() - started
    assert output.strip() == EXPECTED, output
    return elapsed


async def _concurrent(arm: Arm, calls: int, concurrency: int) -> float:
    """Seconds per call (wall time / calls) with `concurrency` calls in flight."""
    limit = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with limit:
            await _one(arm)

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(calls)))
    return (time.perf_counter() - started) / calls


async def main(calls: int, concurrency: int) -> None:
    runner = CodeRunner()
    arms: dict[str, Arm] = {
        "before": before,
        "open+exec": lambda code: open_and_exec(runner, code),
        "now": lambda code: now(runner, code),
    }
    print(f"now: {runner.describe()}")
    for arm in arms.values():  # warm caches of each
        for _ in range(3):
            await _one(arm)
    sequential: dict[str, list[float]] = {name: [] for name in arms}
    for _ in range(calls):  # interleaved, so load on the machine falls on every arm alike
        for name, arm in arms.items():
            sequential[name].append(await _one(arm))
    seq = {name: statistics.median(times) for name, times in sequential.items()}
    par = {name: await _concurrent(arm, calls, concurrency) for name, arm in arms.items()}
    print(
        f"{'ms per call':28}"
        + "".join(f"{name:>12}" for name in arms)
        + f"{'now/before':>12}{'now/open+exec':>15}"
    )
    for label, values in (("sequential (median)", seq), (f"{concurrency} in flight (wall)", par)):
        cells = "".join(f"{values[name] * 1e3:12.1f}" for name in arms)
        ratios = f"{values['now'] / values['before']:12.2f}{values['now'] / values['open+exec']:15.2f}"
        print(f"{label:28}{cells}{ratios}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--concurrency", type=int, default=8)
    options = parser.parse_args()
    asyncio.run(main(options.calls, options.concurrency))
