"""`rubric push`: upload a built environment package to a hub with twine, refusing re-pushes.

Before uploading, the hub is asked what it has: an existing version is refused (suggesting
`--bump`), and so is content identical to the hub's latest version (the content hash ignores
the version number, so a bump alone is not new content). Credentials come from
`RUBRIC_HUB_USER`/`RUBRIC_HUB_PASSWORD`, else twine's `.pypirc` section for the same URL or
keyring; they are never printed.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import io
import logging
import os
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from envs._project import CARD_FILE, BumpPart, HubError, Project
from envs.hub._build import abuild_package, dist_files
from envs.hub._card import HubRecord
from envs.hub._index import HUB_PASSWORD_VAR, HUB_USER_VAR, Hub, IndexReader
from harness._core.aio import run_sync


@dataclass(frozen=True)
class PushResult:
    """What `push_package` uploaded, and where.

    Attributes:
        name: The distribution's name.
        version: The version uploaded.
        files: The files uploaded.
        hub: The hub they went to.
    """

    name: str
    version: str
    files: list[Path]
    hub: Hub


def _built_record(project: Project, files: list[Path]) -> HubRecord:
    wheel = next((f for f in files if f.name.endswith(".whl")), None)
    if wheel is None:
        raise HubError(
            f"no wheel for {project.name.distribution} {project.version} in {project.root / 'dist'}"
        )
    member = f"{project.module_dir().name}/{CARD_FILE}"
    with zipfile.ZipFile(wheel) as archive:
        if member not in archive.namelist():
            raise HubError(f"{wheel.name} carries no {member}; build it with `rubric build`")
        return HubRecord.model_validate_json(archive.read(member))


async def _refuse_repush(reader: IndexReader, project: Project, version: str, content_hash: str) -> None:
    name = project.name.distribution
    files = await reader.project_files(name)
    if not files:
        return
    where = reader.hub.url
    if any(str(f.version) == version for f in files):
        raise HubError(
            f"{name} {version} is already on {where}; bump the version: "
            f"rubric push {project.root} --bump patch (or minor, major)"
        )
    entry = await reader.entry(name)
    if entry is not None and entry.record and entry.record.get("content_hash") == content_hash:
        raise HubError(
            f"{name} {entry.version} on {where} has identical content ({content_hash[:19]}...); "
            "change the package before pushing a new version"
        )


def _credentials(hub: Hub) -> dict[str, Any]:
    """twine Settings arguments for the credentials (env vars, else a .pypirc section for this URL)."""
    user, password = os.environ.get(HUB_USER_VAR), os.environ.get(HUB_PASSWORD_VAR)
    if user or password:
        return {"repository_url": hub.upload_url, "username": user, "password": password}
    from twine.utils import DEFAULT_CONFIG_FILE, get_config

    try:
        sections = get_config(DEFAULT_CONFIG_FILE)
    except Exception:  # an unreadable .pypirc: fall back to keyring / env, as twine would
        sections = {}
    for section, config in sections.items():
        if str(config.get("repository") or "").rstrip("/") == hub.upload_url.rstrip("/"):
            return {"repository_name": section}
    return {
        "repository_url": hub.upload_url,
        "username": os.environ.get("TWINE_USERNAME"),
        "password": os.environ.get("TWINE_PASSWORD"),
    }


def _upload(hub: Hub, files: list[Path]) -> None:
    if importlib.util.find_spec("twine") is None:
        raise HubError("`rubric push` needs twine; install the hub tools: pip install 'rubric-rl[hub]'")
    import requests
    from twine import exceptions
    from twine.commands.upload import upload
    from twine.settings import Settings

    settings = Settings(non_interactive=True, disable_progress_bar=True, **_credentials(hub))
    try:
        with _quiet_twine():  # its progress lines and "Retry with --verbose": our one line says it
            upload(settings, [str(f) for f in files])
    except exceptions.NonInteractive:
        raise HubError(
            f"no credentials for {hub.upload_url}; set {HUB_USER_VAR} and {HUB_PASSWORD_VAR} "
            "(or a .pypirc section or keyring entry for this URL)"
        ) from None
    except requests.HTTPError as exc:
        raise HubError(_http_failure(hub, exc.response)) from None
    except requests.ConnectionError:
        raise HubError(
            f"cannot reach the hub's upload API at {hub.upload_url}; is the index running?"
        ) from None
    except exceptions.TwineException as exc:
        raise HubError(f"upload to {hub.upload_url} failed: {exc}") from None


@contextlib.contextmanager
def _quiet_twine() -> Iterator[None]:
    """Keep twine's own printing and warnings out of the terminal during an upload."""
    log = logging.getLogger("twine")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        log.setLevel(level)


