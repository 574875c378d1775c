"""The capture proxy's controls: forced sampling, model names, budgets, the concurrency limit,
upstream failures, the sync face, and a session's record on a rollout."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import httpx
import openai
import pytest

from harness import CaptureProxy, Client, ConfigError, ProxyBudgets, Rollout, ScriptedEndpoint
from tests.harness.proxy.conftest import ProxyFactory

pytestmark = pytest.mark.timeout(60)
Start = ProxyFactory
HI = [{"role": "user", "content": "hi"}]


def _sdk(proxy: CaptureProxy, key: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=f"{proxy.base_url}/v1", api_key=key, max_retries=0)


async def test_forced_sampling_overrides_the_agents_and_aliases_map_to_the_served_model(
    start_proxy: Start,
) -> None:
    proxy = await start_proxy(
        endpoint={"record": True}, sampling={"temperature": 0.0, "top_k": 5}, model_aliases=["gpt-5"]
    )
    session = proxy.open_session()
    async with _sdk(proxy, session.key) as sdk:
        reply = await sdk.chat.completions.create(model="gpt-5", messages=HI, temperature=0.9, max_tokens=50)
        with pytest.raises(
            openai.NotFoundError, match="'claude-x' is not served here; this proxy serves 'served-model'"
        ):
            await sdk.chat.completions.create(model="claude-x", messages=HI)
    assert reply.model == "gpt-5"  # the agent sees the name it asked for
    (body,) = start_proxy.endpoint_of(proxy).stats.bodies
    assert body["model"] == "served-model" and body["temperature"] == 0.0 and body["top_k"] == 5
    assert body["max_tokens"] == 50
    assert session.turns[0].params == {"temperature": 0.0, "max_tokens": 50, "top_k": 5}
    assert session.turns[1].status == 404 and session.turns[1].model == "claude-x"
    proxy.model_aliases = frozenset({"*"})
    async with _sdk(proxy, session.key) as sdk:
        assert (await sdk.chat.completions.create(model="anything", messages=HI)).model == "anything"
        listed = await sdk.models.list()
    assert [m.id for m in listed.data] == ["served-model"]


@pytest.mark.parametrize(
    ("budgets", "calls_served", "reason", "says"),
    [
        (ProxyBudgets(max_turns=2), 2, "max_turns", "max_turns: its budget of 2 model calls is spent"),
        (ProxyBudgets(max_tokens=3), 1, "max_tokens", "max_tokens: its budget of 3 tokens is spent"),
    ],
)
async def test_a_spent_budget_ends_the_episode_with_a_named_stop_reason(
    start_proxy: Start, budgets: ProxyBudgets, calls_served: int, reason: str, says: str
) -> None:
    proxy = await start_proxy()
    session = proxy.open_session(budgets=budgets)
    async with _sdk(proxy, session.key) as sdk:
        for _ in range(calls_served):
            await sdk.chat.completions.create(model="served-model", messages=HI)
        assert await asyncio.wait_for(session.wait_stopped(), 1) == reason
        with pytest.raises(openai.BadRequestError, match=f"the episode is over \\({says}\\)"):
            await sdk.chat.completions.create(model="served-model", messages=HI)
    assert session.stop_reason == reason and proxy.client.requests == calls_served
    assert session.turns[-1].status == 400 and says in (session.turns[-1].error or "")
    rollout = Rollout()
    session.record_into(rollout)
    assert rollout.stop_reason == reason and rollout.turns == calls_served


async def test_the_wall_clock_budget_ends_a_call_still_waiting_on_the_engine(start_proxy: Start) -> None:
    proxy = await start_proxy(endpoint={"latency": 5.0}, budgets=ProxyBudgets(max_seconds=0.3))
    session = proxy.open_session()
    async with aiohttp.ClientSession() as http:
        headers = {"x-api-key": session.key}
        body = {"model": "served-model", "max_tokens": 10, "messages": HI}
        async with http.post(f"{proxy.base_url}/v1/messages", json=body, headers=headers) as response:
            answer = await response.json()
    assert response.status == 400 and answer["error"]["type"] == "invalid_request_error"
    assert "the episode is over (timeout: its budget of 0.3 seconds is spent)" in answer["error"]["message"]
    assert session.stop_reason == "timeout" and 0.25 < session.turns[0].timing["total"] < 2


async def test_the_runs_concurrency_limit_holds_across_sessions(start_proxy: Start) -> None:
    proxy = await start_proxy(endpoint={"latency": 0.1}, max_concurrency=2)
    sessions = [proxy.open_session() for _ in range(6)]

    async def one(key: str) -> None:
        async with _sdk(proxy, key) as sdk:
            await sdk.chat.completions.create(model="served-model", messages=HI)

    await asyncio.gather(*(one(s.key) for s in sessions))
    stats = start_proxy.endpoint_of(proxy).stats
    assert stats.requests == 6 and stats.max_in_flight == 2
    assert all(len(s.turns) == 1 and s.turns[0].ok for s in sessions)


async def test_a_request_the_engine_rejects_is_a_400_the_agent_can_act_on(start_proxy: Start) -> None:
    proxy = await start_proxy(endpoint={"fail_first": [422]}, client={"max_retries": 0})
    session = proxy.open_session()
    async with _sdk(proxy, session.key) as sdk:
        with pytest.raises(
            openai.BadRequestError, match="the model endpoint rejected the request: .*HTTP 422"
        ):
            await sdk.chat.completions.create(model="served-model", messages=HI)
    assert session.turns[0].status == 400


async def test_an_upstream_failure_is_a_502_to_the_agent_and_recorded(start_proxy: Start) -> None:
    proxy = await start_proxy(
        endpoint={"fail_first": [500, 500]}, client={"max_retries": 1, "backoff_base": 0.001}
    )
    session = proxy.open_session()
    async with _sdk(proxy, session.key) as sdk:
        with pytest.raises(openai.APIStatusError, match="the model endpoint failed") as raised:
            await sdk.chat.completions.create(model="served-model", messages=HI)
    assert raised.value.status_code == 502
    assert session.turns[0].status == 502 and "HTTP 500" in (session.turns[0].error or "")


def test_the_sync_face_serves_from_rubrics_background_loop(
    scripted_endpoint: Callable[..., ScriptedEndpoint], tmp_path: Path
) -> None:
    endpoint = scripted_endpoint(lambda messages, tools: "sync hello")
    proxy = CaptureProxy(Client("served-model", base_url=endpoint.base_url)).start(port=0)
    socket_path = proxy.listen_unix(tmp_path / "sync.sock")
    try:
        session = proxy.open_session("rollout-0")
        with openai.OpenAI(base_url=f"{proxy.base_url}/v1", api_key=session.key, max_retries=0) as sdk:
            reply = sdk.chat.completions.create(model="served-model", messages=HI)
        assert reply.choices[0].message.content == "sync hello" and session.turns[0].ok
        transport = httpx.HTTPTransport(uds=socket_path)
        with httpx.Client(transport=transport) as http:
            answer = http.post(
                "http://sandbox/v1/chat/completions",
                json={"messages": HI},
                headers={"x-api-key": session.key},
            )
        assert answer.json()["choices"][0]["message"]["content"] == "sync hello"
    finally:
        proxy.close()
    assert proxy.port is None and session.stop_reason == "closed" and not Path(socket_path).exists()


async def test_a_session_records_into_a_rollout(start_proxy: Start) -> None:
    proxy = await start_proxy()
    session = proxy.open_session()
    async with _sdk(proxy, session.key) as sdk:
        await sdk.chat.completions.create(model="served-model", messages=[{"role": "user", "content": "one"}])
        with pytest.raises(openai.NotFoundError):  # refused, still recorded
            await sdk.chat.completions.create(model="nope", messages=HI)
    rollout = Rollout(example_id=3)
    session.record_into(rollout)
    assert [m.role for m in rollout.prompt] == ["user"] and rollout.response == "hello from the model"
    assert rollout.turns == 1 and rollout.usage == session.usage and rollout.model_calls[0].tokens is not None
    calls = rollout.model_calls
    assert [c.status for c in calls] == [200, 404] and "model_calls" not in rollout.state
    assert Rollout.model_validate_json(rollout.model_dump_json()).model_calls == calls
    # Results written when the calls were kept in state read back into the field.
    old = rollout.model_dump(mode="json")
    old["state"]["model_calls"] = old.pop("model_calls")
    again = Rollout.model_validate_json(json.dumps(old))
    assert again.model_calls == calls and "model_calls" not in again.state


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"untranslatable": "ignore"}, "must be 'error' or 'drop'"),
        ({"max_concurrency": 0}, "max_concurrency=0"),
        ({"model_aliases": "gpt-5"}, "takes a list of names"),
        ({"sampling": {"stream": True}}, "may not set 'stream'"),
    ],
)
def test_bad_settings_fail_at_construction(kwargs: dict[str, Any], says: str) -> None:
    with pytest.raises(ConfigError, match=says):
        CaptureProxy(Client("m", base_url="http://127.0.0.1:9"), **kwargs)
    with pytest.raises(ConfigError, match="max_turns=0"):
        ProxyBudgets(max_turns=0)


async def _post_unix(socket_path: str, key: str) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession(connector=aiohttp.UnixConnector(path=socket_path)) as http:
        async with http.post(
            "http://sandbox/v1/chat/completions",
            json={"model": "any", "messages": HI, "temperature": 0.9},
            headers={"Authorization": f"Bearer {key}"},
        ) as response:
            return response.status, await response.json()


async def test_one_proxy_per_run_one_listener_per_sandbox_one_session_per_rollout(
    scripted_endpoint: Callable[..., ScriptedEndpoint], tmp_path: Path
) -> None:
    """A run's proxy: each sandbox's socket is a listener of its own, each rollout's session is
    bound to its sandbox's listener, with its own upstream and sampling; closing a listener
    kills its sessions' keys and forgets them."""
    run_model = scripted_endpoint(lambda messages, tools: "from the run's model")
    other_model = scripted_endpoint(lambda messages, tools: "from the other model")
    run_client = Client("run-model", base_url=run_model.base_url)
    other_client = Client("other-model", base_url=other_model.base_url)
    proxy = await CaptureProxy(run_client, sampling={"temperature": 0.0}, model_aliases=["*"]).astart()
    try:
        a = await proxy.alisten_unix(tmp_path / "a.sock")
        b = await proxy.alisten_unix(tmp_path / "b.sock")
        mine = proxy.open_session("mine", socket_path=a)
        theirs = proxy.open_session(
            "theirs", socket_path=b, client=other_client, sampling={"temperature": 0.5}
        )
        status, body = await _post_unix(a, mine.key)
        assert status == 200 and body["choices"][0]["message"]["content"] == "from the run's model"
        assert mine.turns[0].params["temperature"] == 0.0  # the run's sampling, over the agent's
        status, body = await _post_unix(b, theirs.key)
        assert status == 200 and body["choices"][0]["message"]["content"] == "from the other model"
        assert theirs.turns[0].params["temperature"] == 0.5 and body["model"] == "any"
        # A key is no use on another sandbox's socket: refused there, never reaching the session.
        status, body = await _post_unix(b, mine.key)
        assert status == 401 and "proxy key" in body["error"]["message"] and len(mine.turns) == 1
        with pytest.raises(ConfigError, match="not a socket this CaptureProxy listens on"):
            proxy.open_session(socket_path=tmp_path / "c.sock")
        await proxy.aclose_unix(a)
        assert proxy.socket_paths == [b] and not Path(a).exists()
        assert mine.stop_reason == "closed" and "mine" not in proxy.sessions and len(mine.turns) == 1
        proxy.close_session(theirs)
        assert proxy.sessions == {} and (await _post_unix(b, theirs.key))[0] == 401
        await proxy.aclose_unix(a)  # twice: nothing left to close
    finally:
        await proxy.aclose()
        await run_client.aclose()
        await other_client.aclose()
    assert not Path(b).exists()
