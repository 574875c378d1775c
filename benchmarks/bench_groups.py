"""What does comparing within a group cost in judge calls and tokens, against grading each member alone?

    python benchmarks/bench_groups.py [--groups 20] [--sizes 4 8]

For each group size K, scores `--groups` groups of K short answers against the scripted
endpoint acting as a fair judge, with `RankJudge` (orders=1 and 2) and `PairwiseJudge` (all
pairs, both orders, and `max_pairs=K`), and as the baseline a pointwise `LLMJudge` grading each
member alone (K calls per group). Tokens are the scripted endpoint's (whitespace-separated
words of the request and reply), so compare them with each other, not with a real tokenizer's.
Prints judge calls and tokens (prompt + completion) per group, and the ratio to the baseline.
"""

from __future__ import annotations

import argparse
import re
from typing import Any

from harness import Client, Rollout, ScriptedEndpoint
from rubrics import LLMJudge, PairwiseJudge, RankJudge, Rubric

CANDIDATE = re.compile(r"Candidate ([A-Z]):\n<candidate>\n(.*?)\n</candidate>", re.DOTALL)
ANSWER = "The answer is 42, because six sevens make forty-two."


def judge(messages: list[dict[str, Any]], tools: Any) -> str:
    """Ranks / picks by how many words a candidate shares with the reference; grades alone by it too."""
    text = messages[-1]["content"]
    candidates = dict(CANDIDATE.findall(text))
    overlap = {k: len(set(v.split()) & set(ANSWER.split())) for k, v in candidates.items()}
    if "RANKING" in text:
        return "Comparing the candidates with the reference.\nRANKING: " + " > ".join(
            sorted(overlap, key=lambda k: -overlap[k])
        )
    if "WINNER" in text:
        a, b = overlap["A"], overlap["B"]
        return "Comparing the two.\nWINNER: " + ("TIE" if a == b else "A" if a > b else "B")
    return "Close to the reference.\nScore: 7"


def groups(count: int, size: int) -> list[Rollout]:
    words = ANSWER.split()
    return [
        Rollout.model_validate(
            {
                "example_id": g,
                "rollout_index": i,
                "prompt": "What is 6 x 7? Explain briefly.",
                "completion": " ".join(words[: 3 + (i * 7 + g) % (len(words) - 2)]),
                "answer": ANSWER,
            }
        )
        for g in range(count)
        for i in range(size)
    ]


def measure(node: Rubric, count: int, size: int, endpoint: ScriptedEndpoint) -> tuple[float, float]:
    """Judge requests and judge tokens per group."""
    before = endpoint.stats.requests
    batch = node.score_batch(groups(count, size))
    calls = (endpoint.stats.requests - before) / count
    tokens = sum(r.judge_usage.total_tokens for r in batch.rollouts) / count
    assert all(s == s for s in batch), "a group was unscored"
    return calls, tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--groups", type=int, default=20)
    parser.add_argument("--sizes", type=int, nargs="+", default=[4, 8])
    args = parser.parse_args()
    with ScriptedEndpoint(judge) as endpoint:
        client = Client("judge", base_url=endpoint.base_url, max_concurrency=32)
        for size in args.sizes:
            nodes: dict[str, Rubric] = {
                "LLMJudge per member (baseline)": LLMJudge(
                    "Grade against {{ answer }}:\n<response>\n{{ response }}\n</response>",
                    client=client,
                    cache=False,
                    score_range=(0, 10),
                ),
                "RankJudge orders=1": RankJudge(client=client),
                "RankJudge orders=2": RankJudge(client=client, orders=2),
                "PairwiseJudge all pairs": PairwiseJudge(client=client),
                "PairwiseJudge both orders": PairwiseJudge(client=client, both_orders=True),
                f"PairwiseJudge max_pairs={size}": PairwiseJudge(client=client, max_pairs=size),
            }
            print(f"K = {size} ({args.groups} groups)")
            base_calls, base_tokens = measure(next(iter(nodes.values())), args.groups, size, endpoint)
            for label, node in nodes.items():
                calls, tokens = measure(node, args.groups, size, endpoint)
                print(
                    f"  {label:34} {calls:5.1f} calls/group ({calls / base_calls:4.2f}x)  "
                    f"{tokens:7.0f} tokens/group ({tokens / base_tokens:4.2f}x)"
                )
        client.close()


if __name__ == "__main__":
    main()