def _http_failure(hub: Hub, response: Any) -> str:
    status = getattr(response, "status_code", None)
    if status in (401, 403):
        return (
            f"the hub at {hub.upload_url} refused the credentials (HTTP {status}); check "
            f"{HUB_USER_VAR}/{HUB_PASSWORD_VAR} (or .pypirc/keyring)"
        )
    if status == 409:
        return f"the hub at {hub.upload_url} already has this file (HTTP 409); bump the version with --bump patch"
    return f"the hub at {hub.upload_url} refused the upload (HTTP {status} {getattr(response, 'reason', '')})"


async def apush_package(
    directory: str | Path = ".",
    *,
    hub: str | Hub | None = None,
    bump: BumpPart | None = None,
    isolation: bool = True,
) -> PushResult:
    """Upload the package's built sdist and wheel to the hub.

    Args:
        directory: The environment package's folder (built with `rubric build`).
        hub: The index URL (default `$RUBRIC_HUB_URL`).
        bump: Raise this part of the version in pyproject.toml and rebuild before uploading.
        isolation: With `bump`, build in an isolated environment (see `build_package`).

    Returns:
        What was uploaded, and where.

    Raises:
        HubError: nothing built, the version (or identical content) is already on the hub,
            missing or wrong credentials, an unreachable hub or one that is not an index.
    """
    where = hub if isinstance(hub, Hub) else Hub.resolve(hub)
    project = Project.load(directory)
    version = str(project.next_version(bump)) if bump else str(project.version)
    async with IndexReader(where) as reader:
        await _refuse_repush(reader, project, version, project.content_hash())
    pyproject = project.root / "pyproject.toml"
    before = pyproject.read_bytes()
    try:
        if bump:
            project.write_version(version)
            await abuild_package(project.root, isolation=isolation)
        files = dist_files(project, version)
        if not files:
            raise HubError(
                f"nothing built for {project.name.distribution} {version} in {project.root / 'dist'}; "
                f"run rubric build {project.root} first"
            )
        if _built_record(project, files).content_hash != project.content_hash():
            raise HubError(f"the sources changed since the last build; run rubric build {project.root} again")
        await asyncio.to_thread(_upload, where, files)
    except BaseException:
        if bump:  # the bump stands only once the upload succeeded: a retry bumps the same version
            pyproject.write_bytes(before)
        raise
    return PushResult(name=project.name.distribution, version=version, files=files, hub=where)


def push_package(
    directory: str | Path = ".",
    *,
    hub: str | Hub | None = None,
    bump: BumpPart | None = None,
    isolation: bool = True,
) -> PushResult:
    """Synchronous `apush_package` (works inside a running event loop too).

    Args:
        directory: The environment package's folder (built with `rubric build`).
        hub: The index URL (default `$RUBRIC_HUB_URL`).
        bump: Raise this part of the version and rebuild before uploading.
        isolation: With `bump`, build in an isolated environment.

    Returns:
        What was uploaded, and where.
    """
    return run_sync(apush_package(directory, hub=hub, bump=bump, isolation=isolation))


__all__ = ["PushResult", "apush_package", "push_package"]
