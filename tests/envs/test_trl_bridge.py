"""env.trl(): GRPOTrainer keyword arguments, the tool environment factory, and a real GRPOTrainer run."""

from __future__ import annotations

import inspect
import json
import pickle
from pathlib import Path
from typing import Any

import pytest

from envs import SingleTurnEnv, ToolEnv, TRLSpec, load_environment
from envs._training.trl import EnvironmentFactory, TRLEnvironment
from harness import ConfigError
from rubrics import WeightedSum
from tests.helpers.training import grpo_config, tiny_chat_model

TOOL_CALL = '<tool_call>\n{"name": "lookup", "arguments": {"word": "cat"}}\n</tool_call>'


def lookup(word: str, state: dict[str, Any]) -> str:
    """Look a word up in the dictionary.

    Args:
        word: The word to look up.
    """
    state.setdefault("looked_up", []).append(word)
    return {"cat": "a small feline"}.get(word, "not found")


async def count_letters(word: str, letter: str = "a") -> int:
    """Count a letter in a word."""
    return word.count(letter)


def used_lookup(state: dict[str, Any], answer: str) -> float:
    return float(answer in state.get("looked_up", []))


def concise(response: str) -> float:
    return 1.0 if len(response) < 200 else 0.0


def dictionary_env() -> ToolEnv:
    """The tool environment of these tests (loadable by spec, so its factory pickles by spec)."""
    rows = [{"question": "What is a cat?", "answer": "cat"}, {"question": "What is a dog?", "answer": "dog"}]
    rubric = WeightedSum(
        {"used_lookup": used_lookup, "concise": concise}, weights=[0.5, 0.5], name="looked_up"
    )
    return ToolEnv(
        rows, rubric, tools=[lookup, count_letters], system_prompt="Use the tools.", name="dictionary"
    )


# ----------------------------------------------------------------------------- the spec
def test_spec_attributes_are_trainer_kwargs_with_formatted_prompts() -> None:
    spec = dictionary_env().trl()
    assert isinstance(spec, TRLSpec)
    assert set(spec.kwargs) == {"train_dataset", "reward_funcs", "environment_factory"}
    row = spec.train_dataset[0]
    assert row["prompt"] == [
        {"role": "system", "content": "Use the tools."},
        {"role": "user", "content": "What is a cat?"},
    ]
    assert row["answer"] == "cat" and "example_id" in row
    assert spec.reward_funcs[0].__name__ == "looked_up"  # the rubric's name, as as_trl_reward() has it


def test_single_turn_env_has_no_environment_factory() -> None:
    env = SingleTurnEnv(
        [{"question": "q {{x}}", "answer": "a", "x": 1}], concise, prompt_template="Q: {{ question }}"
    )
    spec = env.trl()
    assert spec.environment_factory is None and "environment_factory" not in spec.kwargs
    assert (
        spec.reward_funcs[0].__name__ == "concise" == env.rubric.as_trl_reward().__name__
    )  # not "SingleTurnEnv"
    assert spec.train_dataset[0]["prompt"] == [{"role": "user", "content": "Q: q {{x}}"}]


# ----------------------------------------------------------------------------- the factory
def test_factory_instances_expose_typed_documented_tools_for_transformers() -> None:
    from transformers.utils import get_json_schema

    environment = dictionary_env().trl().environment_factory()
    assert isinstance(environment, TRLEnvironment) and type(environment).__name__ == "dictionary"
    public = [
        n for n, _ in inspect.getmembers(type(environment), inspect.isfunction) if not n.startswith("_")
    ]
    assert public == ["count_letters", "get_reward", "lookup", "reset"]
    assert str(inspect.signature(environment.lookup)) == "(word: str) -> str"  # `state` is injected, hidden
    assert inspect.iscoroutinefunction(type(environment).count_letters)
    schema = get_json_schema(type(environment).lookup)["function"]
    assert schema["description"] == "Look a word up in the dictionary."
    assert schema["parameters"]["properties"]["word"] == {
        "type": "string",
        "description": "The word to look up.",
    }
    letters = get_json_schema(type(environment).count_letters)["function"]["parameters"]
    assert letters["required"] == ["word"] and letters["properties"]["letter"]["type"] == "string"


def test_tools_run_validated_and_get_reward_scores_the_episode() -> None:
    spec = dictionary_env().trl()
    environment = spec.environment_factory()
    environment.reset(**spec.train_dataset[0])
    assert environment.lookup(word="cat") == "a small feline"
    assert environment.lookup(word=3).startswith("Error: tool 'lookup' was not run: invalid arguments")
    assert environment.rollout.state["looked_up"] == ["cat"]
    assert [m.role for m in environment.rollout.completion] == ["assistant", "tool", "assistant", "tool"]
    assert environment.get_reward() == 1.0
    environment.reset(**spec.train_dataset[1])
    assert environment.get_reward() == 0.5  # a fresh episode: nothing looked up yet


def test_reward_function_claims_the_episode_so_it_counts_once() -> None:
    spec = dictionary_env().trl()
    environment = spec.environment_factory()
    row = spec.train_dataset[0]
    environment.reset(**row)
    environment.lookup("cat")
    completion = [{"role": "assistant", "content": "A cat is a small feline."}]
    rewards = spec.reward_funcs[0](
        [row["prompt"]], [completion], None, answer=[row["answer"]], environments=[environment]
    )
    assert rewards == [1.0]
    assert environment.get_reward() is None  # already scored by the reward function


def test_factory_pickles_by_spec_and_by_value() -> None:
    by_spec = load_environment("tests.envs.test_trl_bridge:dictionary_env")
    factory = pickle.loads(pickle.dumps(by_spec.trl().environment_factory))
    assert isinstance(factory, EnvironmentFactory) and factory.env.load_spec == by_spec.load_spec
    environment = factory()
    environment.reset(**by_spec.trl().train_dataset[0])
    assert environment.lookup("cat") == "a small feline"
    by_value = pickle.loads(pickle.dumps(dictionary_env().trl()))
    assert by_value.environment_factory().count_letters  # tools rebuilt from their functions
    assert json.loads(by_value.train_dataset[0]["info"]) == {}


def test_a_tool_name_that_cannot_be_a_method_is_refused() -> None:
    def reset(x: int) -> int:
        """Reset."""
        return x

    env = ToolEnv([{"question": "q"}], concise, tools=[reset])
    with pytest.raises(ConfigError, match="tool 'reset'.*rename it"):
        env.trl().environment_factory()


# ----------------------------------------------------------------------------- the real trainer


@pytest.mark.trl
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_grpo_trainer_runs_the_tool_environment(tmp_path: Path) -> None:
    from trl import GRPOTrainer

    env = dictionary_env()
    model, tokenizer = tiny_chat_model(TOOL_CALL)  # the model always calls lookup(word="cat")
    args = grpo_config(
        tmp_path, shuffle_dataset=False, max_tool_calling_iterations=1, max_completion_length=64
    )
    trainer = GRPOTrainer(model=model, args=args, processing_class=tokenizer, **env.trl().kwargs)
    trainer.train()
    logged: dict[str, list[float]] = {}
    for entry in trainer.state.log_history:
        for key, value in entry.items():
            logged.setdefault(key, []).append(value)
    assert logged["tools/call_frequency"] == [1.0, 1.0]
    # Example 0 asks about "cat" (looked up: 0.5 + 0.5), example 1 about "dog" (only concise: 0.5).
    assert logged["rewards/looked_up/mean"] == [1.0, 0.5]  # named after the rubric
    assert logged["rubric/used_lookup"] == [1.0, 0.0]
    assert logged["rubric/concise"] == [1.0, 1.0]
