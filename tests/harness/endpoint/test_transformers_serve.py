"""The harness against a real OpenAI-compatible server we did not write: `transformers serve`.

One server (Hugging Face's FastAPI app, started as its users start it) serves three tiny Qwen2
models built here and saved to disk, each rigged to give one fixed reply (nothing is
downloaded): a Qwen-style `<tool_call>` for `add(2, 3)`, a plain answer, and a judge's
"Score: 8". The server loads a model by the path a request names, so every model name here
is a path, as with a local checkpoint. Everything goes through our real client and rollout
loop; what is asserted is what the server itself parsed and reported.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from envs import MultiTurnEnv, SingleTurnEnv, ToolEnv
from harness import Client, ConfigError, EndpointError, Rollout, doctor, load_results
from rubrics import LLMJudge, WeightedSum
from tests.helpers.endpoints import free_port
from tests.helpers.training import tiny_chat_model

pytestmark = [pytest.mark.timeout(300), pytest.mark.serve, pytest.mark.trl, pytest.mark.slow]

TOOL_REPLY = '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
PLAIN_REPLY = "The answer is 5."
JUDGE_REPLY = "Helpful.\nScore: 8"

TOOL_ENV = '''
from envs import ToolEnv
from rubrics import WeightedSum


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


def got_five(completion) -> float:
    return float(any(m.role == "tool" and m.content == "5" for m in completion))


def load_environment(n: int = 4) -> ToolEnv:
    rows = [{"question": f"What is 2 + 3? ({i})", "answer": "5"} for i in range(n)]
    return ToolEnv(rows, WeightedSum({"got_five": got_five}), tools=[add], max_turns=2, name="add")
'''


class Served:
    """The running server and the paths of the models it can load."""

    def __init__(self, base_url: str, models: dict[str, str]) -> None:
        self.base_url = base_url
        self.models = models

    def client(self, which: str, **options: Any) -> Client:
        return Client(self.models[which], base_url=self.base_url, api_key="local", max_retries=1, **options)


def _save_models(folder: Path) -> dict[str, str]:
    models = {}
    for which, reply in (("tool", TOOL_REPLY), ("plain", PLAIN_REPLY), ("judge", JUDGE_REPLY)):
        model, tokenizer = tiny_chat_model(reply)
        path = folder / which
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
        models[which] = str(path)
    return models


def _wait_until_up(url: str, process: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 180
    while True:
        try:
            with urllib.request.urlopen(url + "/health", timeout=2):
                return
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"transformers serve did not start:\n{log.read_text()[-3000:]}") from None
            time.sleep(0.2)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    folder = tmp_path_factory.mktemp("transformers-serve")
    models = _save_models(folder)
    port = free_port()
    log = folder / "serve.log"
    cli = shutil.which("transformers", path=os.path.dirname(sys.executable))
    assert cli, (
        "the transformers console script is missing (transformers>=5 with FastAPI: see pyproject's test extra)"
    )
    command = [cli, "serve", "--host", "127.0.0.1", "--port", str(port), "--device", "cpu"]
    with log.open("wb") as out:
        # Offline: a model name that is not a local path must fail at once, never reach the Hub.
        offline = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=offline)
    try:
        _wait_until_up(f"http://127.0.0.1:{port}", process, log)
        yield Served(f"http://127.0.0.1:{port}/v1", models)
    finally:
        process.terminate()
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=20)


def _rubric_eval(tmp_path: Path, served: Served, *args: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "add_env.py").write_text(TOOL_ENV)
    rubric = shutil.which("rubric", path=os.path.dirname(sys.executable))
    assert rubric
    return subprocess.run(
        [rubric, "eval", "add_env.py", "--base-url", served.base_url, "--no-progress", *args],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "OPENAI_API_KEY": "local", "COLUMNS": "200"},
    )


def test_single_turn_chat_finishes_as_the_server_reports(served: Served) -> None:
    env = SingleTurnEnv([{"question": "What is 2 + 3?", "answer": "5"}] * 2, lambda response: 1.0)
    results = env.evaluate(served.client("plain"), num_examples=2)
    assert [r.response for r in results] == [PLAIN_REPLY] * 2
    assert {r.stop_reason for r in results} == {"completed"} and results.summary.num_errors == 0
    assert all(r.usage.prompt_tokens > 0 and r.usage.completion_tokens == 2 for r in results)
    # Cut off by max_tokens, the server says "length", and so does the rollout.
    cut = env.evaluate(served.client("plain"), num_examples=1, sampling={"max_tokens": 1})
    assert cut[0].stop_reason == "length" and cut[0].response == PLAIN_REPLY


class TwoRounds(MultiTurnEnv):
    def env_response(self, rollout: Rollout) -> str | None:
        return "Are you sure?" if rollout.turns < 2 else None


def test_multi_turn_conversation_goes_back_and_forth(served: Served) -> None:
    env = TwoRounds([{"question": "What is 2 + 3?", "answer": "5"}], lambda response: 1.0)
    rollout = env.evaluate(served.client("plain"), num_examples=1)[0]
    assert [(m.role, m.content) for m in rollout.completion] == [
        ("assistant", PLAIN_REPLY),
        ("user", "Are you sure?"),
        ("assistant", PLAIN_REPLY),
    ]
    assert rollout.turns == 2 and rollout.stop_reason == "completed" and rollout.reward == 1.0


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first.
        b: The second.
    """
    return a + b


