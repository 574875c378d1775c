"""RankJudge and PairwiseJudge against a judge server written here (real HTTP on 127.0.0.1)."""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Callable
from typing import Any

import pytest

from harness import Client, ConfigError, Rollout, ScoringError, ScriptedEndpoint
from rubrics import PairwiseJudge, RankJudge, WeightedSum
from rubrics._judge.rank import parse_label_scores, parse_ranking, parse_winner

EndpointFactory = Callable[..., ScriptedEndpoint]
CANDIDATE = re.compile(r"Candidate ([A-Z]):\n<candidate>\n(.*?)\n</candidate>", re.DOTALL)
REFERENCE = re.compile(r"<reference>\n(.*?)\n</reference>", re.DOTALL)


def shown(messages: list[dict[str, Any]]) -> tuple[dict[str, str], float]:
    """The candidates (label -> text) and the reference answer in a judge request."""
    text = messages[-1]["content"]
    return dict(CANDIDATE.findall(text)), float(REFERENCE.findall(text)[0])


def closeness_ranking(messages: list[dict[str, Any]], tools: Any) -> str:
    """A fair judge: ranks candidates by how close their number is to the reference (ties as '=')."""
    candidates, answer = shown(messages)
    tiers: dict[float, list[str]] = {}
    for label, text in candidates.items():
        tiers.setdefault(abs(float(text) - answer), []).append(label)
    return "Thinking it over.\nRANKING: " + " > ".join(" = ".join(tiers[d]) for d in sorted(tiers))


def closeness_winner(messages: list[dict[str, Any]], tools: Any) -> str:
    candidates, answer = shown(messages)
    a, b = (abs(float(candidates[k]) - answer) for k in "AB")
    return "WINNER: " + ("TIE" if a == b else "A" if a < b else "B")


def members(*responses: str, answer: str = "10", example_id: int = 0) -> list[Rollout]:
    return [
        Rollout.model_validate(
            {
                "example_id": example_id,
                "rollout_index": i,
                "prompt": "Name a number near 10.",
                "completion": text,
                "answer": answer,
            }
        )
        for i, text in enumerate(responses)
    ]


def judge_client(ep: ScriptedEndpoint, fast_retry: dict[str, float], **kwargs: Any) -> Client:
    return Client("judge-model", base_url=ep.base_url, max_retries=0, **fast_retry, **kwargs)


# ----------------------------------------------------------------------------- parsing
def test_rankings_parse_robustly() -> None:
    assert parse_ranking("RANKING: C > A > B", "ABC") == {"C": 1.0, "A": 0.5, "B": 0.0}
    assert parse_ranking("**Ranking:** [B] > candidate A = C", "ABC") == {"B": 1.0, "A": 0.25, "C": 0.25}
    assert parse_ranking("RANKING: A > B\nOn reflection:\nranking = B, A", "AB") == {"B": 1.0, "A": 0.0}
    with pytest.raises(ScoringError, match="has no ranking"):
        parse_ranking("They are all fine.", "AB")
    with pytest.raises(ScoringError, match="C left out"):
        parse_ranking("RANKING: A > B", "ABC")
    with pytest.raises(ScoringError, match=r"unknown label\(s\) D; A named twice"):
        parse_ranking("RANKING: A > D > A", "AB")


def test_label_scores_and_winners_parse() -> None:
    assert parse_label_scores("SCORES: A=7, B: 3.5", "AB") == {"A": 7.0, "B": 3.5}
    assert parse_label_scores('{"A": 2, "B": 9}', "AB") == {"A": 2.0, "B": 9.0}
    with pytest.raises(ScoringError, match="no score for B"):
        parse_label_scores("SCORES: A=7", "AB")
    assert parse_winner("B is clearer.\nWINNER: **B**") == "B"
    assert parse_winner("tie") == "TIE"
    with pytest.raises(ScoringError, match="names no winner"):
        parse_winner("Both have merits.")


def test_label_scores_read_numbers_with_exponents_whole() -> None:
    assert parse_label_scores("SCORES: A=1e1, B=2.5E+0, C=-1e-1, D=.5, E=7.", "ABCDE") == {
        "A": 10.0,
        "B": 2.5,
        "C": -0.1,
        "D": 0.5,
        "E": 7.0,
    }
    for reply in ("SCORES: A=1e400, B=3", '{"A": 1e400, "B": 3}', '{"A": NaN, "B": 3}'):
        with pytest.raises(ScoringError, match="score for A is not a finite number"):
            parse_label_scores(reply, "AB")


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("SCORES: A=1e400, B=3, C=4", "score for A is not a finite number"),
        ("SCORES: A=2e1, B=3, C=4", "outside the range 0-10"),  # 20, not 2
    ],
)
def test_a_non_finite_or_out_of_range_score_makes_the_group_nan_with_its_reason(
    scripted_endpoint: EndpointFactory, fast_retry: dict[str, float], reply: str, reason: str
) -> None:
    ep = scripted_endpoint(lambda messages, tools: reply)
    tree = WeightedSum({"rank": RankJudge(client=judge_client(ep, fast_retry), parse="scores")})
    group = members("10", "7", "1")
    assert all(math.isnan(s) for s in tree.score_group(group))
    assert all(reason in r.score_errors["rank"] for r in group)


