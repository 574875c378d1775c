"""env.evaluate / env.aevaluate end to end over real loopback HTTP (the scripted endpoint)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envs import SingleTurnEnv, ToolEnv
from harness import Client, ScriptedEndpoint

ROWS = [{"question": f"{i}+{i}?", "answer": str(2 * i)} for i in range(4)]


def exact(response: str, answer: str) -> float:
    return float(response.strip() == answer)


def adder(messages: list[dict], tools: list[dict] | None) -> str:
    """Answers a+a correctly except for 3+3, so the mean reward is 0.75."""
    a = int(messages[-1]["content"].split("+")[0])
    return "wrong" if a == 3 else str(2 * a)


def test_evaluate_with_model_name_uses_env_endpoint(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env = SingleTurnEnv(ROWS, exact)
    with ScriptedEndpoint(adder) as endpoint:
        monkeypatch.setenv("OPENAI_BASE_URL", endpoint.base_url)
        monkeypatch.delenv("OPENAI_API_KEY", raising=False)
        results = env.evaluate("scripted", progress=False, output_dir=tmp_path / "run")
    rewards = sorted(r.reward for r in results.rollouts)
    assert rewards == [0.0, 1.0, 1.0, 1.0]
    assert all(r.stop_reason == "completed" for r in results.rollouts)
    metadata = json.loads((tmp_path / "run" / "metadata.json").read_text())
    assert "SingleTurnEnv" in json.dumps(metadata)


async def test_aevaluate_with_client_and_tools() -> None:
    async def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    def policy(messages: list[dict], tools: list[dict] | None) -> dict | str:
        assert tools and tools[0]["function"]["name"] == "add"
        if messages[-1]["role"] == "tool":
            return messages[-1]["content"]
        a = int(messages[-1]["content"].split("+")[0])
        call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": {"a": a, "b": a}}}
        return {"role": "assistant", "content": None, "tool_calls": [call]}

    env = ToolEnv(ROWS, exact, tools=[add])
    with ScriptedEndpoint(policy) as endpoint:
        async with Client("scripted", base_url=endpoint.base_url) as client:
            results = await env.aevaluate(client, num_examples=2, rollouts_per_example=2, progress=False)
    assert len(results.rollouts) == 4
    assert all(r.reward == 1.0 and r.turns == 2 for r in results.rollouts)
    assert all([m.role for m in r.completion] == ["assistant", "tool", "assistant"] for r in results.rollouts)
