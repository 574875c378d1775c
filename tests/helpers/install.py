"""This project as a user installs it: its wheel built offline, and OpenEnv 0.10 in a cached venv
of its own for the cross-version tests."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

import filelock
import platformdirs

TREE = Path(__file__).resolve().parents[2]


def build_rubric_wheel(folder: Path) -> Path:
    """rubric-rl's wheel built offline from a copy of the working tree (so the build leaves
    nothing in it) with the build backend installed here; the wheel's path, in `folder`."""
    source = folder / "source"
    shutil.copytree(
        TREE,
        source,
        # Nothing another test may be writing meanwhile (a parallel worker's hypothesis examples,
        # caches, byte code): a file gone mid-copy would fail the copy.
        ignore=shutil.ignore_patterns(
            ".git", "runs", "build", "dist", "*.egg-info", ".*cache", ".hypothesis", "__pycache__"
        ),
    )
    command = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation", "--no-index"]
    done = subprocess.run(
        [*command, "-w", str(folder / "wheels"), str(source)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = (folder / "wheels").glob("rubric_rl-*.whl")
    return wheel


# ---------------------------------------------------------------- OpenEnv 0.10 in a venv of its own
OPENENV_SIDE_VERSION = "0.10.0"


def openenv_side_venv() -> Path:
    """Where the test session keeps OpenEnv 0.10's venv: the user's cache folder, so it is
    made once per machine and reused by every later session."""
    cache = Path(platformdirs.user_cache_dir("rubric-rl"))
    return cache / f"openenv-{OPENENV_SIDE_VERSION}-venv"


def ensure_openenv_side_python() -> str:
    """The python of a venv holding OpenEnv 0.10, for the cross-version tests: $RUBRIC_OPENENV_PYTHON
    when set, else the cached venv of `openenv_side_venv()`, made here when missing.

    Made under a file lock, so parallel test workers wait for one maker; a `complete` marker,
    written last, tells a finished venv from one an interrupted session left half made (that
    one is made again). pip uses its configured index and cache; nothing of the checkout is on
    its path. Raises RuntimeError with pip's output when the venv cannot be made."""
    given = os.environ.get("RUBRIC_OPENENV_PYTHON")
    if given:
        return given
    target = openenv_side_venv()
    python, marker = target / "bin" / "python", target / "complete"
    target.parent.mkdir(parents=True, exist_ok=True)
    with filelock.FileLock(f"{target}.lock", timeout=1800):
        if not marker.is_file():
            shutil.rmtree(target, ignore_errors=True)
            venv.EnvBuilder(with_pip=True).create(target)
            env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
            install = [str(python), "-m", "pip", "install", "-q", f"openenv=={OPENENV_SIDE_VERSION}"]
            done = subprocess.run(install, capture_output=True, text=True, timeout=1500, env=env, cwd=target)
            if done.returncode != 0:
                raise RuntimeError(
                    f"could not make {target}: {' '.join(install)} said: {done.stderr[-3000:]}"
                )
            marker.write_text(OPENENV_SIDE_VERSION + "\n")
    return str(python)
