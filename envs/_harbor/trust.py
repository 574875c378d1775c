"""What the verifier trusts in the agent's sandbox: no process of the agent, and the files it runs.

A Harbor verifier runs in the sandbox the agent used. Before it does, and again after test.sh:
- every process in the sandbox is ended and none is left (`Sandbox.end_processes`): a loop the
  agent left cannot plant a reward after test.sh wrote its own, nor swap /tests/test.sh while
  it is uploaded;
- the files the agent changed outside its own area (`Sandbox.changed_files`, read from outside
  the sandbox) are looked at, and the score is NaN with the reason when one of them is a file
  the verifier runs (`tampered`): anything on the verifier's PATH (changed, removed, or added
  in front of a command of the same name further on), the links and folders that make up
  that PATH, the interpreters' standard libraries, Python's start-up hooks (`*.pth`,
  `sitecustomize.py`, `usercustomize.py`), shared libraries changed in place and the
  dynamic loader's preload and search lists.
Only then are the harness's own commands run, by absolute paths found after the check
(`checked_commands`), and the reward is read by the harness itself (`Sandbox.read`).
"""

from __future__ import annotations

import fnmatch
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath

from harness.runtimes import Sandbox, SandboxError
from harness.runtimes._base import DEFAULT_PATH
from rubrics._tree.scoring import ScoringError

#: The verifier's PATH, in lookup order (the sandbox's default).
PATH_DIRS = tuple(DEFAULT_PATH.split(":"))
#: The shell the harness's own commands run with, by this absolute path.
SHELL = "/bin/sh"
#: Folders of shared libraries (a library there changed in place runs in every program).
LIBRARY_DIRS = ("/lib", "/lib32", "/lib64", "/libx32", "/usr/lib", "/usr/lib32", "/usr/lib64", "/usr/libx32", "/usr/local/lib")  # fmt: skip
#: What holds the PATH together: the folders and the links (/bin -> usr/bin) above them.
STRUCTURE = ("/usr", "/usr/local", "/lib", "/lib32", "/lib64", "/libx32", *PATH_DIRS)
#: Files the dynamic loader reads before any program runs.
LOADER_FILES = ("/etc/ld.so.preload", "/etc/ld.so.conf", "/etc/ld.so.conf.d/*")
#: Python's start-up hooks: run by every interpreter that finds them in a site folder.
STARTUP_HOOKS = ("*.pth", "sitecustomize.py", "usercustomize.py")
#: Interpreters' standard libraries (their site-packages aside).
STDLIB_PATTERNS = ("/usr/lib/python3*/*", "/usr/local/lib/python3*/*")
#: The most files named in the reason.
SHOWN = 5


def _is_library(name: str) -> bool:
    return name.endswith(".so") or ".so." in name


def _stdlib(path: str) -> bool:
    parts = PurePosixPath(path).parts
    return any(fnmatch.fnmatch(path, p) for p in STDLIB_PATTERNS) and not (
        "site-packages" in parts or "dist-packages" in parts
    )


def tampered(changes: Mapping[str, str]) -> tuple[list[str], list[str]]:
    """Which changed files the verifier would run, and which added commands need a look.

    Args:
        changes: `Sandbox.changed_files()`: path -> "added", "changed" or "deleted".

    Returns:
        (the reasons, e.g. "/usr/bin/bash (changed, on the verifier's PATH)"; the commands
        added to a PATH folder, refused by `checked_commands` when another of the same name
        is on the PATH: they shadow it, or stand in for it where a link became a folder).
    """
    found, added = [], []
    for path, kind in sorted(changes.items()):
        pure = PurePosixPath(path)
        parent, name = str(pure.parent), pure.name
        if path == SHELL:
            found.append(f"{path} ({kind}: the shell the harness runs its commands with)")
        elif path in STRUCTURE and kind != "added":
            found.append(f"{path} ({kind}: the folder or link the verifier's commands are found through)")
        elif parent in PATH_DIRS and kind == "added":
            added.append(path)
        elif parent in PATH_DIRS:
            found.append(f"{path} ({kind}, on the verifier's PATH)")
        elif any(fnmatch.fnmatch(name, hook) for hook in STARTUP_HOOKS):
            found.append(f"{path} ({kind}, a Python start-up hook)")
        elif any(fnmatch.fnmatch(path, loader) for loader in LOADER_FILES):
            found.append(f"{path} ({kind}, read by the dynamic loader)")
        elif _stdlib(path) and not (kind == "added" and name.endswith(".pyc")):
            found.append(f"{path} ({kind}, in an interpreter's standard library)")
        elif kind != "added" and _is_library(name) and any(path.startswith(d + "/") for d in LIBRARY_DIRS):
            found.append(f"{path} ({kind}, a shared library)")
    return found, added


