"""The `local` runtime: commands run as plain child processes on this machine (no isolation).

Only when asked for by name, and it warns when its first sandbox opens (once per runtime, so
once per run, not once per command): the code can read your files and secrets and write
anywhere you can. The working directory is a fresh host folder (the sandbox's `workdir`
setting is replaced by it, and `TMPDIR` points there too, so temporary files go with it);
limits are rlimits per command (memory as address space, largest file) and the wall clock.
Network "none" is not enforced.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from harness.runtimes._base import (
    Capture,
    RawResult,
    Runtime,
    Sandbox,
    SandboxConfig,
    SandboxError,
    communicate,
    reap,
    spawn,
)
from harness.runtimes._state import SandboxState

WARNING = (
    "rubric: runtime 'local': sandbox commands run WITHOUT isolation; they can read your files and "
    "secrets and write anywhere you can. Use 'bwrap' or 'docker:IMAGE' for untrusted code."
)


class LocalSandbox(Sandbox):
    """Commands as child processes in a throwaway host folder (see the module docstring)."""

    kind = "local"

    def __init__(self, config: SandboxConfig, state: SandboxState, runtime: LocalRuntime) -> None:
        work = str(state.directory / "work")
        super().__init__(replace(config, workdir=work, env={"TMPDIR": work, **config.env}), state)
        self.runtime = runtime
        self._groups: set[int] = set()
        self._background: list[asyncio.subprocess.Process] = []

    @property
    def inside_socket_path(self) -> str:
        """The socket's host path (a local sandbox sees the host's files)."""
        return str(self.socket_path)

    async def _start(self) -> None:
        if not self.runtime.warned:
            self.runtime.warned = True
            print(WARNING, file=sys.stderr, flush=True)
        os.makedirs(self.workdir, exist_ok=True)

    def _limits(self) -> list[str]:
        limits = ["prlimit", "--core=0"]
        if self.config.memory_mb:
            limits.append(f"--as={self.config.memory_mb << 20}")
        if self.config.disk_mb:
            limits.append(f"--fsize={self.config.disk_mb << 20}")
        return [*limits, "--"]

    async def _run(
        self,
        argv: list[str],
        *,
        stdin: bytes | None,
        timeout: float | None,
        env: Mapping[str, str],
        cwd: str,
        user: str | None,
        out: Capture,
        err: Capture,
    ) -> RawResult:
        if user is not None and user not in (str(os.geteuid()), f"{os.geteuid()}:{os.getegid()}"):
            raise SandboxError(f"the local runtime runs commands as this user only, not {user!r}")
        if not os.path.isdir(cwd):
            raise SandboxError(f"working directory {cwd!r} does not exist")
        start = time.monotonic()
        process = await spawn(
            *self._limits(),
            *argv,
            stdin=asyncio.subprocess.PIPE if stdin is not None else asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=dict(env),
            cwd=cwd,
            start_new_session=True,
        )
        self._groups.add(process.pid)
        try:
            timed_out = await communicate(process, stdin, timeout, out, err)
        finally:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(process.pid, signal.SIGKILL)
            await reap(process)
        code = None if timed_out else process.returncode
        result = RawResult.of(code, out, err, timed_out, start)
        if code == 127 and result.stderr.startswith(b"prlimit: failed to execute"):
            said = result.stderr.replace(b"prlimit: failed to execute", b"command not found:", 1)
            result = replace(result, stderr=said)
        return result

    async def _start_relay(self, port: int, argv: list[str]) -> None:
        process = await spawn(
            sys.executable,
            *argv[1:],
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
        self._background.append(process)
        self._groups.add(process.pid)
        assert process.stdout is not None
        if (await process.stdout.readline()).strip() != b"ready":
            raise SandboxError(f"the relay on 127.0.0.1:{port} did not start")

    async def _stop(self) -> None:
        for group in list(self._groups):  # commands' leftovers: what they started in the background
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signal.SIGKILL)
        for process in self._background:
            await process.wait()

    async def _end_processes(self) -> int:
        """SIGKILL the process group of every command and relay this sandbox started, until
        none of their members is left (a process that left its group is not found here: a
        local sandbox isolates nothing)."""
        for process in self._background:  # the relays: reaped here, so their groups empty
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
        self._background.clear()
        ended = 0
        deadline = time.monotonic() + 5.0
        while alive := [group for group in self._groups if _group_alive(group)]:
            if time.monotonic() > deadline:
                raise SandboxError(f"process groups {alive[:10]} of the local sandbox did not end")
            for group in alive:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(group, signal.SIGKILL)
            ended += len(alive)
            await asyncio.sleep(0.002)
        self._groups.clear()  # all empty now: their ids may be reused by other processes
        return ended

    async def _changed_files(self) -> dict[str, str]:
        """Nothing can be told: the code ran on this machine, with your rights."""
        return {}

    async def _fork(self) -> Sandbox:
        copy = await self.runtime.open(self.config)
        whole = Capture(None)  # a fork needs every byte
        packed = await self._checked_run(["tar", "-c", "-C", self.workdir, "."], out=whole)
        await copy._checked_run(["tar", "-x", "-C", copy.workdir], stdin=packed.stdout)
        return copy

    def describe(self) -> str:
        return "UNSAFE local: plain child processes with rlimits; no isolation, no network limits"


def _group_alive(group: int) -> bool:
    """Whether a process group still has a member that is not a zombie."""
    if not os.path.isdir("/proc"):  # no /proc to tell zombies apart: signal 0 says it
        try:
            os.killpg(group, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    for entry in os.listdir("/proc"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == group and fields[0] not in ("Z", "X"):
                return True
    return False


class LocalRuntime(Runtime):
    """Runs sandbox commands unisolated on this machine (only by name; warns)."""

    def __init__(self, spec: str, run_id: str) -> None:
        super().__init__(spec, run_id)
        self.warned = False  # said once, when its first sandbox opens

    @property
    def kind_name(self) -> str:
        return "local"

    def _make(self, config: SandboxConfig, state: SandboxState) -> Sandbox:
        return LocalSandbox(config, state, self)

    async def check(self, config: SandboxConfig | None = None) -> None:
        """Nothing to check: any machine can run child processes."""

    def describe(self) -> str:
        return "local (UNSAFE: no isolation)"
