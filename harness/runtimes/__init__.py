"""Sandboxes an agent or model code lives in: one interface over Docker, bubblewrap and (by name) local.

    runtime = get_runtime("docker:rubric-test-base:bookworm")   # or "bwrap", "bwrap:ROOTFS", "local"
    async with runtime.sandbox(cpus=1, memory_mb=512, pids=64) as sb:
        result = await sb.exec("python3 -c 'print(1 + 1)'", timeout=10)
        await sb.write("notes.txt", "hi")
        copy = await sb.fork()
    # one command in a sandbox made for it and ended with it (as `docker run --rm`):
    once = await runtime.run(["python3", "-c", "print(6 * 7)"], config=SandboxConfig(pids=16))

Spec grammar (the same for `--runtime SPEC`, environment arguments and Python):
`docker:IMAGE`, `docker:PATH/TO/DIR` (a folder with a Dockerfile, built once per content hash),
`bwrap` (the host's system read-only), `bwrap:ROOTFS_DIR` (a root filesystem folder), `local`
(no isolation; warns), `compose:PATH/TO/docker-compose.yaml` (optionally `?main=IMAGE`: a Docker
Compose project whose service `main` is the sandbox, its sidecars reachable by name). Every sandbox has no network by default; its only way out is a Unix socket
whose host side is `sandbox.socket_path`. `prune()` / `rubric sandboxes prune` removes the
sandboxes of owners that died (a SIGKILLed run) and never touches anything that is not ours.
"""

from __future__ import annotations

import os
import shutil
import warnings
from pathlib import Path

from harness._core.aio import run_sync
from harness._core.errors import ConfigError
from harness.runtimes import _cgroups as cgroups
from harness.runtimes._base import (
    ExecResult,
    Runtime,
    RuntimeUnavailableError,
    Sandbox,
    SandboxConfig,
    SandboxContext,
    SandboxError,
    SyncSandbox,
)
from harness.runtimes._bwrap import BwrapRuntime
from harness.runtimes._compose import ComposeRuntime
from harness.runtimes._docker import DockerRuntime, prune_containers
from harness.runtimes._local import LocalRuntime
from harness.runtimes._state import (
    SandboxState,
    boot_id,
    default_run_id,
    folder_owner,
    owner_alive,
    refusal,
    root_problem,
    state_folders,
    state_root,
)

GRAMMAR = (
    "docker:IMAGE, docker:PATH/TO/DIR (a build context), bwrap, bwrap:ROOTFS_DIR, local, "
    "compose:PATH/TO/docker-compose.yaml[?main=IMAGE]"
)


def get_runtime(runtime: str, *, run_id: str | None = None, build_network: bool = True) -> Runtime:
    """The `Runtime` a runtime string names.

    Args:
        runtime: `docker:IMAGE`, `docker:PATH/TO/DIR`, `bwrap`, `bwrap:ROOTFS_DIR`, `local` or
            `compose:PATH/TO/docker-compose.yaml[?main=IMAGE]`.
        run_id: The run its sandboxes are labelled with (default: this process's).
        build_network: Whether building `docker:PATH/TO/DIR` may use the daemon's default
            network (its RUN steps download packages); False builds with no network at all.

    Raises:
        ConfigError: The runtime is not in the grammar, or names a folder that does not exist.
    """
    run = run_id or default_run_id()
    kind, _, rest = runtime.partition(":")
    if kind == "local" and not rest:
        return LocalRuntime(runtime, run)
    if kind == "bwrap":
        if not rest:
            return BwrapRuntime(runtime, run)
        rootfs = Path(rest).expanduser()
        if not rootfs.is_dir():
            raise ConfigError(
                f"runtime {runtime!r}: root filesystem folder {rest!r} does not exist (make one with debootstrap)"
            )
        return BwrapRuntime(runtime, run, rootfs=rootfs.resolve())
    if kind == "docker" and rest:
        folder = Path(rest).expanduser()
        if folder.is_dir():
            if not (folder / "Dockerfile").is_file():
                raise ConfigError(f"runtime {runtime!r}: folder {rest!r} has no Dockerfile to build")
            return DockerRuntime(runtime, run, context=folder.resolve(), build_network=build_network)
        if rest.startswith((".", "/", "~")):
            raise ConfigError(f"runtime {runtime!r}: build context folder {rest!r} does not exist")
        return DockerRuntime(runtime, run, image=rest)
    if kind == "compose" and rest:
        file, _, query = rest.partition("?main=")
        if not Path(file).expanduser().is_file():
            raise ConfigError(f"runtime {runtime!r}: compose file {file!r} does not exist")
        return ComposeRuntime(runtime, run, Path(file), main_image=query or None, build_network=build_network)
    raise ConfigError(f"unknown runtime {runtime!r}; the runtimes are: {GRAMMAR}")


