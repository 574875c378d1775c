"""The noisy scripted policy varies with the attempt, seeded, so `-r K` shows pass@k rising as a
sampled model does, the same on every run (issue 27.1)."""

from __future__ import annotations

import pickle

import pytest

from envs import load_environment


def test_noisy_rollouts_of_an_example_differ_and_pass_at_k_rises() -> None:
    env = load_environment("gsm8k", num_examples=20)
    first = env.evaluate("scripted:noisy", rollouts_per_example=4, progress=False)
    again = env.evaluate("scripted:noisy", rollouts_per_example=4, concurrency=3, progress=False)
    passes = first.summary.pass_at_k
    assert passes[1] < passes[2] < passes[4], passes
    assert passes == again.summary.pass_at_k  # seeded, and each endpoint starts afresh
    replies: dict[str, set[str]] = {}
    for r in first:
        replies.setdefault(str(r.example_id), set()).add(r.response)
    assert any(len(each) > 1 for each in replies.values())
    policy = env.scripted_policies["noisy"]
    assert pickle.loads(pickle.dumps(policy))._attempts == {}  # a copy counts afresh too


def _outcomes(results: object) -> dict[str, set[float]]:
    by_example: dict[str, set[float]] = {}
    for r in results:  # type: ignore[attr-defined]
        by_example.setdefault(str(r.example_id), set()).add(r.reward)
    return by_example


def test_multi_turn_noisy_players_vary_per_attempt_and_keep_to_it_across_turns() -> None:
    env = load_environment("wordle", num_games=12)
    first = env.evaluate("scripted:noisy", rollouts_per_example=4, progress=False)
    again = env.evaluate("scripted:noisy", rollouts_per_example=4, concurrency=2, progress=False)
    passes = first.summary.pass_at_k
    assert passes[1] < passes[4], passes
    assert passes == again.summary.pass_at_k and first.summary.num_errors == 0
    assert any(len(each) > 1 for each in _outcomes(first).values())  # attempts at one game differ
    assert sum(len(r.state.get("guesses", [])) > 1 for r in first) >= 8  # most games last turns
    for r in first:  # every turn of a game follows one attempt: its guesses are that attempt's
        guesses = [g["word"] for g in r.state.get("guesses", [])]
        policy = env.scripted_policies["noisy"]
        game = policy.lookup.find([m.model_dump() for m in r.prompt])
        attempts = [
            a for a in range(4) if [policy.move(game, a, t)[0] for t in range(len(guesses))] == guesses
        ]
        assert attempts, (r.example_id, guesses)
    assert pickle.loads(pickle.dumps(env.scripted_policies["noisy"])).attempts._counts == {}


@pytest.mark.slow
@pytest.mark.bwrap  # the python environment's sandbox runs each program
def test_python_noisy_coder_varies_per_attempt() -> None:
    env = load_environment("python", num_examples=12)
    first = env.evaluate("scripted:noisy", rollouts_per_example=4, progress=False)
    again = env.evaluate("scripted:noisy", rollouts_per_example=4, concurrency=2, progress=False)
    passes = first.summary.pass_at_k
    assert passes[1] < passes[4], passes
    assert passes == again.summary.pass_at_k
    assert any(len(each) > 1 for each in _outcomes(first).values())
