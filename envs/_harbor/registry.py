"""A Harbor registry (`registry.json`): datasets by name and version, their tasks fetched with git.

    [{"name": "my-dataset", "version": "1.0", "description": "...",
      "tasks": [{"name": "task-1", "git_url": "https://github.com/org/repo.git",
                 "git_commit_id": "<40 hex>", "path": "tasks/task-1", "digest": "sha256:<hex>"}]}]

A registry is a file (`--registry PATH`) or a URL (`https://`, `file://`). `harbor:NAME@VERSION`
picks one dataset; without `@VERSION` the version is chosen as Harbor chooses it ("head", else
the highest PEP 440 version, else the last by name). An unknown name or version is refused
listing what the registry has.

Each task is fetched once with the `git` command (any URL git accepts), only its folder checked
out, into `cache_root()/tasks/<repository>/<commit>/<path>`, keyed by the pinned commit, and read
from there afterwards (offline). `digest` is optional (Harbor's own registry.json has none): when
given, the fetched task must have it. Either way the digest found at the first fetch is recorded
beside the copy, and a copy that no longer has it is refused (edited or damaged since). A task
whose `git_commit_id` is not a full commit id (none, or a branch) is fetched again each time, as
Harbor does. A task without `git_url` is a folder, relative to a registry file's own folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import urllib.parse
import urllib.request
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from packaging.version import InvalidVersion, Version
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from envs._harbor.digest import task_digest
from envs._harbor.files import HarborTaskError

_COMMIT = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
_RECORD = "fetched.json"
#: The longest a registry.json may be (read whole).
MAX_REGISTRY_BYTES = 64 << 20
#: The longest one git command may take (a clone of a large repository included).
GIT_TIMEOUT_SEC = 1800.0


class RegistryTask(BaseModel):
    """One task of a registry dataset: a folder at `path` of `git_url` at `git_commit_id`
    (neither may start with "-": git would read it as an option)."""

    model_config = ConfigDict(extra="allow")

    name: str
    git_url: str | None = Field(None, pattern=r"^[^-\s].*$")
    git_commit_id: str | None = Field(None, pattern=r"^[A-Za-z0-9._/][A-Za-z0-9._/-]*$")
    path: str
    digest: str | None = Field(None, pattern=r"^sha256:[a-f0-9]{64}$")


class RegistryDataset(BaseModel):
    """One dataset version of a registry."""

    model_config = ConfigDict(extra="allow")

    name: str
    version: str
    description: str = ""
    tasks: list[RegistryTask]


_DATASETS = TypeAdapter(list[RegistryDataset])


def cache_root() -> Path:
    """Where fetched Harbor tasks live (`RUBRIC_HARBOR_CACHE`, default ~/.cache/rubric/harbor)."""
    return Path(os.environ.get("RUBRIC_HARBOR_CACHE") or Path.home() / ".cache" / "rubric" / "harbor")


def _read_source(source: str) -> tuple[bytes, Path | None]:
    """The registry's bytes, and its folder when it is a local file."""
    scheme = urllib.parse.urlparse(source).scheme
    if scheme == "file":
        source = urllib.request.url2pathname(urllib.parse.urlparse(source).path)
    elif scheme in ("http", "https"):
        try:
            with urllib.request.urlopen(source, timeout=60) as response:
                return response.read(MAX_REGISTRY_BYTES + 1), None
        except OSError as exc:
            raise HarborTaskError(f"Harbor registry {source} cannot be fetched: {exc}") from None
    elif scheme and len(scheme) > 1:
        raise HarborTaskError(
            f"Harbor registry {source}: give a registry.json path, a file:// or an http(s):// URL"
        )
    path = Path(source).expanduser()
    try:
        with path.open("rb") as handle:
            return handle.read(MAX_REGISTRY_BYTES + 1), path.resolve().parent
    except OSError as exc:
        raise HarborTaskError(f"Harbor registry {source} cannot be read: {exc.strerror}") from None


def read_registry(source: str) -> tuple[list[RegistryDataset], Path | None]:
    """The datasets of a registry.json (a path or a URL), and its folder when it is a local file.

    Raises:
        HarborTaskError: It cannot be read, is not JSON, or is not a list of datasets (the field).
    """
    data, folder = _read_source(source)
    if len(data) > MAX_REGISTRY_BYTES:
        raise HarborTaskError(f"Harbor registry {source} is larger than {MAX_REGISTRY_BYTES >> 20} MiB")
    try:
        return _DATASETS.validate_json(data), folder
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc'])) or 'registry'}: {e['msg']}" for e in exc.errors()[:5]
        )
        raise HarborTaskError(f"Harbor registry {source} is not a list of datasets: {problems}") from None


