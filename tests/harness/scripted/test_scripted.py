"""The scripted endpoint, exercised over loopback with the real `openai` client."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import openai
import pytest

from harness import ScriptedEndpoint
from harness.scripted._endpoint import ScriptedHTTPError

pytestmark = pytest.mark.timeout(30)
Endpoints = Callable[..., ScriptedEndpoint]  # the conftest fixture factory

USER = [{"role": "user", "content": "what is two plus two"}]
TOOLS = [
    {"type": "function", "function": {"name": "add", "parameters": {"type": "object", "properties": {}}}}
]


def sdk(endpoint: ScriptedEndpoint, timeout: float = 10.0) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=endpoint.base_url, api_key="test", max_retries=0, timeout=timeout)


async def chat(endpoint: ScriptedEndpoint, timeout: float = 10.0, **kwargs: Any) -> Any:
    async with sdk(endpoint, timeout) as client:
        kwargs.setdefault("messages", USER)
        return await client.chat.completions.create(model="my-model", **kwargs)


def raw_post(endpoint: ScriptedEndpoint, body: bytes) -> tuple[int, dict[str, str], dict[str, Any]]:
    """POST to the endpoint with urllib; header names come back lower-cased."""
    request = urllib.request.Request(
        endpoint.base_url + "/chat/completions",
        data=body,
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as reply:
            return reply.status, {k.lower(): v for k, v in reply.headers.items()}, json.load(reply)
    except urllib.error.HTTPError as err:
        with err:  # an HTTPError holds the open response
            return err.code, {k.lower(): v for k, v in err.headers.items()}, json.load(err)


async def test_text_answer_usage_and_model_echo(scripted_endpoint: Endpoints) -> None:
    endpoint = scripted_endpoint(lambda messages, tools: "four is the answer")
    reply = await chat(endpoint)
    assert reply.choices[0].message.content == "four is the answer"
    assert reply.choices[0].finish_reason == "stop"
    assert reply.model == "my-model"
    assert reply.id.startswith("chatcmpl-")
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens, reply.usage.total_tokens) == (5, 4, 9)
    stats = endpoint.stats
    assert stats.requests == 1 and stats.responses == {200: 1}
    assert (stats.prompt_tokens, stats.completion_tokens) == (5, 4)


async def test_tool_calls_get_ids_json_arguments_and_finish_reason(scripted_endpoint: Endpoints) -> None:
    seen: list[Any] = []

    def policy(messages: list[dict], tools: list[dict] | None) -> Any:
        seen.append(tools)
        return {
            "content": None,
            "tool_calls": [
                {"function": {"name": "add", "arguments": {"a": 2, "b": 2}}},
                {"id": "mine", "name": "add", "arguments": '{"a": 1}'},
            ],
        }

    endpoint = scripted_endpoint(policy)
    reply = await chat(endpoint, tools=TOOLS)
    calls = reply.choices[0].message.tool_calls
    assert reply.choices[0].finish_reason == "tool_calls"
    assert [c.function.name for c in calls] == ["add", "add"]
    assert json.loads(calls[0].function.arguments) == {"a": 2, "b": 2}
    assert calls[1].id == "mine" and calls[0].id
    assert seen == [TOOLS]


async def test_models_listing(scripted_endpoint: Endpoints) -> None:
    endpoint = scripted_endpoint(lambda m, t: "x", model="scripted-oracle")
    async with sdk(endpoint) as client:
        models = await client.models.list()
    assert [m.id for m in models.data] == ["scripted-oracle"]


async def test_n_calls_policy_n_times_and_async_policies_work(scripted_endpoint: Endpoints) -> None:
    counter = iter(range(100))

    async def policy(messages: list[dict], tools: list[dict] | None) -> Any:
        await asyncio.sleep(0)
        return f"answer {next(counter)}"

    endpoint = scripted_endpoint(policy)
    reply = await chat(endpoint, n=3)
    assert [c.message.content for c in reply.choices] == ["answer 0", "answer 1", "answer 2"]
    assert [c.index for c in reply.choices] == [0, 1, 2]


async def test_three_parameter_policy_sees_request_body(scripted_endpoint: Endpoints) -> None:
    def policy(messages: list[dict], tools: list[dict] | None, body: dict) -> str:
        return json.dumps(body["response_format"])

    endpoint = scripted_endpoint(policy)
    reply = await chat(endpoint, response_format={"type": "json_object"})
    assert json.loads(reply.choices[0].message.content) == {"type": "json_object"}


async def test_finish_reason_length_from_policy_and_from_max_tokens(scripted_endpoint: Endpoints) -> None:
    endpoint = scripted_endpoint(lambda m, t: {"content": "cut", "finish_reason": "length"})
    assert (await chat(endpoint)).choices[0].finish_reason == "length"
    endpoint = scripted_endpoint(lambda m, t: "one two three four five")
    reply = await chat(endpoint, max_tokens=2)
    assert reply.choices[0].message.content == "one two"
    assert reply.choices[0].finish_reason == "length"
    assert reply.usage.completion_tokens == 2


async def test_policy_errors_become_http_errors(scripted_endpoint: Endpoints) -> None:
    def policy(messages: list[dict], tools: list[dict] | None) -> Any:
        if "boom" in messages[-1]["content"]:
            raise RuntimeError("policy exploded")
        raise ScriptedHTTPError(422, "cannot do that")

    endpoint = scripted_endpoint(policy)
    with pytest.raises(openai.InternalServerError, match="policy exploded"):
        await chat(endpoint, messages=[{"role": "user", "content": "boom"}])
    with pytest.raises(openai.UnprocessableEntityError, match="cannot do that"):
        await chat(endpoint)
    assert endpoint.stats.responses == {500: 1, 422: 1}


async def test_bad_policy_return_value_is_a_500_naming_the_fix(scripted_endpoint: Endpoints) -> None:
    endpoint = scripted_endpoint(lambda m, t: 42)
    with pytest.raises(openai.InternalServerError, match="return a str or an assistant message dict"):
        await chat(endpoint)


def test_bad_requests_and_unknown_routes(scripted_endpoint: Endpoints) -> None:
    endpoint = scripted_endpoint(lambda m, t: "x")
    status, _, body = raw_post(endpoint, b"{not json")
    assert status == 400 and "not valid JSON" in body["error"]["message"]
    status, _, body = raw_post(endpoint, b'{"model": "m"}')
    assert status == 400 and "'messages' is required" in body["error"]["message"]
    with pytest.raises(urllib.error.HTTPError) as info:
        urllib.request.urlopen(endpoint.url + "/v2/nothing", timeout=10)
    with info.value:
        assert info.value.code == 404


def test_record_keeps_request_bodies(scripted_endpoint: Endpoints) -> None:
    endpoint = scripted_endpoint(lambda m, t: "x", record=True)
    raw_post(endpoint, json.dumps({"model": "m", "messages": USER, "temperature": 0.3}).encode())
    assert endpoint.stats.bodies == [{"model": "m", "messages": USER, "temperature": 0.3}]


def test_429_carries_retry_after(scripted_endpoint: Endpoints) -> None:
    endpoint = scripted_endpoint(lambda m, t: "x", rate_429=1.0, retry_after=2.5)
    status, headers, body = raw_post(endpoint, json.dumps({"messages": USER}).encode())
    assert status == 429
    assert headers["retry-after"] == "2.5"
    assert body["error"]["type"] == "rate_limit_error"


async def test_rate_500_and_fail_first_script(scripted_endpoint: Endpoints) -> None:
    endpoint = scripted_endpoint(lambda m, t: "ok", fail_first=[503, 429])
    for error in (openai.InternalServerError, openai.RateLimitError):
        with pytest.raises(error):
            await chat(endpoint)
    assert (await chat(endpoint)).choices[0].message.content == "ok"
    endpoint = scripted_endpoint(lambda m, t: "ok", rate_500=1.0)
    with pytest.raises(openai.InternalServerError, match="scripted failure"):
        await chat(endpoint)


async def test_faults_are_reproducible_for_a_seed(scripted_endpoint: Endpoints) -> None:
    async def outcomes(seed: int) -> list[int]:
        endpoint = scripted_endpoint(lambda m, t: "ok", rate_500=0.5, seed=seed)
        result = []
        async with sdk(endpoint) as client:
            for _ in range(12):
                try:
                    await client.chat.completions.create(model="m", messages=USER)
                    result.append(200)
                except openai.InternalServerError:
                    result.append(500)
        return result

    first = await outcomes(7)
    assert first == await outcomes(7)
    assert 200 in first and 500 in first


async def test_drop_closes_the_connection_without_answer(scripted_endpoint: Endpoints) -> None:
    endpoint = scripted_endpoint(lambda m, t: "x", rate_drop=1.0)
    with pytest.raises(openai.APIConnectionError):
        await chat(endpoint)
    stats = endpoint.stats
    assert stats.dropped == 1 and stats.responses == {}


async def test_hang_outlasts_the_client_timeout_and_frees_the_server(scripted_endpoint: Endpoints) -> None:
    endpoint = scripted_endpoint(lambda m, t: "x", rate_hang=1.0, hang_seconds=20)
    started = time.perf_counter()
    with pytest.raises(openai.APITimeoutError):
        await chat(endpoint, timeout=0.3)
    assert time.perf_counter() - started < 5
    for _ in range(50):  # the server notices the client left and ends the hang early
        if endpoint.stats.in_flight == 0:
            break
        await asyncio.sleep(0.05)
    stats = endpoint.stats
    assert stats.hung == 1 and stats.in_flight == 0 and stats.dropped == 1


def test_stop_ends_a_hung_request_at_once() -> None:
    endpoint = ScriptedEndpoint(lambda m, t: "x", rate_hang=1.0, hang_seconds=60).start()
    outcome: list[Any] = []

    def post() -> None:
        try:
            outcome.append(raw_post(endpoint, json.dumps({"messages": USER}).encode()))
        except Exception as exc:  # the connection is closed under it
            outcome.append(exc)

    caller = threading.Thread(target=post, daemon=True)
    caller.start()
    for _ in range(100):
        if endpoint.stats.hung:
            break
        time.sleep(0.02)
    started = time.perf_counter()
    endpoint.stop()
    caller.join(10)
    assert time.perf_counter() - started < 3
    assert outcome and isinstance(outcome[0], Exception) and not endpoint.running


def test_a_port_in_use_is_an_error_naming_it() -> None:
    with ScriptedEndpoint(lambda m, t: "x") as first:
        with pytest.raises(OSError, match=f"cannot listen on 127.0.0.1:{first.port}"):
            ScriptedEndpoint(lambda m, t: "x", port=first.port).start()


async def test_malformed_tool_json_arrives_unparseable(scripted_endpoint: Endpoints) -> None:
    policy = lambda m, t: {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]}  # noqa: E731
    endpoint = scripted_endpoint(policy, rate_malformed_tool_json=1.0)
    reply = await chat(endpoint, tools=TOOLS)
    arguments = reply.choices[0].message.tool_calls[0].function.arguments
    with pytest.raises(json.JSONDecodeError):
        json.loads(arguments)
    assert endpoint.stats.malformed == 1


async def test_latency_is_non_blocking_and_in_flight_is_counted(scripted_endpoint: Endpoints) -> None:
    endpoint = scripted_endpoint(lambda m, t: "x", latency=0.3)
    started = time.perf_counter()
    async with sdk(endpoint) as client:
        await asyncio.gather(*[client.chat.completions.create(model="m", messages=USER) for _ in range(10)])
    elapsed = time.perf_counter() - started
    assert 0.3 <= elapsed < 2.0
    stats = endpoint.stats
    assert stats.max_in_flight == 10 and stats.in_flight == 0 and stats.responses == {200: 10}


@pytest.mark.parametrize(
    "knobs, fragment",
    [
        ({"rate_429": 1.5}, "rate_429"),
        ({"rate_500": 0.6, "rate_429": 0.6}, "> 1"),
        ({"latency": -1}, "latency"),
        ({"fail_first": ["boom"]}, "fail_first item"),
        ({"fail_first": [200]}, "fail_first item"),
        ({"port": 70000}, "port"),
    ],
)
def test_bad_knobs_fail_at_construction(knobs: dict[str, Any], fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        ScriptedEndpoint(lambda m, t: "x", **knobs)


def test_policy_must_be_callable() -> None:
    with pytest.raises(TypeError, match="policy must be callable"):
        ScriptedEndpoint("not a policy")  # type: ignore[arg-type]


def test_base_url_before_start_explains_what_to_do() -> None:
    endpoint = ScriptedEndpoint(lambda m, t: "x")
    with pytest.raises(RuntimeError, match="call start"):
        _ = endpoint.base_url


def test_reset_stats_restarts_counters_and_script(scripted_endpoint: Endpoints) -> None:
    endpoint = scripted_endpoint(lambda m, t: "x", fail_first=[500])
    assert raw_post(endpoint, json.dumps({"messages": USER}).encode())[0] == 500
    endpoint.reset_stats()
    assert endpoint.stats.requests == 0
    assert raw_post(endpoint, json.dumps({"messages": USER}).encode())[0] == 500


async def test_process_mode_serves_and_reports_stats(scripted_endpoint: Endpoints) -> None:
    calls = []  # the child process has its own copy; the parent's stays empty

    def policy(messages: list[dict], tools: list[dict] | None) -> Any:
        calls.append(1)
        return "from the child"

    endpoint = scripted_endpoint(policy, process=True, fail_first=[500])
    with pytest.raises(openai.InternalServerError):
        await chat(endpoint)
    assert (await chat(endpoint)).choices[0].message.content == "from the child"
    stats = endpoint.stats
    assert stats.requests == 2 and stats.responses == {500: 1, 200: 1}
    assert calls == []
    endpoint.reset_stats()
    assert endpoint.stats.requests == 0


def test_serve_forever_until_stop() -> None:
    endpoint = ScriptedEndpoint(lambda m, t: "served")
    ready = threading.Event()
    urls: list[str] = []

    def on_ready(url: str) -> None:
        urls.append(url)
        ready.set()

    thread = threading.Thread(target=endpoint.serve_forever, args=(on_ready,), daemon=True)
    thread.start()
    assert ready.wait(10)
    assert urls[0] == endpoint.base_url
    status, _, body = raw_post(endpoint, json.dumps({"messages": USER}).encode())
    assert status == 200 and body["choices"][0]["message"]["content"] == "served"
    endpoint.stop()
    thread.join(10)
    assert not thread.is_alive() and not endpoint.running


def test_context_manager_stops_and_can_restart() -> None:
    endpoint = ScriptedEndpoint(lambda m, t: "x")
    with endpoint as running:
        assert running.running
        url = running.base_url
    assert not endpoint.running
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(url.rsplit("/v1", 1)[0] + "/v1/models", timeout=2)
    with endpoint:
        assert raw_post(endpoint, json.dumps({"messages": USER}).encode())[0] == 200
