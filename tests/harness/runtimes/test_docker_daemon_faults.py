"""harness.runtimes with a Docker daemon that is down or unhealthy: a run without Docker never asks
it, `rubric sandboxes` warns in one line and exits 0, a Docker sandbox fails with one clear error.

Each unhealthy daemon is a real Unix-socket server started here and named by DOCKER_HOST: one that
answers garbage (a JSON string, or bytes that are not HTTP), one that answers 500 with no
"message", one that closes every connection, one that never answers, and a path with no socket.
The machine's own daemon is hidden for the one case with no DOCKER_HOST and no socket at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import socketserver
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from harness.runtimes import RuntimeUnavailableError, get_runtime
from harness.runtimes import _docker as docker_runtime
from harness.runtimes._docker import DAEMON_DEADLINE, client
from harness.runtimes._state import LABEL, boot_id
from tests.harness.runtimes.conftest import DOCKER, TEST_IMAGE
from tests.helpers.docs import docs_pages
from tests.helpers.processes import run

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

_JSON = b"HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"

#: What each unhealthy daemon answers to a request (None: close; b"": never answer).
ANSWERS: dict[str, bytes | None] = {
    "garbage-json": _JSON % (b"200 OK", 9, b'"garbage"'),
    "garbage-bytes": b"this is not HTTP at all\r\n\r\n",
    "500-no-message": _JSON % (b"500 Internal Server Error", 2, b"{}"),
    "closes": None,
    "never-answers": b"",
}
FAULTS = [*ANSWERS, "no-socket"]


class FakeDaemon(socketserver.ThreadingUnixStreamServer):
    """A Unix-socket server that answers every request as `ANSWERS[fault]` says, counting
    connections; `version` (when given) is answered properly to GET /version."""

    daemon_threads = True

    def __init__(self, path: str, answer: bytes | None, version: bytes | None = None) -> None:
        self.answer, self.version, self.connections = answer, version, 0
        self.held: list[socket.socket] = []
        super().__init__(path, _Handler)


class _Handler(socketserver.BaseRequestHandler):
    server: FakeDaemon

    def handle(self) -> None:
        self.server.connections += 1
        conn: socket.socket = self.request
        while True:
            request = b""
            while b"\r\n\r\n" not in request:
                chunk = conn.recv(65536)
                if not chunk:
                    return
                request += chunk
            target = request.split(b"\r\n", 1)[0].split(b" ")[1:2] or [b""]
            if self.server.version is not None and target[0].split(b"?")[0].endswith(b"/version"):
                conn.sendall(_JSON % (b"200 OK", len(self.server.version), self.server.version))
            elif self.server.answer is None:
                return  # the connection closes on the client
            elif self.server.answer == b"":
                self.server.held.append(conn)
                while conn.recv(65536):  # holds the connection, says nothing, until the client leaves
                    pass
                return
            else:
                conn.sendall(self.server.answer)


@contextlib.contextmanager
def unhealthy_daemon(fault: str, folder: Path, version: bytes | None = None) -> Iterator[FakeDaemon | None]:
    """DOCKER_HOST for `fault` (set in os.environ meanwhile) and the server behind it (None for
    "no-socket")."""
    path = folder / f"docker-{uuid.uuid4().hex[:6]}.sock"
    previous = os.environ.get("DOCKER_HOST")
    os.environ["DOCKER_HOST"] = f"unix://{path}"
    server = None if fault == "no-socket" else FakeDaemon(str(path), ANSWERS[fault], version)
    thread = threading.Thread(target=server.serve_forever, daemon=True) if server else None
    if thread is not None:
        thread.start()
    try:
        yield server
    finally:
        if server is not None:
            server.shutdown()
            for conn in server.held:
                with contextlib.suppress(OSError):
                    conn.shutdown(socket.SHUT_RDWR)
            server.server_close()
        if previous is None:
            os.environ.pop("DOCKER_HOST", None)
        else:
            os.environ["DOCKER_HOST"] = previous


@pytest.fixture
def sockets() -> Iterator[Path]:
    """A short folder for Unix sockets (a socket path has at most 107 bytes)."""
    folder = Path(f"/tmp/rubric-dh-{uuid.uuid4().hex[:8]}")
    folder.mkdir()
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.parametrize("fault", FAULTS)
def test_a_run_without_docker_never_asks_an_unhealthy_daemon(
    fault: str, sockets: Path, tmp_path: Path
) -> None:
    """`rubric eval` prunes at start; a run that uses no Docker sandbox does not ask Docker, so
    whatever the daemon does, the quick start passes at once, with no warning."""
    with unhealthy_daemon(fault, sockets) as server:
        start = time.monotonic()
        done = run(
            "eval",
            "gsm8k",
            "--model",
            "scripted:oracle",
            "-n",
            "2",
            "-o",
            "run",
            "--no-progress",
            cwd=tmp_path,
        )
        took = time.monotonic() - start
        asked = server.connections if server is not None else 0
    assert done.returncode == 0, done.stderr
    assert "mean reward" in done.stdout and "1 ± 0" in done.stdout
    assert "error" not in done.stderr.lower() and "warning" not in done.stderr.lower(), done.stderr
    assert asked == 0
    assert took < 30


@pytest.mark.parametrize("action", ["list", "prune"])
@pytest.mark.parametrize("fault", FAULTS)
async def test_rubric_sandboxes_says_no_docker_daemon_and_exits_0(
    fault: str, action: str, sockets: Path, tmp_path: Path
) -> None:
    """`rubric sandboxes list|prune` with an unhealthy daemon: one warning line saying "no Docker
    daemon" (and why), exit 0, within the daemon's deadline; this user's bwrap sandboxes are still
    listed."""
    run_id = f"faults-{uuid.uuid4().hex[:8]}"
    async with get_runtime("bwrap", run_id=run_id).sandbox():
        with unhealthy_daemon(fault, sockets):
            start = time.monotonic()
            done = await asyncio.to_thread(run, "sandboxes", action, cwd=tmp_path)
            took = time.monotonic() - start
    assert done.returncode == 0, done.stderr
    warnings = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(warnings) == 1 and warnings[0].startswith("rubric: warning: no Docker daemon"), done.stderr
    assert f"Docker containers not {'listed' if action == 'list' else 'pruned'}" in warnings[0]
    assert "Traceback" not in done.stderr
    assert run_id in done.stdout and "running" in done.stdout
    assert took < DAEMON_DEADLINE + 10


def test_rubric_sandboxes_with_no_docker_host_and_no_socket(tmp_path: Path) -> None:
    """No DOCKER_HOST and no socket where Docker's is looked for (aiodocker 0.27 raises an
    AssertionError then): the machine's /run is hidden under a bubblewrap mount namespace."""
    env = {k: v for k, v in os.environ.items() if k != "DOCKER_HOST"}
    done = subprocess.run(
        ["bwrap", "--dev-bind", "/", "/", "--tmpfs", "/run", "--", shutil.which("rubric") or "rubric", "sandboxes"],
        capture_output=True, text=True, timeout=60, env={**env, "HOME": str(tmp_path)}, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stderr.startswith("rubric: warning: no Docker daemon found"), done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "AssertionError" not in done.stderr


@pytest.mark.parametrize("fault", FAULTS)
async def test_a_docker_sandbox_on_an_unhealthy_daemon_is_one_clear_error(fault: str, sockets: Path) -> None:
    """A run that does use Docker gets `RuntimeUnavailableError` saying what the daemon did,
    within the deadline: never a TypeError, a KeyError, a DockerError [900] or a hang."""
    with unhealthy_daemon(fault, sockets):
        start = time.monotonic()
        with pytest.raises(
            RuntimeUnavailableError, match="no Docker daemon answers at unix://.* start one"
        ) as caught:
            async with get_runtime(DOCKER).sandbox():
                pass
        took = time.monotonic() - start
    assert "\n" not in str(caught.value)
    assert took < DAEMON_DEADLINE + 5
    if fault == "never-answers":
        assert f"no answer within {DAEMON_DEADLINE:g} s" in str(caught.value)


@pytest.mark.parametrize("fault", [f for f in FAULTS if f != "no-socket"])
async def test_a_daemon_that_answers_the_check_but_not_the_prune_is_a_warning(
    fault: str, sockets: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first Docker sandbox of a process prunes what dead owners left on the daemon; when
    the daemon answers `version` but fails the listing, that is one warning and the check passes."""
    monkeypatch.setattr(docker_runtime, "_pruned", False)
    with unhealthy_daemon(fault, sockets, version=b'{"ApiVersion": "1.41", "Version": "20.10"}'):
        runtime = get_runtime(DOCKER)
        with pytest.warns(
            UserWarning, match="no Docker daemon answers .*Docker sandboxes of dead owners not pruned"
        ):
            await runtime.check()
    assert docker_runtime._pruned


_OPEN_ONE = r"""
import asyncio, sys
from harness.runtimes import get_runtime

async def main():
    async with get_runtime(sys.argv[1]).sandbox() as sb:
        print((await sb.exec("echo opened")).stdout, end="")

asyncio.run(main())
"""


@pytest.mark.docker
async def test_the_first_docker_sandbox_of_a_run_prunes_dead_owners_containers() -> None:
    """With a healthy daemon, a process's first Docker sandbox removes a container a dead owner of
    this boot left (`rubric eval` no longer asks Docker at start)."""
    finished = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True
    )
    dead = finished.stdout.strip()  # a pid whose process has ended
    docker = client()
    try:
        left = await docker.containers.create(
            {
                "Image": TEST_IMAGE,
                "Cmd": ["sleep", "120"],
                "Labels": {
                    LABEL: "1",
                    "rubric.run": "dead-owner",
                    "rubric.owner": dead,
                    "rubric.owner_start": "1",
                    "rubric.boot": boot_id(),
                },
                "HostConfig": {"NetworkMode": "none"},
            }
        )
        opened = await asyncio.create_subprocess_exec(
            sys.executable, "-c", _OPEN_ONE, DOCKER, stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": os.getcwd()},
        )  # fmt: skip
        out, _ = await opened.communicate()
        assert out == b"opened\n"
        listed = await docker.containers.list(all=True, filters={"label": ["rubric.run=dead-owner"]})
        assert [c.id for c in listed if c.id == left.id] == []
    finally:
        with contextlib.suppress(Exception):
            await left.delete(force=True)
        await docker.close()


def test_the_security_guide_states_the_daemons_deadline() -> None:
    table = docs_pages()["guides/security.md"]
    row = next(line for line in table.splitlines() if "**Docker daemon**" in line)
    assert f"each call to the daemon has {DAEMON_DEADLINE:g} s" in row and "exits 0" in row
