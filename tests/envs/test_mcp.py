"""Tools from real MCP servers (tests/envs/mcp_tools_server.py, the official SDK's server API)
over stdio and streamable HTTP on 127.0.0.1, through `envs.mcp_server` and the real rollout loop."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp.client import Client as SDKClient
from mcp.client.stdio import StdioServerParameters, stdio_client

from envs import ToolEnv, mcp_server
from envs._tools.functions import OUTPUT_LIMIT
from envs._tools.mcp import MCPStartError, MCPTool
from harness import ConfigError, run_sync
from tests.helpers.endpoints import free_port, serve
from tests.helpers.processes import processes_with, run

pytestmark = [pytest.mark.timeout(120), pytest.mark.interop, pytest.mark.slow]
SERVER = Path(__file__).with_name("mcp_tools_server.py")
COMMAND = [sys.executable, str(SERVER)]
BAD_SERVER = Path(__file__).with_name("mcp_bad_server.py")


def _tools(**options: Any) -> dict[str, MCPTool]:
    return {t.name: t for t in mcp_server(COMMAND, **options).tools()}


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().rsplit(")", 1)[1].split()[0] == "Z")


def _wait_gone(pids: list[int], seconds: float = 10.0) -> list[int]:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        alive = [p for p in pids if _alive(p)]
        if not alive:
            return []
        time.sleep(0.1)
    return [p for p in pids if _alive(p)]


def test_the_model_sees_exactly_what_the_server_lists() -> None:
    async def official() -> list[Any]:
        params = StdioServerParameters(command=COMMAND[0], args=COMMAND[1:])
        async with SDKClient(stdio_client(params)) as client:
            return list((await client.list_tools()).tools)

    listed = run_sync(official())
    tools = _tools()
    assert list(tools) == [t.name for t in listed]
    for item in listed:
        function = tools[item.name].schema["function"]
        assert function["description"] == item.description
        assert function["parameters"] == {"type": "object", "properties": {}, **item.input_schema}


async def test_calls_results_and_errors_come_back_as_tool_results(tmp_path: Path) -> None:
    tools = _tools()
    server = tools["add"].server
    try:
        assert (await tools["add"].call('{"a": 2, "b": 3}')).content == "5"
        # Checked against the declared schema before anything reaches the server.
        bad = await tools["add"].call('{"a": "two", "b": 3}')
        assert bad.error and "a: 'two' is not of type 'integer'" in bad.content and "not run" in bad.content
        assert (await tools["count"].call("{}")).content == "1"  # the bad call never ran
        failed = await tools["fail"].call({"reason": "disk full"})
        # The server's own words (mcp 2.0 includes the exception text, later 2.x only the tool's name).
        assert failed.error and failed.content.startswith("Error:") and "fail" in failed.content
        picture = await tools["picture"].call("")
        assert picture.error is None and picture.content.splitlines()[0] == "a red dot"
        assert "[image: image/png" in picture.content and "the notes" in picture.content
        kinds = [part["type"] for part in picture.parts or []]
        assert kinds == ["text", "image", "resource"] and picture.parts[1]["mimeType"] == "image/png"  # type: ignore[index]
    finally:
        await server.release()


async def test_a_crash_a_hang_and_a_malformed_result_stay_inside_the_call() -> None:
    tools = _tools(timeout=1.0)
    server = tools["add"].server
    try:
        assert (await tools["count"].call("{}")).content == "1"
        crashed = await tools["crash"].call("{}")
        assert crashed.error and "MCP server failed" in crashed.error
        # The next call gets a fresh server (its counter starts again).
        assert (await tools["count"].call("{}")).content == "1"
        started = time.monotonic()
        hung = await tools["sleep"].call({"seconds": 30})
        assert hung.error == "timed out after 1 s" and time.monotonic() - started < 5
        garbled = await tools["garble"].call("{}")
        assert garbled.error and "ValidationError" in garbled.error and "content" in garbled.error
        assert (await tools["add"].call({"a": 1, "b": 1})).content == "2"  # still serving
        assert (await tools["count"].call("{}")).content == "2"  # the same server as before
    finally:
        await server.release()


@pytest.mark.parametrize("detach", [False, True])  # True: the grandchild left the group (setsid)
async def test_a_crashed_server_leaves_no_process_behind(detach: bool) -> None:
    tools = _tools()
    server = tools["add"].server
    marker = f"rubric-test-grandchild-{uuid.uuid4().hex}"  # unique across parallel workers
    try:
        grandchild = int((await tools["spawn"].call({"marker": marker, "detach": detach})).content)
        assert processes_with(marker) == [grandchild]
        assert (await tools["crash"].call({})).error
        deadline = time.monotonic() + 10
        while processes_with(marker) and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
        assert processes_with(marker) == []
    finally:
        await server.release()
        for pid in processes_with(marker):  # old code: do not leave it behind after the failure
            os.kill(pid, signal.SIGKILL)


async def test_a_huge_result_is_cut_like_the_python_sandboxs_output() -> None:
    tools = _tools()
    server = tools["add"].server
    try:
        result = await tools["big"].call({"size": 5_000_000})
        assert result.error is None and result.parts is None
        body, note = result.content.rsplit("\n", 1)
        assert note == f"[output truncated: showing the first {OUTPUT_LIMIT} of 5000000 bytes]"
        assert set(body) <= {"x", "\n"} and OUTPUT_LIMIT - 99 <= len(body) <= OUTPUT_LIMIT
        whole = (await tools["big"].call({"size": OUTPUT_LIMIT})).content
        assert len(whole) == OUTPUT_LIMIT and "truncated" not in whole  # at the limit: kept whole
        # A binary block over the cap is kept on the result as its summary alone.
        server.block_limit = 50
        picture = await tools["picture"].call({})
        assert [part["type"] for part in picture.parts or []] == ["text", "text", "resource"]
        assert (
            picture.parts
            and picture.parts[1]["text"] == "[image: image/png, 69 bytes] (not kept: over 50 bytes)"
        )
    finally:
        await server.release()
    small = {t.name: t for t in mcp_server(COMMAND, output_limit=100).tools()}
    try:
        assert (await small["big"].call({"size": 1000})).content.endswith(
            "showing the first 100 of 1000 bytes]"
        )
    finally:
        await small["big"].server.release()


def test_a_server_that_cannot_start_fails_at_once_naming_command_and_stderr() -> None:
    script = "import sys; sys.stderr.write('config.toml: no such file\\n'); sys.exit(2)"
    with pytest.raises(
        MCPStartError, match=r"did not start: .*its stderr ends: config\.toml: no such file"
    ) as caught:
        mcp_server([sys.executable, "-c", script]).tools()
    assert "-c" in str(caught.value) and isinstance(caught.value, ConfigError)
    with pytest.raises(MCPStartError, match=r"'/no/such/server' did not start"):
        mcp_server(["/no/such/server"], start_timeout=20).tools()


def test_a_server_that_never_answers_its_listing_fails_within_start_timeout() -> None:
    started = time.monotonic()
    with pytest.raises(MCPStartError, match=r"tool listing did not finish within start_timeout=8s"):
        mcp_server([sys.executable, str(BAD_SERVER), "silent-listing"], start_timeout=8).tools()
    assert time.monotonic() - started < 25  # the deadline, and closing the server


@pytest.mark.parametrize(
    ("mode", "error"),
    [
        ("endless-listing", r"lists tools on more than 100 pages; fix the server's tool listing"),
        ("same-cursor", r"repeats the tool listing cursor 'the-same-cursor'"),
        ("crowded-listing", r"lists more than 1000 tools"),
    ],
)
def test_a_tool_listing_that_never_ends_is_an_error(mode: str, error: str) -> None:
    with pytest.raises(MCPStartError, match=error):
        mcp_server([sys.executable, str(BAD_SERVER), mode], start_timeout=60).tools()


@pytest.mark.parametrize("bad", [{}, {"command": ["x"], "url": "http://127.0.0.1:1/mcp"}, {"url": "ftp://x"}])
def test_bad_server_settings_are_named(bad: dict[str, Any]) -> None:
    with pytest.raises(ConfigError, match="mcp_server"):
        mcp_server(**bad)


def _counting_policy(messages: list[dict[str, Any]], tools: Any) -> Any:
    """Call count twice, then answer with the last count."""
    seen = [m for m in messages if m["role"] == "tool"]
    if len(seen) < 2:
        return {"tool_calls": [{"function": {"name": "count", "arguments": {}}}]}
    return seen[-1]["content"]


@pytest.mark.parametrize("per_rollout", [True, False])
async def test_per_rollout_servers_keep_rollouts_apart(per_rollout: bool, tmp_path: Path) -> None:
    pid_dir = tmp_path / "pids"
    pid_dir.mkdir()
    server = mcp_server(COMMAND, per_rollout=per_rollout, env={"MCP_PID_DIR": str(pid_dir)})
    env = ToolEnv(
        [{"question": f"count {i}", "answer": "2"} for i in range(4)],
        lambda response, answer: float(response == answer),
        tools=[server],
        max_turns=4,
    )
    listing_pids = [int(p.name) for p in pid_dir.iterdir()]
    async with serve(_counting_policy) as (_, client):
        results = await env.aevaluate(client, concurrency=2, progress=False)
    answers = sorted(r.response for r in results)
    pids = [int(p.name) for p in pid_dir.iterdir() if int(p.name) not in listing_pids]
    if per_rollout:  # each rollout had a server of its own: every count restarts
        assert answers == ["2"] * 4 and results.summary.mean_reward == 1.0 and len(pids) == 4
    else:  # one server for the run: the counts go on across rollouts
        counts = sorted(int(a) for a in answers)  # interleaved rollouts: distinct, the last is 8
        assert len(set(counts)) == 4 and counts[-1] == 8 and len(pids) == 1
    assert _wait_gone(pids) == []  # stopped when each rollout / the run ended


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[str]:
    port = free_port()
    with (tmp_path / "err").open("wb") as err:
        proc = subprocess.Popen([*COMMAND, "--port", str(port)], stderr=err)
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 60
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError((tmp_path / "err").read_text()) from None
            time.sleep(0.1)
    yield url
    proc.terminate()
    proc.wait(20)


async def test_a_streamable_http_server(http_server: str) -> None:
    tools = {t.name: t for t in mcp_server(url=http_server).tools()}
    assert {"add", "count", "picture"} <= set(tools)
    server = tools["add"].server
    try:
        assert (await tools["add"].call({"a": 20, "b": 22})).content == "42"
        assert (await tools["count"].call({})).content == "1"
        assert (await tools["count"].call({})).content == "2"
    finally:
        await server.release()
    with pytest.raises(MCPStartError, match="check the URL"):
        mcp_server(url=f"http://127.0.0.1:{free_port()}/mcp", start_timeout=10).tools()


ENV_FILE = """
import sys
from envs import ToolEnv, mcp_server


