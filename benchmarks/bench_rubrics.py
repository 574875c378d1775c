"""Speed of scoring through a rubric tree against calling the same functions by hand.

Scores N rollouts (default 100,000) through a 5-leaf synchronous WeightedSum, and through
the same 5 functions called directly in a loop with the weighted sum computed by hand, in
one run, and prints rollouts/s for both and the ratio. The tree does more per rollout (it
records every node's score and error on the rollout), so the ratio is its price.

    python benchmarks/bench_rubrics.py [--n 100000]
"""

from __future__ import annotations

import argparse
import time

from harness import Rollout
from rubrics import WeightedSum


def exact(response: str, answer: str) -> float:
    return float(response.strip() == answer)


def contains(response: str, answer: str) -> bool:
    return answer in response


def short(response: str) -> float:
    return 1.0 if len(response) < 40 else 0.5


def one_turn(completion: list) -> int:
    return int(len(completion) == 1)


def has_digit(response: str, difficulty: int = 0) -> bool:
    return any(ch.isdigit() for ch in response) or difficulty > 5


FUNCTIONS = (exact, contains, short, one_turn, has_digit)
WEIGHTS = (0.4, 0.2, 0.1, 0.1, 0.2)


def make_rollouts(n: int) -> list[Rollout]:
    return [
        Rollout.model_validate(
            {
                "example_id": i,
                "completion": f"the answer is {i % 97}",
                "answer": str(i % 89),
                "difficulty": i % 10,
            }
        )
        for i in range(n)
    ]


def by_hand(rollouts: list[Rollout]) -> list[float]:
    out = []
    for r in rollouts:
        response, answer = r.response, r.answer
        total = (
            WEIGHTS[0] * exact(response, answer)
            + WEIGHTS[1] * contains(response, answer)
            + WEIGHTS[2] * short(response)
            + WEIGHTS[3] * one_turn(r.completion)
            + WEIGHTS[4] * has_digit(response, r.info.get("difficulty", 0))
        )
        r.reward = total
        out.append(total)
    return out


def best_time(fn, rollouts: list[Rollout], repeats: int) -> tuple[float, list[float]]:
    """Fastest of `repeats` runs: the machine is shared, the minimum is the least noisy."""
    best, result = float("inf"), []
    for _ in range(repeats):
        start = time.perf_counter()
        result = fn(rollouts)
        best = min(best, time.perf_counter() - start)
    return best, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    rubric = WeightedSum(list(FUNCTIONS), weights=list(WEIGHTS))
    rollouts = make_rollouts(args.n)

    hand_s, expected = best_time(by_hand, rollouts, args.repeats)
    tree_s, got = best_time(rubric.score_batch, rollouts, args.repeats)
    call_s, _ = best_time(lambda rs: [rubric(r) for r in rs], rollouts, args.repeats)

    mismatches = sum(abs(a - b) > 1e-9 for a, b in zip(expected, got))
    if mismatches:
        raise SystemExit(f"tree and hand-written scores disagree on {mismatches} rollouts")
    n = args.n
    print(
        f"rollouts: {n:,}  (5-leaf sync WeightedSum vs the same 5 functions by hand; best of {args.repeats})"
    )
    print(f"by hand:              {n / hand_s:12,.0f} rollouts/s")
    print(
        f"tree score_batch:     {n / tree_s:12,.0f} rollouts/s   tree takes {tree_s / hand_s:.2f}x the hand loop's time"
    )
    print(
        f"tree rubric(r) loop:  {n / call_s:12,.0f} rollouts/s   tree takes {call_s / hand_s:.2f}x the hand loop's time"
    )


if __name__ == "__main__":
    main()
