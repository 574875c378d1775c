"""An agent environment in TRL: `env.trl().kwargs` hold a rollout_func whose episodes run the
agent against the trainer's OpenAI-compatible server, with the token ids the proxy recorded."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from harness import ConfigError
from harness.scripted import ScriptedEndpoint
from tests.envs.agents.conftest import task_env
from tests.helpers.training import grpo_config, tiny_chat_model

pytestmark = [pytest.mark.agents, pytest.mark.slow]


def test_rollout_func_plays_agent_episodes_with_the_engines_token_ids() -> None:
    env = task_env()
    spec = env.trl(agent="bash")
    kwargs = spec.kwargs
    assert set(kwargs) == {"train_dataset", "reward_funcs", "rollout_func"}
    prompt = kwargs["train_dataset"][0]["prompt"]
    with ScriptedEndpoint(env.scripted_policies["solve"]) as endpoint:
        trainer = SimpleNamespace(
            args=SimpleNamespace(vllm_server_base_url=endpoint.url),
            model=SimpleNamespace(name_or_path="tiny"),
        )
        out = kwargs["rollout_func"]([prompt, prompt], trainer)  # TRL's sampler repeats each prompt
    assert len(out["prompt_ids"]) == len(out["completion_ids"]) == 2
    for prompt_ids, completion_ids, logprobs, mask in zip(
        out["prompt_ids"], out["completion_ids"], out["logprobs"], out["env_mask"]
    ):
        assert prompt_ids and len(completion_ids) == len(logprobs) == len(mask)
        assert mask[0] == 1 and 0 in mask and mask[-1] == 1  # sampled, the tool's output, sampled again
    rewards = kwargs["reward_funcs"][0]([prompt, prompt], [[], []], agent_reward=out["agent_reward"])
    assert rewards == [1.0, 1.0]


def test_rollout_func_without_a_server_names_the_fix() -> None:
    env = task_env()
    func = env.trl(agent="bash").kwargs["rollout_func"]
    with pytest.raises(ConfigError, match="vllm_mode='server'"):
        func([[{"role": "user", "content": "x"}]], SimpleNamespace(args=SimpleNamespace(), model=None))


@pytest.mark.trl
@pytest.mark.timeout(300)
def test_grpo_trainer_trains_on_agent_episodes(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from trl import GRPOTrainer

    monkeypatch.setenv("TRL_EXPERIMENTAL_SILENCE", "1")  # rollout_func is experimental in TRL 1.16

    env = task_env()
    model, tokenizer = tiny_chat_model(
        "hi"
    )  # only the trainer's forward pass: the agent's calls go to the endpoint
    with ScriptedEndpoint(env.scripted_policies["solve"]) as endpoint:
        kwargs = env.trl(base_url=endpoint.url, model="tiny", agent="bash").kwargs
        args = grpo_config(tmp_path, shuffle_dataset=False, max_completion_length=512)
        trainer = GRPOTrainer(model=model, args=args, processing_class=tokenizer, **kwargs)
        trainer.train()
    rewards = [entry["reward"] for entry in trainer.state.log_history if "reward" in entry]
    assert rewards == [1.0, 1.0]  # every episode wrote the file, scored in its sandbox
