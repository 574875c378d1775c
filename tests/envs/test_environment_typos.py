"""A typo in a reward function's parameter lists the rollout fields and the closest match (issue 27.10)."""

from __future__ import annotations

import pytest

from envs import SingleTurnEnv
from harness.errors import ConfigError


def test_a_misspelt_parameter_names_the_fields_and_the_closest_one() -> None:
    def graded(respnse: str, answer: str) -> float:
        return 1.0

    with pytest.raises(ConfigError) as caught:
        SingleTurnEnv([{"question": "q", "answer": "a", "difficulty": 1}], graded)
    message = str(caught.value)
    assert "'respnse'" in message and "difficulty" in message
    assert "rollout fields: answer, completion, info, prompt, response" in message
    assert "did you mean 'response'?" in message