def add_policy(messages, tools):
    if messages[-1]["role"] == "tool":
        return messages[-1]["content"]
    a, b = (int(x) for x in messages[-1]["content"].removeprefix("What is ").rstrip("?").split("+"))
    return {{"tool_calls": [{{"function": {{"name": "add", "arguments": {{"a": a, "b": b}}}}}}]}}


def slow_policy(messages, tools):
    return {{"tool_calls": [{{"function": {{"name": "sleep", "arguments": {{"seconds": 50}}}}}}]}}


def load_environment(n: int = 6) -> ToolEnv:
    rows = [{{"question": f"What is {{i}}+{{i + 1}}?", "answer": str(2 * i + 1)}} for i in range(n)]
    env = ToolEnv(
        rows,
        lambda response, answer: float(response == answer),
        tools=[mcp_server([sys.executable, {server!r}], env={{"MCP_PID_DIR": {pids!r}}})],
        max_turns=3,
        name="mcp-add",
    )
    env.scripted_policies = {{"add": add_policy, "slow": slow_policy}}
    return env
"""


def _env_file(tmp_path: Path) -> Path:
    pids = tmp_path / "pids"
    pids.mkdir()
    path = tmp_path / "mcp_env.py"
    path.write_text(ENV_FILE.format(server=str(SERVER), pids=str(pids)))
    return path


HANGING_ENV = """
from envs import ToolEnv, mcp_server


