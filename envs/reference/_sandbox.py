"""Run a snippet of model-written Python isolated in Linux namespaces (bubblewrap), with limits.

Each call gets fresh PID, mount, network, IPC, UTS, cgroup and user namespaces from `bwrap`
(Debian/Ubuntu package `bubblewrap`), the established unprivileged sandboxing tool:

- a read-only view of only what Python needs (`/usr`, `/lib*`, the interpreter, its standard
  library and shared library, `/etc/ld.so.cache`), with every `site-packages`/`dist-packages`
  and every `share/rubric` data folder in view covered by an empty tmpfs: not the project, its
  dependencies, the answers (wherever pip installed them), the user's home, or other rollouts;
- a private, size-capped tmpfs as its working directory and `/tmp`, gone when the call returns;
- no network unless the environment opts in, and an environment with no variables of ours;
- its own `/proc`, so no other process (the harness, its secrets) is visible or killable;
- caps for the whole process tree: a cgroup (`pids.max`, memory) when this process may create
  one, plus per-process rlimits (CPU seconds, address space, file size, process count);
- nothing left running: bwrap's init is PID 1 of the namespace, so when the code's main process
  exits, times out or the harness dies (`--die-with-parent`), the kernel kills every process.

Where bubblewrap or user namespaces are missing (macOS, a locked-down kernel) `Sandbox` refuses
to be built, with one line saying how to install it. `Sandbox(unsafe=True)` runs the code in a
plain child process with the same rlimits and a throwaway working directory, and warns: that
is resource limiting, not isolation.

The code is sent on stdin, and a tiny bootstrap (inside the sandbox) applies the rlimits and
runs it as `__main__`, printing tracebacks without its own frame. Limits are set there rather
than through `preexec_fn`, which is unsafe in a process with threads.

Over 500 lines because the isolation is one argument list built in one place (namespaces,
mounts, rlimits, the bootstrap): split, a reviewer could not see everything a sandbox allows.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import glob
import itertools
import os
import shutil
import signal
import site
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from envs._tools.functions import OUTPUT_LIMIT, truncation_note
from harness._core.errors import ConfigError
from harness.runtimes import Runtime, get_runtime

# Runs in the child: apply limits, read the code from stdin, run it as __main__, and print
# tracebacks without this bootstrap's own frame. Arguments: CPU s, address space, file size
# and process count (0 = leave as is).
_BOOTSTRAP = r"""
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

SCRATCH = "/tmp"  # the sandbox's working directory: a private tmpfs
UNSAFE_PREFIX = "rubric-python-"  # host scratch folders of unsafe runs: rubric-python-<pid>-*
INSTALL_HINT = (
    "install bubblewrap (Debian/Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap) "
    "on Linux with user namespaces enabled, or pass unsafe_sandbox=True to run model code unisolated"
)


class SandboxUnavailableError(ConfigError):
    """bubblewrap is missing or cannot create namespaces here; the message says how to fix it."""


