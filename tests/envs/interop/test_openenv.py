"""`envs.from_openenv`: a real OpenEnv server (OpenEnv's own server API, on 127.0.0.1) run by our harness."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import http.server
import json
import math
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from envs import from_openenv
from envs._interop.openenv import (
    OpenEnvConnectError,
    OpenEnvFinalReward,
    OpenEnvStepReward,
)
from harness import ConfigError, ScriptedEndpoint, aevaluate
from rubrics import WeightedSum
from rubrics.credit import returns_to_go
from tests.cli.conftest import Invoke
from tests.envs.interop import openenv_guess
from tests.envs.interop.openenv_guess import GuessEnvironment, bisect_tool_policy
from tests.helpers.endpoints import free_port, serve
from tests.helpers.processes import run

pytestmark = [pytest.mark.timeout(120), pytest.mark.interop, pytest.mark.slow]
REPO = Path(__file__).resolve().parents[3]


@contextlib.contextmanager
def openenv_server(app: Any = openenv_guess.app) -> Iterator[str]:
    """OpenEnv's server app run by uvicorn on a free loopback port, in a thread; its URL."""
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=free_port(), log_level="critical"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert thread.is_alive() and time.monotonic() < deadline, "the OpenEnv server did not start"
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(30)


@pytest.fixture
def url() -> Iterator[str]:
    with openenv_server() as address:
        yield address


def _wait_closed(timeout: float = 10) -> int:
    """How many environment instances the server still holds, once its session cleanup ran."""
    deadline = time.monotonic() + timeout
    while GuessEnvironment.open_instances and time.monotonic() < deadline:
        time.sleep(0.02)
    return GuessEnvironment.open_instances


async def test_episodes_run_with_step_and_final_rewards_as_nodes(url: str) -> None:
    env = from_openenv(url, num_examples=3)
    assert [t["function"]["name"] for t in env.tool_schemas] == ["guess"]
    assert env.tool_schemas[0]["function"]["parameters"]["properties"]["guess"]["maximum"] == 15
    async with serve(bisect_tool_policy) as (_, client):
        results = await aevaluate(env, client)
    rollouts = sorted(results.rollouts, key=lambda r: str(r.example_id))
    assert [r.stop_reason for r in rollouts] == ["done"] * 3
    for r in rollouts:
        steps = r.state["openenv"]["steps"]
        assert r.prompt[-1].content == "Guess my number, 0 to 15."
        assert [s["reward"] for s in steps] == [-0.1] * (len(steps) - 1) + [1.0]
        assert r.scores["final_reward"] == 1.0
        assert r.reward == pytest.approx(1.0 - 0.1 * (len(steps) - 1))
        assert r.turn_scores["step_reward"] == [s["reward"] for s in steps]
        assert r.completion[-1].role == "tool" and r.completion[-1].content == "correct"
    # seeds 0, 1, 2 pick secrets 5, 12, 3: bisection finds them in 3, 4 and 2 guesses
    assert [len(r.state["openenv"]["steps"]) for r in rollouts] == [3, 4, 2]
    assert _wait_closed() == 0  # every session was closed when its rollout ended


async def test_environment_rewards_combine_with_our_nodes(url: str) -> None:
    def short(state: dict[str, Any]) -> float:
        return 1.0 if len(state["openenv"]["steps"]) <= 3 else 0.0

    rubric = WeightedSum({"env": OpenEnvStepReward(), "outcome": OpenEnvFinalReward(), "short": short})
    env = from_openenv(url, rubric=rubric, num_examples=2, reward="final", credit=returns_to_go())
    async with serve(bisect_tool_policy) as (_, client):
        results = await aevaluate(env, client)
    first = next(r for r in results.rollouts if r.example_id == "episode-0")
    assert first.scores == {"env": pytest.approx(0.8), "outcome": 1.0, "short": 1.0}
    assert first.reward == pytest.approx((0.8 + 1.0 + 1.0) / 3)
    assert first.turn_scores[""] == pytest.approx([-0.1 / 3, -0.1 / 3, (1.0 + 1.0 + 1.0) / 3])
    assert first.turn_rewards == pytest.approx([0.8 / 3 + 2 / 3, 0.9 / 3 + 2 / 3, 1.0])