def load_environment() -> ToolEnv:
    server = mcp_server(url="http://127.0.0.1:{port}/mcp", start_timeout=2)
    return ToolEnv([{{"question": "q", "answer": "a"}}], lambda response: 1.0, tools=[server])
"""


def test_a_hanging_mcp_url_fails_with_one_clear_error_and_nothing_after(tmp_path: Path) -> None:
    with socket.socket() as hanging:  # accepts connections, never answers
        hanging.bind(("127.0.0.1", 0))
        hanging.listen(16)
        (tmp_path / "hanging_env.py").write_text(HANGING_ENV.format(port=hanging.getsockname()[1]))
        proc = run("eval", "hanging_env.py", "-m", "scripted:x", "--no-progress", cwd=tmp_path, timeout=60)
    assert proc.returncode != 0
    assert "did not start: no answer within 2s; check the URL" in proc.stderr
    assert "never retrieved" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_rubric_eval_of_an_mcp_environment_end_to_end(tmp_path: Path) -> None:
    _env_file(tmp_path)
    proc = run(
        "eval", "mcp_env.py", "-m", "scripted:add", "-o", "out", "--no-progress", cwd=tmp_path, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and all(r["reward"] == 1.0 for r in rows)
    assert all(any(m["role"] == "tool" for m in r["completion"]) for r in rows)
    metadata = json.loads((tmp_path / "out" / "metadata.json").read_text())
    assert metadata["env"]["mcp_servers"][0]["command"][1] == str(SERVER)
    pids = [int(p.name) for p in (tmp_path / "pids").iterdir()]
    assert pids and _wait_gone(pids) == []


def test_a_sigkilled_rubric_eval_leaves_no_server_behind(tmp_path: Path) -> None:
    from tests.helpers.processes import RUBRIC

    _env_file(tmp_path)
    endpoint_pids: list[int] = []
    with subprocess.Popen(
        [str(RUBRIC), "eval", "mcp_env.py", "-m", "scripted:slow", "--no-progress"],  # a tool call of 50 s
        cwd=tmp_path,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    ) as proc:
        deadline = time.monotonic() + 90
        while len(list((tmp_path / "pids").iterdir())) < 2:  # the listing's server, then the run's
            assert proc.poll() is None and time.monotonic() < deadline, "the run never started its server"
            time.sleep(0.1)
        endpoint_pids = [int(p.name) for p in (tmp_path / "pids").iterdir()]
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    assert _wait_gone(endpoint_pids, seconds=15) == []


async def test_trl_environment_methods_take_the_servers_parameters() -> None:
    import inspect

    from envs._training.trl import environment_class

    env = ToolEnv(
        [{"question": "What is 2+3?", "answer": "5"}], lambda response: 1.0, tools=[mcp_server(COMMAND)]
    )
    cls = environment_class(env)
    signature = inspect.signature(cls.add)
    assert list(signature.parameters) == ["self", "a", "b"]
    assert signature.parameters["a"].annotation is int and inspect.iscoroutinefunction(cls.add)
    assert "Add two integers." in (cls.add.__doc__ or "")
    episode = cls()
    await asyncio.to_thread(episode.reset, **env.get_dataset()[0])
    assert await episode.add(a=2, b=3) == "5"
    assert episode.rollout.completion[-1].content == "5"
    await env.release()


PLAIN_ENV = """
from envs import Environment
from tests_env_policies import add_policy


