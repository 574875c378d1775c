"""Per-turn scores and credit assignment end to end: a multi-turn env over the scripted endpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from envs import MultiTurnEnv
from harness import Client, ConfigError, Message, Rollout, ScriptedEndpoint, load_results
from rubrics import WeightedSum, reward
from rubrics.credit import discounted, returns_to_go


class GuessEnv(MultiTurnEnv):
    """Says higher/lower until the model names the number."""

    def env_response(self, rollout: Rollout) -> str | None:
        guess, target = int(rollout.response), int(rollout.answer)
        if guess == target:
            return None
        return "higher" if guess < target else "lower"


def guesser(messages: list[dict[str, Any]], tools: Any) -> str:
    """Bisects 1..8: 4, then 6 or 2, and so on."""
    low, high = 1, 8
    guess = (low + high) // 2
    for message in messages:
        if message["role"] == "assistant":
            guess = int(message["content"])
        elif message["content"] in ("higher", "lower"):
            low, high = (guess + 1, high) if message["content"] == "higher" else (low, guess - 1)
            guess = (low + high) // 2
    return str(guess)


def closer(turn: Message, turn_index: int, messages: list[Message], answer: str) -> float:
    """1 - distance to the target / 8, for each guess."""
    return 1.0 - abs(int(turn.text) - int(answer)) / 8


def solved(response: str, answer: str) -> float:
    return float(response == answer)


def make_env(credit: Any) -> GuessEnv:
    rubric = WeightedSum({"closer": reward(closer, per_turn=True), "solved": solved}, weights=[0.5, 0.5])
    return GuessEnv([{"question": "Guess 1-8.", "answer": "7"}], rubric, credit=credit, max_turns=5)


async def test_evaluate_records_turn_scores_and_discounted_turn_rewards(tmp_path: Path) -> None:
    with ScriptedEndpoint(guesser) as endpoint:
        async with Client("guesser", base_url=endpoint.base_url) as client:
            results = await make_env(discounted(0.5)).aevaluate(
                client, progress=False, output_dir=tmp_path / "run"
            )
    (r,) = results.rollouts
    assert [m.text for m in r.completion if m.role == "assistant"] == ["4", "6", "7"]
    assert r.turn_scores["closer"] == [pytest.approx(5 / 8), pytest.approx(7 / 8), 1.0]
    assert r.turn_scores[""] == [pytest.approx(5 / 16), pytest.approx(7 / 16), pytest.approx(1.0)]
    assert r.reward == pytest.approx(0.5 * (5 / 8 + 7 / 8 + 1) / 3 + 0.5)
    assert r.turn_rewards == [pytest.approx(0.25 * r.reward), pytest.approx(0.5 * r.reward), r.reward]
    again = load_results(tmp_path / "run").rollouts[0]  # written to disk and read back
    assert again.turn_scores == r.turn_scores and again.turn_rewards == r.turn_rewards


async def test_returns_to_go_over_the_root_turn_scores() -> None:
    env = make_env(returns_to_go())
    rollout = await env.setup_rollout(env.get_dataset()[0])
    for guess, reply in (("4", "higher"), ("7", None)):
        rollout.completion.append(Message(role="assistant", content=guess))
        if reply:
            rollout.completion.append(Message(role="user", content=reply))
    await env.score(rollout)
    assert rollout.turn_scores[""] == [pytest.approx(5 / 16), pytest.approx(1.0)]
    assert rollout.turn_rewards == [pytest.approx(5 / 16 + 1.0), pytest.approx(1.0)]


def test_credit_must_be_callable() -> None:
    with pytest.raises(ConfigError, match="credit must be a function"):
        make_env(0.9)


def test_rollout_views_show_turn_rewards() -> None:
    r = Rollout.model_validate(
        {"completion": [{"role": "assistant", "content": "4"}], "reward": 0.5, "turn_rewards": [0.5]}
    )
    r.turn_scores = {"": [0.5], "closer": [1.0]}
    html = r._repr_html_()
    assert "turn rewards: <code>0.5</code>" in html and "turn scores closer: <code>1</code>" in html
    from harness import EvalResults

    assert EvalResults([r]).to_pandas()["turn_rewards"].tolist() == [[0.5]]
