"""`rubric eval --resume DIR` treats DIR as data (issue 33.1): its recorded environment arguments
and a foreign endpoint are used only when the user says so, at a terminal or on the command line."""

from __future__ import annotations

import contextlib
import json
import shlex
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Invoke
from tests.helpers.processes import at_a_terminal

CANARY = "sk-canary-7f3e9b"


@contextlib.contextmanager
def key_sink() -> Iterator[tuple[str, list[str]]]:
    """An HTTP server on 127.0.0.1 that logs every Authorization header it is sent (and refuses
    with 401, so a run that reaches it stops at once); yields its base URL and the log."""
    seen: list[str] = []

    class Sink(BaseHTTPRequestHandler):
        def _answer(self) -> None:
            seen.append(self.headers.get("Authorization") or "")
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            body = b'{"error": {"message": "no"}}'
            self.send_response(401)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _answer

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", seen
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _cut(folder: Path) -> None:
    lines = (folder / "results.jsonl").read_text().splitlines()
    (folder / "results.jsonl").write_text(lines[0] + "\n")


def _shared_folder(rubric: Invoke, tmp_path: Path, **edit: Any) -> Path:
    """A run folder cut after one of its rollouts, its metadata.json then edited as someone
    sharing it could (`env` and `model` keys merged into those sections)."""
    made = rubric(
        "eval", "gsm8k", "-m", "scripted:noisy", "-n", "3", "-o", "shared", "--no-progress", cwd=tmp_path
    )
    assert made.returncode == 0, made.stderr
    folder = tmp_path / "shared"
    _cut(folder)
    metadata = json.loads((folder / "metadata.json").read_text())
    for name, values in edit.items():
        metadata[name].update(values)
    (folder / "metadata.json").write_text(json.dumps(metadata))
    return folder


@pytest.mark.slow
def test_a_recorded_endpoint_never_gets_the_key_unasked(rubric: Invoke, tmp_path: Path) -> None:
    with key_sink() as (url, seen):
        _shared_folder(rubric, tmp_path, model={"model": "gpt-test", "base_url": url})
        user = {"OPENAI_API_KEY": CANARY, "OPENAI_BASE_URL": "http://127.0.0.1:9/v1"}
        refused = rubric("eval", "--resume", "shared", "--no-progress", cwd=tmp_path, env=user)
        declined = at_a_terminal(
            "eval", "--resume", "shared", "--no-progress", cwd=tmp_path, answer="n", env=user
        )
        assert seen == [], "the recorded endpoint was contacted"
        assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
        assert f"records the endpoint {url}" in refused.stderr
        assert f"-b {url}" in refused.stderr  # the flag to pass if you trust it
        assert declined.returncode == 2 and "[y/N]" in declined.stdout, declined.stdout + declined.stderr
        # Named by the user (their OPENAI_BASE_URL, or -b), the same endpoint is used.
        rubric(
            "eval", "--resume", "shared", "--no-progress", cwd=tmp_path, env={**user, "OPENAI_BASE_URL": url}
        )
        assert f"Bearer {CANARY}" in seen
        seen.clear()
        _cut(tmp_path / "shared")
        rubric("eval", "--resume", "shared", "--no-progress", "-b", url, cwd=tmp_path, env=user)
        assert f"Bearer {CANARY}" in seen


@pytest.mark.slow
def test_recorded_environment_arguments_are_not_used_unasked(rubric: Invoke, tmp_path: Path) -> None:
    touched = tmp_path / "touched"
    command = shlex.join([sys.executable, "-c", f"open({str(touched)!r}, 'w')"])
    recorded = {"mcp_servers": [command]}
    _shared_folder(rubric, tmp_path, env={"load_kwargs": recorded})
    refused = rubric("eval", "--resume", "shared", "--no-progress", cwd=tmp_path)
    declined = at_a_terminal("eval", "--resume", "shared", "--no-progress", cwd=tmp_path, answer="n")
    assert not touched.exists(), "a command recorded in the folder ran"
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1, refused.stderr
    typed = shlex.quote(json.dumps(recorded))
    assert f"rubric eval --resume shared -a {typed}" in refused.stderr  # the command to type
    assert declined.returncode == 2 and "[y/N]" in declined.stdout, declined.stdout + declined.stderr
    assert not touched.exists()


def test_a_folder_with_no_arguments_and_the_users_endpoint_resumes_unasked(
    rubric: Invoke, tmp_path: Path
) -> None:
    _shared_folder(rubric, tmp_path)  # gsm8k with no arguments, scripted: nothing to confirm
    resumed = rubric("eval", "--resume", "shared", "--no-progress", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert len((tmp_path / "shared" / "results.jsonl").read_text().splitlines()) == 3