def load_environment(n: int = 6) -> Environment:
    rows = [{"question": f"What is {i}+{i + 1}?", "answer": str(2 * i + 1)} for i in range(n)]
    env = Environment(rows, lambda response, answer: float(response == answer), max_turns=3, name="plain-add")
    env.scripted_policies = {"add": add_policy}
    return env
"""


def test_rubric_eval_adds_a_server_from_the_command_line_in_every_worker(tmp_path: Path) -> None:
    _env_file(tmp_path)  # its add_policy, importable by the worker processes too
    (tmp_path / "tests_env_policies.py").write_text((tmp_path / "mcp_env.py").read_text())
    (tmp_path / "plain_env.py").write_text(PLAIN_ENV)
    server = f"{sys.executable} {SERVER}"
    proc = run(
        *(
            "eval",
            "plain_env.py",
            "-m",
            "scripted:add",
            "--mcp",
            server,
            "--workers",
            "2",
            "-c",
            "4",
            "-o",
            "out",
        ),
        "--no-progress",
        cwd=tmp_path,
        timeout=150,
        env={"PYTHONPATH": os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])},
    )
    assert proc.returncode == 0, proc.stderr
    rows = [json.loads(line) for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines()]
    assert len(rows) == 6 and all(r["reward"] == 1.0 for r in rows)
    metadata = json.loads((tmp_path / "out" / "metadata.json").read_text())
    assert metadata["env"]["load_kwargs"] == {"mcp_servers": [server]}
    assert "add" in metadata["env"]["tools"] and metadata["arguments"]["workers"] == 2


ADD_ENV = """
from envs import ToolEnv


