"""`rubric serve` / `envs.serve_openenv`: OpenEnv's own client plays our reference environments."""

from __future__ import annotations

import asyncio
import contextlib
import http.client
import http.server
import json
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openenv.core.generic_client import GenericEnvClient
from websockets.exceptions import ConnectionClosed

from envs import load_environment
from envs._interop.openenv_guard import check_origin
from envs._interop.openenv_serve import openenv_app
from harness import ConfigError
from tests.envs.interop.test_openenv import openenv_server
from tests.helpers.browser import chromium
from tests.helpers.endpoints import free_port
from tests.helpers.processes import RUBRIC, rubric_serve, serving

pytestmark = [pytest.mark.timeout(120), pytest.mark.interop, pytest.mark.serve, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[3]
PROBE = f"import os; print(2 + 3, os.path.exists({str(REPO / 'README.md')!r}))"


def _assistant(reply: dict[str, Any] | str, turn: int) -> dict[str, Any]:
    """A scripted policy's reply as an OpenAI assistant message, tool calls given ids."""
    if isinstance(reply, str):
        return {"role": "assistant", "content": reply}
    calls = [
        {"id": f"call_{turn}_{i}", "type": "function", **c} for i, c in enumerate(reply.get("tool_calls", []))
    ]
    return {"role": "assistant", "content": reply.get("content"), "tool_calls": calls}


async def play(client: Any, policy: Any, **reset: Any) -> tuple[Any, list[dict[str, Any]]]:
    """A whole episode with OpenEnv's client: reset, then step with the policy's replies until done."""
    result = await client.reset(**reset)
    messages, tools = list(result.observation["messages"]), result.observation["tools"]
    for turn in range(20):
        message = _assistant(policy(messages, tools), turn)
        result = await client.step(
            {"content": message["content"], "tool_calls": message.get("tool_calls", [])}
        )
        messages += [message, *result.observation["messages"]]
        if result.done:
            return result, messages
    raise AssertionError("the episode did not end")


def test_openenv_client_plays_wordle_through_rubric_serve() -> None:
    oracle = load_environment("wordle").scripted_policies["oracle"]

    async def episode(url: str) -> tuple[Any, list[dict[str, Any]]]:
        async with GenericEnvClient(base_url=url) as client:
            return await play(client, oracle, seed=3)

    with rubric_serve("wordle") as url:
        result, messages = asyncio.run(episode(url))
    assert messages[0]["role"] == "system" and "Wordle" in messages[0]["content"]
    assert messages[1]["role"] == "user"
    assert messages[-1]["role"] == "tool" and "GGGGG" in messages[-1]["content"]
    observation = result.observation
    assert result.done and observation["stop_reason"] == "won"
    assert result.reward == pytest.approx(1.0)
    assert observation["scores"]["grade.win"] == 1.0 and "grade" in observation["scores"]


@pytest.fixture
def python_server() -> Iterator[str]:
    with openenv_server(openenv_app(load_environment("python"))) as url:
        yield url


async def test_python_episodes_run_in_the_sandbox_and_sessions_stay_apart(python_server: str) -> None:
    env = load_environment("python")
    oracle = env.scripted_policies["oracle"]
    rows = list(env.get_dataset())

    async def episode(seed: int) -> tuple[Any, list[dict[str, Any]]]:
        async with GenericEnvClient(base_url=python_server) as client:
            return await play(client, oracle, seed=seed)

    played = await asyncio.gather(*(episode(seed) for seed in range(4)))
    for seed, (result, messages) in enumerate(played):
        assert rows[seed]["question"] in next(m["content"] for m in messages if m["role"] == "user")
        assert result.done and result.reward == 1.0, result.observation
        assert result.observation["metadata"]["example_id"] == rows[seed]["example_id"]
        assert set(result.observation["scores"]) == {path for path, _ in env.rubric.named_rubrics()}
        tool_output = next(m for m in messages if m["role"] == "tool")
        assert not tool_output["content"].startswith("Error")


async def test_a_whole_episode_reports_unscored_nodes_and_bad_requests(python_server: str) -> None:
    async with GenericEnvClient(base_url=python_server) as client:
        with pytest.raises(RuntimeError, match="no episode is running; reset first"):
            await client.step({"content": "42"})
        with pytest.raises(RuntimeError, match="has no example_id 'nope'.*reset with one of them"):
            await client.reset(example_id="nope")
        await client.reset(seed=0)
        with pytest.raises(RuntimeError, match="VALIDATION_ERROR"):
            await client.step({"text": "42"})  # not a field of the action
        called = await client.step(
            {
                "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "run_python", "arguments": "{}"}}
                ]
            }
        )
        assert not called.done and called.observation["messages"][0]["content"].startswith("Error")
        probe = {"code": PROBE}  # the model's code runs in the sandbox: the project's files are not there
        call = {
            "id": "c2",
            "type": "function",
            "function": {"name": "run_python", "arguments": json.dumps(probe)},
        }
        ran = await client.step({"tool_calls": [call]})
        assert ran.observation["messages"][0]["content"].split() == ["5", "False"]
        final = await client.step({"content": "no idea"})
    assert final.done and final.observation["stop_reason"] == "completed"
    assert final.reward == 0.0 and final.observation["scores"]


