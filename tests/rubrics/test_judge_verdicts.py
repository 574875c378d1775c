"""Verdict parsing on its own: labelled scores, fractions, choices, JSON, rescaling, reducing."""

from __future__ import annotations

import pytest

from rubrics._judge.verdicts import (
    VerdictError,
    parse_choice,
    parse_json,
    parse_number,
    reduce_scores,
    rescale,
)

TEN = (0.0, 10.0)


@pytest.mark.parametrize(
    ("reply", "value"),
    [
        ("7", 7.0),
        ("-2.5", -2.5),
        ("\u22123", -3.0),
        ("Score: 7/10", 7.0),
        ("8 out of 10", 8.0),
        ("Score: 1/2", 5.0),  # a fraction of another denominator is a proportion of the scale
        ("Points 3, 4 and 5 are fine. Rating: 6", 6.0),  # label beats the last number
        ("Scores seen: 3 then 9", 9.0),  # no label: last number
        ("**Score:** 8\n\nThanks!", 8.0),
        ("Verdict = [[4]]", 4.0),
        ("<think>Score: 2</think>\nScore: 5", 5.0),
    ],
)
def test_parse_number(reply: str, value: float) -> None:
    assert parse_number(reply, score_range=TEN) == pytest.approx(value)


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("", "judge reply was empty"),
        (None, "judge reply was empty"),
        ("no numbers at all", "judge reply had no score"),
        ("<think>Score: 4", "judge reply had only reasoning (<think>) and no verdict"),
        ("Score: 3/0", "divides by zero"),
    ],
)
def test_parse_number_failures(reply: str | None, reason: str) -> None:
    with pytest.raises(VerdictError, match=reason.replace("(", r"\(").replace(")", r"\)")):
        parse_number(reply, score_range=TEN)


def test_parse_number_pattern() -> None:
    assert parse_number("a 1 b [[7]] c 2", pattern=r"\[\[(.+?)\]\]", score_range=TEN) == 7.0
    with pytest.raises(VerdictError, match="did not match"):
        parse_number("Score: 4", pattern=r"\[\[(\d)\]\]")
    with pytest.raises(VerdictError, match="is not a number"):
        parse_number("[[high]]", pattern=r"\[\[(\w+)\]\]")


CHOICES = {"C": 1.0, "P": 0.5, "I": 0.0}


@pytest.mark.parametrize(
    ("reply", "value"),
    [
        ("GRADE: C", 1.0),
        ("I think it is partially right.\n\nGRADE: P", 0.5),
        ("First GRADE: I but on reflection GRADE: C", 1.0),  # last labelled verdict wins
        ("Verdict: **I**", 0.0),
        ("C", 1.0),
        ("Reasoning...\n(P)", 0.5),
        ("grade: c", 1.0),
    ],
)
def test_parse_choice(reply: str, value: float) -> None:
    assert parse_choice(reply, CHOICES) == value


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("GRADE: C/I", "several labels"),
        ("Could be C. Could be I.", "no label among"),  # single letters need a label or their own line
        ("Looks good", "no label among"),
    ],
)
def test_parse_choice_failures(reply: str, reason: str) -> None:
    with pytest.raises(VerdictError, match=reason):
        parse_choice(reply, CHOICES)


def test_parse_choice_words() -> None:
    words = {"CORRECT": 1.0, "INCORRECT": 0.0}
    assert parse_choice("The response is INCORRECT.", words) == 0.0
    assert parse_choice("correct", words) == 1.0
    with pytest.raises(VerdictError, match="several labels"):
        parse_choice("Either CORRECT or INCORRECT.", words)


@pytest.mark.parametrize(
    ("reply", "value"),
    [
        ('{"score": 7}', 7.0),
        ('Analysis first.\n```json\n{"score": 3, "why": "ok"}\n```', 3.0),
        ('notes {"a": 1} then {"score": "8/10"}', 8.0),
        ('{"Score": 2}', 2.0),
        ('{"score": true}', 1.0),
    ],
)
def test_parse_json(reply: str, value: float) -> None:
    assert parse_json(reply, score_range=TEN) == value


def test_parse_json_failures_and_keys() -> None:
    with pytest.raises(VerdictError, match="no JSON object"):
        parse_json("nothing")
    with pytest.raises(VerdictError, match=r"no 'score' field \(keys: grade\)"):
        parse_json('{"grade": 1}')
    with pytest.raises(VerdictError, match="not a score"):
        parse_json('{"score": [1]}')
    assert parse_json('{"met": false}', key="met") == 0.0
    assert parse_json('{"score": "P"}', choices=CHOICES) == 0.5


def test_rescale_and_range() -> None:
    assert rescale(4, (1, 5)) == 0.75
    assert rescale(-1, (-1, 1)) == 0.0
    with pytest.raises(VerdictError, match="outside score_range"):
        rescale(6, (1, 5))


def test_reduce_scores() -> None:
    assert reduce_scores([0.0, 1.0, 1.0], "mean") == pytest.approx(2 / 3)
    assert reduce_scores([0.0, 0.2, 1.0], "median") == 0.2
    assert reduce_scores([1.0, 0.0, 1.0], "majority") == 1.0
    assert reduce_scores([1.0, 0.0], "majority") == 0.0  # ties go to the lower score
    with pytest.raises(VerdictError, match="no judge sample"):
        reduce_scores([], "mean")
