"""`rubric install` and `rubric list`: environments from a hub into this interpreter, and what is installed.

`install` asks the hub which versions it has (so a typo or a missing version is one clear line
before any installer runs), downloads the hub's own wheel of that version and checks it
against the sha256 the hub's index gives, then has uv (when on PATH) or pip install that file
for `sys.executable`: the environment itself can never come from another index (dependency
confusion), while its dependencies still come from the configured index (PyPI by default, the
hub as an extra one). It finally confirms the `rubric.environments` entry point is registered.
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
import importlib
import importlib.util
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from importlib.metadata import Distribution, PackageNotFoundError, distribution, distributions
from pathlib import Path

from packaging.requirements import InvalidRequirement, Requirement
from packaging.tags import sys_tags
from packaging.utils import canonicalize_name, parse_wheel_filename

from envs._project import CARD_FILE, ENTRY_POINT_GROUP, HubError, PackageName
from envs.hub._card import MAX_CARD_BYTES, read_record
from envs.hub._index import DistFile, Hub, IndexReader
from harness._core.aio import run_sync

INSTALL_TIMEOUT = 900.0


@dataclass(frozen=True)
class InstalledEnvironment:
    """An installed environment: its registered name, distribution, version and card description.

    Attributes:
        name: The name it is registered under (`rubric eval NAME`).
        distribution: The distribution that installed it.
        version: Its version.
        description: Its card's description.
        entry_point: The object its entry point names (module:function).
    """

    name: str
    distribution: str
    version: str
    description: str
    entry_point: str


def _parse_spec(spec: str) -> tuple[PackageName, str | None]:
    try:
        requirement = Requirement(spec.strip())
    except InvalidRequirement:
        raise HubError(f"cannot read {spec!r}; give NAME or NAME==VERSION, e.g. my-env==0.1.0") from None
    name = PackageName.parse(requirement.name)
    pins = [s.version for s in requirement.specifier if s.operator in ("==", "===")]
    if requirement.specifier and not pins:
        raise HubError(f"{spec!r}: only NAME or NAME==VERSION is supported")
    return name, pins[0] if pins else None


def _resolve_version(hub: Hub, name: PackageName, files: list[DistFile] | None, wanted: str | None) -> str:
    if not files:
        raise HubError(
            f"no package {name.distribution!r} on {hub.url}; `rubric hub search` lists what is there"
        )
    versions = sorted({f.version for f in files})
    if wanted is None:
        return str(versions[-1])
    if wanted not in {str(v) for v in versions}:
        raise HubError(
            f"{name.distribution} has no version {wanted} on {hub.url}; it has {', '.join(map(str, versions))}"
        )
    return wanted


def _hub_wheel(hub: Hub, name: PackageName, files: list[DistFile], version: str) -> DistFile:
    """The hub's own wheel of `name` `version` for this interpreter (the one to install)."""
    supported = set(sys_tags())
    wheels = sorted(
        (
            f
            for f in files
            if f.is_wheel
            and str(f.version) == version
            and set(parse_wheel_filename(f.filename)[3]) & supported
        ),
        key=lambda f: f.filename,
    )
    if not wheels:
        raise HubError(
            f"{hub.url} has no wheel of {name.distribution} {version} for this Python; nothing installed"
        )
    return wheels[0]


async def _fetch_verified(reader: IndexReader, dist: DistFile, folder: Path) -> Path:
    """Download the hub's file and check it against the sha256 the hub's index gives."""
    if dist.sha256 is None:
        raise HubError(
            f"{reader.hub.url} gives no sha256 for {dist.filename}, so it cannot be checked; nothing installed "
            f"(pypiserver gives one by default: do not run it with --hash-algo none)"
        )
    data = await reader.download(dist.url)
    if hashlib.sha256(data).hexdigest() != dist.sha256:
        raise HubError(
            f"{dist.filename} from {reader.hub.url} does not match the sha256 its index gives; nothing installed"
        )
    path = folder / dist.filename
    path.write_bytes(data)
    return path


def installer_command(requirement: str, hub: Hub) -> list[str]:
    """uv when on PATH, else pip; either installs into this interpreter's environment.

    `requirement` is the path of the environment's own wheel, fetched from the hub and checked:
    the environment itself never comes from another index. Its dependencies may (the hub is
    an extra index beside the configured one).
    """
    uv = shutil.which("uv")
    if uv:
        return [
            uv,
            "pip",
            "install",
            "--python",
            sys.executable,
            "--extra-index-url",
            hub.simple_url,
            requirement,
        ]
    return [sys.executable, "-m", "pip", "install", "--extra-index-url", hub.simple_url, requirement]


