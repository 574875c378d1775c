"""Run a snippet of model-written Python in a fresh `harness.runtimes` sandbox, with limits.

Each call is one `runtime.run(...)`: a sandbox made for the program and ended with it, so no
process, file or variable of one call reaches the next or another rollout's. By default the
runtime is `bwrap` (bubblewrap, Linux namespaces; see `harness.runtimes`), which gives the
program fresh user, PID, mount, network, IPC, UTS and cgroup namespaces, a read-only view of
the host's /usr with every installed package and rubric data folder covered, a private
size-capped `/tmp` as its working directory, no network unless the environment opts in, no
variables of ours, a cgroup (processes, memory) and rlimits, and nothing left running after
it. What this module adds is only what is specific to Python snippets:

- the harness's own interpreter, standard library and shared library, mounted read-only
  where they lie outside /usr (the runtime covers the `site-packages` inside them);
- a tiny bootstrap that applies the per-process limits the runtimes have no setting for (CPU
  seconds, address space), merges stderr into stdout, reads the code from stdin and runs it
  as `__main__`, printing tracebacks without its own frame;
- the limits of one call (`SandboxLimits`) and the text the model sees (`RunResult.render`).

Other runtimes run the image's `python3` the same way (`docker:IMAGE`: as user nobody, so the
image's files stay its own; `bwrap:ROOTFS_DIR`). Where bubblewrap is missing or cannot create
namespaces `CodeRunner` refuses to be built, with one line saying how to install it.
`CodeRunner(unsafe=True)` runs the code on the `local` runtime instead (a plain child process
with the same limits in a throwaway folder) and warns: that is resource limiting, not isolation.
"""

from __future__ import annotations

import glob
import os
import signal
import sys
import sysconfig
from dataclasses import dataclass

from envs._tools.functions import OUTPUT_LIMIT, truncation_note
from harness._core.aio import run_sync
from harness._core.errors import ConfigError
from harness.runtimes import Runtime, RuntimeUnavailableError, SandboxConfig, get_runtime

# Runs in the sandbox: merge stderr into stdout, apply the limits the runtimes do not set,
# read the code from stdin, run it as __main__, and print tracebacks without this bootstrap's
# own frame. Arguments: CPU seconds and address space in bytes (0 = leave as is).
_BOOTSTRAP = r"""
import os, resource, sys
os.dup2(1, 2)
cpu, memory = (int(a) for a in sys.argv[1:3])
if cpu > 0:
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
if memory > 0:
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
source = sys.stdin.read()
sys.stdin = open("/dev/null")
sys.argv = ["<cell>"]
try:
    exec(compile(source, "<cell>", "exec"), {"__name__": "__main__", "__builtins__": __builtins__})
except SystemExit:
    raise
except BaseException as exc:
    import traceback  # only now: importing it costs a few ms of every run
    traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next)
    sys.stdout.flush()
    sys.exit(1)
"""

SCRATCH = "/tmp"  # the sandbox's working directory: its private tmpfs
UNSAFE_WARNING = (
    "rubric: unsafe_sandbox=True: model code runs WITHOUT isolation; it can read your files and "
    "secrets and write anywhere you can. Use bubblewrap on Linux for untrusted models."
)


@dataclass(frozen=True)
class SandboxLimits:
    """Limits for one run.

    Attributes:
        timeout: Wall-clock seconds before the whole process tree is killed.
        cpu_seconds: CPU seconds per process (RLIMIT_CPU); 0 = no limit.
        memory_mb: Memory for the whole tree where the runtime has a cgroup (bubblewrap adds
            the scratch tmpfs, which is charged there too), and the address space of each
            process (RLIMIT_AS) always; 0 = no limit.
        output_limit: Bytes of output kept (the rest is counted and cut).
        disk_mb: Size of the private scratch tmpfs, and the largest file (RLIMIT_FSIZE).
        max_processes: Processes and threads the tree may hold at once.
    """

    timeout: float = 10.0
    cpu_seconds: int = 10
    memory_mb: int = 512
    output_limit: int = OUTPUT_LIMIT
    disk_mb: int = 64
    max_processes: int = 32

    def __post_init__(self) -> None:
        if not self.timeout > 0:
            raise ConfigError(f"SandboxLimits.timeout must be > 0 seconds, got {self.timeout}")
        if self.cpu_seconds < 0 or self.memory_mb < 0:
            raise ConfigError("SandboxLimits.cpu_seconds and memory_mb must be >= 0 (0 = no limit)")
        if self.output_limit < 1:
            raise ConfigError(f"SandboxLimits.output_limit must be >= 1 byte, got {self.output_limit}")
        if self.disk_mb < 1 or self.max_processes < 4:
            raise ConfigError(
                f"SandboxLimits.disk_mb must be >= 1 and max_processes >= 4 (the sandbox's own "
                f"processes and the interpreter), got {self.disk_mb} and {self.max_processes}"
            )


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
            notes.append(truncation_note(self.limits.output_limit, self.total_bytes))
        if self.timed_out:
            notes.append(f"[timed out after {self.limits.timeout:g} s; the process was killed]")
        elif self.returncode is not None and self.returncode < 0:
            name = (
                signal.Signals(-self.returncode).name if -self.returncode in signal.valid_signals() else "?"
            )
            why = " (CPU time limit exceeded)" if name == "SIGXCPU" else ""
            why = " (memory limit exceeded)" if name == "SIGKILL" and self.limits.memory_mb else why
            notes.append(f"[killed by signal {name}{why}]")
        elif self.returncode:
            notes.append(f"[exit code {self.returncode}]")
        body = self.output if self.output else ("" if notes else "(no output)")
        return "\n".join(part for part in [body.rstrip("\n"), *notes] if part)


