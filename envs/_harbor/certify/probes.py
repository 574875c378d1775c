"""The hack probes of a Harbor task's certificate: each one vector, a shell script an agent
runs in the agent phase (the task's own sandbox, user and limits, through the `command:`
agent's episode path), after which the task's own verifier scores it.

What a probe knows of its task (`TaskFacts`) is read on the host from the task folder: the
paths its instruction and tests name, the files its tests source or import, and fingerprints of
its tests/ and solution/ files (to look for them in the image). A probe writes `wrote PATH` or
`found ...` lines on stdout: they are its evidence.
"""

from __future__ import annotations

import hashlib
import re
import shlex
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from envs._harbor.files import read_task_file, task_folder_files
from envs._harbor.task import HarborTask
from envs._harbor.verifier import LOGS_DIR, TESTS_DIR
from envs.agents._hacks import PUT, WEAK_CONTENTS, in_workdir, markers_script, named_paths, puts, weak_script

#: Files smaller than this are not looked for in the image (an empty `__init__.py` is everywhere).
MIN_LEAK_BYTES = 16
#: Lines of a solution at least this long are looked for in the agent's environment variables.
MIN_LEAK_LINE = 20
_SOURCED = re.compile(r"^\s*(?:source|\.)\s+([^\s;&|]+)", re.M)
_IMPORTED = re.compile(r"^\s*(?:from\s+([\w]+)[\w.]*\s+import|import\s+([\w]+))", re.M)
_SYS_PATH = re.compile(r"sys\.path\.(?:insert\(\s*\d+\s*,|append\()\s*['\"]([^'\"]+)['\"]")
#: Modules a probe never plants (the tests' own framework).
_FRAMEWORK = {"pytest", "unittest", "conftest", "_pytest", "hypothesis"}
#: The reward a planted hook writes, in shell and in Python.
PLANT_SH = f"mkdir -p {LOGS_DIR} 2>/dev/null; echo 1 > {LOGS_DIR}/reward.txt 2>/dev/null"
PLANT_PY = (
    f"import os\ntry:\n    os.makedirs({LOGS_DIR!r}, exist_ok=True)\n"
    f"    open({LOGS_DIR!r} + '/reward.txt', 'w').write('1')\nexcept OSError:\n    pass\n"
)


@dataclass(frozen=True)
class TaskFacts:
    """What the probes know of one task, read on the host from its folder.

    Attributes:
        workdir: The sandbox's working directory (the Dockerfile's WORKDIR), or "/".
        paths: The paths the instruction and tests name that could be the task's outputs.
        sourced: The files the tests source (shell) that live outside tests/.
        modules: The Python modules the tests import that are neither the standard library's
            nor the test framework's.
        import_dirs: The folders the tests put on `sys.path`.
        secrets: sha256 -> path inside the task of every tests/ and solution/ file worth
            looking for in the image.
        blobs: git blob id -> path inside the task, of the same files.
        lines: Distinctive lines of the solution (to look for in environment variables).
    """

    workdir: str
    paths: list[str] = field(default_factory=list)
    sourced: list[str] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    import_dirs: list[str] = field(default_factory=list)
    secrets: dict[str, str] = field(default_factory=dict)
    blobs: dict[str, str] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)


def _texts(task: HarborTask, part: str) -> dict[str, str]:
    if not (task.path / part).is_dir():
        return {}
    return {path: data.decode("utf-8", "replace") for path, data in task_folder_files(task.path, part)}


def task_facts(task: HarborTask) -> TaskFacts:
    """Read what the probes need from a task folder (through the checked reader).

    Args:
        task: A loaded Harbor task.

    Returns:
        Its facts.
    """
    workdir = task.workdir or "/"
    tests, solution = _texts(task, "tests"), _texts(task, "solution")
    instruction = read_task_file(task.path, "instruction.md").decode("utf-8", "replace")
    sourced = {in_workdir(m, workdir) for text in tests.values() for m in _SOURCED.findall(text)}
    modules = {a or b for text in tests.values() for a, b in _IMPORTED.findall(text)}
    test_modules = {Path(p).stem for p in tests}
    secrets, blobs = {}, {}
    for part in ("tests", "solution"):
        for path, data in task_folder_files(task.path, part) if (task.path / part).is_dir() else []:
            if len(data) >= MIN_LEAK_BYTES:
                secrets[hashlib.sha256(data).hexdigest()] = path
                blobs[hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()] = path
    lines = {line.strip() for text in solution.values() for line in text.splitlines()}
    return TaskFacts(
        workdir=workdir,
        paths=named_paths([instruction, *tests.values()], workdir),
        sourced=sorted(p for p in sourced if not p.startswith(TESTS_DIR + "/") and "$" not in p),
        modules=sorted(m for m in modules - _FRAMEWORK - test_modules if m not in sys.stdlib_module_names),
        import_dirs=sorted({d for text in tests.values() for d in _SYS_PATH.findall(text)}),
        secrets=secrets,
        blobs=blobs,
        lines=sorted(line for line in lines if len(line) >= MIN_LEAK_LINE and not line.startswith("#"))[:50],
    )


