"""Run a snippet of model-written Python in a child process with limits.

Why a subprocess and not `exec`: the model's code may loop forever, allocate without bound or
print megabytes; a child process can be killed and resource-limited without hurting the
evaluation. It runs asynchronously (`asyncio.create_subprocess_exec`), so hundreds of
concurrent rollouts never block the event loop.

The limits are applied by a tiny bootstrap that runs *inside* the child before the user code
(`resource.setrlimit` for CPU seconds and address space), rather than through `preexec_fn`,
which is unsafe in a process with threads (the harness runs its loop on a background thread).
The code is sent on stdin, so nothing is written into the scratch directory but what the code
itself writes there.

This is resource limiting, not isolation: the code can read whatever the user running the
evaluation can. Run untrusted models inside a container or VM.
"""

from __future__ import annotations

import asyncio
import os
import signal
import sys
from dataclasses import dataclass
from pathlib import Path

# Runs in the child: apply limits, read the code from stdin, run it as __main__, and print
# tracebacks without this bootstrap's own frame.
_BOOTSTRAP = r"""
import resource, sys, traceback
cpu, mem = int(sys.argv[1]), int(sys.argv[2])
if cpu > 0:
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
if mem > 0:
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
source = sys.stdin.read()
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


@dataclass(frozen=True)
class SandboxLimits:
    """Limits for one run: wall-clock and CPU seconds, address space, and output size."""

    timeout: float = 10.0
    cpu_seconds: int = 10
    memory_mb: int = 512
    output_limit: int = 4000

    def __post_init__(self) -> None:
        if self.timeout <= 0:
            raise ValueError(f"SandboxLimits.timeout must be > 0 seconds, got {self.timeout}")
        if self.cpu_seconds < 0 or self.memory_mb < 0:
            raise ValueError("SandboxLimits.cpu_seconds and memory_mb must be >= 0 (0 = no limit)")
        if self.output_limit < 1:
            raise ValueError(f"SandboxLimits.output_limit must be >= 1 byte, got {self.output_limit}")


@dataclass(frozen=True)
class RunResult:
    """What one run produced: the (possibly truncated) output and how the process ended."""

    output: str
    returncode: int | None
    timed_out: bool
    truncated: bool
    total_bytes: int
    limits: SandboxLimits

    def render(self) -> str:
        """The text the model sees: output, then a bracketed note on anything unusual."""
        notes: list[str] = []
        if self.truncated:
            notes.append(
                f"[output truncated: showing the first {self.limits.output_limit} of "
                f"{self.total_bytes} bytes]"
            )
        if self.timed_out:
            notes.append(f"[timed out after {self.limits.timeout:g} s; the process was killed]")
        elif self.returncode is not None and self.returncode < 0:
            name = (
                signal.Signals(-self.returncode).name if -self.returncode in signal.valid_signals() else "?"
            )
            why = " (CPU time limit exceeded)" if name == "SIGXCPU" else ""
            notes.append(f"[killed by signal {name}{why}]")
        elif self.returncode:
            notes.append(f"[exit code {self.returncode}]")
        body = self.output if self.output else ("" if notes else "(no output)")
        return "\n".join(part for part in [body.rstrip("\n"), *notes] if part)


def _child_env(workdir: Path) -> dict[str, str]:
    """A minimal environment: the model's code must not see API keys in ours."""
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(workdir),
        "TMPDIR": str(workdir),
        "LANG": "C.UTF-8",
    }


def _kill_group(process: asyncio.subprocess.Process) -> None:
    """Kill the child's whole process group (it leads its own session), so nothing it started
    in the background outlives the call, even after the child itself has exited."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # the group is already gone


async def run_code(code: str, workdir: str | Path, limits: SandboxLimits | None = None) -> RunResult:
    """Run `code` with `python -I` in `workdir` under `limits`; stdout and stderr are merged."""
    limits = limits or SandboxLimits()
    workdir = Path(workdir)
    if not workdir.is_dir():
        raise FileNotFoundError(f"sandbox working directory {workdir} does not exist")
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-I",
        "-c",
        _BOOTSTRAP,
        str(limits.cpu_seconds),
        str(limits.memory_mb * 1024 * 1024),
        cwd=workdir,
        env=_child_env(workdir),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    kept = bytearray()
    total = 0

    async def feed_and_collect() -> None:
        nonlocal total
        assert process.stdin is not None and process.stdout is not None
        try:
            process.stdin.write(code.encode("utf-8", errors="replace"))
            await process.stdin.drain()
            process.stdin.close()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the child died before reading everything; its output says why
        while chunk := await process.stdout.read(65536):
            total += len(chunk)
            if len(kept) < limits.output_limit:
                kept.extend(chunk[: limits.output_limit - len(kept)])
        await process.wait()

    timed_out = False
    try:
        await asyncio.wait_for(feed_and_collect(), timeout=limits.timeout)
    except TimeoutError:
        timed_out = True
        _kill_group(process)
        await process.wait()
    finally:
        _kill_group(process)  # also on success (background children) and on cancellation
    return RunResult(
        output=kept.decode("utf-8", errors="replace"),
        returncode=process.returncode,
        timed_out=timed_out,
        truncated=total > limits.output_limit,
        total_bytes=total,
        limits=limits,
    )


__all__ = ["RunResult", "SandboxLimits", "run_code"]
