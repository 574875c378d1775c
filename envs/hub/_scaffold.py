"""`rubric init`: write a ready environment package (pyproject, module, data, test, card)."""

from __future__ import annotations

import json
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from string import Template
from typing import Literal

from packaging.version import Version

from envs._project import HubError, PackageName
from envs.hub import _templates as templates

KindOption = Literal["single", "tool", "multi", "mcp"]
KINDS: dict[str, str] = {"single": "single-turn", "tool": "tool", "multi": "multi-turn", "mcp": "tool"}
NUM_ROWS = 20


def rubric_requirement() -> str:
    """`rubric-rl` with a compatible range: the running minor series (0.x) or major (>= 1)."""
    try:
        current = Version(version("rubric-rl"))
    except PackageNotFoundError:  # running from a source tree that was never installed
        current = Version("0.1.0")
    major, minor = (*current.release, 0)[:2]
    if major == 0:
        return f"rubric-rl>={major}.{minor},<{major}.{minor + 1}"
    return f"rubric-rl>={major}.{minor},<{major + 1}"


def _rows(kind: str) -> list[dict[str, str]]:
    rows = []
    for i in range(NUM_ROWS):
        if kind == "multi-turn":
            secret = (37 * i + 11) % 100 + 1
            question = "I am thinking of a whole number from 1 to 100. Guess it."
            rows.append({"id": f"game-{i:02d}", "question": question, "answer": str(secret)})
        else:
            a, b = 3 * i + 2, (7 * i) % 11 + 1
            rows.append({"id": f"sum-{i:02d}", "question": f"What is {a} + {b}?", "answer": str(a + b)})
    return rows


def init_package(name: str, directory: str | Path = ".", kind: KindOption = "single") -> Path:
    """Write a new environment package `directory/name` and return its path.

    The package has a PEP 621 `pyproject.toml` (depending on a compatible `rubric-rl` range and
    declaring the `rubric.environments` entry point), `MODULE/environment.py` with a working
    `load_environment(**kwargs)`, a small dataset, a scripted `demo` policy, a test, and a
    README.md whose front matter is the environment card.

    Args:
        name: The environment's name; PEP 503 normalized, so `My_Env` becomes `my-env` (module `my_env`).
        directory: The folder to create the package in.
        kind: "single" (one answer), "tool" (tool calls), "multi" (the environment talks back) or
            "mcp" (tool calls to an MCP server shipped in the package; depends on rubric-rl[mcp]).

    Raises:
        HubError: an invalid name or kind, or a target folder that exists and is not empty.
    """
    names = PackageName.parse(name)
    if kind not in KINDS:
        raise HubError(f"unknown kind {kind!r}; use one of {', '.join(KINDS)}")
    root = Path(directory) / name.strip()
    if root.exists() and any(root.iterdir()):
        raise HubError(f"{root} already exists and is not empty; choose another name or --dir")
    card_kind = KINDS[kind]
    values = {
        "name": names.distribution,
        "module": names.module,
        "kind": card_kind,
        "description": f"A {card_kind} environment of {'number guessing' if kind == 'multi' else 'two-number additions'}.",
        "tags": ", ".join(["example", card_kind, "games" if kind == "multi" else "math"]),
        "requirement": rubric_requirement().replace("rubric-rl", "rubric-rl[mcp]", 1)
        if kind == "mcp"
        else rubric_requirement(),
    }
    module_text = templates.MCP_TOOL if kind == "mcp" else templates.MODULES[card_kind]
    files = {
        "pyproject.toml": templates.PYPROJECT,
        "README.md": templates.README,
        f"{names.module}/__init__.py": templates.INIT,
        f"{names.module}/environment.py": module_text,
        f"tests/test_{names.module}.py": templates.TEST,
    }
    if kind == "mcp":
        files[f"{names.module}/server.py"] = templates.MCP_SERVER
    for relative, text in files.items():
        path = root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(Template(text).substitute(values), encoding="utf-8")
    data = "".join(json.dumps(row) + "\n" for row in _rows(card_kind))
    (root / names.module / "data.jsonl").write_text(data, encoding="utf-8")
    return root


__all__ = ["KINDS", "init_package", "rubric_requirement"]
