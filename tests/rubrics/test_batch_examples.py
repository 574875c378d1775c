"""score_batch gives each dict its own example unless the caller groups them (issue 19.9)."""

from __future__ import annotations

from rubrics import reward


@reward
def exact(response: str, answer: str) -> float:
    return float(response == answer)


def test_three_different_prompts_are_three_examples() -> None:
    items = [{"prompt": f"q{i}", "completion": "4", "answer": "4" if i else "5"} for i in range(3)]
    scored = exact.score_batch(items)
    assert [r.example_id for r in scored.rollouts] == [0, 1, 2]
    assert scored.summary.num_examples == 3 and set(scored.summary.pass_at_k) == {1}
    assert "3 (3 examples)" in scored._repr_html_().replace(",", "")


def test_items_the_caller_groups_stay_one_example() -> None:
    items = [
        {"example_id": "q", "rollout_index": k, "completion": "4", "answer": "4" if k else "5"}
        for k in range(3)
    ]
    scored = exact.score_batch(items)
    assert scored.summary.num_examples == 1 and set(scored.summary.pass_at_k) == {1, 2, 3}