def _post(url: str, body: dict[str, Any], timeout: float = 10) -> tuple[int, Any]:
    """POST `body` as JSON; the status and the answer (JSON when it is, else its text), an HTTP error's too."""
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            status, text = response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        status, text = exc.code, exc.read().decode()
    with contextlib.suppress(ValueError):
        return status, json.loads(text)
    return status, text


def test_an_http_reset_never_blocks_the_server() -> None:
    async def session(url: str) -> Any:
        async with GenericEnvClient(base_url=url) as client:
            return await client.reset(seed=1)

    with rubric_serve("wordle") as url:
        started = time.monotonic()
        resetting = threading.Thread(target=_post, args=(f"{url}/reset", {"seed": 0}))
        resetting.start()
        time.sleep(0.5)  # the reset answered; the episode it set up is being released
        with urllib.request.urlopen(f"{url}/health", timeout=10) as health:
            assert health.status == 200
        health_took = time.monotonic() - started
        other = asyncio.run(session(url))
        resetting.join(30)
        took = time.monotonic() - started
    assert not resetting.is_alive()
    assert "Wordle" in other.observation["messages"][0]["content"]
    assert health_took < 3 and took < 10, (health_took, took)


def _ask(url: str, method: str, path: str, headers: dict[str, str], body: str = "") -> tuple[int, str]:
    """One raw HTTP request (any Host header); the status and the text answered."""
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        connection.request(method, path, body=body.encode() or None, headers=headers)
        response = connection.getresponse()
        return response.status, response.read().decode()
    finally:
        connection.close()


def test_foreign_hosts_and_origins_are_refused_before_openenv(python_server: str) -> None:
    port = urllib.parse.urlsplit(python_server).port
    reset = ("POST", "/reset", '{"seed": 0}')
    json_type = {"Content-Type": "application/json"}
    status, text = _ask(python_server, *reset[:2], {**json_type, "Host": f"evil.test:{port}"}, reset[2])
    assert status == 421 and "Invalid Host header 'evil.test:" in text and "rebinding" in text
    # a page elsewhere, even on this machine: refused, and told how to allow it
    for origin in ("http://evil.test", f"http://127.0.0.1:{port + 1}", "null", f"https://localhost:{port}"):
        status, text = _ask(
            python_server, *reset[:2], {"Content-Type": "text/plain", "Origin": origin}, reset[2]
        )
        assert status == 403 and f"--allow-origin {origin}" in text, (origin, status, text)
    status, _ = _ask(python_server, "OPTIONS", "/reset", {"Origin": "http://evil.test"})
    assert status == 403
    upgrade = {
        "Connection": "Upgrade",
        "Upgrade": "websocket",
        "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
    }
    assert _ask(python_server, "GET", "/ws", {**upgrade, "Origin": "http://evil.test"})[0] == 403
    assert _ask(python_server, "GET", "/ws", {**upgrade, "Host": "evil.test"})[0] == 421
    # this server's own pages, and clients that send no Origin (OpenEnv's), go on
    for origin in (f"http://127.0.0.1:{port}", f"http://localhost:{port}", None):
        headers = {**json_type, **({"Origin": origin} if origin else {}), "Host": f"localhost:{port}"}
        status, text = _ask(python_server, *reset[:2], headers, reset[2])
        assert status == 200 and "run_python" in text, (origin, text)
    assert _ask(python_server, "GET", "/ws", {**upgrade, "Origin": f"http://127.0.0.1:{port}"})[0] == 101