def test_rubric_eval_runs_an_openenv_server_end_to_end(rubric: Invoke, url: str, tmp_path: Path) -> None:
    with ScriptedEndpoint(bisect_tool_policy) as endpoint:
        done = rubric(
            "eval", f"openenv:{url}", "-m", "scripted", "--base-url", endpoint.base_url,
            "-n", "2", "-o", str(tmp_path / "run"), cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "run" / "results.jsonl").read_text().splitlines()
    saved = [json.loads(line) for line in lines]
    assert sorted(r["stop_reason"] for r in saved) == ["done", "done"]
    assert all(set(r["scores"]) == {"step_reward", "final_reward"} for r in saved)
    shown = rubric("view", str(tmp_path / "run"), cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "step_reward" in shown.stdout and "final_reward" in shown.stdout
    # re-scoring: a results folder never connects on its own; named, the nodes score from the record
    refused = rubric("score", str(tmp_path / "run"), cwd=tmp_path)
    assert refused.returncode != 0 and "an OpenEnv environment (a server to connect to" in refused.stderr
    rescored = rubric("score", str(tmp_path / "run"), f"openenv:{url}", cwd=tmp_path)
    assert rescored.returncode == 0, rescored.stderr
    again = [
        json.loads(line)
        for line in next((tmp_path / "run").glob("results.rescored-*.jsonl")).read_text().splitlines()
    ]

    # results.jsonl is in finishing order, a re-scored copy in dataset order: match by rollout
    def keyed(rows: list[dict[str, Any]]) -> dict[tuple[str, int], Any]:
        return {(str(r["example_id"]), r["rollout_index"]): r["scores"] for r in rows}

    assert keyed(again) == keyed(saved)


async def test_a_local_server_app_is_started_and_stopped() -> None:
    env = from_openenv("tests.envs.interop.openenv_guess:app", num_examples=1)
    assert env.local is not None
    try:
        async with serve(bisect_tool_policy) as (_, client):
            results = await aevaluate(env, client)
        assert results.rollouts[0].reward == pytest.approx(0.8)
        assert env.config()["openenv"] == {
            "app": "tests.envs.interop.openenv_guess:app",
            "action": "GuessAction",
        }
    finally:
        env.close()
    with pytest.raises(OSError):
        import urllib.request

        urllib.request.urlopen(f"{env.base_url}/health", timeout=2)


# ----------------------------------------------------------------------------- bad input


def test_an_unreachable_server_is_named_with_the_fix() -> None:
    address = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(OpenEnvConnectError, match=rf"no OpenEnv server answers at {address} .*start it"):
        from_openenv(address)


def test_a_server_speaking_another_protocol_is_named() -> None:
    with ScriptedEndpoint(bisect_tool_policy) as endpoint:  # an OpenAI-compatible server, not OpenEnv
        root = endpoint.base_url.removesuffix("/v1")
        with pytest.raises(OpenEnvConnectError, match=r"does not speak OpenEnv's HTTP API: GET /schema"):
            from_openenv(root)


def test_a_local_app_that_cannot_start_names_it_and_its_stderr() -> None:
    with pytest.raises(
        OpenEnvConnectError, match=r"'no_such_module:app' did not start: it exited.*no_such_module"
    ):
        from_openenv("no_such_module:app")


async def test_a_rejected_action_is_a_tool_error_and_the_episode_goes_on(url: str) -> None:
    def out_of_range_first(messages: list[dict[str, Any]], tools: Any) -> dict[str, Any] | str:
        if not any(m["role"] == "tool" for m in messages):
            return {"tool_calls": [{"function": {"name": "guess", "arguments": {"guess": 99}}}]}
        return bisect_tool_policy([m for m in messages if "rejected" not in str(m.get("content"))], tools)

    env = from_openenv(url, num_examples=1)
    async with serve(out_of_range_first) as (_, client):
        results = await aevaluate(env, client)
    r = results.rollouts[0]
    assert r.error is None and r.stop_reason == "done" and r.scores["final_reward"] == 1.0
    rejected = r.completion[1].content
    assert rejected.startswith('Error: the environment rejected the action {"guess": 99}')
    assert "call 'guess' with arguments matching its schema" in rejected and '"maximum":15' in rejected
    assert r.state["tool_errors"][0]["error"].startswith("the environment rejected the action")


async def test_a_server_that_goes_away_fails_its_rollouts_not_the_run(tmp_path: Path) -> None:
    with openenv_server() as address:
        env = from_openenv(address, num_examples=2)
    async with serve(bisect_tool_policy) as (_, client):
        results = await aevaluate(env, client, output_dir=tmp_path / "run")
    assert len(results.rollouts) == 2
    for r in results.rollouts:
        assert r.stop_reason == "error" and math.isnan(r.reward)
        assert r.error is not None and f"could not open an OpenEnv session at {address}" in r.error
    assert len((tmp_path / "run" / "results.jsonl").read_text().splitlines()) == 2


async def test_a_server_that_hangs_fails_that_rollout_and_closes_its_session(url: str) -> None:
    def slow_guess(messages: list[dict[str, Any]], tools: Any) -> dict[str, Any]:
        return {
            "tool_calls": [{"function": {"name": "guess", "arguments": {"guess": openenv_guess.SLOW_GUESS}}}]
        }

    env = from_openenv(url, num_examples=1, timeout=0.5)
    async with serve(slow_guess) as (_, client):
        results = await aevaluate(env, client)
    r = results.rollouts[0]
    assert r.stop_reason == "error" and math.isnan(r.reward)
    assert r.error is not None and "did not answer step within 0.5s" in r.error and "timeout=" in r.error
    assert _wait_closed(15) == 0


async def test_a_one_text_field_action_is_the_models_reply() -> None:
    def ask(messages: list[dict[str, Any]], tools: Any) -> str:
        return "tea, please" if messages[-1]["content"] == "say the magic word" else "tea"

    with openenv_server(openenv_guess.chat_app) as address:
        env = from_openenv(address, num_examples=1)
        assert env.tool_schemas == [] and env.text_field == "message"
        async with serve(ask) as (_, client):
            results = await aevaluate(env, client)
        with pytest.raises(
            ConfigError, match=r"action='text' needs an action that is one text field.*'guess'"
        ):
            with openenv_server() as guess_address:
                from_openenv(guess_address, action="text")
    r = results.rollouts[0]
    assert [m.role for m in r.completion] == ["assistant", "user", "assistant", "user"]
    assert [m.content for m in r.completion] == ["tea", "say the magic word", "tea, please", "gladly"]
    assert r.stop_reason == "done" and r.turn_scores["step_reward"] == [0.0, 1.0] and r.reward == 1.0


async def test_a_cancelled_run_closes_its_sessions(url: str) -> None:
    def slow_guess(messages: list[dict[str, Any]], tools: Any) -> dict[str, Any]:
        return {
            "tool_calls": [{"function": {"name": "guess", "arguments": {"guess": openenv_guess.SLOW_GUESS}}}]
        }

    env = from_openenv(url, num_examples=2)
    async with serve(slow_guess) as (_, client):
        task = asyncio.create_task(aevaluate(env, client))
        deadline = time.monotonic() + 20
        while GuessEnvironment.open_instances < 2:
            assert time.monotonic() < deadline and not task.done()
            await asyncio.sleep(0.02)
        await asyncio.sleep(0.2)  # both sessions are inside their slow step
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
    assert env._sessions == {}
    assert _wait_closed(15) == 0


def _uvicorn_serving(app: str) -> list[str]:
    """Processes whose command line runs uvicorn on `app`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with contextlib.suppress(OSError):
            argv = cmdline.read_bytes().split(b"\0")
            if b"uvicorn" in argv and app.encode() in argv:
                found.append(cmdline.parent.name)
    return found


def test_rubric_eval_starts_a_local_app_and_leaves_nothing_running(tmp_path: Path) -> None:
    app = "tests.envs.interop.openenv_guess:app"
    with ScriptedEndpoint(bisect_tool_policy) as endpoint:
        done = run(
            "eval", f"openenv:{app}", "-m", "scripted", "--base-url", endpoint.base_url, "-n", "1",
            "-a", '{"success": ["final_reward", 1.0]}', "--no-progress", "-o", str(tmp_path / "run"), cwd=REPO,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "final_reward >= 1" in done.stdout and "done 1" in done.stdout
    deadline = time.monotonic() + 10
    while _uvicorn_serving(app) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _uvicorn_serving(app) == []


async def test_a_server_at_its_session_limit_fails_the_extra_rollout_naming_the_fix() -> None:
    def slow_guess(messages: list[dict[str, Any]], tools: Any) -> dict[str, Any]:
        return {
            "tool_calls": [{"function": {"name": "guess", "arguments": {"guess": openenv_guess.SLOW_GUESS}}}]
        }

    one_session = openenv_guess.create_app(
        GuessEnvironment, openenv_guess.GuessAction, openenv_guess.GuessObservation, max_concurrent_envs=1
    )
    with openenv_server(one_session) as address:
        env = from_openenv(address, num_examples=2, max_turns=1)
        async with serve(slow_guess) as (_, client):
            results = await aevaluate(env, client, concurrency=2)
    errors = sorted(str(r.error) for r in results.rollouts)
    assert errors[0] == "None"
    assert (
        "session limit" in errors[1]
        and "lower the concurrency (-c) or raise the server's max_concurrent_envs" in errors[1]
    )
    assert _wait_closed(15) == 0


@contextlib.contextmanager
def _trickling_server(*, drip: float | None) -> Iterator[str]:
    """A server on 127.0.0.1 whose every answer never ends: one byte every `drip` seconds of a
    long body, or (drip None) bytes as fast as it can send, without a length."""
    stop = threading.Event()

    class Trickle(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            if drip is not None:
                self.send_header("Content-Length", "100000")
            self.end_headers()
            with contextlib.suppress(OSError):
                while not stop.is_set():
                    self.wfile.write(b" " if drip is not None else b" " * 65536)
                    self.wfile.flush()
                    if drip is not None:
                        stop.wait(drip)

        def log_message(self, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Trickle)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
        thread.join(10)


@pytest.mark.parametrize(
    ("drip", "why"),
    [
        (2.0, r"no OpenEnv server answers at {} \(GET /schema: no whole answer within 10s\); start it"),
        (
            None,
            r"{} does not speak OpenEnv's HTTP API: GET /schema: the answer is more than the 33,554,432 bytes",
        ),
    ],
)
def test_a_schema_that_never_ends_fails_within_one_deadline_and_size(drip: float | None, why: str) -> None:
    with _trickling_server(drip=drip) as address, concurrent.futures.ThreadPoolExecutor(1) as pool:
        started = time.monotonic()
        attempt = pool.submit(from_openenv, address)
        with pytest.raises(OpenEnvConnectError, match=why.format(re.escape(address))):
            attempt.result(timeout=20)
        assert time.monotonic() - started < 13


async def test_an_observation_over_the_size_cap_fails_its_rollout(url: str) -> None:
    env = from_openenv(
        url,
        dataset=[
            {"question": "flood", "reset": {"seed": 0, "flood": True}},
            {"question": "plain", "reset": {"seed": 1}},
        ],
    )
    async with serve(bisect_tool_policy) as (_, client):
        results = await aevaluate(env, client)
    flooded, fine = results.rollouts
    assert flooded.stop_reason == "error" and math.isnan(flooded.reward)
    assert (
        flooded.error is not None
        and "answered reset with a message larger than the 33,554,432 bytes" in flooded.error
    )
    assert fine.error is None and fine.scores["final_reward"] == 1.0


STEP_ANSWERS: list[dict[str, Any]] = [
    {"reward": "1", "done": True},
    {"reward": True, "done": True},
    {"reward": 1.0, "done": "false"},
    {"reward": 1.0, "done": True},
]
"""What the hand-written server below answers a step, by the seed of the reset."""


@contextlib.contextmanager
def _hand_written_server() -> Iterator[str]:
    """An OpenEnv look-alike on 127.0.0.1 (its /schema and /ws) that answers each step with
    STEP_ANSWERS[seed]: the wrong types a server we did not write may send."""
    from websockets.sync.server import serve as serve_websockets

    schema = {
        "action": {"title": "GuessAction", "type": "object", "properties": {"guess": {"type": "integer"}}},
        "observation": {"type": "object"},
        "state": {"type": "object"},
    }

    def session(ws: Any) -> None:
        seed = 0
        for raw in ws:
            message = json.loads(raw)
            if message["type"] == "close":
                return
            if message["type"] == "reset":
                seed = message["data"].get("seed", 0)
                data = {"observation": {"feedback": "Guess my number."}, "reward": None, "done": False}
            else:
                data = {"observation": {"feedback": "correct"}, **STEP_ANSWERS[seed]}
            ws.send(json.dumps({"type": "observation", "data": data}))

    def schema_route(connection: Any, request: Any) -> Any:
        return connection.respond(200, json.dumps(schema)) if request.path == "/schema" else None

    with serve_websockets(session, "127.0.0.1", 0, process_request=schema_route) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{server.socket.getsockname()[1]}"
        finally:
            server.shutdown()
            thread.join(10)


async def test_rewards_and_done_of_the_wrong_type_are_not_taken_for_numbers() -> None:
    with _hand_written_server() as address:
        env = from_openenv(address, num_examples=len(STEP_ANSWERS))
        async with serve(bisect_tool_policy) as (_, client):
            results = await aevaluate(env, client)
    text, boolean, done_text, fine = sorted(results.rollouts, key=lambda r: r.info["seed"])
    for rollout, shown in ((text, "reward='1' (str)"), (boolean, "reward=True (bool)")):
        assert rollout.error is None and math.isnan(rollout.reward), rollout
        reason = rollout.score_errors["step_reward"]
        assert f"step 1 gave {shown}, not a finite real number" in reason
    assert done_text.stop_reason == "error" and math.isnan(done_text.reward)
    assert done_text.error is not None and "answered step with done='false' (str)" in done_text.error
    assert "the field 'done' must be true or false" in done_text.error
    assert fine.error is None and fine.reward == 1.0