@dataclass(frozen=True)
class SandboxLimits:
    """Limits for one run.

    Attributes:
        timeout: Wall-clock seconds before the whole process tree is killed.
        cpu_seconds: CPU seconds per process (RLIMIT_CPU); 0 = no limit.
        memory_mb: Memory for the whole tree when a cgroup is available, and the address space
            of each process (RLIMIT_AS) always; 0 = no limit.
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
        if self.disk_mb < 1 or self.max_processes < 2:
            raise ConfigError(
                f"SandboxLimits.disk_mb must be >= 1 and max_processes >= 2, "
                f"got {self.disk_mb} and {self.max_processes}"
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


# ----------------------------------------------------------------------------- host probing


def _interpreter() -> tuple[str, str]:
    """The real (non-venv) interpreter and its prefix."""
    prefix = os.path.realpath(sys.base_prefix)
    candidate = Path(prefix) / "bin" / f"python{sys.version_info.major}.{sys.version_info.minor}"
    executable = str(candidate) if candidate.exists() else os.path.realpath(sys.executable)
    return executable, prefix


def _python_binds(executable: str, prefix: str) -> tuple[list[str], list[str]]:
    """Read-only binds of what the interpreter needs outside /usr (itself, its standard
    library, its shared library), and the folders it can see (for `_masks`)."""
    stdlib = os.path.realpath(os.path.dirname(os.__file__))
    libdir = sysconfig.get_config_var("LIBDIR") or os.path.join(prefix, "lib")
    shared = sorted(glob.glob(os.path.join(glob.escape(libdir), "libpython*.so*")))
    wanted = [executable, stdlib, *shared]
    args: list[str] = []
    for path in wanted:
        if not path.startswith("/usr/"):  # /usr is bound whole by _system_binds
            args += ["--ro-bind", path, path]
    return args, ["/usr", stdlib]


def _masks(visible: list[str]) -> list[str]:
    """An empty tmpfs over every package and rubric data folder inside `visible`: a base
    (non-venv) install puts this project, its dependencies and the reference environments'
    answer keys (`<prefix>/share/rubric/datasets`) under the interpreter's own tree."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    prefixes = {
        os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, "/usr", "/usr/local")
    }
    candidates = {os.path.realpath(p) for p in site.getsitepackages()}
    for prefix in prefixes:
        candidates |= {
            os.path.join(prefix, "share", "rubric"),
            os.path.join(prefix, "lib", version, "site-packages"),
            os.path.join(prefix, "lib", version, "dist-packages"),
            os.path.join(prefix, "lib", "python3", "dist-packages"),
        }
    args: list[str] = []
    for path in sorted(candidates):
        inside = any(path == root or path.startswith(root + "/") for root in visible)
        if inside and os.path.isdir(path):
            args += ["--tmpfs", path]
    return args


def _system_binds() -> list[str]:
    """Read-only binds of the system directories Python needs (merged-/usr symlinks kept)."""
    args = ["--ro-bind", "/usr", "/usr"]
    for name in ("/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"):
        if os.path.islink(name):
            args += ["--symlink", os.readlink(name), name]
        elif os.path.isdir(name):
            args += ["--ro-bind", name, name]
    for name in ("/etc/ld.so.cache", "/etc/localtime"):
        args += ["--ro-bind-try", name, name]
    return args


_NETWORK_FILES = ("/etc/resolv.conf", "/etc/hosts", "/etc/nsswitch.conf", "/etc/ssl", "/etc/ca-certificates")


@functools.cache
def bubblewrap_problem() -> str | None:
    """Why bubblewrap cannot sandbox code on this machine, or None when it can (probed once)."""
    if not sys.platform.startswith("linux"):
        return f"model code is sandboxed with Linux namespaces, not available on {sys.platform}"
    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return "bubblewrap (bwrap) is not installed"
    probe = [bwrap, "--unshare-all", "--die-with-parent", *_system_binds(), "--", "/usr/bin/env", "true"]
    try:
        done = subprocess.run(probe, capture_output=True, timeout=10, env={"PATH": "/usr/bin:/bin"})
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"bubblewrap does not run ({exc})"
    if done.returncode != 0:
        reason = done.stderr.decode(errors="replace").strip().splitlines()
        return f"bubblewrap cannot create namespaces here ({reason[-1] if reason else done.returncode})"
    return None


# ----------------------------------------------------------------------------- cgroups


def _cgroup_paths() -> dict[str, str]:
    """controller (or "" for cgroup v2) -> this process's cgroup path, from /proc/self/cgroup."""
    paths: dict[str, str] = {}
    with contextlib.suppress(OSError):
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, controllers, path = line.split(":", 2)
            for controller in controllers.split(",") if controllers else [""]:
                paths[controller] = path
    return paths


