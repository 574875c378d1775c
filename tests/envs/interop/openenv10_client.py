"""An agent loop on OpenEnv 0.10's own client, run in its own venv: `PYTHON openenv10_client.py ENV_URL MODEL_URL SEED`.

What a user of a `rubric serve` environment writes: OpenEnv's `GenericEnvClient` (its sync
form, as a TRL rollout loop uses it) plays one episode, and an OpenAI-compatible endpoint
(the `openai` package, which OpenEnv installs) writes each assistant turn from the messages
and tools the observations carry. Prints one JSON object: the episode's end (`done`, `reward`,
the final observation's `stop_reason`, `scores`, `metadata`), every message, and the versions
of `openenv` and `websockets` it ran with.
"""

from __future__ import annotations

import json
import sys
from importlib.metadata import version
from typing import Any

from openai import OpenAI
from openenv.core.generic_client import GenericEnvClient

MAX_TURNS = 20
TIMEOUT = 30.0


def assistant_turn(
    model: OpenAI, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
) -> dict[str, Any]:
    """The model's next assistant message, as a plain dict."""
    reply = model.chat.completions.create(model="scripted", messages=messages, tools=tools or None)
    return reply.choices[0].message.model_dump(exclude_none=True)


def play(env_url: str, model_url: str, seed: int) -> dict[str, Any]:
    """One whole episode: reset, then step with the model's messages until the environment says done."""
    model = OpenAI(base_url=model_url, api_key="unused", timeout=TIMEOUT, max_retries=0)
    with GenericEnvClient(base_url=env_url, message_timeout_s=TIMEOUT).sync() as env:
        result = env.reset(seed=seed)
        messages, tools = list(result.observation["messages"]), result.observation["tools"]
        for _ in range(MAX_TURNS):
            message = assistant_turn(model, messages, tools)
            result = env.step(
                {"content": message.get("content"), "tool_calls": message.get("tool_calls", [])}
            )
            messages += [message, *result.observation["messages"]]
            if result.done:
                break
    final = result.observation
    return {
        "done": result.done,
        "reward": result.reward,
        "stop_reason": final.get("stop_reason"),
        "scores": final.get("scores"),
        "metadata": final.get("metadata"),
        "messages": messages,
        "versions": {name: version(name) for name in ("openenv", "websockets")},
    }


if __name__ == "__main__":
    print(json.dumps(play(sys.argv[1], sys.argv[2], int(sys.argv[3]))))
