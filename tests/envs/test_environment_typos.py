"""A typo names the closest match: in a reward function's parameters (issue 27.10), in evaluate's options (issue 34)."""

from __future__ import annotations

import pytest

import harness
from envs import SingleTurnEnv
from harness import Client, ConfigError, ConfigTypeError, run_sync


def test_a_misspelt_parameter_names_the_fields_and_the_closest_one() -> None:
    def graded(respnse: str, answer: str) -> float:
        return 1.0

    with pytest.raises(ConfigError) as caught:
        SingleTurnEnv([{"question": "q", "answer": "a", "difficulty": 1}], graded)
    message = str(caught.value)
    assert "'respnse'" in message and "difficulty" in message
    assert "rollout fields: answer, completion, info, prompt, response" in message
    assert "did you mean 'response'?" in message


def test_a_misspelt_evaluate_option_names_the_closest_one() -> None:
    env = SingleTurnEnv([{"question": "q", "answer": "a"}], lambda response, answer: 1.0)
    client = Client("m", base_url="http://127.0.0.1:9/v1", api_key="k")
    calls = {
        "SingleTurnEnv.evaluate": lambda: env.evaluate(client, num_exampels=2),
        "SingleTurnEnv.aevaluate": lambda: run_sync(env.aevaluate(client, num_exampels=2)),
        "evaluate": lambda: harness.evaluate(env, client, num_exampels=2),
    }
    for where, call in calls.items():
        with pytest.raises(ConfigTypeError) as caught:
            call()
        message = str(caught.value)
        assert message.startswith(f"{where}() has no option 'num_exampels'; did you mean 'num_examples'?")
        assert "rollouts_per_example" in message  # the options there are
    with pytest.raises(ConfigTypeError, match="has no option 'colour'; its options are: num_examples"):
        env.evaluate(client, colour="red")