def add(a: int, b: int) -> int:
    \"\"\"Add two integers (a Python tool).\"\"\"
    return a + b


def load_environment() -> ToolEnv:
    return ToolEnv([{"question": "What is 1+2?", "answer": "3"}], lambda response: 1.0, tools=[add])
"""


async def test_clashing_tool_names_say_how_to_prefix_from_python_and_the_command_line(tmp_path: Path) -> None:
    from envs import load_environment

    with pytest.raises(ConfigError, match=r"duplicate tool name.*envs\.mcp_server\(\.\.\., prefix=\.\.\.\)"):
        ToolEnv([{"question": "q"}], lambda response: 1.0, tools=[mcp_server(COMMAND), mcp_server(COMMAND)])
    env = ToolEnv(
        [{"question": "q"}],
        lambda response: 1.0,
        tools=[mcp_server(COMMAND), mcp_server(COMMAND, prefix="calc")],
    )
    assert {"add", "calc_add", "calc_count"} <= {t.name for t in env.tools}
    try:
        calc_add = next(t for t in env.tools if t.name == "calc_add")
        assert (await calc_add.call({"a": 2, "b": 40})).content == "42"  # the server's add
    finally:
        await env.release()
    # From the command line: the --mcp form of the fix, not envs.tool(name=...).
    (tmp_path / "add_env.py").write_text(ADD_ENV)
    server = f"{sys.executable} {SERVER}"
    proc = run(
        "eval", "add_env.py", "-m", "scripted:x", "--mcp", server, "--no-progress", cwd=tmp_path, timeout=60
    )
    assert proc.returncode != 0 and "envs.tool(name" not in proc.stderr
    fix = f"give them a prefix with --mcp 'mcp1={server}' (then add is mcp1_add"
    assert "duplicate tool name(s) 'add'" in proc.stderr and fix in " ".join(proc.stderr.split()), proc.stderr
    # ... which works, as mcp_servers= in Python too.
    prefixed = load_environment(str(tmp_path / "add_env.py"), mcp_servers=[f"mcp1={server}"])
    assert {"add", "mcp1_add"} <= {t.name for t in prefixed.tools}
    assert prefixed.config()["mcp_servers"][0]["prefix"] == "mcp1"


def _picture_then_answer(messages: list[dict[str, Any]], tools: Any) -> Any:
    if messages[-1]["role"] == "tool":
        return "a red dot"
    return {"tool_calls": [{"function": {"name": "picture", "arguments": {}}}]}


async def test_views_show_the_content_blocks_a_tool_returned() -> None:
    from rich.console import Console

    from harness._views.html import rollout_html
    from harness._views.terminal import render_rollout

    env = ToolEnv(
        [{"question": "Draw a dot.", "answer": "a red dot"}],
        lambda response, answer: float(response == answer),
        tools=[mcp_server(COMMAND)],
    )
    async with serve(_picture_then_answer) as (_, client):
        (rollout,) = await env.aevaluate(client, progress=False)
    (kept,) = rollout.state["tool_content"]
    assert [b["type"] for b in kept["content"]] == ["text", "image", "resource"] and kept["tool"] == "picture"
    page = rollout_html(rollout)
    assert '<img alt="image/png from the tool" src="data:image/png;base64,iVBORw0KGgo' in page
    assert "[resource: file:///notes.txt]\nthe notes" in page
    console = Console(record=True, width=120)
    console.print(render_rollout(rollout))
    text = console.export_text()
    assert "tool content · turn" in text and "[image: image/png, 69 bytes]" in text and "the notes" in text