def _local_records(*, dry_run: bool) -> list[dict[str, str]]:
    """This user's bubblewrap and local sandbox folders (with their processes).

    Only from the private state root: a root that is not private is refused with a warning and
    nothing in it is used.
    """
    root = state_root()
    problem = root_problem(root)
    if problem:
        warnings.warn(
            f"{refusal(root, problem)}; its sandboxes are not listed or pruned", UserWarning, stacklevel=4
        )
        return []
    records = []
    for folder in state_folders():
        state = SandboxState.load(folder)
        owner = state.owner if state else folder_owner(folder)
        if state is not None:
            alive = state.boot == boot_id() and owner_alive(state.owner, state.owner_start)
        else:  # not yet recorded (or unreadable): the owner named in the folder's name
            alive = owner is not None and os.path.exists(f"/proc/{owner}")
        if state is not None and state.kind == "docker":  # listed with its container (labels)
            if not alive and not dry_run:
                state.remove()  # its container (if it got one) goes in prune_containers
            continue
        record = {"kind": state.kind if state else "?", "id": folder.name, "run": state.run_id if state else "",
                  "owner": str(owner), "alive": str(alive), "removed": "False"}  # fmt: skip
        if not alive and not dry_run:
            if state is not None:
                state.kill_processes()  # each only once proven ours (start time and token)
            shutil.rmtree(folder, ignore_errors=True)  # a folder of the private root, never a named path
            record["removed"] = "True"
        records.append(record)
    return records


async def alist_sandboxes(*, docker: bool = True) -> list[dict[str, str]]:
    """Every sandbox of ours on this machine (kind, id, run, owner, alive), removing nothing.

    Args:
        docker: Ask Docker too (False: only bwrap and local sandboxes).

    Returns:
        One record per sandbox. Warns (`UserWarning`, one line) instead of failing when the
        state root is not private or the Docker daemon cannot be asked.
    """
    found = _local_records(dry_run=True)
    if docker:
        found += await _docker_records(dry_run=True)
    return found


async def aprune(*, docker: bool = True) -> list[dict[str, str]]:
    """Remove the sandboxes whose owner process is gone; returns what was found.

    Those are bwrap processes (each proven ours by its start time and the sandbox's token) and
    cgroups, host folders in this user's private state root, and Docker containers and fork
    images labelled as ours. Nothing outside the state root is deleted, whatever a file or a
    label says.

    Args:
        docker: Prune Docker containers and images too (False: only bwrap and local sandboxes;
            `rubric eval` prunes Docker only when its first Docker sandbox starts).

    Returns:
        One record per sandbox found, with whether it was removed. Warns (`UserWarning`, one
        line) instead of failing when the state root is not private or the Docker daemon is
        down, hangs or answers nonsense.
    """
    found = await _docker_records(dry_run=False) if docker else []
    found += _local_records(dry_run=False)
    cgroups.prune_groups()
    return found


async def _docker_records(*, dry_run: bool) -> list[dict[str, str]]:
    try:
        return await prune_containers(dry_run=dry_run)
    except RuntimeUnavailableError as exc:  # no extra, no daemon, or one that fails: say so, go on
        what = "listed" if dry_run else "pruned"
        warnings.warn(f"{exc}; Docker containers not {what}", UserWarning, stacklevel=3)
        return []


def list_sandboxes(*, docker: bool = True) -> list[dict[str, str]]:
    """Sync face of `alist_sandboxes`.

    Args:
        docker: Ask Docker too (False: only bwrap and local sandboxes).

    Returns:
        One record per sandbox.
    """
    return run_sync(alist_sandboxes(docker=docker))


def prune(*, docker: bool = True) -> list[dict[str, str]]:
    """Sync face of `aprune`.

    Args:
        docker: Prune Docker containers and images too (False: only bwrap and local sandboxes).

    Returns:
        One record per sandbox found, with whether it was removed.
    """
    return run_sync(aprune(docker=docker))


__all__ = [
    "GRAMMAR",
    "ExecResult",
    "Runtime",
    "RuntimeUnavailableError",
    "Sandbox",
    "SandboxConfig",
    "SandboxContext",
    "SandboxError",
    "SyncSandbox",
    "alist_sandboxes",
    "aprune",
    "get_runtime",
    "list_sandboxes",
    "prune",
]