def _installed(name: PackageName) -> Distribution:
    importlib.invalidate_caches()
    try:
        return distribution(name.distribution)
    except PackageNotFoundError:
        raise HubError(f"the installer finished but {name.distribution} is not installed here") from None


async def ainstall(spec: str, *, hub: str | Hub | None = None) -> InstalledEnvironment:
    """Install `NAME` or `NAME==VERSION` from the hub into the running interpreter's environment.

    Args:
        spec: `NAME` or `NAME==VERSION`.
        hub: The index URL (default `$RUBRIC_HUB_URL`).

    Returns:
        What was installed.

    Raises:
        HubError: a bad spec, no such package or version on the hub, the installer failed, or
            the installed package registers no `rubric.environments` entry point.
    """
    where = hub if isinstance(hub, Hub) else Hub.resolve(hub)
    name, wanted = _parse_spec(spec)
    with tempfile.TemporaryDirectory(prefix="rubric-install-") as folder:
        async with IndexReader(where) as reader:
            files = await reader.project_files(name.distribution)
            version = _resolve_version(where, name, files, wanted)
            wheel = await _fetch_verified(reader, _hub_wheel(where, name, files or [], version), Path(folder))
        command = installer_command(str(wheel), where)
        proc = await asyncio.to_thread(
            subprocess.run, command, capture_output=True, text=True, timeout=INSTALL_TIMEOUT, check=False
        )
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise HubError(f"installing {name.distribution}=={version} failed ({command[0]}): {tail}")
    found = [e for e in installed_environments() if canonicalize_name(e.distribution) == name.distribution]
    if not found:
        _installed(name)
        raise HubError(
            f"{name.distribution} {version} is installed but registers no {ENTRY_POINT_GROUP!r} entry point; "
            "it is not an environment package"
        )
    return found[0]


def install(spec: str, *, hub: str | Hub | None = None) -> InstalledEnvironment:
    """Synchronous `ainstall` (works inside a running event loop too).

    Args:
        spec: `NAME` or `NAME==VERSION`.
        hub: The index URL (default `$RUBRIC_HUB_URL`).

    Returns:
        What was installed.
    """
    return run_sync(ainstall(spec, hub=hub))


def _description(dist: Distribution, module: str) -> str:
    """The card's description, else the first docstring line of the entry point's module, else Summary.

    The docstring is read from the source with `ast`, so listing imports nothing.
    """
    card = Path(str(dist.locate_file(f"{module.split('.')[0]}/{CARD_FILE}")))
    try:
        with card.open("rb") as handle:
            record, _ = read_record(handle.read(MAX_CARD_BYTES + 1))  # capped: a card is small
        if record is not None:
            return record.card.description
    except OSError:
        pass
    try:
        spec = importlib.util.find_spec(module)
        origin = Path(spec.origin) if spec is not None and spec.origin else None
        doc = ast.get_docstring(ast.parse(origin.read_text(encoding="utf-8"))) if origin else None
    except (ImportError, ValueError, OSError, SyntaxError):
        doc = None
    return (doc or "").strip().splitlines()[0] if doc else str((dist.metadata.get_all("Summary") or [""])[0])


def installed_environments() -> list[InstalledEnvironment]:
    """Every installed environment (entry-point group `rubric.environments`), sorted by name."""
    importlib.invalidate_caches()
    found: dict[tuple[str, str], InstalledEnvironment] = {}
    for dist in distributions():
        for ep in dist.entry_points:
            if ep.group != ENTRY_POINT_GROUP:
                continue
            key = (canonicalize_name(ep.name), ep.value)
            found.setdefault(
                key,
                InstalledEnvironment(
                    name=ep.name,
                    distribution=str(dist.metadata["Name"]),
                    version=dist.version,
                    description=_description(dist, ep.value.split(":")[0]),
                    entry_point=ep.value,
                ),
            )
    return sorted(found.values(), key=lambda e: canonicalize_name(e.name))


__all__ = ["InstalledEnvironment", "ainstall", "install", "installed_environments", "installer_command"]