def _newest(versions: list[str]) -> str:
    """Harbor's choice when no version is asked for: "head", else the highest PEP 440 version,
    else the last by name."""
    if "head" in versions:
        return "head"
    parsed: list[tuple[Version, str]] = []
    for version in versions:
        try:
            parsed.append((Version(version), version))
        except InvalidVersion:
            continue
    return max(parsed)[1] if parsed else max(versions)


def find_dataset(datasets: list[RegistryDataset], spec: str, source: str) -> RegistryDataset:
    """The dataset `NAME@VERSION` (or `NAME`: the version Harbor would choose) of a registry.

    Raises:
        HarborTaskError: No dataset has that name (the registry's datasets are listed), or none
            of that name has that version (its versions are listed).
    """
    name, _, version = spec.partition("@")
    versions = {d.version: d for d in datasets if d.name == name}
    if not versions:
        have = ", ".join(sorted({f"{d.name}@{d.version}" for d in datasets})) or "none"
        raise HarborTaskError(f"Harbor registry {source} has no dataset {name!r}; it has: {have}")
    if not version:
        version = _newest(list(versions))
    if version not in versions:
        raise HarborTaskError(
            f"Harbor registry {source} has no version {version!r} of {name}; it has: {', '.join(sorted(versions))}"
        )
    return versions[version]


def _git(*args: str, cwd: Path) -> str:
    """Run one git command; its stdout, or a HarborTaskError with what git said."""
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_LFS_SKIP_SMUDGE": "1"}
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_SEC,
            check=False,
        )
    except FileNotFoundError:
        raise HarborTaskError("fetching Harbor registry tasks needs the git command; install git") from None
    except subprocess.TimeoutExpired:
        raise HarborTaskError(f"git {' '.join(args)} took longer than {GIT_TIMEOUT_SEC:.0f}s") from None
    if done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise HarborTaskError(f"git {' '.join(args)} failed: {said[-1] if said else done.returncode}")
    return done.stdout.strip()


def _task_path(task: RegistryTask) -> PurePosixPath:
    """The task's folder inside its repository, refused when it would lead out of it."""
    path = PurePosixPath(task.path)
    if path.is_absolute() or ".." in path.parts or not path.parts or path == PurePosixPath("."):
        raise HarborTaskError(f"Harbor registry task {task.name}: path {task.path!r} must be a folder inside its repository")  # fmt: skip
    return path


def _checkout(task: RegistryTask, stage: Path) -> tuple[Path, str]:
    """A checkout of only the task's folder at its commit (or the default branch) in `stage`;
    returns the folder and the commit it came from."""
    assert task.git_url is not None
    path = _task_path(task)
    _git("init", "--quiet", str(stage), cwd=stage.parent)
    _git("remote", "add", "origin", task.git_url, cwd=stage)
    _git("sparse-checkout", "set", "--no-cone", f"/{path}/", cwd=stage)
    _git("fetch", "--quiet", "--depth", "1", "origin", task.git_commit_id or "HEAD", cwd=stage)
    _git("-c", "advice.detachedHead=false", "checkout", "--quiet", "FETCH_HEAD", cwd=stage)
    commit = _git("rev-parse", "HEAD", cwd=stage)
    if task.git_commit_id and _COMMIT.match(task.git_commit_id) and commit != task.git_commit_id:
        raise HarborTaskError(f"Harbor registry task {task.name}: {task.git_url} gave commit {commit}, not {task.git_commit_id}")  # fmt: skip
    folder = stage.joinpath(*path.parts)
    if not folder.is_dir():
        raise HarborTaskError(
            f"Harbor registry task {task.name}: {task.git_url} at {commit} has no folder {path}"
        )
    return folder, commit


@dataclass(frozen=True)
class FetchedTask:
    """A registry task in the cache: its folder, the commit it came from, its digest."""

    folder: Path
    commit: str
    digest: str


def _entry(task: RegistryTask, commit: str) -> Path:
    """The cache entry of a task at a commit: its repository (by its URL's hash), commit, path."""
    assert task.git_url is not None
    repository = hashlib.sha256(task.git_url.encode()).hexdigest()[:16]
    return cache_root() / "tasks" / repository / commit / "_".join(_task_path(task).parts)


