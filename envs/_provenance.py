"""Where an environment came from: its distribution and version, or a hash of its local source.

`envs.load_environment` sets `env.provenance` to one of these records; `evaluate` writes it to
`metadata.json`, `rubric view` shows it, and `rubric eval --resume` warns when it changed.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
from pathlib import Path
from typing import Any

from envs._project import Project


def _sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def of_distribution(dist: Any, entry_point: str) -> dict[str, Any]:
    """An environment an installed distribution registers."""
    return {
        "source": "distribution",
        "distribution": str(dist.metadata["Name"]),
        "version": str(dist.version),
        "entry_point": entry_point,
    }


def of_file(path: Path) -> dict[str, Any]:
    """A `.py` file: its resolved path and a hash of its bytes."""
    return {"source": "file", "path": str(path.resolve()), "hash": _sha256(path.read_bytes())}


def of_directory(path: Path) -> dict[str, Any]:
    """A package folder: its declared name and version and a hash of its source files."""
    project = Project.load(path)
    return {
        "source": "directory",
        "path": str(project.root),
        "distribution": project.name.distribution,
        "version": str(project.table.get("version", "")),
        "hash": project.content_hash(),
    }


def of_module(module_name: str) -> dict[str, Any]:
    """`module:function`: the distribution providing the module, else a hash of its file."""
    import sys

    top = module_name.split(".", 1)[0]
    providers = importlib.metadata.packages_distributions().get(top) or []
    if providers:
        dist = importlib.metadata.distribution(providers[0])
        return {
            "source": "distribution",
            "distribution": dist.metadata["Name"],
            "version": dist.version,
            "module": module_name,
        }
    file = getattr(sys.modules.get(module_name), "__file__", None)
    found: dict[str, Any] = {"source": "module", "module": module_name}
    if file:
        found.update(path=str(Path(file).resolve()), hash=_sha256(Path(file).read_bytes()))
    return found


def describe_provenance(provenance: object) -> str:
    """Where an environment came from, in one line for people.

    Args:
        provenance: The record a run keeps (`EvalResults.metadata["provenance"]`,
            `Environment.provenance`); anything else reads as unknown.

    Returns:
        For example "my-env 0.1.0 (installed distribution)", or a file or folder with the
        start of its hash.
    """
    if not isinstance(provenance, dict):
        return "unknown (recorded before provenance was kept)"
    source = provenance.get("source")
    if source == "distribution":
        where = f", {provenance['entry_point']}" if provenance.get("entry_point") else ""
        return f"{provenance.get('distribution')} {provenance.get('version')} (installed distribution{where})"
    short = str(provenance.get("hash", ""))[:19]
    if source == "directory":
        return f"{provenance.get('distribution')} {provenance.get('version')} from folder {provenance.get('path')} ({short})"
    return f"{provenance.get('path') or provenance.get('module')} ({short or 'no hash'})"


def changes(before: Any, now: Any, *, names: tuple[Any, Any] = (None, None)) -> str | None:
    """What changed between two provenance records, or None when they are the same environment.

    `names` are the environment's names then and now (from metadata.json and the loaded
    environment), so the line says which environment each side was, not only where it came from.
    """
    if not isinstance(before, dict) or not isinstance(now, dict) or before == now:
        return None
    was, is_now = (f"{name!r} from " if name else "" for name in names)
    return (
        f"the environment changed since the run started: was {was}{describe_provenance(before)}, "
        f"now {is_now}{describe_provenance(now)}"
    )


__all__ = ["changes", "describe_provenance", "of_directory", "of_distribution", "of_file", "of_module"]
