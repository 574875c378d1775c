"""An agent environment in TRL's GRPOTrainer: a black-box `rollout_func` and its reward.

TRL hands `rollout_func(prompts, trainer)` the prompts of a step (each repeated
`num_generations` times by its sampler). Each becomes one agent episode of the `AgentRun`
(`harness.rollout(..., episodes=run)`) against the trainer's vLLM server (an OpenAI-compatible
`/v1/chat/completions`, asked for token ids), scored with the environment's rubric while its
sandbox is open; a step's episodes share the run's one capture proxy, closed with the run's
sandboxes when the step's episodes are done. What TRL trains on is the episode's training
sample (`harness.training_samples`) that holds its last call, from the proxy's recorded ids,
never re-tokenised: the first call's prompt ids, then, per model call, the ids the agent added
(tool outputs: `env_mask` 0) and the ids the model sampled (`env_mask` 1, with their
logprobs). The reward rides along as an extra field that `AgentReward` returns.
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
from harness._core.samples import TrainingSample, training_samples
from harness._core.types import Rollout
from harness._endpoint.client import Client

#: The extra fields `AgentRolloutFunc` returns beside TRL's required ones.
REWARD_FIELD = "agent_reward"


def episode_sample(rollout: Rollout) -> TrainingSample | None:
    """The training sample TRL gets for an episode: TRL takes one completion per prompt, so of
    the episode's samples (`harness.training_samples`), the one holding its last call (the
    final answer); None when the episode has no token ids."""
    samples = [s for s in training_samples(rollout) if s.has_token_ids]
    return max(samples, key=lambda s: s.calls[-1]) if samples else None


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
            sample = episode_sample(r)
            out["prompt_ids"].append(sample.prompt_ids if sample else [])
            out["completion_ids"].append(sample.completion_ids if sample else [])
            out["logprobs"].append(sample.logprobs if sample else [])
            out["env_mask"].append(sample.mask if sample else [])
            reward = sample.reward if sample else r.reward
            out[REWARD_FIELD].append(None if math.isnan(reward) else reward)
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