def _reuse(task: RegistryTask, entry: Path) -> FetchedTask:
    """A task fetched before: its recorded digest checked against the copy (and the registry's)."""
    try:
        record = json.loads((entry / _RECORD).read_text())
        recorded, commit = str(record["digest"]), str(record["commit"])
    except (OSError, ValueError, KeyError, TypeError):
        raise HarborTaskError(f"Harbor registry task {task.name}: {entry / _RECORD} is damaged; remove {entry} to fetch it again") from None  # fmt: skip
    folder = entry / _task_path(task).name
    actual = task_digest(folder)
    if actual != recorded:
        raise HarborTaskError(
            f"Harbor registry task {task.name}: the copy in {folder} has digest {actual}, it had {recorded} "
            f"when fetched; it was changed since: remove {entry} to fetch it again"
        )
    _check_pinned(task, actual)
    return FetchedTask(folder, commit, actual)


def _check_pinned(task: RegistryTask, actual: str) -> None:
    if task.digest is not None and actual != task.digest:
        raise HarborTaskError(
            f"Harbor registry task {task.name}: {task.git_url} at {task.git_commit_id} has digest {actual}, "
            f"the registry pins {task.digest}"
        )


def fetch_task(task: RegistryTask) -> FetchedTask:
    """A registry task's folder in the cache, fetched with git unless it is there at its commit.

    Raises:
        HarborTaskError: git failed (what it said), the folder is not at that commit, or the
            task's digest is not the one the registry pins or was recorded at the first fetch.
    """
    if task.git_commit_id and _COMMIT.match(task.git_commit_id):
        entry = _entry(task, task.git_commit_id)
        if (entry / _RECORD).is_file():
            return _reuse(task, entry)
    root = cache_root() / "tasks"
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".fetch-", dir=root) as temp:
        folder, commit = _checkout(task, Path(temp) / "repo")
        actual = task_digest(folder)
        _check_pinned(task, actual)
        entry = _entry(task, commit)
        if (entry / _RECORD).is_file():  # fetched meanwhile (another run), or unpinned and unchanged
            return _reuse(task, entry)
        staged = Path(temp) / "entry"
        shutil.copytree(folder, staged / folder.name, symlinks=True)
        record = {
            "name": task.name,
            "git_url": task.git_url,
            "commit": commit,
            "path": task.path,
            "digest": actual,
        }
        (staged / _RECORD).write_text(json.dumps(record, indent=1) + "\n")
        entry.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.rename(staged, entry)
        except OSError:  # another process put it there first
            return _reuse(task, entry)
    return FetchedTask(entry / folder.name, commit, actual)


def _local_task(task: RegistryTask, folder: Path | None, source: str) -> Path:
    """A registry task without git_url: a folder relative to the registry file's folder."""
    if folder is None:
        raise HarborTaskError(f"Harbor registry {source}: task {task.name} has no git_url, and a registry at a URL has no folder for its path")  # fmt: skip
    path = (folder / task.path).resolve()
    if not path.is_dir():
        raise HarborTaskError(f"Harbor registry {source}: task {task.name}'s folder {path} does not exist")
    actual = task_digest(path)
    if task.digest is not None and actual != task.digest:
        raise HarborTaskError(f"Harbor registry task {task.name}: {path} has digest {actual}, the registry pins {task.digest}")  # fmt: skip
    return path


def registry_task_folders(spec: str, registry: str) -> tuple[RegistryDataset, list[Path]]:
    """The dataset `spec` (`NAME@VERSION` or `NAME`) of a registry and its task folders, each
    fetched (once) into the cache and checked.

    Args:
        spec: The dataset, `NAME@VERSION` or `NAME`.
        registry: The registry.json: a path, a `file://` or an `http(s)://` URL.

    Raises:
        HarborTaskError: As `read_registry`, `find_dataset` and `fetch_task`.
    """
    datasets, folder = read_registry(registry)
    dataset = find_dataset(datasets, spec, registry)
    folders: list[Path] = []
    for task in dataset.tasks:
        path = fetch_task(task).folder if task.git_url else _local_task(task, folder, registry)
        folders.append(path)
    return dataset, folders


__all__ = [
    "FetchedTask",
    "RegistryDataset",
    "RegistryTask",
    "cache_root",
    "fetch_task",
    "registry_task_folders",
]
