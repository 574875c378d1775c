"""An environment package on disk: its name, pyproject, entry point, version and content hash.

Everything `rubric check/build/push` needs to know about a package directory comes from here,
read from its PEP 621 `pyproject.toml` with `tomllib`; the only write is `bump_version`, which
rewrites the `version = "..."` line and nothing else, so the user's formatting survives.
"""

from __future__ import annotations

import hashlib
import importlib
import json
import re
import sys
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from harness._core.errors import RubricError

#: The file `rubric build` writes into the package's import directory and ships in the wheel.
#: The entry-point group an environment package registers its `load_environment` under.
ENTRY_POINT_GROUP = "rubric.environments"
CARD_FILE = "rubric_card.json"
#: Where files that are not source live; the content hash skips them.
_SKIPPED_DIRS = {
    "dist",
    "build",
    "__pycache__",
    ".git",
    ".venv",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
}
_NAME = re.compile(r"^([A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9])$", re.IGNORECASE)  # PEP 508 names
_VERSION_LINE = re.compile(r'^(\s*version\s*=\s*)(["\'])([^"\']*)\2', re.MULTILINE)

BumpPart = Literal["patch", "minor", "major"]


class HubError(RubricError):
    """A problem with an environment package or a hub, said in one line with the fix."""


@dataclass(frozen=True)
class PackageName:
    """The forms of one environment's name: `my-env` (distribution), `my_env` (import module).

    Attributes:
        distribution: The distribution's name (`my-env`).
        module: The import module's name (`my_env`).
    """

    distribution: str
    module: str

    @classmethod
    def parse(cls, name: str) -> PackageName:
        """Validate `name` (PEP 508) and normalize it (PEP 503); hyphens and underscores are the same.

        Raises:
            HubError: when the name is empty, has characters a package name cannot have, or
                does not start with a letter (a module name must).
        """
        text = name.strip() if isinstance(name, str) else ""
        if not _NAME.match(text) or not text[0].isalpha():
            raise HubError(
                f"invalid environment name {name!r}: use letters, digits, '-', '_' or '.', starting "
                "with a letter and ending with a letter or digit (e.g. my-env)"
            )
        distribution = canonicalize_name(text)
        return cls(distribution=distribution, module=distribution.replace("-", "_").replace(".", "_"))


