"""Judge calibration against human labels, with the judge served on 127.0.0.1 (figures by hand)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from harness import Client, ConfigError, ScriptedEndpoint
from rubrics import LLMJudge, WeightedSum
from rubrics._judge import agreement
from rubrics._judge.probes import FILLER
from rubrics.calibration import acalibrate, calibrate, find_judge
from rubrics.judges import JudgeCache

EndpointFactory = Callable[..., ScriptedEndpoint]
PROMPT = "Question: {{ prompt }}\n<response>\n{{ response }}\n</response>\nReference: {{ answer }}"
# What the test's judge says for each response (on 0-10); the reference "ref" gets 6.
SCORES = {"yes": 8, "no": 3, "ref": 6, "three": 3, "four": 4, "five": 5, "nine": 9}


@pytest.fixture(autouse=True)
def _fresh_cache() -> Iterator[None]:
    JudgeCache.shared.clear()
    yield
    JudgeCache.shared.clear()


def grader(messages: list[dict[str, Any]], tools: Any) -> str:
    """The judge: a score from the response block; filler after it adds 2 (a verbosity bias)."""
    prompt = messages[-1]["content"]
    response = re.search(r"<response>\n(.*?)\n</response>", prompt, re.S)
    text = response.group(1) if response else ""
    first = text.split("\n\n")[0].strip()
    if first not in SCORES:
        return "I cannot grade this."
    bonus = 2 if FILLER in text else 0
    return f"Score: {min(10, SCORES[first] + bonus)}"


def judge_at(ep: ScriptedEndpoint, fast_retry: dict[str, float], **kwargs: Any) -> LLMJudge:
    client = Client("judge-model", base_url=ep.base_url, max_retries=0, **fast_retry)
    return LLMJudge(PROMPT, client=client, score_range=(0, 10), **kwargs)


def rows(pairs: list[tuple[str, Any]]) -> list[dict[str, Any]]:
    return [
        {"prompt": f"Question {i}", "completion": response, "answer": "ref", "label": label}
        for i, (response, label) in enumerate(pairs)
    ]


# 6 rows labelled 1 (the judge passes 5: "yes" = 0.8, fails 1: "no" = 0.3), 4 labelled 0 (the
# judge passes 1, fails 3), and one the judge cannot grade.
BINARY = rows([("yes", 1)] * 5 + [("no", 1)] + [("yes", 0)] + [("no", 0)] * 3 + [("??", True)])


def test_binary_figures_by_hand(
    scripted_endpoint: EndpointFactory, fast_retry: dict[str, float], tmp_path: Path
) -> None:
    ep = scripted_endpoint(grader, record=True)
    labels = tmp_path / "labels.jsonl"
    labels.write_text("".join(json.dumps(r) + "\n" for r in BINARY))
    cal = calibrate(judge_at(ep, fast_retry), labels, prices=(1e-6, 2e-6))
    assert cal.kind == "binary" and cal.threshold == 0.5
    assert len(cal.items) == 11 and cal.num_scored == 10
    assert cal.unscored_reasons == [("judge reply had no score", 1)]
    # accuracy (5 + 3) / 10; chance agreement 0.6 * 0.6 + 0.4 * 0.4 = 0.52;
    # kappa (0.8 - 0.52) / (1 - 0.52) = 0.28 / 0.48
    assert cal.accuracy == pytest.approx(0.8)
    assert cal.kappa == pytest.approx(0.28 / 0.48)
    assert cal.classes == ("1", "0") and cal.confusion == ((5, 1), (1, 3))
    by_label = {r.label: r for r in cal.by_label}
    assert by_label["1"].count == 6 and by_label["1"].agreement == pytest.approx(5 / 6)
    assert by_label["0"].agreement == pytest.approx(3 / 4)
    assert by_label["1"].mean_score == pytest.approx((5 * 0.8 + 0.3) / 6)
    # verbosity: every padded twin scores 2 points (0.2) higher; the 4 fails (0.3 -> 0.5) flip.
    verbosity, position = cal.probes
    assert (verbosity.num_pairs, verbosity.num_changed) == (10, 4)
    assert verbosity.mean_shift == pytest.approx(0.2) and verbosity.mean_abs_shift == pytest.approx(0.2)
    # position: the response slot shows "ref" (0.6): six 0.8s move -0.2, four 0.3s move +0.3.
    assert position.mean_shift == pytest.approx((6 * -0.2 + 4 * 0.3) / 10)
    assert position.mean_abs_shift == pytest.approx((6 * 0.2 + 4 * 0.3) / 10)
    assert position.num_changed == 4 and position.skipped is None
    # Every request made is counted once, with the tokens the endpoint reported.
    stats = ep.stats
    assert cal.num_calls == 11 and cal.probe_calls == 20 and stats.requests == 31
    prompt_tokens, completion_tokens = stats.prompt_tokens, stats.completion_tokens
    assert cal.tokens_per_call == pytest.approx((prompt_tokens / 31, completion_tokens / 31))
    assert cal.cost_per_call == pytest.approx((prompt_tokens * 1e-6 + completion_tokens * 2e-6) / 31)
    assert "moderate agreement beyond chance" in cal.reading  # kappa 0.58


async def test_categorical_figures_by_hand(
    scripted_endpoint: EndpointFactory, fast_retry: dict[str, float]
) -> None:
    def choice(messages: list[dict[str, Any]], tools: Any) -> str:
        grade = re.search(r"<response>\n(\w)", messages[-1]["content"])
        return f"GRADE: {grade.group(1) if grade else 'I'}"

    ep = scripted_endpoint(choice)
    judge = judge_at(ep, fast_retry, parse="choice", choices={"C": 10, "P": 5, "I": 0})
    # The response's first letter is the judge's grade: labels C C P P I I, verdicts C P P I I I.
    data = rows([("C", "C"), ("P", "C"), ("P", "P"), ("I", "P"), ("I", "I"), ("I", "I")])
    cal = await acalibrate(judge, data, probes=False)
    assert cal.kind == "categorical" and cal.probes == ()
    # accuracy 4/6; chance (2*1 + 2*2 + 2*3) / 36 = 1/3; kappa (2/3 - 1/3) / (2/3) = 0.5
    assert cal.accuracy == pytest.approx(4 / 6) and cal.kappa == pytest.approx(0.5)
    assert cal.classes == ("C", "P", "I")
    assert cal.confusion == ((1, 1, 0), (0, 1, 1), (0, 0, 2))
    assert [(r.label, r.agreement) for r in cal.by_label] == [("C", 0.5), ("P", 0.5), ("I", 1.0)]


def test_continuous_figures_by_hand(scripted_endpoint: EndpointFactory, fast_retry: dict[str, float]) -> None:
    ep = scripted_endpoint(grader)
    # labels 2 4 6 8 10, judge 3 4 5 9 9 (all on 0-10, read as 0-1)
    data = rows([("three", 2), ("four", 4), ("five", 6), ("nine", 8), ("nine", 10)])
    cal = calibrate(judge_at(ep, fast_retry), data, probes=False)
    assert cal.kind == "continuous" and cal.accuracy is None and cal.kappa is None
    # |0.3-0.2| + 0 + |0.5-0.6| + |0.9-0.8| + |0.9-1.0| = 0.4, over 5
    assert cal.mae == pytest.approx(0.08)
    # ranks 1..5 against 1, 2, 3, 4.5, 4.5: sxy 9.5, sxx 10, syy 9.5 -> 9.5 / sqrt(95)
    assert cal.spearman == pytest.approx(9.5 / math.sqrt(95))
    # fifths, highest first: labels 0.8 and 1.0 -> judge 0.9 twice; 0.6 -> 0.5; 0.4 -> 0.4; 0.2 -> 0.3
    assert cal.classes == ("0.8–1.0", "0.6–0.8", "0.4–0.6", "0.2–0.4", "0.0–0.2")
    assert cal.confusion == (
        (2, 0, 0, 0, 0),
        (0, 0, 1, 0, 0),
        (0, 0, 1, 0, 0),
        (0, 0, 0, 1, 0),
        (0, 0, 0, 0, 0),
    )


def test_position_probe_is_skipped_without_a_reference(
    scripted_endpoint: EndpointFactory, fast_retry: dict[str, float]
) -> None:
    ep = scripted_endpoint(grader)
    judge = LLMJudge(
        "<response>\n{{ response }}\n</response>",
        client=Client("j", base_url=ep.base_url),
        score_range=(0, 10),
    )
    cal = calibrate(judge, rows([("yes", 1), ("no", 0)]))
    verbosity, position = cal.probes
    assert verbosity.num_pairs == 2 and position.num_pairs == 0
    assert position.skipped == "the judge's prompt does not show both the response and the reference answer"


def test_report_in_terminal_and_html(
    scripted_endpoint: EndpointFactory, fast_retry: dict[str, float]
) -> None:
    ep = scripted_endpoint(grader)
    planted = "<img src=x onerror=alert(1)>"  # an example id the judge disagrees on: listed, escaped
    data = [*BINARY, {"example_id": planted, "prompt": "q", "completion": "no", "answer": "ref", "label": 1}]
    cal = calibrate(judge_at(ep, fast_retry), data)
    console = Console(width=140, record=True)
    console.print(cal)
    text = console.export_text()
    for expected in (
        "judge calibration",
        f"{cal.accuracy:.3g}",
        f"{cal.kappa:.3g}",
        "confusion",
        "verbosity",
        "+0.200",
    ):
        assert expected in text
    assert "give prices per token" in text
    page = cal.to_html()
    assert page.startswith("<!DOCTYPE html>") and 'class="confusion"' in page and "verbosity" in page
    fragment = cal._repr_html_()
    assert "<style>" in fragment and "Cohen&#x27;s kappa" in fragment
    assert planted not in page and planted not in fragment and "&lt;img src=x onerror=alert(1)&gt;" in page


def test_judge_found_by_path_and_errors_name_the_judges(fast_retry: dict[str, float]) -> None:
    inner = LLMJudge(PROMPT, model="m", base_url="http://127.0.0.1:9/v1")
    tree = WeightedSum(
        {"grade": WeightedSum({"judge": inner, "len": lambda response: 1.0}), "other": lambda: 1.0}
    )
    assert find_judge(tree) is inner and find_judge(tree, "grade.judge") is inner
    with pytest.raises(ConfigError, match=r"no node 'grade\.nope'; its judges: 'grade\.judge'"):
        find_judge(tree, "grade.nope")
    with pytest.raises(ConfigError, match="node 'grade.len' is a .*, not an LLMJudge"):
        find_judge(tree, "grade.len")
    tree.second = LLMJudge(PROMPT, model="m")
    with pytest.raises(ConfigError, match="several judges .*'grade.judge', 'second'.*--node"):
        find_judge(tree)


def test_bad_labels_fail_before_any_call(
    scripted_endpoint: EndpointFactory, fast_retry: dict[str, float], tmp_path: Path
) -> None:
    ep = scripted_endpoint(grader, record=True)
    judge = judge_at(ep, fast_retry)
    with pytest.raises(ConfigError, match="row 2 has no 'label'"):
        calibrate(judge, [{"completion": "yes", "label": 1}, {"completion": "no"}])
    with pytest.raises(ConfigError, match="outside label_range"):
        calibrate(judge, [{"completion": "yes", "label": 3.5}, {"completion": "no", "label": 12}])
    with pytest.raises(ConfigError, match=r"labels 'X' have no score"):
        calibrate(judge, [{"completion": "yes", "label": "X"}], categories={"C": 1.0})
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"completion": "yes", "label": 1}\nnot json\n')
    with pytest.raises(ConfigError, match="line 2 is not JSON"):
        calibrate(judge, bad)
    assert ep.stats.requests == 0


def test_agreement_figures() -> None:
    assert agreement.ranks([3, 1, 3, 2]) == [3.5, 1.0, 3.5, 2.0]
    assert agreement.cohen_kappa([1, 1, 1], [1, 1, 1]) is None  # one class only: undefined
    assert agreement.cohen_kappa([1, 0], [0, 1]) == pytest.approx(-1.0)
    assert agreement.spearman_rho([1, 2, 3], [5, 5, 5]) is None
    assert agreement.spearman_rho([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0)
    assert agreement.mean_abs_error([], []) is None
    with pytest.raises(ValueError, match="equal lengths"):
        agreement.accuracy([1], [])


async def test_sync_form_works_inside_a_running_loop_and_on_error_is_still_unscored(
    scripted_endpoint: EndpointFactory, fast_retry: dict[str, float]
) -> None:
    # A judge that opts out of NaN (on_error=0.0) still has its failure recorded: the row is
    # unscored for calibration, not a verdict of 0 that would agree with a "0" label.
    ep = scripted_endpoint(grader)
    cal = calibrate(
        judge_at(ep, fast_retry, on_error=0.0), rows([("yes", 1), ("??", 0), ("no", 0)]), probes=False
    )
    assert cal.num_scored == 2 and cal.accuracy == 1.0 and cal.confusion == ((1, 0), (0, 1))
    assert [i.reason for i in cal.items] == [None, "judge reply had no score", None]


def test_a_judge_asked_several_times_is_sized_as_a_panel(
    scripted_endpoint: EndpointFactory, fast_retry: dict[str, float]
) -> None:
    """samples=3: each sample is a judge of the panel; a judge that repeats itself is worth one."""
    ep = scripted_endpoint(grader)
    cal = calibrate(judge_at(ep, fast_retry, samples=3), BINARY[:10], probes=False)
    assert cal.panel is not None and cal.panel.names == ("sample 1", "sample 2", "sample 3")
    assert cal.panel.num_rollouts == 10
    assert cal.panel.error_correlation == pytest.approx(1.0)
    assert cal.panel.effective_judges == pytest.approx(1.0)
    assert cal.corrected is None and cal.corrected_note is None  # no run given