def test_settings_are_checked() -> None:
    with pytest.raises(ConfigError, match="needs a judge"):
        RankJudge()
    with pytest.raises(ConfigError, match="orders"):
        RankJudge(model="m", orders=0)
    with pytest.raises(ConfigError, match="max_pairs"):
        PairwiseJudge(model="m", max_pairs=0)


# ----------------------------------------------------------------------------- RankJudge
def test_rank_judge_maps_the_shuffled_ranking_back_to_members(
    scripted_endpoint: EndpointFactory, fast_retry: dict[str, float]
) -> None:
    ep = scripted_endpoint(closeness_ranking, record=True)
    judge = RankJudge(client=judge_client(ep, fast_retry))
    group = members("10", "7", "9", "1")
    assert judge.score_group(group) == pytest.approx([1.0, 1 / 3, 2 / 3, 0.0])
    request = ep.stats.bodies[0]["messages"][-1]["content"]
    labelled = dict(CANDIDATE.findall(request))
    assert sorted(labelled.values()) == ["1", "10", "7", "9"] and list(labelled.values()) != [
        "10",
        "7",
        "9",
        "1",
    ]
    detail = group[0].score_details[""]
    assert detail["calls"] == 1 and detail["group_size"] == 4 and "RANKING" in detail["replies"][0]["reply"]
    assert sum(r.judge_usage.total_tokens for r in group) == sum(detail["group_usage"].values()) > 0


def test_two_orders_cancel_a_position_biased_judge(
    scripted_endpoint: EndpointFactory, fast_retry: dict[str, float]
) -> None:
    ep = scripted_endpoint(lambda messages, tools: "RANKING: A > B > C", record=True)
    biased = RankJudge(client=judge_client(ep, fast_retry))
    assert sorted(biased.score_group(members("10", "7", "1"))) == [0.0, 0.5, 1.0]
    fair = RankJudge(client=judge_client(ep, fast_retry), orders=2)
    assert fair.score_group(members("10", "7", "1")) == [0.5, 0.5, 0.5]
    assert fair.calls == 2


def test_scores_mode_rescales_each_members_score(
    scripted_endpoint: EndpointFactory, fast_retry: dict[str, float]
) -> None:
    def scorer(messages: list[dict[str, Any]], tools: Any) -> str:
        candidates, answer = shown(messages)
        return "SCORES: " + ", ".join(
            f"{k}={max(0.0, 10 - abs(float(v) - answer)):g}" for k, v in candidates.items()
        )

    ep = scripted_endpoint(scorer)
    judge = RankJudge(client=judge_client(ep, fast_retry), parse="scores")
    assert judge.score_group(members("10", "5", "0")) == pytest.approx([1.0, 0.5, 0.0])


def test_ties_share_the_mid_rank(scripted_endpoint: EndpointFactory, fast_retry: dict[str, float]) -> None:
    ep = scripted_endpoint(closeness_ranking)  # equally close answers are tied
    ep2 = scripted_endpoint(lambda messages, tools: "RANKING: A = B = C")
    assert RankJudge(client=judge_client(ep2, fast_retry)).score_group(members("8", "12", "3")) == [0.5] * 3
    scores = RankJudge(client=judge_client(ep, fast_retry)).score_group(members("10", "3", "10"))
    assert scores == [0.75, 0.0, 0.75]


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("I cannot decide.", "judge reply has no ranking"),
        ("RANKING: A > B", "C left out"),
        ("RANKING: A > B > C > D", "unknown label(s) D"),
    ],
)
def test_a_malformed_reply_makes_the_group_nan_with_its_reason(
    scripted_endpoint: EndpointFactory, fast_retry: dict[str, float], reply: str, reason: str
) -> None:
    ep = scripted_endpoint(lambda messages, tools: reply)
    tree = WeightedSum({"rank": RankJudge(client=judge_client(ep, fast_retry))})
    group = members("10", "7", "1")
    assert all(math.isnan(s) for s in tree.score_group(group))
    assert all(reason in r.score_errors["rank"] for r in group)
    assert all(math.isnan(r.scores["rank"]) for r in group)


def test_a_group_of_one_needs_no_judge(
    scripted_endpoint: EndpointFactory, fast_retry: dict[str, float]
) -> None:
    ep = scripted_endpoint(closeness_ranking)
    judge = RankJudge(client=judge_client(ep, fast_retry))
    group = members("3")
    assert judge.score_group(group) == [0.5]
    assert ep.stats.requests == 0 and judge.calls == 0
    assert group[0].score_details[""]["note"] == "a group of one: nothing to compare"


