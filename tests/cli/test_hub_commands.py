"""`rubric build/push/install/hub search/hub info` from the command line: output and one-line errors."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import pytest

from tests.cli.conftest import Invoke
from tests.helpers.docs import code_block
from tests.helpers.hub import HubServer

pytestmark = [pytest.mark.hub, pytest.mark.slow]


def _one_line_error(rubric: Invoke, *args: str, cwd: Path) -> str:
    done = rubric(*args, cwd=cwd)
    assert done.returncode == 2, done.stdout + done.stderr
    err = done.stderr.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_build_push_search_info_print_what_happened(
    rubric: Invoke, tmp_path: Path, hub_server: HubServer
) -> None:
    package = tmp_path / "cli-hub-env"

    def out(*args: str) -> str:
        done = rubric(*args, cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    out("init", "cli-hub-env", "--dir", str(tmp_path))
    built = out("build", str(package), "--no-isolation")
    assert "cli_hub_env-0.1.0-py3-none-any.whl" in built and "checked on rubric-rl" in built
    pushed = out("push", str(package))  # the hub from RUBRIC_HUB_URL
    assert f"rubric install cli-hub-env==0.1.0 --hub {hub_server.url}" in pushed
    found = out("hub", "search")
    assert "cli-hub-env 0.1.0  (versions: 0.1.0)" in found and "checked on: rubric-rl" in found
    assert "no environment packages match" in out("hub", "search", "--tag", "no-such-tag")
    info = out("hub", "info", "cli_hub_env")
    assert "rubric correct: reward(correct) (weight=0.8)" in info and "reward_range:" not in info
    assert "kind: single-turn; reward range [0.0, 1.0]; license Apache-2.0; needs nothing else" in info
    assert "# cli-hub-env" in info  # the card's body


def test_bad_inputs_are_one_line_each(
    rubric: Invoke, tmp_path: Path, hub_server: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    def error(*args: str) -> str:
        return _one_line_error(rubric, *args, cwd=tmp_path)

    assert "cannot read 'no good'; give NAME or NAME==VERSION" in error("install", "no good")
    assert "invalid environment name '9lives'" in error("install", "9lives")
    assert "no package 'absent-env' on" in error("install", "absent-env")
    assert "'absent-env'" in error("hub", "info", "absent-env")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    assert "cannot reach the hub" in error("hub", "search", "--hub", closed)
    monkeypatch.setenv("RUBRIC_HUB_PASSWORD", "wrong-secret-123")
    package = tmp_path / "creds-env"
    assert rubric("init", "creds-env", "--dir", str(tmp_path), cwd=tmp_path).returncode == 0
    assert rubric("build", str(package), "--no-isolation", cwd=tmp_path).returncode == 0
    err = error("push", str(package))
    assert "refused the credentials" in err and "wrong-secret-123" not in err


def test_readme_publish_block_runs_as_written(rubric: Invoke, tmp_path: Path, hub_server: HubServer) -> None:
    """Build, push, search and info as README writes them; install and list run in a fresh venv
    in test_hub_end_to_end.py (here they would change this test's own environment)."""
    import shlex

    assert rubric("init", "my-env", "--kind", "tool", cwd=tmp_path).returncode == 0
    out = ""
    for line in code_block("bash", "rubric build ./my-env").splitlines():
        argv = shlex.split(line.split("#")[0])
        if argv[1] in ("install", "list"):
            continue
        extra = ["--no-isolation"] if argv[1] == "build" else []  # offline: the backend installed here
        done = rubric(*argv[1:], *extra, cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
        out += done.stdout
    assert (
        "my-env 0.1.0  (versions: 0.1.0)" in out and "rubric used_tool: reward(used_tool) (weight=0.1)" in out
    )


def test_readme_local_hub_block_runs_as_written_on_loopback_only(tmp_path: Path) -> None:
    """The README's hub set-up (less `pip install`) in bash: it makes its folder, and the index
    listens on 127.0.0.1 alone (read from /proc/net/tcp), answering the simple API."""
    import subprocess
    import time
    import urllib.request

    from tests.helpers.endpoints import free_port

    block = code_block("bash", "pypi-server run")
    port = free_port()
    lines = [line for line in block.splitlines() if not line.startswith("pip install")]
    script = "\n".join(lines).replace("8080", str(port)) + "\necho $! > server.pid\n"
    with (tmp_path / "out.log").open("wb") as log:  # not a pipe: the server keeps it open
        done = subprocess.run(["bash", "-c", script], cwd=tmp_path, stdout=log, stderr=log, timeout=60)
    assert done.returncode == 0, (tmp_path / "out.log").read_text()
    pid = int((tmp_path / "server.pid").read_text())
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/simple/", timeout=2) as reply:
                    assert reply.status == 200
                break
            except OSError:
                assert time.monotonic() < deadline, "the README's pypi-server did not start"
                time.sleep(0.2)
        listening = [
            line.split()[1]
            for line in Path("/proc/net/tcp").read_text().splitlines()[1:]
            + Path("/proc/net/tcp6").read_text().splitlines()[1:]
            if line.split()[3] == "0A" and int(line.split()[1].rsplit(":", 1)[1], 16) == port
        ]
        assert listening == [f"0100007F:{port:04X}"], listening  # 127.0.0.1 only, no 0.0.0.0 or ::
        assert (tmp_path / "packages").is_dir()
    finally:
        os.kill(pid, signal.SIGTERM)