@dataclass(frozen=True)
class Project:
    """A package directory with a PEP 621 pyproject declaring a `rubric.environments` entry point.

    Attributes:
        root: The package's folder.
        pyproject: Its pyproject.toml, parsed.
    """

    root: Path
    pyproject: dict[str, Any]

    @classmethod
    def load(cls, directory: str | Path) -> Project:
        """Read `directory/pyproject.toml`; HubError when it is missing or is not valid TOML."""
        root = Path(directory).resolve()
        path = root / "pyproject.toml"
        if not path.is_file():
            raise HubError(
                f"{root} has no pyproject.toml; run `rubric init NAME` to start an environment package"
            )
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise HubError(f"{path} is not valid TOML ({exc}); fix the file") from None
        return cls(root=root, pyproject=data)

    @property
    def table(self) -> dict[str, Any]:
        """The `[project]` table (empty when absent)."""
        table = self.pyproject.get("project")
        return table if isinstance(table, dict) else {}

    @property
    def name(self) -> PackageName:
        """The distribution's validated name."""
        if "name" not in self.table:
            raise HubError(f'{self.root}/pyproject.toml has no [project] name; add name = "my-env"')
        return PackageName.parse(str(self.table["name"]))

    @property
    def version(self) -> Version:
        """The `[project] version`; HubError when missing, dynamic or not PEP 440."""
        raw = self.table.get("version")
        if raw is None:
            raise HubError(
                f'{self.root}/pyproject.toml has no static [project] version; add version = "0.1.0"'
            )
        try:
            return Version(str(raw))
        except InvalidVersion:
            raise HubError(
                f"version {raw!r} in {self.root}/pyproject.toml is not a PEP 440 version"
            ) from None

    @property
    def entry_points(self) -> dict[str, str]:
        """The `rubric.environments` entry points: environment name -> `module:function`."""
        groups = self.table.get("entry-points") or {}
        found = groups.get(ENTRY_POINT_GROUP) if isinstance(groups, dict) else None
        return {str(k): str(v) for k, v in found.items()} if isinstance(found, dict) else {}

    def entry_point(self) -> tuple[str, str]:
        """The one (name, `module:function`) this package registers; HubError if none."""
        points = self.entry_points
        if not points:
            raise HubError(
                f"{self.root}/pyproject.toml declares no entry point in group {ENTRY_POINT_GROUP!r}; add "
                f'[project.entry-points."{ENTRY_POINT_GROUP}"] my-env = "my_env:load_environment"'
            )
        return next(iter(points.items()))

    def import_root(self) -> Path:
        """The directory to put on sys.path to import the package (a `src/` layout is honoured)."""
        return self.root / "src" if (self.root / "src").is_dir() else self.root

    def module_dir(self) -> Path:
        """The directory of the entry point's top-level package (where the card file goes)."""
        module = self.entry_point()[1].split(":", 1)[0].split(".", 1)[0]
        directory = self.import_root() / module
        if not (directory / "__init__.py").is_file():
            raise HubError(
                f"entry point module {module!r} is not a package directory under {self.import_root()}; "
                f"the card ships as {module}/{CARD_FILE}, so make {module} a package (a folder with __init__.py)"
            )
        return directory

    def resolve_entry_point(self) -> Callable[..., Any]:
        """Import the entry point's function from this folder (not from an installed copy).

        Raises:
            HubError: the module cannot be imported or has no such callable (the import
                error is named in one line).
        """
        target = self.entry_point()[1]
        module_name, _, attr = target.partition(":")
        self._prefer_source_tree(module_name.split(".", 1)[0])
        try:
            found: Any = importlib.import_module(module_name)
        except Exception as exc:
            raise HubError(
                f"entry point {target!r}: importing {module_name!r} failed: {type(exc).__name__}: {exc}"
            ) from None
        for part in attr.split(".") if attr else []:
            if not hasattr(found, part):
                raise HubError(f"entry point {target!r}: module {module_name!r} has no attribute {part!r}")
            found = getattr(found, part)
        if not callable(found):
            raise HubError(f"entry point {target!r} is a {type(found).__name__}, not a function")
        loader: Callable[..., Any] = found
        return loader

    def _prefer_source_tree(self, top: str) -> None:
        """Put the folder first on sys.path and forget a same-named module imported from elsewhere."""
        root = str(self.import_root())
        if root in sys.path:
            sys.path.remove(root)
        sys.path.insert(0, root)
        loaded = sys.modules.get(top)
        origin = getattr(loaded, "__file__", None) or ""
        if loaded is not None and not Path(origin).resolve().is_relative_to(self.import_root()):
            for name in [n for n in sys.modules if n == top or n.startswith(top + ".")]:
                del sys.modules[name]
        importlib.invalidate_caches()

    def content_hash(self) -> str:
        """sha256 over the source files, ignoring the version (so a bump alone changes nothing).

        Skips build output, caches, hidden files and the generated card; `pyproject.toml` is
        hashed as parsed TOML without `[project] version`.
        """
        digest = hashlib.sha256()
        for path in sorted(self._source_files()):
            relative = path.relative_to(self.root).as_posix()
            if relative == "pyproject.toml":
                data = json.loads(json.dumps(self.pyproject))
                data.get("project", {}).pop("version", None)
                content = json.dumps(data, sort_keys=True).encode()
            else:
                content = path.read_bytes()
            digest.update(relative.encode() + b"\0" + hashlib.sha256(content).digest())
        return "sha256:" + digest.hexdigest()

    def _source_files(self) -> list[Path]:
        files = []
        for path in self.root.rglob("*"):
            parts = path.relative_to(self.root).parts
            if any(p in _SKIPPED_DIRS or p.startswith(".") or p.endswith(".egg-info") for p in parts):
                continue
            if path.is_file() and path.name != CARD_FILE and path.suffix not in {".pyc", ".pyo"}:
                files.append(path)
        return files

    def next_version(self, part: BumpPart) -> Version:
        """The version with `part` raised and the lower parts reset (0.1.3 + minor -> 0.2.0)."""
        major, minor, patch = (*self.version.release, 0, 0)[:3]
        new = {
            "major": f"{major + 1}.0.0",
            "minor": f"{major}.{minor + 1}.0",
            "patch": f"{major}.{minor}.{patch + 1}",
        }.get(part)
        if new is None:
            raise HubError(f"cannot bump {part!r}; use patch, minor or major")
        return Version(new)

    def write_version(self, new: str | Version) -> None:
        """Rewrite the `version = "..."` line of [project] in pyproject.toml, and nothing else."""
        path = self.root / "pyproject.toml"
        text = path.read_text(encoding="utf-8")
        project_start = text.find("[project]")
        match = _VERSION_LINE.search(text, project_start if project_start >= 0 else 0)
        if match is None:
            raise HubError(f'cannot find the version = "..." line in {path}; edit the version by hand')
        path.write_text(text[: match.start(3)] + str(new) + text[match.end(3) :], encoding="utf-8")
        self.table["version"] = str(new)

    def bump_version(self, part: BumpPart) -> Version:
        """Raise the version's `part` in pyproject.toml; returns the new version."""
        new = self.next_version(part)
        self.write_version(new)
        return new


__all__ = ["CARD_FILE", "BumpPart", "HubError", "PackageName", "Project"]
