"""OpenEnv across versions: our side (OpenEnv 0.4) against OpenEnv 0.10 run from its own venv, both ways."""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envs import from_openenv, load_environment
from envs._interop.openenv import OpenEnvConnectError
from harness import ConfigError, ScriptedEndpoint, aevaluate
from tests.envs.interop import openenv_guess
from tests.envs.interop.openenv_guess import bisect_tool_policy
from tests.helpers.endpoints import free_port, serve
from tests.helpers.install import OPENENV_SIDE_VERSION, ensure_openenv_side_python, openenv_side_venv
from tests.helpers.processes import rubric_serve, run, serving

pytestmark = [pytest.mark.timeout(180), pytest.mark.interop, pytest.mark.serve, pytest.mark.slow]
HERE = Path(__file__).resolve().parent
REPO = HERE.parents[2]
SIDE_VERSION = OPENENV_SIDE_VERSION
SIDE_APP = "tests.envs.interop.openenv10_server:app"


def side_python() -> str:
    """The python of the venv holding OpenEnv 0.10: $RUBRIC_OPENENV_PYTHON when set, else the
    venv the test session keeps in the user's cache folder (tests/conftest.py makes it before
    the first test, outside any test's timeout); the test fails when neither can be had."""
    try:
        python = ensure_openenv_side_python()
    except RuntimeError as err:
        pytest.fail(f"no OpenEnv {SIDE_VERSION} venv for the cross-version tests: {err}", pytrace=False)
    probe = "from importlib.metadata import version; print(version('openenv'))"
    found = subprocess.run([python, "-c", probe], capture_output=True, text=True, timeout=60)
    if found.stdout.strip() != SIDE_VERSION:
        pytest.fail(
            f"{python} has openenv {found.stdout.strip() or found.stderr.strip()[-200:]!r}, not {SIDE_VERSION}; "
            f"unset RUBRIC_OPENENV_PYTHON to have the tests make {openenv_side_venv()}, or point it at "
            f"a python with openenv=={SIDE_VERSION}",
            pytrace=False,
        )
    return python


@contextlib.contextmanager
def openenv10_server(
    mode: str = "simulation", max_sessions: int = 8, *, clean_log: bool = True
) -> Iterator[str]:
    """The guessing game on OpenEnv 0.10's server (`openenv10_server:app`) run by the side venv's
    uvicorn; its URL. With `clean_log` the server must log no traceback."""
    port = free_port()
    command = [side_python(), "-m", "uvicorn", SIDE_APP, "--port", str(port), "--log-level", "warning"]
    settings = {"OPENENV_MODE": mode, "GUESS_SESSIONS": str(max_sessions), "PYTHONPATH": str(REPO)}
    with serving(command, port, env=settings) as server:
        yield f"http://127.0.0.1:{port}"
    assert not clean_log or "Traceback" not in server.stop()[1], server.stop()[1]


def _get(url: str) -> Any:
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.loads(response.read())


def _slow_guess(messages: list[dict[str, Any]], tools: Any) -> dict[str, Any]:
    return {"tool_calls": [{"function": {"name": "guess", "arguments": {"guess": openenv_guess.SLOW_GUESS}}}]}


# ----------------------------------------------------------- our client, OpenEnv 0.10's server


def test_rubric_eval_plays_a_production_mode_openenv_0_10_server(tmp_path: Path) -> None:
    with openenv10_server(mode="production") as url:
        schema = _get(f"{url}/schema")  # what only 0.10 publishes: the reset observation, a State subclass
        assert (
            schema["reset_observation"]["title"] == "GuessStart"
            and "guesses" in schema["state"]["properties"]
        )
        with pytest.raises(urllib.error.HTTPError, match="404"):  # production mode: the WebSocket only
            urllib.request.urlopen(
                urllib.request.Request(f"{url}/reset", data=b"{}", method="POST"), timeout=10
            )
        with ScriptedEndpoint(bisect_tool_policy) as endpoint:
            done = run(
                "eval", f"openenv:{url}", "-m", "scripted", "--base-url", endpoint.base_url, "-n", "3",
                "--no-progress", "-o", str(tmp_path / "run"), cwd=tmp_path,
            )  # fmt: skip
    assert done.returncode == 0, done.stderr
    lines = (tmp_path / "run" / "results.jsonl").read_text().splitlines()
    saved = sorted((json.loads(line) for line in lines), key=lambda r: r["example_id"])
    assert [r["stop_reason"] for r in saved] == ["done"] * 3
    # seeds 0, 1, 2 pick secrets 5, 12, 3: bisection finds them in 3, 4 and 2 guesses, as on 0.4
    steps = [r["state"]["openenv"]["steps"] for r in saved]
    assert [len(s) for s in steps] == [3, 4, 2]
    for r, episode in zip(saved, steps, strict=True):
        assert [s["reward"] for s in episode] == [-0.1] * (len(episode) - 1) + [1.0]
        assert r["scores"] == {
            "final_reward": 1.0,
            "step_reward": pytest.approx(1.0 - 0.1 * (len(episode) - 1)),
        }
        assert json.loads(r["prompt"][-1]["content"]) == {
            "feedback": "Guess my number, 0 to 15.",
            "low": 0,
            "high": 15,
        }