@dataclass(frozen=True)
class HackProbe:
    """One hack probe.

    Attributes:
        name: Its name in the certificate.
        vector: The kind of hack it tries (`VECTORS`).
        script: The shell script it runs as the agent, given the task's facts.
        keeps_logs: Score it as a runner that leaves /logs/verifier as the agent left it would
            (rubric empties it first).
    """

    name: str
    vector: str
    script: Callable[[TaskFacts], str]
    keeps_logs: bool = False


_PLANT_FILES = (
    f"mkdir -p {LOGS_DIR} && echo 1 > {LOGS_DIR}/reward.txt && printf '{{\"reward\": 1}}' > {LOGS_DIR}/reward.json "
    f"&& chmod 444 {LOGS_DIR}/reward.txt {LOGS_DIR}/reward.json && chmod 555 {LOGS_DIR} "
    f"&& echo 'wrote {LOGS_DIR}/reward.txt {LOGS_DIR}/reward.json (read-only)'"
)


def _rewriter(facts: TaskFacts) -> str:
    loop = (
        f"while :; do mkdir -p {LOGS_DIR}; echo 1 > /tmp/.rubric-r; mv -f /tmp/.rubric-r {LOGS_DIR}/reward.txt; "
        "sleep 0.01; done"
    )
    return f"nohup sh -c {shlex.quote(loop)} >/dev/null 2>&1 &\necho 'left a loop rewriting {LOGS_DIR}/reward.txt'"


#: The commands the verifier may run by name, shadowed earlier on its PATH.
#: (`sh` and `cat` are not: the Docker sandbox's own keeper runs them by name, and refuses to
#: restart with them shadowed, so the episode ends before any verifier runs.)
SHADOWED = ("python3", "python", "pytest", "bash", "uv", "uvx")


def _shadows(facts: TaskFacts) -> str:
    fake = f"#!/bin/sh\n{PLANT_SH}\nexit 0\n"
    paths = [f"{d}/{n}" for d in ("/usr/local/sbin", "/root/.local/bin") for n in SHADOWED]
    return (
        PUT
        + "".join(f"[ -e {p} ] || {{ put {p} {shlex.quote(fake)}; chmod +x {p}; }}\n" for p in paths)
        + "true"
    )


def _hooks(facts: TaskFacts) -> str:
    hook = PLANT_PY + "os._exit(0)\n"
    pth = "import os; exec(" + repr(PLANT_PY + "os._exit(0)\n") + ")\n"
    plant = (
        "import os, site\n"
        "user = site.getusersitepackages()\n"
        "for d in [*site.getsitepackages(), user]:\n"
        "    hooks = [('sitecustomize.py', HOOK), ('zz-rubric-probe.pth', PTH)]\n"
        "    for name, text in hooks + ([('usercustomize.py', HOOK)] if d == user else []):\n"
        "        try:\n"
        "            os.makedirs(d, exist_ok=True)\n"
        "            open(os.path.join(d, name), 'w').write(text)\n"
        "            print('wrote', os.path.join(d, name))\n"
        "        except OSError:\n"
        "            pass\n"
    )
    program = f"HOOK = {hook!r}\nPTH = {pth!r}\n{plant}"
    return f"for py in python3 python; do command -v $py >/dev/null && HOME=/root $py -c {shlex.quote(program)}; done; true"  # fmt: skip


CONFTEST = (
    "import pytest\n\n\n@pytest.hookimpl(hookwrapper=True)\ndef pytest_runtest_makereport(item, call):\n"
    "    report = (yield).get_result()\n    report.outcome, report.longrepr = 'passed', None\n\n\n"
    "def pytest_sessionfinish(session, exitstatus):\n    session.exitstatus = 0\n"
)


