"""`rubric build/push/install/hub search/hub info` from the command line: output and one-line errors."""

from __future__ import annotations

import os
import signal
import socket
from pathlib import Path

import pytest

from cli import main
from tests.helpers.docs import code_block
from tests.helpers.hub import HubServer


def _one_line_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    return err


def test_build_push_search_info_print_what_happened(
    tmp_path: Path, hub_server: HubServer, capsys: pytest.CaptureFixture[str]
) -> None:
    package = tmp_path / "cli-hub-env"
    assert main(["init", "cli-hub-env", "--dir", str(tmp_path)]) == 0
    assert main(["build", str(package), "--no-isolation"]) == 0
    out = capsys.readouterr().out
    assert "cli_hub_env-0.1.0-py3-none-any.whl" in out and "checked on rubric-rl" in out
    assert main(["push", str(package)]) == 0  # the hub from RUBRIC_HUB_URL
    assert f"rubric install cli-hub-env==0.1.0 --hub {hub_server.url}" in capsys.readouterr().out
    assert main(["hub", "search"]) == 0
    out = capsys.readouterr().out
    assert "cli-hub-env 0.1.0  (versions: 0.1.0)" in out and "checked on: rubric-rl" in out
    assert main(["hub", "search", "--tag", "no-such-tag"]) == 0
    assert "no environment packages match" in capsys.readouterr().out
    assert main(["hub", "info", "cli_hub_env"]) == 0
    out = capsys.readouterr().out
    assert "rubric correct: FunctionRubric (weight=0.8)" in out and "reward_range:" not in out
    assert "kind: single-turn; reward range [0.0, 1.0]; license Apache-2.0; needs nothing else" in out
    assert "# cli-hub-env" in out  # the card's body


def test_bad_inputs_are_one_line_each(
    tmp_path: Path, hub_server: HubServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    assert "cannot read 'no good'; give NAME or NAME==VERSION" in _one_line_error(
        ["install", "no good"], capsys
    )
    assert "invalid environment name '9lives'" in _one_line_error(["install", "9lives"], capsys)
    assert "no package 'absent-env' on" in _one_line_error(["install", "absent-env"], capsys)
    assert "'absent-env'" in _one_line_error(["hub", "info", "absent-env"], capsys)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{sock.getsockname()[1]}"
    assert "cannot reach the hub" in _one_line_error(["hub", "search", "--hub", closed], capsys)
    monkeypatch.setenv("RUBRIC_HUB_PASSWORD", "wrong-secret-123")
    package = tmp_path / "creds-env"
    assert main(["init", "creds-env", "--dir", str(tmp_path)]) == 0
    assert main(["build", str(package), "--no-isolation"]) == 0
    capsys.readouterr()
    err = _one_line_error(["push", str(package)], capsys)
    assert "refused the credentials" in err and "wrong-secret-123" not in err


def test_readme_publish_block_runs_as_written(
    tmp_path: Path, hub_server: HubServer, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Build, push, search and info as README writes them; install and list run in a fresh venv
    in test_hub_end_to_end.py (here they would change this test's own environment)."""
    import shlex

    blocks = [code_block("bash", "rubric build ./my-env")]
    monkeypatch.chdir(tmp_path)
    assert main(["init", "my-env", "--kind", "tool"]) == 0
    for line in blocks[0].splitlines():
        argv = shlex.split(line.split("#")[0])
        if argv[1] in ("install", "list"):
            continue
        extra = ["--no-isolation"] if argv[1] == "build" else []  # offline: the backend installed here
        assert main([*argv[1:], *extra]) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    assert "my-env 0.1.0  (versions: 0.1.0)" in out and "rubric used_tool: FunctionRubric (weight=0.1)" in out


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