async def test_rejected_actions_and_a_full_server_read_the_same_from_openenv_0_10() -> None:
    def out_of_range_first(messages: list[dict[str, Any]], tools: Any) -> dict[str, Any] | str:
        if not any(m["role"] == "tool" for m in messages):
            return {"tool_calls": [{"function": {"name": "guess", "arguments": {"guess": 99}}}]}
        return bisect_tool_policy([m for m in messages if "rejected" not in str(m.get("content"))], tools)

    with openenv10_server() as url:
        env = from_openenv(url, num_examples=1)
        async with serve(out_of_range_first) as (_, client):
            rejected = (await aevaluate(env, client)).rollouts[0]
    assert (
        rejected.error is None and rejected.stop_reason == "done" and rejected.scores["final_reward"] == 1.0
    )
    assert rejected.completion[1].content.startswith(
        'Error: the environment rejected the action {"guess": 99}'
    )
    assert "VALIDATION_ERROR" in rejected.state["tool_errors"][0]["error"]

    with openenv10_server(max_sessions=1) as url:
        env = from_openenv(url, num_examples=2, max_turns=1)
        async with serve(_slow_guess) as (_, client):
            results = await aevaluate(env, client, concurrency=2)
    errors = sorted(str(r.error) for r in results.rollouts)
    assert errors[0] == "None"
    assert "session limit" in errors[1] and "lower the concurrency (-c)" in errors[1]


async def test_a_hung_openenv_0_10_step_fails_that_rollout_and_the_server_takes_the_next() -> None:
    # OpenEnv 0.10's server logs a traceback when the step it finishes has no client left to read it
    with openenv10_server(max_sessions=1, clean_log=False) as url:
        env = from_openenv(url, num_examples=1, timeout=0.5)
        async with serve(_slow_guess) as (_, client):
            hung = (await aevaluate(env, client)).rollouts[0]
        # the one session slot is free again once the hung step ends: the timed-out session was closed
        await asyncio.sleep(openenv_guess.SLOW_SECONDS + 1)
        again = from_openenv(url, num_examples=1)
        async with serve(bisect_tool_policy) as (_, client):
            played = (await aevaluate(again, client)).rollouts[0]
    assert (
        hung.stop_reason == "error"
        and hung.error is not None
        and "did not answer step within 0.5s" in hung.error
    )
    assert played.error is None and played.scores["final_reward"] == 1.0


async def test_an_openenv_0_10_app_is_started_with_the_python_of_its_venv(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    python = side_python()
    monkeypatch.setenv("PYTHONPATH", str(REPO))  # the child imports tests.envs.interop.openenv10_server
    env = from_openenv(SIDE_APP, python=python, num_examples=1)
    try:
        async with serve(bisect_tool_policy) as (_, client):
            played = (await aevaluate(env, client)).rollouts[0]
        assert env.config()["openenv"] == {"app": SIDE_APP, "python": python, "action": "GuessAction"}
    finally:
        env.close()
    assert played.scores["final_reward"] == 1.0 and played.reward == pytest.approx(0.8)
    # our python has OpenEnv 0.4, whose create_app does not take 0.10's arguments
    with pytest.raises(OpenEnvConnectError, match=r"did not start: it exited.*state_cls"):
        from_openenv(SIDE_APP)
    with pytest.raises(OpenEnvConnectError, match=r"no python executable at '/no/such/python'"):
        from_openenv(SIDE_APP, python="/no/such/python")
    with pytest.raises(ConfigError, match=r"starts a module:app target; 'http://127.0.0.1:9' is a URL"):
        from_openenv("http://127.0.0.1:9", python=python)


# ----------------------------------------------------------- OpenEnv 0.10's client, our server


@pytest.mark.parametrize("name", ["wordle", "python"])
def test_openenv_0_10_client_plays_our_environment_through_rubric_serve(name: str) -> None:
    python = side_python()
    env = load_environment(name)
    with ScriptedEndpoint(env.scripted_policies["oracle"]) as endpoint, rubric_serve(name) as url:
        played = subprocess.run(
            [python, str(HERE / "openenv10_client.py"), url, endpoint.base_url, "3"],
            capture_output=True, text=True, timeout=120,
        )  # fmt: skip
    assert played.returncode == 0, played.stderr
    episode = json.loads(played.stdout)
    assert episode["versions"]["openenv"] == SIDE_VERSION
    assert episode["done"] is True and episode["reward"] == pytest.approx(1.0)
    assert set(episode["scores"]) == {path for path, _ in env.rubric.named_rubrics()}
    assert all(score == pytest.approx(1.0) for score in episode["scores"].values()), episode["scores"]
    row = list(env.get_dataset("eval"))[3]
    assert episode["metadata"]["example_id"] == row["example_id"]
    messages = episode["messages"]
    assert [m["role"] for m in messages[:2]] == ["system", "user"] and messages[-1]["role"] in (
        "tool",
        "assistant",
    )
    if name == "wordle":
        assert episode["stop_reason"] == "won" and "GGGGG" in messages[-1]["content"]
    else:
        assert row["question"] in messages[1]["content"]
        assert not next(m for m in messages if m["role"] == "tool")["content"].startswith("Error")