# Run by /bin/sh with pairs "ADDED CANDIDATE": prints the pairs whose candidate is an executable
# file that is not the added one itself (/bin and /usr/bin are one folder where /bin is a link).
_LOOKUP = (
    'while [ $# -gt 1 ]; do a=$1; c=$2; shift 2; if [ -f "$c" ] && [ -x "$c" ] && ! [ "$c" -ef "$a" ]; '
    'then printf "%s %s\\n" "$a" "$c"; fi; done; exit 0'
)


async def checked_commands(
    sandbox: Sandbox, added: Sequence[str], names: Sequence[str]
) -> tuple[list[str], dict[str, str]]:
    """After `tampered` found nothing: which added commands have a namesake elsewhere on the
    PATH, and the absolute path of each of `names` (e.g. "bash") in PATH order.

    Runs one `/bin/sh` in the sandbox: with it, everything on the PATH, the links and the
    loader's lists unchanged, that shell and what it finds are the image's own.

    Returns:
        (the reasons for the added commands with a namesake, {name: absolute path} of the
        `names` found).

    Raises:
        ScoringError: The shell cannot run.
    """
    pairs = [
        (path, f"{d}/{PurePosixPath(path).name}")
        for path in added
        for d in PATH_DIRS
        if d != str(PurePosixPath(path).parent)
    ]
    pairs += [("-", f"{d}/{name}") for name in names for d in PATH_DIRS]
    argv = ["/bin/sh", "-c", _LOOKUP, "sh", *(word for pair in pairs for word in pair)]
    try:
        result = await sandbox.exec(argv, timeout=60, user="0", cwd="/")
        why = "" if result.ok else f"exit code {result.exit_code}: {result.stderr.strip()[-300:]}"
    except SandboxError as exc:
        why = str(exc)
    if why and added:  # e.g. a `cat` added in front of the image's ended the restarted sandbox
        raise refusal([f"{path} (added to the verifier's PATH, and the sandbox failed after: {why})" for path in added])  # fmt: skip
    if why:
        raise ScoringError(f"cannot look up the verifier's commands in the sandbox: {why}")
    present = [tuple(line.split(" ", 1)) for line in result.stdout.splitlines() if " " in line]
    namesakes: dict[str, str] = {}
    for path, other in present:
        if path != "-":
            namesakes.setdefault(path, other)
    found: dict[str, str] = {}
    for _, other in (pair for pair in present if pair[0] == "-"):
        found.setdefault(PurePosixPath(other).name, other)
    shadows = [f"{path} (added; {other} of the same name is on the verifier's PATH too)" for path, other in namesakes.items()]  # fmt: skip
    return shadows, found


def refusal(reasons: Sequence[str]) -> ScoringError:
    """The NaN of a verifier that will not run beside files the agent changed."""
    shown = "; ".join(reasons[:SHOWN]) + (
        f"; and {len(reasons) - SHOWN} more" if len(reasons) > SHOWN else ""
    )
    return ScoringError(
        f"the agent changed files the verifier would run: {shown}; the verifier does not run beside "
        "them (the score is unknown, not 0)"
    )


async def end_processes(sandbox: Sandbox, when: str) -> None:
    """End every process in the sandbox (`Sandbox.end_processes`), as a ScoringError if not."""
    try:
        await sandbox.end_processes()
    except SandboxError as exc:
        raise ScoringError(f"cannot end the sandbox's processes {when}: {exc}") from None