def _interpreter_mounts() -> tuple[str, dict[str, str]]:
    """The harness's real (non-venv) interpreter, and read-only mounts of what it needs outside
    /usr (itself, its standard library, its shared library), each at its own path."""
    prefix = os.path.realpath(sys.base_prefix)
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidate = os.path.join(prefix, "bin", version)
    executable = candidate if os.path.exists(candidate) else os.path.realpath(sys.executable)
    stdlib = os.path.realpath(os.path.dirname(os.__file__))
    libdir = sysconfig.get_config_var("LIBDIR") or os.path.join(prefix, "lib")
    shared = sorted(glob.glob(os.path.join(glob.escape(libdir), "libpython*.so*")))
    wanted = [executable, stdlib, *shared]
    return executable, {path: path for path in wanted if not path.startswith("/usr/")}


def warn_unsafe() -> None:
    """Say on stderr that model code runs unisolated (each unsafe build and each run)."""
    print(UNSAFE_WARNING, file=sys.stderr, flush=True)


class CodeRunner:
    """Runs model code, each call in a fresh sandbox of one runtime, under `limits`.

    Args:
        limits: Time, CPU, memory, output, disk and process limits for each call.
        network: Give the code the host's network (off by default).
        unsafe: Run on the `local` runtime (a plain child process with the same limits, no
            isolation), for machines without bubblewrap. Warns on every build.
        runtime: The runtime each call's sandbox comes from: a spec ("bwrap", the default;
            "docker:IMAGE", "bwrap:ROOTFS_DIR") or a `harness.runtimes.Runtime`. Its image
            needs python3; on Docker the code runs as user nobody (65534).

    Raises:
        RuntimeUnavailableError: bubblewrap is missing or cannot create namespaces, and
            `unsafe` is not set; or the runtime cannot apply the limits here (root without a
            cgroup, where the kernel does not apply the process limit).
    """

    def __init__(
        self,
        limits: SandboxLimits | None = None,
        *,
        network: bool = False,
        unsafe: bool = False,
        runtime: str | Runtime | None = None,
    ):
        if runtime is not None and unsafe:
            raise ConfigError(
                "pass either runtime= or unsafe_sandbox=True, not both (runtime='local' is the unsafe one)"
            )
        self.limits = limits or SandboxLimits()
        self.network = network
        self.unsafe = unsafe
        spec = runtime if runtime is not None else ("local" if unsafe else "bwrap")
        self.runtime = get_runtime(spec) if isinstance(spec, str) else spec
        if unsafe:
            warn_unsafe()
        self.python, mounts = self._interpreter()
        self.config = self._sandbox_config(mounts)
        if self.runtime.kind_name == "bwrap":  # refused now, not at the first call (Docker: then)
            try:
                run_sync(self.runtime.check(self.config))
            except RuntimeUnavailableError as exc:
                raise RuntimeUnavailableError(
                    f"cannot sandbox model code: {exc}, or pass unsafe_sandbox=True to run model code unisolated"
                ) from None

    def _interpreter(self) -> tuple[str, dict[str, str]]:
        """The python to run and the mounts it needs: on the host's system (`bwrap`) the
        harness's own interpreter, on `local` this one, elsewhere the image's python3."""
        if self.runtime.spec == "bwrap":
            return _interpreter_mounts()
        if self.runtime.kind_name == "local":
            return sys.executable, {}
        return "python3", {}

    def _sandbox_config(self, mounts: dict[str, str]) -> SandboxConfig:
        limits = self.limits
        return SandboxConfig(
            memory_mb=limits.memory_mb or None,
            pids=limits.max_processes,
            disk_mb=limits.disk_mb,
            network="host" if self.network else "none",
            workdir=SCRATCH,
            mounts=mounts,
        )

    def describe(self) -> str:
        """One line saying what isolates and limits each call."""
        return f"a fresh sandbox per call: {self.runtime.describe()}"

    async def run(self, code: str) -> RunResult:
        """Run `code` as a fresh program; stdout and stderr are merged into the result."""
        limits = self.limits
        argv = [self.python, "-I", "-c", _BOOTSTRAP, str(limits.cpu_seconds), str(limits.memory_mb << 20)]
        done = await self.runtime.run(
            argv,
            config=self.config,
            stdin=code,
            timeout=limits.timeout,
            # nobody on Docker: the image's files stay its own (bwrap maps only our user)
            user="65534:65534" if self.runtime.kind_name == "docker" else None,
            max_output=2 * limits.output_limit,  # its head is the output_limit bytes shown
        )
        # stderr holds only what came before the bootstrap (an interpreter or sandbox failure)
        output = done.stdout.encode() + done.stderr.encode()
        total = len(output) + done.stdout_cut + done.stderr_cut
        return RunResult(
            output=output[: limits.output_limit].decode("utf-8", errors="replace"),
            returncode=done.exit_code,
            timed_out=done.timed_out,
            truncated=total > limits.output_limit,
            total_bytes=total,
            limits=limits,
        )


async def run_code(
    code: str,
    limits: SandboxLimits | None = None,
    *,
    unsafe: bool = False,
    runtime: str | Runtime | None = None,
) -> RunResult:
    """Run `code` once in a new `CodeRunner(limits, unsafe=unsafe, runtime=runtime)`."""
    return await CodeRunner(limits, unsafe=unsafe, runtime=runtime).run(code)


__all__ = [
    "UNSAFE_WARNING",
    "CodeRunner",
    "RunResult",
    "SandboxLimits",
    "run_code",
    "warn_unsafe",
]
