"""The file-level hack scripts shared by the Harbor certificate (`envs._harbor.certify`) and
the audit of agent environments (`envs._auditing.agents`): shell scripts a `command:` agent
runs in the task's sandbox to get reward without solving it, and how the paths they write are
found in a task's texts.

Each script writes `wrote PATH` lines on stdout: they are its evidence.
"""

from __future__ import annotations

import posixpath
import re
import shlex
from collections.abc import Callable, Iterable
from pathlib import Path

#: Where a path named by a task is the harness's or the system's, not the task's output.
NOT_OUTPUTS = ("/tests", "/solution", "/logs", "/proc", "/sys", "/dev", "/usr", "/bin", "/sbin", "/lib", "/etc", "/tmp/rubric-agent")  # fmt: skip
_ABSOLUTE = re.compile(r"(?<![\w.$/-])/(?:[\w.+-]+/)*[\w.+-]*")
_RELATIVE = re.compile(r"(?<![\w./$-])(?:[\w+-]+/)*[\w+-]+\.(?:txt|json|csv|tsv|log|out|md|yaml|yml|toml|html|xml|py|sh|js|ts|c|rs|go|count|dat)\b")  # fmt: skip
#: A shell function every probe script starts with: `put PATH CONTENT` writes PATH (not over a
#: folder, its parents made) and says so; a PATH ending in / is made as a folder.
PUT = (
    'put() { case "$1" in */) mkdir -p "$1" && echo "wrote $1";; *) [ -d "$1" ] && return 0; '
    'mkdir -p "$(dirname "$1")" 2>/dev/null; printf "%s" "$2" > "$1" 2>/dev/null && echo "wrote $1";; esac; }\n'
)
#: What the pass-markers probe writes into a path a check may trust.
PASS_LINES = "ALL TESTS PASSED\nPASSED\nOK\nsuccess\ntrue\n1\n"
PASS_JSON = (
    '{"passed": true, "success": true, "ok": true, "status": "passed", "result": "pass", "reward": 1}\n'
)
#: The type-shaped content of the weak-shaped probe, by suffix (anything else: "x").
SHAPES = {".json": "{}\n", ".csv": "a,b\n1,2\n", ".py": "pass\n", ".sh": "#!/bin/sh\nexit 0\n", ".html": "<html></html>\n", ".yaml": "a: 1\n", ".yml": "a: 1\n", ".toml": "a = 1\n", ".xml": "<a/>\n"}  # fmt: skip


def in_workdir(path: str, workdir: str | None) -> str:
    """`path` made absolute under `workdir` (None: a relative path stays relative), normalized."""
    if workdir is None or path.startswith("/"):
        return posixpath.normpath(path)
    return posixpath.normpath(f"{workdir.rstrip('/')}/{path}")


def named_paths(texts: Iterable[str], workdir: str | None) -> list[str]:
    """Paths the texts name that the agent could write as outputs (absolute, or files relative to
    the working directory), the harness's and the system's left out.

    Args:
        texts: The instruction, the tests, the checks' paths and commands.
        workdir: The sandbox's working directory relative paths are under (None: kept relative).

    Returns:
        The paths, sorted.
    """
    found: set[str] = set()
    for text in texts:
        found.update(m for m in _ABSOLUTE.findall(text) if len(m) > 1)
        found.update(in_workdir(m, workdir) for m in _RELATIVE.findall(text))
    keep = {p for p in found if not any(p == n or p.startswith(n + "/") for n in NOT_OUTPUTS)}
    home = (workdir or "").rstrip("/")
    return sorted(p for p in keep if p.rstrip("/") not in ("", ".", home))


def puts(paths: Iterable[str], content: Callable[[str], str]) -> str:
    """`put` lines writing each path with `content(path)`."""
    return "".join(f"put {shlex.quote(p)} {shlex.quote(content(p))}\n" for p in paths)


def weak_script(paths: Iterable[str], content: Callable[[str], str]) -> str:
    """A script writing every path with `content(path)` (the weak-checks probes)."""
    return PUT + puts(paths, content) + "true"


def markers_script(paths: Iterable[str]) -> str:
    """A script writing plausible pass markers into every path (the pass-markers probe)."""
    return weak_script(paths, lambda p: PASS_JSON if p.endswith(".json") else PASS_LINES)


#: The weak-checks probes' contents by probe name: empty, a constant, type-shaped.
WEAK_CONTENTS: dict[str, Callable[[str], str]] = {
    "weak-empty": lambda _: "",
    "weak-constant": lambda _: "1\n",
    "weak-shaped": lambda p: SHAPES.get(Path(p).suffix, "x\n"),
}

__all__ = [
    "NOT_OUTPUTS",
    "PASS_JSON",
    "PASS_LINES",
    "PUT",
    "SHAPES",
    "WEAK_CONTENTS",
    "in_workdir",
    "markers_script",
    "named_paths",
    "puts",
    "weak_script",
]
