"""An agent environment in TRL's GRPOTrainer: a black-box `rollout_func` and its reward.

TRL hands `rollout_func(prompts, trainer)` the prompts of a step (each repeated
`num_generations` times by its sampler). Each becomes one agent episode of the `AgentRun`
(`harness.rollout(..., episodes=run)`) against the trainer's vLLM server (an OpenAI-compatible
`/v1/chat/completions`, asked for token ids), scored with the environment's rubric while its
sandbox is open; a step's episodes share the run's one capture proxy, closed with the run's
sandboxes when the step's episodes are done. What TRL trains on comes from the proxy's
recorded turns, never re-tokenised: the first call's prompt ids, then, per model call, the
ids the agent added (tool outputs: `env_mask` 0) and the ids the model sampled (`env_mask` 1,
with their logprobs). The reward rides along as an extra field that `AgentReward` returns.
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Mapping, Sequence
from typing import Any

import harness
from envs.agents._run import AgentRun
from harness._core.aio import run_sync
from harness._core.errors import ConfigError
from harness._core.protocol import EnvironmentProtocol
from harness._core.types import Rollout
from harness._endpoint.client import Client

#: The extra fields `AgentRolloutFunc` returns beside TRL's required ones.
REWARD_FIELD = "agent_reward"


def token_sequence(rollout: Rollout) -> tuple[list[int], list[int], list[float], list[int]]:
    """(prompt ids, completion ids, logprobs, env mask) of an agent rollout's main line of calls:
    sampled ids have mask 1, ids the agent added between calls (tool output) mask 0 and
    logprob 0.0. Stops where the agent rewrote its history (the next prompt does not extend it)."""
    turns = rollout.turn_tokens
    if not turns:
        return [], [], [], []
    prompt = list(turns[0].prompt_token_ids)
    sequence = list(prompt)
    completion: list[int] = []
    logprobs: list[float] = []
    mask: list[int] = []
    for index, turn in enumerate(turns):
        if index > 0:
            if turn.prompt_token_ids[: len(sequence)] != sequence:
                break
            added = turn.prompt_token_ids[len(sequence) :]
            completion += added
            logprobs += [0.0] * len(added)
            mask += [0] * len(added)
            sequence += added
        sampled = list(turn.completion_token_ids)
        completion += sampled
        logprobs += (
            list(turn.logprobs)
            if turn.logprobs and len(turn.logprobs) == len(sampled)
            else [0.0] * len(sampled)
        )
        mask += [1] * len(sampled)
        sequence += sampled
    return prompt, completion, logprobs, mask


class AgentRolloutFunc:
    """GRPOTrainer's `rollout_func` for an environment played by an agent (`env.trl().kwargs`).

    Args:
        env: The environment (the task).
        run: The agent playing its episodes.
        rows: Its training rows by prompt (JSON), so an episode sees its row's columns.
        base_url: The OpenAI-compatible server the agents' calls go to (default: the trainer's
            `vllm_server_base_url`, or `http://HOST:PORT` from its vLLM server settings).
        model: The model name there (default: the trainer's model's `name_or_path`).
        concurrency: Episodes at once.
    """

    def __init__(
        self,
        env: EnvironmentProtocol,
        run: AgentRun,
        rows: Mapping[str, Mapping[str, Any]],
        *,
        base_url: str | None = None,
        model: str | None = None,
        concurrency: int = 8,
    ) -> None:
        self.env = env
        self.run = run
        self.rows = dict(rows)
        self.base_url = base_url
        self.model = model
        self.concurrency = concurrency

    def endpoint(self, trainer: Any) -> tuple[str, str]:
        """(base URL, model name) the episodes call."""
        args: Any = getattr(trainer, "args", None)
        base_url = self.base_url or getattr(args, "vllm_server_base_url", None)
        if base_url is None and getattr(args, "vllm_server_host", None):
            base_url = f"http://{args.vllm_server_host}:{args.vllm_server_port}"
        model = self.model or getattr(getattr(trainer, "model", None), "name_or_path", None)
        if not base_url or not model:
            raise ConfigError(
                "an agent environment trains through an OpenAI-compatible server: run GRPOTrainer with "
                "vllm_mode='server' (its vllm_server_base_url is used), or give env.trl(base_url=..., model=...)"
            )
        return base_url.rstrip("/") + ("" if base_url.rstrip("/").endswith("/v1") else "/v1"), model

    def __call__(self, prompts: Sequence[Any], trainer: Any) -> dict[str, list[Any]]:
        base_url, model = self.endpoint(trainer)
        rollouts = run_sync(self._episodes(list(prompts), base_url, model))
        out: dict[str, list[Any]] = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": []}
        out[REWARD_FIELD] = []
        for r in rollouts:
            prompt, completion, logprobs, mask = token_sequence(r)
            out["prompt_ids"].append(prompt)
            out["completion_ids"].append(completion)
            out["logprobs"].append(logprobs)
            out["env_mask"].append(mask)
            out[REWARD_FIELD].append(None if math.isnan(r.reward) else r.reward)
        return out

    async def _episodes(self, prompts: list[Any], base_url: str, model: str) -> list[Rollout]:
        client = Client(model, base_url=base_url, return_token_ids=True, max_concurrency=self.concurrency)
        limit = asyncio.Semaphore(self.concurrency)

        async def one(index: int, prompt: Any) -> Rollout:
            row = dict(self.rows.get(json.dumps(prompt, sort_keys=True, default=str), {}))
            row.update(example_id=row.get("example_id", index), prompt=prompt)
            async with limit:
                return await harness.rollout(self.env, client, row, index, episodes=self.run)

        try:
            return list(await asyncio.gather(*(one(i, p) for i, p in enumerate(prompts))))
        finally:
            try:
                await self.run.close()  # the step's proxy and anything a cancel left open
            finally:
                await client.aclose()


class AgentReward:
    """The reward function beside `AgentRolloutFunc`: the rubric's reward of each episode,
    scored in its sandbox (None, TRL's "no reward", for an episode that errored)."""

    __name__ = "agent_reward"

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], **kwargs: Any
    ) -> list[float | None]:
        rewards = kwargs.get(REWARD_FIELD)
        if rewards is None:
            raise ConfigError(
                "agent_reward reads the rewards AgentRolloutFunc returns: pass env.trl().kwargs whole"
            )
        return list(rewards)
