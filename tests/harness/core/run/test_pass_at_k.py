"""pass@k beside errors says it was computed over the scored rollouts only (issue 28.5)."""

from __future__ import annotations

from harness import Rollout


def test_pass_at_k_says_it_counts_only_the_scored_rollouts() -> None:
    from rich.console import Console

    from harness import EvalResults

    rollouts = [Rollout(example_id=i, rollout_index=0, reward=1.0, stop_reason="completed") for i in range(2)]
    rollouts.append(Rollout(example_id=9, rollout_index=0, stop_reason="error", error="EndpointError: down"))
    results = EvalResults(rollouts)
    console = Console(record=True, width=120)
    console.print(results)
    line = next(x for x in console.export_text().splitlines() if "pass@1" in x)
    assert " 1  (over the 2 scored of 3)" in line  # pass@1 is 1, over the scored
    assert "over the 2 scored of 3" in results._repr_html_()


def test_a_slice_that_cuts_an_example_says_pass_at_k_leaves_it_out() -> None:
    from rich.console import Console

    from harness import EvalResults

    rollouts = [
        Rollout(example_id=e, rollout_index=k, reward=1.0 if k == 0 else 0.0, stop_reason="completed")
        for e in range(2)
        for k in range(2)
    ]
    part = EvalResults(rollouts)[:3]  # example 0 whole, example 1 cut to one rollout
    assert part.summary.pass_at_k_examples == {1: 2, 2: 1} and part.summary.pass_at_k[2] == 1.0
    console = Console(record=True, width=140)
    console.print(part)
    line = next(x for x in console.export_text().splitlines() if "pass@2" in x)
    assert "over 1 of 2 examples: the rest have < 2 rollouts" in line
    assert "over 1 of 2 examples (the rest have &lt; 2 rollouts)" in part._repr_html_()
