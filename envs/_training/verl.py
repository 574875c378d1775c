"""An environment in verl's shapes: its examples as verl's RL dataset rows, its rubric as verl's reward.

verl (0.9) reads a parquet file whose rows hold `data_source`, `prompt` (chat messages),
`reward_model` (`{"style": "rule", "ground_truth": ...}`) and `extra_info` (free-form, with the
example's `index`), and scores with a reward function it loads from a Python file
(`reward.custom_reward_function.path/name`). `env.verl()` gives both: `train_dataset` (write it with
`.to_parquet(path)`) and `reward_fn`, the rubric as `rubrics._verl.VerlReward` (for verl's `batch`
reward manager; its `compute_score` method is the per-response form for the reward loop).
Every dataset column rides in `extra_info`, where the rubric's leaves and judge templates find it.

An environment with tools or more than one turn is played by verl's agent loop
(`envs._verl_agent_loop.EnvironmentAgentLoop`, registered as `rubric_env`): its rows carry
`agent_name`, and `agent_loop_config` is the entry for verl's
`actor_rollout_ref.rollout.agent.agent_loop_config_path` file.

An environment only an agent can play (its rows name their own sandboxes or a setup step, as
Harbor tasks do, or its rubric reads the agent's sandbox) is refused by `env.verl()`: verl's
loop would play the chat loop, not the agent, and score nothing. `env.verl(agent=...)` plays it
with the agent instead (`envs._verl_agent_loop.AgentEpisodeLoop`, registered as `rubric_agent`),
its model calls served by verl's rollout server.
"""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from envs._training.protocol import TrainableEnvironment
from envs._training.trl import PrepareForScoring
from envs.agents import command_passes, file_contains
from envs.agents._run import AgentRun
from envs.agents._task import AgentTask, declares_setup, names_sandboxes
from harness._core.errors import ConfigError
from harness._core.protocol import SANDBOX
from harness._core.types import jsonable, text_messages
from rubrics._verl import VerlReward, as_verl_reward

if TYPE_CHECKING:  # pragma: no cover
    from datasets import Dataset
    from rubrics._tree.module import Rubric

#: The name verl's agent-loop registry knows `envs._verl_agent_loop.EnvironmentAgentLoop` by.
AGENT_LOOP_NAME = "rubric_env"
_AGENT_LOOP_TARGET = "envs._verl_agent_loop.EnvironmentAgentLoop"
#: The name verl's agent-loop registry knows `envs._verl_agent_loop.AgentEpisodeLoop` by.
AGENT_EPISODE_LOOP_NAME = "rubric_agent"
_AGENT_EPISODE_LOOP_TARGET = "envs._verl_agent_loop.AgentEpisodeLoop"
# Environments `env.verl()` built in this process, by the name its agent-loop config uses.
_registered: dict[str, TrainableEnvironment] = {}
# Agent runs `env.verl(agent=...)` was given in this process, by the environment's name.
_registered_agents: dict[str, AgentRun] = {}


def registered_agent(name: str) -> AgentRun | None:
    """The agent run `env.verl(agent=...)` registered under `name` in this process, if any."""
    return _registered_agents.get(name)


def registered_environment(name: str) -> TrainableEnvironment | None:
    """The environment `env.verl()` registered under `name` in this process, if any."""
    return _registered.get(name)


def plays_episodes(env: TrainableEnvironment) -> bool:
    """Whether verl plays `env` in an agent loop (it has tools, or more than one turn)."""
    return bool(env.tools) or env.max_turns > 1


def _reads_sandbox(rubric: Rubric) -> bool:
    """Whether a node of `rubric` reads the agent's sandbox (`command_passes`, `file_contains`,
    or a reward function with a `sandbox` parameter)."""
    if isinstance(rubric, (command_passes, file_contains)):
        return True
    fn = getattr(rubric, "_fn", None)
    if callable(fn):
        try:
            if SANDBOX in inspect.signature(fn).parameters:
                return True
        except (TypeError, ValueError):  # a builtin without a signature reads no sandbox
            pass
    return any(_reads_sandbox(child) for child in rubric.children())


def agent_only(env: TrainableEnvironment) -> str | None:
    """Why only an agent can play `env` (then verl's chat loop cannot), or None."""
    if isinstance(env, AgentTask):  # an Environment is one: its task hooks say
        if names_sandboxes(env):
            return "its rows name their own sandboxes (task_sandbox), as Harbor tasks do"
        if declares_setup(env):
            return "it sets up an agent's sandbox (setup_sandbox)"
    if _reads_sandbox(env.rubric):
        return "its rubric reads the agent's sandbox"
    return None


