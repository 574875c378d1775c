"""Runtime specs the shared sandbox tests run against: real bwrap, a real dockerd, and local.

Docker tests are marked `docker` (CI starts a daemon and builds the base image with
.ci/docker-up; they never skip). The image is $RUBRIC_TEST_IMAGE (default
rubric-test-base:bookworm, a debootstrap minbase root filesystem with python3 and bash).
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

TEST_IMAGE = os.environ.get("RUBRIC_TEST_IMAGE", "rubric-test-base:bookworm")
DOCKER = f"docker:{TEST_IMAGE}"
#: The same root filesystem as a folder (.ci/docker-up keeps it), for bwrap:ROOTFS_DIR.
TEST_ROOTFS = os.environ.get("RUBRIC_TEST_ROOTFS", "/var/lib/rubric-rootfs/bookworm")

#: Every runtime; the isolating ones (limits and network are enforced).
ALL = [pytest.param("bwrap", id="bwrap"), pytest.param("local", id="local"),
       pytest.param(f"bwrap:{TEST_ROOTFS}", id="bwrap-rootfs"),
       pytest.param(DOCKER, id="docker", marks=pytest.mark.docker)]  # fmt: skip
ISOLATING = [p for p in ALL if p.id != "local"]
#: One runtime of each kind, for the slower whole-lifecycle tests.
KINDS = [p for p in ALL if p.id != "bwrap-rootfs"]


def run_without_cgroups(code: str) -> subprocess.CompletedProcess[str]:
    """Run Python `code` (with this checkout importable) as root of a new user and mount
    namespace whose /sys/fs/cgroup is an empty tmpfs: a root that may make no cgroup."""
    repo = Path(__file__).resolve().parents[3]
    script = (
        f"mount -t tmpfs tmpfs /sys/fs/cgroup && exec {shlex.quote(sys.executable)} -c {shlex.quote(code)}"
    )
    return subprocess.run(
        ["unshare", "--mount", "--map-root-user", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(repo)},
        cwd=repo,
    )