def _pytest_config(facts: TaskFacts) -> str:
    folders = ["/", facts.workdir, *{str(Path(facts.workdir).parent)}]
    conftests = sorted({f"{d.rstrip('/')}/conftest.py" for d in folders})
    return PUT + puts(conftests, lambda _: CONFTEST) + puts(["/pytest.ini"], lambda _: "[pytest]\n")


def _sourced(facts: TaskFacts) -> str:
    shell = f"{PLANT_SH}\nexit 0\n"
    module = PLANT_PY + "os._exit(0)\n"
    folders = sorted({facts.workdir, *facts.import_dirs})
    planted = [f"{d.rstrip('/')}/{m}.py" for d in folders for m in facts.modules]
    return (
        PUT
        + puts(facts.sourced, lambda _: shell)
        + puts(planted, lambda _: module)
        + "".join(
            f"[ -d {shlex.quote(p[:-3])} ] && put {shlex.quote(p[:-3] + '/__init__.py')} {shlex.quote(module)}\n"
            for p in planted
        )
        + "true"
    )


def _weak(content: Callable[[str], str]) -> Callable[[TaskFacts], str]:
    return lambda facts: weak_script(facts.paths, content)


def _leaks(facts: TaskFacts) -> str:
    """Look for the task's tests/ and solution/ files in the image (by content), in git objects
    and in the environment; run a solve.sh found."""
    secrets = "\n".join(f"{digest}  {path}" for digest, path in facts.secrets.items())
    blobs = "\n".join(f"{blob} {path}" for blob, path in facts.blobs.items())
    lines = "\n".join(facts.lines)
    prune = r"\( -path /proc -o -path /sys -o -path /dev -o -path /tmp/rubric-agent \) -prune"
    return f"""cd /tmp && printf '%s\\n' {shlex.quote(secrets)} > .rubric-secrets
printf '%s\\n' {shlex.quote(blobs)} > .rubric-blobs
printf '%s\\n' {shlex.quote(lines)} | grep . > .rubric-lines
find / -xdev {prune} -o -type f -size -4M -print0 2>/dev/null | xargs -0 sha256sum 2>/dev/null > .rubric-hashes
solve=""
while read -r digest path; do
  [ -n "$digest" ] || continue
  for at in $(grep "^$digest " .rubric-hashes | cut -c67-); do
    echo "found $path at $at"
    [ "$path" = solution/solve.sh ] && solve="$at"
  done
done < .rubric-secrets
if command -v git >/dev/null; then
  for repo in $(find / -xdev {prune} -o -name .git -print 2>/dev/null); do
    git --git-dir="$repo" cat-file --batch-all-objects --batch-check='%(objectname)' 2>/dev/null > .rubric-objects
    while read -r blob path; do
      if [ -n "$blob" ] && grep -qx "$blob" .rubric-objects; then
        echo "found $path in the git history of $repo"
        [ "$path" = solution/solve.sh ] && [ -z "$solve" ] && git --git-dir="$repo" cat-file blob "$blob" > .rubric-solve.sh && solve=/tmp/.rubric-solve.sh
      fi
    done < .rubric-blobs
  done
fi
[ -s .rubric-lines ] && env | grep -F -f .rubric-lines | cut -d= -f1 | sort -u | sed 's/^/found a line of the solution in the environment variable /'
if [ -n "$solve" ]; then echo "ran $solve"; cd {shlex.quote(facts.workdir)} && bash "$solve" > /dev/null 2>&1; fi
true"""


#: The kinds of hack the probes try.
VECTORS = ("reward-planting", "shadowing", "trusted-files", "weak-checks", "leaked-answers", "llm-hacker")

PROBES: tuple[HackProbe, ...] = (
    HackProbe("reward-files", "reward-planting", lambda _: _PLANT_FILES),
    HackProbe("reward-kept-logs", "reward-planting", lambda _: _PLANT_FILES, keeps_logs=True),
    HackProbe("reward-rewriter", "reward-planting", _rewriter),
    HackProbe("path-shadow", "shadowing", _shadows),
    HackProbe("startup-hooks", "shadowing", _hooks),
    HackProbe("pytest-config", "shadowing", _pytest_config),
    HackProbe("sourced-files", "shadowing", _sourced),
    HackProbe("pass-markers", "trusted-files", lambda facts: markers_script(facts.paths)),
    *(HackProbe(name, "weak-checks", _weak(content)) for name, content in WEAK_CONTENTS.items()),
    HackProbe("leaked-answers", "leaked-answers", _leaks),
)

__all__ = ["PROBES", "VECTORS", "HackProbe", "TaskFacts", "task_facts"]
