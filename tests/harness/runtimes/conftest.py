"""Runtime specs the shared sandbox tests run against: real bwrap, a real dockerd, and local.

Docker tests are marked `docker` (CI starts a daemon and builds the base image with
.ci/docker-up; they never skip). The image is $RUBRIC_TEST_IMAGE (default
rubric-test-base:bookworm, a debootstrap minbase root filesystem with python3 and bash).
"""

from __future__ import annotations

import os

import pytest

TEST_IMAGE = os.environ.get("RUBRIC_TEST_IMAGE", "rubric-test-base:bookworm")
DOCKER = f"docker:{TEST_IMAGE}"

#: Every runtime; the isolating ones (limits and network are enforced).
ALL = [pytest.param("bwrap", id="bwrap"), pytest.param("local", id="local"),
       pytest.param(DOCKER, id="docker", marks=pytest.mark.docker)]  # fmt: skip
ISOLATING = [p for p in ALL if p.id != "local"]