def test_an_errored_member_is_not_shown_to_the_judge(
    scripted_endpoint: EndpointFactory, fast_retry: dict[str, float]
) -> None:
    ep = scripted_endpoint(closeness_ranking, record=True)
    group = members("10", "7", "9", "1")
    group[1].error = "EndpointError: 503"
    scores = RankJudge(client=judge_client(ep, fast_retry)).score_group(group)
    assert scores[0] == 1.0 and scores[2] == 0.5 and scores[3] == 0.0 and math.isnan(scores[1])
    assert "7" not in CANDIDATE.findall(ep.stats.bodies[0]["messages"][-1]["content"])[0]
    assert len(CANDIDATE.findall(ep.stats.bodies[0]["messages"][-1]["content"])) == 3
    assert "left out of the group" in group[1].score_errors[""]


def test_a_failed_judge_call_is_the_groups_reason(
    scripted_endpoint: EndpointFactory, fast_retry: dict[str, float]
) -> None:
    ep = scripted_endpoint(closeness_ranking, rate_500=1.0)
    group = members("10", "7")
    assert all(math.isnan(s) for s in RankJudge(client=judge_client(ep, fast_retry)).score_group(group))
    assert group[0].score_errors[""].startswith("judge call failed")


# ----------------------------------------------------------------------------- PairwiseJudge
def test_pairwise_scores_are_shares_of_wins(
    scripted_endpoint: EndpointFactory, fast_retry: dict[str, float]
) -> None:
    ep = scripted_endpoint(closeness_winner)
    judge = PairwiseJudge(client=judge_client(ep, fast_retry))
    assert judge.score_group(members("10", "7", "9", "1")) == pytest.approx([1.0, 1 / 3, 2 / 3, 0.0])
    assert judge.calls == 6
    both = PairwiseJudge(client=judge_client(ep, fast_retry), both_orders=True)
    assert both.score_group(members("10", "10", "1")) == [0.75, 0.75, 0.0]
    assert both.calls == 6


def test_a_bounded_tournament_gives_every_member_the_same_games(
    scripted_endpoint: EndpointFactory, fast_retry: dict[str, float]
) -> None:
    ep = scripted_endpoint(closeness_winner)
    judge = PairwiseJudge(client=judge_client(ep, fast_retry), max_pairs=8)
    pairs = judge.pairs(8)
    assert len(pairs) == 8 and all(sum(m in p for p in pairs) == 2 for m in range(8))
    scores = judge.score_group(members(*[str(v) for v in (10, 1, 9, 2, 8, 3, 7, 4)]))
    assert judge.calls == 8 and scores[0] == 1.0 and scores[1] == 0.0
    assert len(PairwiseJudge(model="m").pairs(8)) == 28


def test_a_failed_comparison_is_dropped_and_counted(
    scripted_endpoint: EndpointFactory, fast_retry: dict[str, float]
) -> None:
    def flaky(messages: list[dict[str, Any]], tools: Any) -> str:
        candidates, _ = shown(messages)
        return "no idea" if "1" in candidates.values() else closeness_winner(messages, tools)

    ep = scripted_endpoint(flaky)
    group = members("10", "7", "1")
    scores = PairwiseJudge(client=judge_client(ep, fast_retry)).score_group(group)
    assert scores[:2] == [1.0, 0.0] and math.isnan(scores[2])
    assert "every comparison of this member failed: judge reply names no winner" in group[2].score_errors[""]
    assert len(group[0].score_details[""]["dropped"]) == 2


def test_concurrency_limits_are_honoured(
    scripted_endpoint: EndpointFactory, fast_retry: dict[str, float]
) -> None:
    in_flight = [0, 0]  # now, most

    async def slow(messages: list[dict[str, Any]], tools: Any) -> str:
        in_flight[0] += 1
        in_flight[1] = max(in_flight)
        await asyncio.sleep(0.02)
        in_flight[0] -= 1
        return closeness_winner(messages, tools)

    ep = scripted_endpoint(slow)
    judge = PairwiseJudge(client=judge_client(ep, fast_retry, max_concurrency=2))
    batch = judge.score_batch([r for e in range(4) for r in members("10", "7", "9", "1", example_id=e)])
    assert list(batch)[:4] == pytest.approx([1.0, 1 / 3, 2 / 3, 0.0])
    assert judge.calls == 24 and in_flight[1] == 2


def test_a_judge_that_cannot_answer_fails_once_before_any_group(fast_retry: dict[str, float]) -> None:
    judge = RankJudge(model="m", base_url="http://127.0.0.1:1/v1", api_key="local")
    with pytest.raises(ConfigError, match=r"judge 'rank_judge' .* cannot reach its endpoint"):
        judge.score_group(members("10", "7"))
