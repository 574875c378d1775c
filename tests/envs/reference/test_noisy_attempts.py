"""The noisy scripted policy varies with the attempt, seeded, so `-r K` shows pass@k rising as a
sampled model does, the same on every run (issue 27.1)."""

from __future__ import annotations

import pickle

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