PAGE = b"""<!doctype html><title>elsewhere</title><script>
function viaWebSocket(url) {
  return new Promise((resolve) => {
    const ws = new WebSocket(url);
    ws.onopen = () => ws.send(JSON.stringify({type: "reset", data: {seed: 0}}));
    ws.onmessage = (event) => { resolve("answered " + event.data); ws.close(); };
    ws.onerror = () => resolve("refused");
  });
}
async function viaFetch(url) {
  try {
    const answer = await fetch(url, {method: "POST", headers: {"Content-Type": "application/json"},
                                     body: JSON.stringify({seed: 0})});
    return "answered " + answer.status + " " + await answer.text();
  } catch (error) { return "refused " + error; }
}
</script>"""


@contextlib.contextmanager
def _page_server() -> Iterator[str]:
    """A web page (PAGE) served on a free loopback port: an origin other than the server's."""

    class Page(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Content-Length", str(len(PAGE)))
            self.end_headers()
            self.wfile.write(PAGE)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Page)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.mark.browser
def test_a_page_of_another_origin_cannot_drive_the_server_in_chromium() -> None:
    with _page_server() as foreign, _page_server() as allowed:
        with rubric_serve("python", "--allow-origin", allowed) as url, chromium() as browser:
            ws_url = url.replace("http://", "ws://") + "/ws"
            seen = {}
            for origin in (foreign, allowed):
                page = browser.new_page()
                page.goto(origin)
                seen[origin] = (
                    page.evaluate("url => viaWebSocket(url)", ws_url),
                    page.evaluate("url => viaFetch(url)", f"{url}/reset"),
                )
                page.close()
    assert seen[foreign] == ("refused", "refused TypeError: Failed to fetch"), seen[foreign]
    by_socket, by_fetch = seen[allowed]
    question = next(iter(load_environment("python").get_dataset()))["question"]
    assert (
        by_socket.startswith("answered ")
        and question in json.loads(by_socket[9:])["data"]["observation"]["messages"][1]["content"]
    )
    assert by_fetch.startswith("answered 200 ") and "run_python" in by_fetch


def test_idle_sessions_are_closed_and_free_their_slots() -> None:
    async def sessions(url: str) -> None:
        async with GenericEnvClient(base_url=url) as idle:
            await idle.reset(seed=0)
            async with GenericEnvClient(base_url=url) as refused:  # the one slot is taken
                with pytest.raises((RuntimeError, ConnectionClosed)):  # OpenEnv says so, or just closes
                    await refused.reset(seed=1)
            await asyncio.sleep(2.5)  # idle for longer than --idle-timeout
            async with GenericEnvClient(base_url=url) as other:
                started = await other.reset(seed=1)
                assert "Wordle" in started.observation["messages"][0]["content"]
            with pytest.raises(
                ConnectionClosed, match="1001.*session idle for more than 1s; open a new session"
            ):
                await idle.step({"content": "crane"})

    with rubric_serve("wordle", "--max-sessions", "1", "--idle-timeout", "1") as url:
        asyncio.run(sessions(url))


def test_an_http_step_says_to_use_the_websocket_without_a_traceback() -> None:
    port = free_port()
    with serving([str(RUBRIC), "serve", "wordle", "--port", str(port)], port) as server:
        url = f"http://127.0.0.1:{port}"
        assert _post(f"{url}/reset", {"seed": 0})[0] == 200
        for _ in range(2):
            status, answer = _post(f"{url}/step", {"action": {"content": "crane"}})
            assert status == 409
            assert answer["detail"].startswith("no episode is running for HTTP POST /step")
            assert "Reset first and step over one WebSocket session at /ws" in answer["detail"]
        _, err = server.stop()
    assert "Traceback" not in err and "Exception" not in err and "Error" not in err, err


def test_allowed_origins_and_the_idle_timeout_are_checked_before_serving() -> None:
    assert check_origin(" HTTP://127.0.0.1:3000/ ") == "http://127.0.0.1:3000"
    for wrong in ("127.0.0.1:3000", "http://127.0.0.1:*", "http://host/page", "ftp://host", "http://h:99999"):
        with pytest.raises(ConfigError, match="is not a web origin; give scheme://host"):
            check_origin(wrong)
    for seconds in (0, -1, float("nan"), float("inf"), True):
        with pytest.raises(ConfigError, match="idle_timeout must be a positive number of seconds"):
            openenv_app(load_environment("wordle"), idle_timeout=seconds)
