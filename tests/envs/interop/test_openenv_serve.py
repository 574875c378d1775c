"""`rubric serve` / `envs.serve_openenv`: OpenEnv's own client plays our reference environments."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from openenv.core.generic_client import GenericEnvClient

from envs import load_environment
from envs.interop.openenv_serve import openenv_app
from tests.envs.interop.test_openenv import openenv_server
from tests.helpers import rubric_serve

pytestmark = pytest.mark.timeout(120)
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


def _post(url: str, body: dict[str, Any], timeout: float = 10) -> tuple[int, dict[str, Any]]:
    """POST `body` as JSON; the status and the JSON answer (an HTTP error's too)."""
    request = urllib.request.Request(
        url, data=json.dumps(body).encode(), headers={"Content-Type": "application/json"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"null")


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
