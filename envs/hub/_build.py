"""`rubric build`: check the package, write its hub record, build sdist and wheel with `build`.

The record (`rubric_card.json`: card, rubric tree summary, compatibility record, content hash)
is written into the package's import directory before the PEP 517 build, so it ships inside
both the sdist and the wheel; the build is then verified to carry it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import json
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.utils import (
    InvalidSdistFilename,
    InvalidWheelFilename,
    canonicalize_name,
    parse_sdist_filename,
    parse_wheel_filename,
)

from envs._project import CARD_FILE, HubError, Project
from envs.hub._card import HubRecord
from envs.hub._checks import CheckReport, acheck_package, rubric_version
from harness._core.aio import run_sync

BUILD_TIMEOUT = 600.0
HUB_EXTRA_HINT = "install the hub tools: pip install 'rubric-rl[hub]'"


@dataclass(frozen=True)
class BuildResult:
    """What `build_package` made: the dist files and the record they carry.

    Attributes:
        files: The sdist and wheel written into `dist/`.
        record: The hub record (`rubric_card.json`) the wheel carries.
    """

    files: list[Path]
    record: HubRecord


def make_record(report: CheckReport) -> HubRecord:
    """The hub record of a package that passed `check` (compatibility: this rubric-rl version)."""
    project, card = report.project, report.card
    if project is None or card is None or not report.ok:
        raise HubError("the package must pass `rubric check` before it gets a hub record")
    return HubRecord(
        name=project.name.distribution,
        version=str(project.version),
        entry_points=project.entry_points,
        card=card,
        rubric=report.built().rubric.tree(),
        compatibility={"rubric-rl": [rubric_version()]},
        content_hash=project.content_hash(),
    )


def write_record(project: Project, record: HubRecord) -> Path:
    """Write `rubric_card.json`; versions checked earlier on the same content are kept."""
    path = project.module_dir() / CARD_FILE
    if path.is_file():
        try:
            old = HubRecord.model_validate_json(path.read_text(encoding="utf-8"))
        except ValueError:
            old = None
        if old is not None and old.content_hash == record.content_hash:
            for package, versions in old.compatibility.items():
                merged = sorted(set(versions) | set(record.compatibility.get(package, [])))
                record.compatibility[package] = merged
    path.write_text(
        json.dumps(record.model_dump(mode="json", exclude_none=True), indent=2) + "\n", encoding="utf-8"
    )
    return path


def dist_files(project: Project, version: str | None = None) -> list[Path]:
    """The sdist and wheels of `version` (default: the project's) in `DIR/dist/`."""
    wanted = version or str(project.version)
    found = []
    for path in sorted((project.root / "dist").glob("*")):
        try:
            if path.name.endswith(".whl"):
                name, got = parse_wheel_filename(path.name)[:2]
            elif path.name.endswith(".tar.gz"):
                name, got = parse_sdist_filename(path.name)
            else:
                continue
        except (InvalidWheelFilename, InvalidSdistFilename):
            continue
        if canonicalize_name(name) == project.name.distribution and str(got) == wanted:
            found.append(path)
    return found


def _run_build(project: Project, isolation: bool) -> list[Path]:
    if importlib.util.find_spec("build") is None:
        raise HubError(f"`rubric build` needs the `build` package; {HUB_EXTRA_HINT}")
    for stale in dist_files(project):
        stale.unlink()
    command = [sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", str(project.root / "dist")]
    command += [] if isolation else ["--no-isolation"]
    proc = subprocess.run(
        [*command, str(project.root)], capture_output=True, text=True, timeout=BUILD_TIMEOUT, check=False
    )
    if proc.returncode != 0:
        tail = " | ".join((proc.stderr or proc.stdout).strip().splitlines()[-3:])
        raise HubError(f"building {project.root} failed (python -m build): {tail}")
    files = dist_files(project)
    if not any(f.name.endswith(".whl") for f in files):
        raise HubError(
            f"python -m build made no wheel for {project.name.distribution} in {project.root / 'dist'}"
        )
    return files


def _verify_wheel(project: Project, files: list[Path]) -> None:
    wheel = next(f for f in files if f.name.endswith(".whl"))
    expected = f"{project.module_dir().name}/{CARD_FILE}"
    if expected not in zipfile.ZipFile(wheel).namelist():
        raise HubError(
            f"{wheel.name} lacks {expected}; ship it as package data, e.g. [tool.setuptools.package-data] "
            f'{project.module_dir().name} = ["{CARD_FILE}"]'
        )


async def abuild_package(directory: str | Path = ".", *, isolation: bool = True) -> BuildResult:
    """Run `check`, write the hub record, then build sdist and wheel into `directory/dist/`.

    Args:
        directory: The environment package's folder.
        isolation: Build in an isolated environment (PEP 517, fetching the build backend from
            the package index); False builds with the backend installed here (offline).

    Returns:
        The files built and the record they carry.

    Raises:
        HubError: a check failed, `build` is not installed, or the build failed.
    """
    report = await acheck_package(directory)
    if not report.ok:
        failed = [r for r in report.results if not r.ok]
        raise HubError(
            f"rubric check failed ({len(failed)} of {len(report.results)}), first: {failed[0].name}: "
            f"{failed[0].detail}; fix it, then build again"
        )
    assert report.project is not None
    record = make_record(report)
    write_record(report.project, record)
    files = await asyncio.to_thread(_run_build, report.project, isolation)
    _verify_wheel(report.project, files)
    return BuildResult(files=files, record=record)


def build_package(directory: str | Path = ".", *, isolation: bool = True) -> BuildResult:
    """Synchronous `abuild_package` (works inside a running event loop too).

    Args:
        directory: The environment package's folder.
        isolation: Build in an isolated environment; False builds with the backend installed here.

    Returns:
        The files built and the record they carry.
    """
    return run_sync(abuild_package(directory, isolation=isolation))


__all__ = ["BuildResult", "abuild_package", "build_package", "dist_files", "make_record", "write_record"]