def test_the_servers_parsed_tool_calls_reach_our_tools(served: Served) -> None:
    def got_five(completion: list[Any]) -> float:
        return float(any(m.role == "tool" and m.content == "5" for m in completion))

    env = ToolEnv([{"question": "What is 2 + 3?", "answer": "5"}], got_five, tools=[add], max_turns=3)
    rollout = env.evaluate(served.client("tool"), num_examples=1)[0]
    assert rollout.error is None and rollout.reward == 1.0
    assert rollout.turns == 3 and rollout.stop_reason == "max_turns"  # the model never stops calling
    calls = [m for m in rollout.completion if m.role == "assistant"]
    results = [m for m in rollout.completion if m.role == "tool"]
    assert len(calls) == len(results) == 3
    for call, result in zip(calls, results):
        (tool_call,) = call.tool_calls or []
        assert tool_call.name == "add" and json.loads(tool_call.arguments) == {"a": 2, "b": 3}
        # The server's own id (not one we made up) links the result to its call.
        assert tool_call.id.endswith("_tool_call_0") and result.tool_call_id == tool_call.id
        assert result.content == "5"


def test_a_judge_served_this_way_scores_rollouts(served: Served) -> None:
    judge = LLMJudge(
        "Rate the answer from 0 to 10.\n<response>{{ response }}</response>\nEnd with 'Score: N'.",
        model=served.models["judge"],
        base_url=served.base_url,
        api_key="local",
        parse="number",
        score_range=(0, 10),
        cache=False,
    )
    rubric = WeightedSum({"helpful": judge})
    scored = rubric.score_batch([{"completion": "5", "answer": "5"}, {"completion": "4", "answer": "5"}])
    assert list(scored) == [0.8, 0.8]
    assert all(r.scores["helpful"] == 0.8 and r.judge_usage.prompt_tokens > 0 for r in scored.rollouts)


def test_a_sampling_key_the_server_rejects_stops_the_run_with_its_own_words(
    served: Served, tmp_path: Path
) -> None:
    proc = _rubric_eval(tmp_path, served, "-m", served.models["tool"], "-a", '{"n": 8}', "-S", '{"top_k": 3}')
    assert proc.returncode != 0, proc.stdout
    line = proc.stderr.strip().splitlines()[-1]
    assert "stopped early" in line and "HTTP 422" in line and "top_k" in line, proc.stderr
    assert "remove the sampling keys it does not support" in line


