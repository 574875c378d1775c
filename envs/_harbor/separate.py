"""What leaves the agent's sandbox for the verifier: `[[verifier.collect]]`, `artifacts`, and a
separate verifier's own sandbox (`[verifier] environment_mode = "separate"`).

Once the agent has finished (and every process of its ended):
- each `[[verifier.collect]]` command runs in the agent's sandbox, as root in its working
  folder, within its `timeout_sec` (a failing one leaves the score NaN with its output);
- /logs/artifacts (when there is one) and each `artifacts` entry (the task's, and a step's
  own after that step) are copied out of the agent's sandbox to a private host folder, at
  their absolute paths (links inside them dropped); what each held is kept with the rollout
  (its size and, for text, its first `KEPT_TEXT` characters; a declared one that is missing
  says so, and one that is a link leading out of it or a device is refused and not copied);
- a separate verifier runs in a fresh sandbox of its own image: tests/ built as a Docker
  context when it has a Dockerfile (which must put test.sh at /tests/test.sh: Harbor does not
  upload tests/ then), else `[verifier.environment]`'s (or `[environment]`'s) `docker_image`,
  with that table's cpus, memory and storage and no network. It sees the copied artifacts at
  their paths and nothing else of the agent's sandbox: no file it did not declare, no process
  (the sandboxes share nothing). Its sandbox is removed when the tests end.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tarfile
from collections.abc import AsyncIterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from envs._harbor.files import staged_task_folder
from envs._harbor.task import ArtifactSection, HarborTask, dockerfile_workdir
from envs._harbor.trust import SHELL, end_processes
from envs.agents._sandboxes import DEFAULT_DOCKER_PIDS
from harness.runtimes import Sandbox, SandboxError, get_runtime
from harness.runtimes._base import DEFAULT_WORKDIR
from harness.runtimes._docker import build_context
from rubrics._tree.scoring import ScoringError

#: Harbor's convention folder: whatever is there is an artifact with no declaration.
ARTIFACTS_DIR = "/logs/artifacts"
#: Characters of a text artifact kept with the rollout.
KEPT_TEXT = 4000
#: Files of a folder artifact listed with the rollout.
KEPT_FILES = 50


async def run_collect_hooks(sandbox: Sandbox, task: HarborTask, detail: dict[str, Any]) -> None:
    """Run each `[[verifier.collect]]` command in the agent's sandbox, then end what it started.

    Raises:
        ScoringError: a command failed or timed out (with its output).
    """
    hooks = task.config.verifier.collect
    for hook in hooks:
        done = await sandbox.exec(
            [SHELL, "-c", hook.command], cwd=sandbox.workdir, user="0", timeout=hook.timeout_sec
        )
        detail.setdefault("collect", []).append({"command": hook.command, "exit_code": done.exit_code})
        if not done.ok:
            said = (done.stderr or done.stdout).strip()[-300:]
            ended = f"ran past {hook.timeout_sec:g} s" if done.timed_out else f"exited {done.exit_code}"
            raise ScoringError(
                f"[[verifier.collect]] {hook.command!r} {ended}" + (f": {said}" if said else "")
            )
    if hooks:
        await end_processes(sandbox, "after [[verifier.collect]]")


async def copy_artifacts(
    sandbox: Sandbox, artifacts: Sequence[ArtifactSection], into: Path
) -> dict[str, Any]:
    """Copy /logs/artifacts and `artifacts` out of `sandbox` to `into` (each at its absolute
    path below it, links dropped). Returns what each held, by source (see the module docstring)."""
    found: dict[str, Any] = {}
    for source, declared in [(ARTIFACTS_DIR, None), *((a.source, a) for a in artifacts)]:
        local = into / source.lstrip("/")
        try:
            await sandbox.download(source, local)
        except SandboxError:
            if declared is not None:
                found[source] = {"missing": True}
            continue
        except (tarfile.TarError, OSError) as exc:  # a link out of it, a device: not copied
            found[source] = {"refused": f"{type(exc).__name__}: {exc}"[:300]}
            if local.is_dir():
                shutil.rmtree(local, ignore_errors=True)
            else:
                local.unlink(missing_ok=True)
            continue
        _drop_links(local)
        found[source] = _summary(local) | (
            {"destination": declared.destination} if declared and declared.destination else {}
        )
    return found


def _drop_links(path: Path) -> None:
    """Remove every link below `path` (an artifact is files and folders, nothing pointing elsewhere)."""
    if path.is_symlink():
        path.unlink()
        return
    for root, folders, files in os.walk(path):
        for name in folders + files:
            if (Path(root) / name).is_symlink():
                (Path(root) / name).unlink()


def _summary(local: Path) -> dict[str, Any]:
    """What one copied artifact holds, for the rollout."""
    if local.is_file():
        data = local.read_bytes()
        try:
            return {"bytes": len(data), "text": data.decode()[:KEPT_TEXT]}
        except UnicodeDecodeError:
            return {"bytes": len(data)}
    files = sorted(p for p in local.rglob("*") if p.is_file())
    return {
        "files": {str(p.relative_to(local)): p.stat().st_size for p in files[:KEPT_FILES]},
        "count": len(files),
    }


async def verifier_image(task: HarborTask) -> str:
    """The separate verifier's image: tests/ built (a checked copy) when it has a Dockerfile,
    else the verifier table's `docker_image`."""
    table = task.verifier_environment
    if not (task.path / "tests" / "Dockerfile").is_file():
        assert table.docker_image is not None  # `load_task` refused the task otherwise
        return table.docker_image
    async with staged_task_folder(task.path, "tests") as context:
        try:
            return await build_context(context, network=table.allow_internet)
        except SandboxError as exc:  # name the task's folder, not the temporary copy
            raise ScoringError(str(exc).replace(str(context), str(task.path / "tests"))) from None


@contextlib.asynccontextmanager
async def verifier_sandbox(
    task: HarborTask, copied: Path, artifacts: Mapping[str, Any]
) -> AsyncIterator[Sandbox]:
    """A fresh sandbox of the verifier's image holding the copied artifacts at their paths;
    removed on exit."""
    table = task.verifier_environment
    image = await verifier_image(task)
    workdir = (
        dockerfile_workdir(task.path, "tests/Dockerfile")
        if (task.path / "tests" / "Dockerfile").is_file()
        else None
    )
    runtime = get_runtime(f"docker:{image}")
    async with runtime.sandbox(
        cpus=table.cpus,
        memory_mb=table.memory_mb,
        disk_mb=table.storage_mb,
        pids=DEFAULT_DOCKER_PIDS,
        workdir=workdir or DEFAULT_WORKDIR,
    ) as sandbox:
        for source, held in artifacts.items():
            if not held.get("missing"):
                await sandbox.upload(copied / source.lstrip("/"), source)
        yield sandbox