def check_verl_playable(env: TrainableEnvironment) -> None:
    """Refuse, with what works instead, an environment verl's chat loop cannot play.

    Raises:
        ConfigError: only an agent can play `env` (see `agent_only`).
    """
    reason = agent_only(env)
    if reason is not None:
        raise ConfigError(
            f"env.verl() cannot train environment {env.name!r}: {reason}, and verl's agent loop plays "
            "the chat loop, not an agent. Give it the agent (env.verl(agent='bash')), train it with TRL "
            "(env.trl(agent='bash'), see "
            "docs/guides/training.md), or record agent runs with `rubric eval ENV --agent NAME` "
            "(token ids on by default) and train on results.to_dataset(format='tokens')"
        )


class VerlSpec:
    """What verl needs to train on one environment.

    Attributes:
        train_dataset: a Hugging Face Dataset in verl's RL schema (`data_source`, `prompt`,
            `reward_model`, `extra_info`); `train_dataset.to_parquet(path)` for `data.train_files`.
        reward_fn: the environment's rubric as verl's reward function (NaN where unscored).
        overrides: the Hydra overrides that point verl at `reward_fn` once it is saved in a
            file as `compute_score` (see the README's verl section).
        agent_loop_config: for an environment with tools or several turns, the entry of verl's
            agent-loop config file (`actor_rollout_ref.rollout.agent.agent_loop_config_path`)
            that plays it; its rows' `agent_name` picks it. None for a single-turn environment.

    Args:
        env: The environment to train on.
        split: The dataset split the training prompts come from.
        num_examples: Use only the first this many examples (None: all).
        agent: The agent playing its episodes (then every row is an agent episode).
    """

    def __init__(
        self,
        env: TrainableEnvironment,
        *,
        split: str = "train",
        num_examples: int | None = None,
        agent: AgentRun | None = None,
    ) -> None:
        if agent is None:
            check_verl_playable(env)
        self.env = env
        self.agent_loop_config: dict[str, Any] | None = None
        if agent is not None:
            self.agent_loop_config = self._loop_entry(AGENT_EPISODE_LOOP_NAME, _AGENT_EPISODE_LOOP_TARGET)
            spec = agent.source
            self.agent_loop_config["agent"] = dataclasses.asdict(spec) if spec is not None else env.name
            _registered_agents[env.name] = agent
        elif plays_episodes(env):
            self.agent_loop_config = self._loop_entry(AGENT_LOOP_NAME, _AGENT_LOOP_TARGET)
        loop = None if self.agent_loop_config is None else self.agent_loop_config["name"]
        self.train_dataset: Dataset = train_dataset(
            env, split=split, num_examples=num_examples, agent_name=loop
        )
        self.reward_fn: VerlReward = as_verl_reward(env.rubric)
        if env.parser is not None:
            self.reward_fn.prepare = PrepareForScoring(env)
        self.overrides = [
            "reward.reward_manager.source=register",
            "reward.reward_manager.name=naive",
            "reward.custom_reward_function.name=compute_score",
        ]

    def __repr__(self) -> str:
        return f"VerlSpec({self.env.name!r}, {len(self.train_dataset)} prompts)"

    def _loop_entry(self, name: str, target: str) -> dict[str, Any]:
        """The agent-loop config entry for `target`, naming the environment as a worker finds it."""
        env = self.env
        entry: dict[str, Any] = {"name": name, "_target_": target}
        if env.source is not None:  # a worker process builds it again from its spec
            entry["environment"] = env.source.spec
            entry["environment_kwargs"] = jsonable(env.source.kwargs)
        else:  # built in Python: found by name in this process
            _registered[env.name] = env
            entry["environment"] = env.name
        return entry


def train_dataset(
    env: TrainableEnvironment,
    *,
    split: str = "train",
    num_examples: int | None = None,
    agent_name: str | None = None,
) -> Dataset:
    """The environment's examples as verl's RL dataset rows (the prompt as rendered chat messages),
    each naming the agent loop `agent_name` that plays it (none: verl's single-turn rollout)."""
    from datasets import Dataset  # the [datasets] dependency, as for env.trl()

    data = env.get_dataset(split, n=num_examples)
    rows: list[dict[str, Any]] = []
    agent = {"agent_name": agent_name} if agent_name is not None else {}
    for index, row in enumerate(data):
        extra = {k: jsonable(v) for k, v in row.items() if k not in ("prompt", "parsed_answer", "info")}
        info = row.get("info")
        if isinstance(info, Mapping):  # its keys join the columns (parquet cannot hold an empty struct)
            for key, value in info.items():
                extra.setdefault(str(key), jsonable(value))
        extra["index"] = index
        rows.append(
            {
                "data_source": env.name,
                "prompt": text_messages(env.format_prompt(row)),
                "reward_model": {"style": "rule", "ground_truth": str(row.get("answer", ""))},
                "extra_info": extra,
                **agent,
            }
        )
    return Dataset.from_list(rows)


__all__ = [
    "AGENT_EPISODE_LOOP_NAME",
    "AGENT_LOOP_NAME",
    "VerlSpec",
    "agent_only",
    "check_verl_playable",
    "plays_episodes",
    "registered_agent",
    "registered_environment",
    "train_dataset",
]