def test_a_model_the_server_does_not_have_is_named_in_the_error(served: Served) -> None:
    env = SingleTurnEnv([{"question": "What is 2 + 3?", "answer": "5"}], lambda response: 1.0)
    client = Client("no/such-model", base_url=served.base_url, api_key="local", max_retries=1, timeout=60)
    rollout = env.evaluate(client, num_examples=1)[0]
    assert rollout.stop_reason == "error" and "no/such-model" in (rollout.error or "")
    # The server's own answer (it cannot load the model and says 500), not a hang or a crash.
    assert "HTTP 500" in (rollout.error or "")


def test_n_above_one_is_refused_before_any_request(served: Served) -> None:
    # `transformers serve` ignores n and answers with one choice: a silent wrong result that the
    # harness never asks for (one rollout is one completion; -r gives several).
    env = SingleTurnEnv([{"question": "What is 2 + 3?", "answer": "5"}], lambda response: 1.0)
    with pytest.raises(ConfigError, match="'n'.*rollouts_per_example|-r"):
        env.evaluate(served.client("plain", sampling={"n": 2}), num_examples=1)


def test_rubric_eval_with_two_workers_against_the_server(served: Served, tmp_path: Path) -> None:
    proc = _rubric_eval(
        tmp_path, served, "-m", served.models["tool"], "-a", '{"n": 4}', "--workers", "2", "-o", "run"
    )
    assert proc.returncode == 0, proc.stderr
    results = load_results(tmp_path / "run")
    assert len(results) == 4 and results.summary.num_errors == 0
    assert all(r.reward == 1.0 and r.stop_reason == "max_turns" for r in results)
    assert {m.tool_call_id for r in results for m in r.completion if m.role == "tool"} != {None}


def test_doctor_says_what_transformers_serve_lacks_for_training(served: Served) -> None:
    """`rubric doctor` against a server we did not write: chat and parsed tool calls work; what
    it does not serve for training is named, with the fix (docs/guides/training.md lists it)."""
    report = doctor(served.base_url, served.models["tool"], api_key="local", max_concurrency=4)
    statuses = {c.name: c.status for c in report.checks}
    assert statuses["chat completions"] == "pass", report.checks
    assert statuses["tool calls"] == "pass", report.check("tool calls")
    assert statuses["token ids"] == "fail" and "return_token_ids" in report.check("token ids").fix
    assert not report.ok


AGENT_ENV = """
from envs import Environment
from envs.agents import file_contains

def load_environment():
    return Environment([{"prompt": "Write hi into hello.txt."}], file_contains("hello.txt", "hi"), name="file-task")
"""


@pytest.mark.bwrap
def test_an_agent_run_probes_for_token_ids_and_goes_on_without_them(served: Served, tmp_path: Path) -> None:
    # `transformers serve` refuses `return_token_ids` (HTTP 422): asked directly it fails; the
    # run's probe hears the no, so the agent's calls go through without ids instead of failing.
    async def ask_for_ids() -> None:
        async with served.client("plain", return_token_ids=True) as asked:
            await asked.complete([{"role": "user", "content": "ping"}], max_tokens=1)

    with pytest.raises(EndpointError, match="return_token_ids"):
        asyncio.run(ask_for_ids())
    (tmp_path / "agent_env.py").write_text(AGENT_ENV)
    rubric = shutil.which("rubric", path=os.path.dirname(sys.executable))
    assert rubric
    proc = subprocess.run(
        [rubric, "eval", "agent_env.py", "-b", served.base_url, "-m", served.models["plain"], "--agent", "bash",
         "--runtime", "bwrap", "-t", "8", "--no-progress", "-o", "run"],
        cwd=tmp_path, capture_output=True, text=True, timeout=240,
        env={**os.environ, "OPENAI_API_KEY": "local", "COLUMNS": "200"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (rollout,) = load_results(tmp_path / "run")
    assert rollout.error is None and rollout.model_calls and all(c.ok for c in rollout.model_calls)
    assert all(c.tokens is None and c.served_by for c in rollout.model_calls)
    assert json.loads((tmp_path / "run" / "metadata.json").read_text())["model"]["return_token_ids"] is False
