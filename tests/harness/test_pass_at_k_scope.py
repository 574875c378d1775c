"""pass@k beside errors says it was computed over the scored rollouts only (issue 28.5)."""

from __future__ import annotations

from harness.types import Rollout


def test_pass_at_k_says_it_counts_only_the_scored_rollouts() -> None:
    from rich.console import Console

    from harness.results import EvalResults

    rollouts = [Rollout(example_id=i, rollout_index=0, reward=1.0, stop_reason="completed") for i in range(2)]
    rollouts.append(Rollout(example_id=9, rollout_index=0, stop_reason="error", error="EndpointError: down"))
    results = EvalResults(rollouts)
    console = Console(record=True, width=120)
    console.print(results)
    line = next(x for x in console.export_text().splitlines() if "pass@1" in x)
    assert "1.0000" in line and "over the 2 scored of 3" in line
    assert "over the 2 scored of 3" in results._repr_html_()