def _cgroup_parents() -> dict[str, Path]:
    """Where a per-call cgroup can be made for the pids and memory controllers, v1 or v2."""
    paths = _cgroup_paths()
    root = Path("/sys/fs/cgroup")
    v1: dict[str, Path] = {c: root / c / paths[c].lstrip("/") for c in ("pids", "memory") if c in paths}
    if len(v1) == 2 and all((p / "cgroup.procs").exists() for p in v1.values()):
        return v1
    for mount in (root, root / "unified"):
        base = mount / paths.get("", "/").lstrip("/")
        with contextlib.suppress(OSError):
            enabled = (base / "cgroup.subtree_control").read_text().split()
            if not {"pids", "memory"} <= set(enabled):
                (base / "cgroup.subtree_control").write_text("+pids +memory")
            return {"": base}
    return {}


_counter = itertools.count()


class _Cgroup:
    """One call's cgroup: caps processes and memory for everything the code starts."""

    def __init__(self, parents: dict[str, Path], limits: SandboxLimits) -> None:
        name = f"rubric-sandbox-{os.getpid()}-{next(_counter)}"
        self.dirs = [parent / name for parent in parents.values()]
        memory = (limits.memory_mb + limits.disk_mb) * 1024 * 1024  # the tmpfs is charged too
        settings = {
            "pids.max": str(limits.max_processes),
            "memory.limit_in_bytes" if "memory" in parents else "memory.max": str(memory),
            "memory.swap.max": "0",
        }
        for directory in self.dirs:
            directory.mkdir()
            for key, value in settings.items():
                if (directory / key).exists():
                    (directory / key).write_text(value)

    @property
    def procs(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def remove(self) -> None:
        """Kill whatever is left in the cgroup and delete it."""
        deadline = time.monotonic() + 2.0
        for directory in self.dirs:
            while directory.exists():
                with contextlib.suppress(OSError):
                    for pid in (directory / "cgroup.procs").read_text().split():
                        os.kill(int(pid), signal.SIGKILL)
                    directory.rmdir()
                if directory.exists() and time.monotonic() > deadline:
                    break  # removed by the next stale sweep
                time.sleep(0.005) if directory.exists() else None


def _sweep_stale_cgroups(parents: dict[str, Path]) -> None:
    """Delete per-call cgroups left by harness processes that were killed."""
    for parent in parents.values():
        for directory in parent.glob("rubric-sandbox-*"):
            pid = directory.name.split("-")[2]
            if pid.isdigit() and not _pid_alive(int(pid)):
                with contextlib.suppress(OSError):
                    directory.rmdir()


@functools.cache
def _usable_cgroup_parents() -> dict[str, Path]:
    """Controller -> parent cgroup when this process may make per-call cgroups (probed once)."""
    parents = _cgroup_parents()
    if not parents:
        return {}
    try:
        _Cgroup(parents, SandboxLimits()).remove()
    except OSError:
        return {}
    _sweep_stale_cgroups(parents)
    return parents


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_scratch(root: str | Path | None = None) -> list[Path]:
    """Delete `rubric-python-<pid>-*` scratch folders whose process is gone (a killed run)."""
    removed = []
    for path in Path(root or tempfile.gettempdir()).glob(f"{UNSAFE_PREFIX}*"):
        pid = path.name[len(UNSAFE_PREFIX) :].split("-", 1)[0]
        if path.is_dir() and (not pid.isdigit() or not _pid_alive(int(pid))):
            shutil.rmtree(path, ignore_errors=True)
            removed.append(path)
    return removed


# ----------------------------------------------------------------------------- the sandbox


class Sandbox:
    """Runs model code in bubblewrap namespaces under `limits` (see the module docstring).

    Args:
        limits: Time, CPU, memory, output, disk and process limits for each call.
        network: Give the code the host's network (off by default).
        unsafe: Run without isolation (a plain child process with rlimits), for machines
            without bubblewrap. Warns on every build.
        runtime: Run each call in a fresh sandbox of this runtime instead (a spec such as
            "docker:IMAGE", "bwrap", "bwrap:ROOTFS_DIR", or a `harness.runtimes.Runtime`); the
            image needs python3. The same limits apply (processes, memory, disk, CPU seconds
            and the wall clock); on Docker the code runs as user nobody (65534).

    Raises:
        SandboxUnavailableError: bubblewrap is missing or cannot create namespaces, and
            `unsafe` is not set; or this process runs as root, where the kernel does not
            apply the process limit, and may not create a cgroup.
    """

    def __init__(
        self,
        limits: SandboxLimits | None = None,
        *,
        network: bool = False,
        unsafe: bool = False,
        runtime: str | Runtime | None = None,
    ):
        self.limits = limits or SandboxLimits()
        self.network = network
        self.unsafe = unsafe
        self._cgroups: dict[str, Path] = {}
        self.runtime = get_runtime(runtime) if isinstance(runtime, str) else runtime
        if self.runtime is not None:
            if unsafe:
                raise ConfigError(
                    "pass either runtime= or unsafe_sandbox=True, not both (runtime='local' is the unsafe one)"
                )
            return
        if unsafe:
            remove_stale_scratch()
            warn_unsafe()
            return
        problem = bubblewrap_problem()
        if problem is not None:
            raise SandboxUnavailableError(f"cannot sandbox model code: {problem}; {INSTALL_HINT}")
        self._cgroups = _usable_cgroup_parents()
        if not self._cgroups and os.geteuid() == 0:
            raise SandboxUnavailableError(
                "cannot sandbox model code: running as root, where RLIMIT_NPROC does not apply, and "
                "no cgroup can be created to cap processes; run as a normal user, give this process "
                "a writable cgroup, or pass unsafe_sandbox=True"
            )

    def describe(self) -> str:
        """One line saying what isolates and limits each call."""
        if self.runtime is not None:
            return f"a fresh {self.runtime.describe()} sandbox per call"
        if self.unsafe:
            return "UNSAFE: a plain child process with rlimits; the code can read and write what you can"
        caps = "cgroup (processes, memory) + rlimits" if self._cgroups else "rlimits"
        net = "host network" if self.network else "no network"
        return f"bubblewrap: pid/mount/net/ipc/uts/user/cgroup namespaces, {net}, caps by {caps}"

    def bwrap_args(self) -> list[str]:
        """The bubblewrap command line up to (not including) the interpreter."""
        executable, prefix = _interpreter()
        binds, visible = _python_binds(executable, prefix)
        args = ["bwrap", "--unshare-all", "--die-with-parent", "--new-session", *_system_binds(), *binds]
        args += _masks(visible)
        if self.network:
            args.insert(2, "--share-net")
            for name in _NETWORK_FILES:
                args += ["--ro-bind-try", name, name]
        args += ["--proc", "/proc", "--dev", "/dev", "--size", str(self.limits.disk_mb * 1024 * 1024)]
        args += ["--tmpfs", SCRATCH, "--chdir", SCRATCH, "--hostname", "sandbox", "--clearenv"]
        for key, value in _child_env(SCRATCH).items():
            args += ["--setenv", key, value]
        return [*args, "--", executable]

    def _bootstrap_args(self) -> list[str]:
        limits = self.limits
        # With a cgroup the tree is capped there; RLIMIT_NPROC is then left alone (it counts
        # every process of the user, which in unsafe mode is the user's whole session).
        nproc = 0 if self._cgroups or self.unsafe else limits.max_processes
        numbers = (limits.cpu_seconds, limits.memory_mb << 20, limits.disk_mb << 20, nproc)
        return ["-I", "-c", _BOOTSTRAP, *(str(n) for n in numbers)]

    async def run(self, code: str) -> RunResult:
        """Run `code` as a fresh program; stdout and stderr are merged into the result."""
        if self.runtime is not None:
            return await self._run_in_runtime(self.runtime, code)
        if self.unsafe:
            workdir = tempfile.mkdtemp(prefix=f"{UNSAFE_PREFIX}{os.getpid()}-")
            try:
                command = [sys.executable, *self._bootstrap_args()]
                return await _execute(command, code, self.limits, cwd=workdir, env=_child_env(workdir))
            finally:
                shutil.rmtree(workdir, ignore_errors=True)
        command = [*self.bwrap_args(), *self._bootstrap_args()]
        cgroup = _Cgroup(self._cgroups, self.limits) if self._cgroups else None
        if cgroup is not None:  # join the cgroup before bwrap starts, so every descendant is in it
            enter = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'
            command = ["/bin/sh", "-c", enter, "sh", *cgroup.procs, "--", *command]
        try:
            result = await _execute(command, code, self.limits, env={"PATH": "/usr/bin:/bin"})
        finally:
            if cgroup is not None:
                cgroup.remove()
        return _from_wrapper(result)

    async def _run_in_runtime(self, runtime: Runtime, code: str) -> RunResult:
        """One call in a fresh sandbox of `runtime`: the bootstrap reads the code on stdin."""
        limits = self.limits
        numbers = (limits.cpu_seconds, limits.memory_mb << 20, limits.disk_mb << 20, 0)
        argv = ["python3", "-I", "-c", _BOOTSTRAP, *(str(n) for n in numbers)]
        user = (
            "65534:65534" if runtime.kind_name == "docker" else None
        )  # nobody: the image's files stay its own
        opened = runtime.sandbox(
            memory_mb=limits.memory_mb + limits.disk_mb if limits.memory_mb else None,
            pids=limits.max_processes,
            disk_mb=limits.disk_mb,
            network="host" if self.network else "none",
            env={"HOME": SCRATCH, "TMPDIR": SCRATCH},
            workdir=SCRATCH,
        )
        async with opened as box:
            done = await box.exec(
                ["/bin/sh", "-c", 'exec "$@" 2>&1', "sh", *argv],
                stdin=code,
                timeout=limits.timeout,
                user=user,
                max_output=2 * limits.output_limit,  # its head is the output_limit bytes shown
            )
        output = done.stdout.encode()
        total = len(output) + done.stdout_cut
        return RunResult(
            output=output[: limits.output_limit].decode("utf-8", errors="replace"),
            returncode=done.exit_code,
            timed_out=done.timed_out,
            truncated=total > limits.output_limit,
            total_bytes=total,
            limits=limits,
        )


def _from_wrapper(result: RunResult) -> RunResult:
    """bwrap reports a child killed by signal N as exit code 128 + N; give it back as -N."""
    code = result.returncode
    if code is not None and code > 128 and (code - 128) in signal.valid_signals():
        return RunResult(
            result.output,
            -(code - 128),
            result.timed_out,
            result.truncated,
            result.total_bytes,
            result.limits,
        )
    return result


UNSAFE_WARNING = (
    "rubric: unsafe_sandbox=True: model code runs WITHOUT isolation; it can read your files and "
    "secrets and write anywhere you can. Use bubblewrap on Linux for untrusted models."
)


def warn_unsafe() -> None:
    """Say on stderr that model code runs unisolated (each unsafe build and each run)."""
    print(UNSAFE_WARNING, file=sys.stderr, flush=True)


def _child_env(workdir: str) -> dict[str, str]:
    """A minimal environment: the model's code must not see API keys in ours."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8"}


def _kill_group(process: asyncio.subprocess.Process) -> None:
    """Kill the child's whole process group (it leads its own session)."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)


async def _execute(
    command: list[str], code: str, limits: SandboxLimits, *, env: dict[str, str], cwd: str | None = None
) -> RunResult:
    """Start `command`, feed it `code`, collect output up to the limit, kill on timeout."""
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=cwd,
        env=env,
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


async def run_code(
    code: str,
    limits: SandboxLimits | None = None,
    *,
    unsafe: bool = False,
    runtime: str | Runtime | None = None,
) -> RunResult:
    """Run `code` once in a new `Sandbox(limits, unsafe=unsafe, runtime=runtime)`."""
    return await Sandbox(limits, unsafe=unsafe, runtime=runtime).run(code)


__all__ = [
    "RunResult",
    "Sandbox",
    "SandboxLimits",
    "SandboxUnavailableError",
    "bubblewrap_problem",
    "remove_stale_scratch",
    "run_code",
]
