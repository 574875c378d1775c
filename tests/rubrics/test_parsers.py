"""Parsers on tricky model output: think blocks, nesting, several answers, unicode signs."""

from __future__ import annotations

import pytest

from rubrics.parsers import (
    XMLFormat,
    extract_after,
    extract_boxed,
    extract_last_number,
    extract_xml,
    strip_think,
)


# ----------------------------------------------------------------------------- strip_think
@pytest.mark.parametrize(
    ("text", "visible"),
    [
        ("<think>2+2 is 5?</think>\nThe answer is 4.", "The answer is 4."),
        ("<think>still thinking, the answer is 7", ""),  # unclosed leading block: all reasoning
        ("reasoning the template opened</think> final: 4", "final: 4"),  # orphan closing tag
        ("a <think>x<think>y</think>z</think> b", "a  b"),  # nested blocks removed whole
        ("<think>one</think> mid <think>two</think> end", "mid  end"),
        ("no reasoning at all", "no reasoning at all"),
        ("", ""),
    ],
)
def test_strip_think(text: str, visible: str) -> None:
    assert strip_think(text) == visible


# ----------------------------------------------------------------------------- extract_xml
def test_extract_xml_last_and_first() -> None:
    text = "<answer>1</answer> then <answer> 2 </answer>"
    assert extract_xml(text, "answer") == "2"
    assert extract_xml(text, "answer", last=False) == "1"
    assert extract_xml(text, "answer", strip=False) == " 2 "


def test_extract_xml_ignores_think_unless_asked() -> None:
    text = "<think><answer>draft 3</answer></think><answer>4</answer>"
    assert extract_xml(text, "answer") == "4"
    assert extract_xml("<think><answer>3</answer></think>", "answer") is None
    assert extract_xml("<think><answer>3</answer>", "answer") is None  # unclosed think swallows all
    assert extract_xml("<think><answer>3</answer></think>", "answer", ignore_think=False) == "3"
    assert extract_xml("<think>plan</think> done", "think") == "plan"


def test_extract_xml_nesting_and_malformed() -> None:
    assert extract_xml("<answer>a<answer>b</answer>c</answer>", "answer") == "a<answer>b</answer>c"
    assert extract_xml("<answer>unclosed", "answer") is None
    assert extract_xml("<answer>5 <answer>6</answer>", "answer") == "6"  # unclosed outer ignored
    assert extract_xml("<answer>1</answr>", "answer") is None
    assert extract_xml(None, "answer") is None
    assert extract_xml("<Answer>1</Answer>", "answer") is None  # tag names are exact


def test_extract_xml_rejects_bad_tag() -> None:
    with pytest.raises(ValueError, match="invalid XML tag name"):
        extract_xml("x", "<answer>")


# ----------------------------------------------------------------------------- extract_boxed
@pytest.mark.parametrize(
    ("text", "boxed"),
    [
        (r"so \boxed{\frac{1}{2}}", r"\frac{1}{2}"),
        (r"\boxed{1} no wait \boxed{2}", "2"),
        (r"\boxed{\{a\}}", r"\{a\}"),  # escaped braces do not count
        (r"\boxed{x^{2}} and \boxed{trunc", "x^{2}"),  # an unclosed box is skipped
        (r"\fbox{7}", "7"),
        (r"$\boxed 5$", "5"),
        (r"<think>\boxed{1}</think> answer \boxed{2}", "2"),
        (r"<think>\boxed{1}</think> no box", None),
        ("nothing here", None),
    ],
)
def test_extract_boxed(text: str, boxed: str | None) -> None:
    assert extract_boxed(text) == boxed


def test_extract_boxed_first() -> None:
    assert extract_boxed(r"\boxed{a} \boxed{b}", last=False) == "a"


# ----------------------------------------------------------------------------- numbers
@pytest.mark.parametrize(
    ("text", "number"),
    [
        ("The answer is 42.", 42.0),
        ("\u22125 degrees", -5.0),  # unicode minus sign
        ("it costs $1,234.50 in total", 1234.5),
        ("first 3, then -7", -7.0),
        ("10-5", 5.0),  # subtraction, not a negative number
        ("x = (-3)", -3.0),
        ("half is .5", 0.5),
        ("1e3 items", 1000.0),
        ("1,2345", 2345.0),  # not a thousands group
        ("+8", 8.0),
        ("<think>maybe 3</think> it is 4", 4.0),
        ("no digits", None),
        ("", None),
    ],
)
def test_extract_last_number(text: str, number: float | None) -> None:
    assert extract_last_number(text) == number


def test_extract_last_number_as_text() -> None:
    assert extract_last_number("total: \u22121,234.50", as_text=True) == "-1234.50"
    assert extract_last_number("<think>3</think>", ignore_think=False) == 3.0


# ----------------------------------------------------------------------------- extract_after
def test_extract_after() -> None:
    assert extract_after("work...\n#### 72\n") == "72"
    assert extract_after("#### 1\n#### 2 dogs\nmore") == "2 dogs"
    assert extract_after("#### 1\n#### 2\nmore", line=False) == "2\nmore"
    assert extract_after("Answer: 9", "Answer:") == "9"
    assert extract_after("no marker") is None
    assert extract_after("####   ") is None
    assert extract_after("<think>#### 1</think> done") is None
    with pytest.raises(ValueError, match="non-empty marker"):
        extract_after("x", "")


# ----------------------------------------------------------------------------- XMLFormat
FMT = XMLFormat(["reasoning", "answer"])


@pytest.mark.parametrize(
    ("text", "score"),
    [
        ("<reasoning>2+2</reasoning>\n<answer>4</answer>", 1.0),
        ("preamble <reasoning>r</reasoning><answer>4</answer>", 1.0),  # outside text allowed by default
        ("<answer>4</answer><reasoning>r</reasoning>", 0.5),  # wrong order
        ("<reasoning>r</reasoning><answer>4", 0.5),  # unclosed
        ("<reasoning>r</reasoning><answer>4</answr>", 0.5),  # mismatched closing tag
        ("<reasoning>r<answer>4</answer></reasoning>", 0.0),  # nested
        ("<reasoning>r</reasoning><answer>4</answer><answer>5</answer>", 0.5),  # two answers
        ("<reasoning>r</reasoning><answer>  </answer>", 0.5),  # empty answer
        ("<reasoning>r</reasoning><answer>4</answer></answer>", 0.5),  # stray closing tag
        ("<think><reasoning>r</reasoning><answer>4</answer></think>", 0.0),  # all inside think
        ("<think><reasoning>r</reasoning><answer>4</answer>", 0.0),  # unclosed think
        ("<think><answer>3</answer></think><reasoning>r</reasoning><answer>4</answer>", 1.0),
        ("drafted in the prompt's think</think><reasoning>r</reasoning><answer>4</answer>", 1.0),
        ("", 0.0),
    ],
)
def test_format_reward(text: str, score: float) -> None:
    assert FMT.format_reward(text) == pytest.approx(score)


def test_format_strict_outside_text() -> None:
    strict = XMLFormat(["reasoning", "answer"], allow_text_outside=False)
    assert strict.format_reward("<reasoning>r</reasoning>\n<answer>4</answer>") == 1.0
    assert strict.format_reward("<think>t</think><reasoning>r</reasoning><answer>4</answer>") == 1.0
    assert strict.format_reward("hi <reasoning>r</reasoning><answer>4</answer>") < 1.0


def test_parse_never_reads_think() -> None:
    text = "<think><answer>3</answer></think><reasoning>r</reasoning><answer>4</answer>"
    assert FMT.parse(text) == {"reasoning": "r", "answer": "4"}
    assert FMT.parse("<think><answer>3</answer></think>") == {"reasoning": None, "answer": None}
    assert FMT.parse_answer("<reasoning>r</reasoning><answer> 7 </answer>") == "7"
    assert FMT("<answer>8</answer>") == "8"
    assert FMT.parse(None) == {"reasoning": None, "answer": None}


def test_think_as_a_declared_field() -> None:
    fmt = XMLFormat(["think", "answer"])
    assert fmt.format_reward("<think>t</think><answer>4</answer>") == 1.0
    assert fmt.parse("<think>t</think><answer>4</answer>") == {"think": "t", "answer": "4"}
    assert fmt.format_reward("<think>t<answer>4</answer></think>") == 0.0


def test_xmlformat_validation() -> None:
    with pytest.raises(ValueError, match="list of tag names"):
        XMLFormat("answer")
    with pytest.raises(ValueError, match="unique"):
        XMLFormat(["a", "a"])
    with pytest.raises(ValueError, match="invalid XML tag name"):
        XMLFormat(["ok", "not ok"])
    with pytest.raises(ValueError, match="answer_field"):
        XMLFormat(["a"], answer_field="b")


def test_format_and_instructions_round_trip() -> None:
    text = FMT.format(reasoning="because", answer="4")
    assert FMT.format_reward(text) == 1.0
    assert FMT.parse(text) == {"reasoning": "because", "answer": "4"}
    assert "<answer>" in FMT.instructions() and "in this order" in FMT.instructions()
    with pytest.raises(ValueError, match="missing \\['answer'\\]"):
        FMT.format(reasoning="x")


def test_format_reward_as_rubric_leaf() -> None:
    from rubrics import Rubric

    leaf = FMT.reward()
    assert isinstance(leaf, Rubric) and leaf.name == "format"
    assert leaf({"completion": "<reasoning>r</reasoning><answer>4</answer>"}) == 1.0
    assert leaf({"completion": "<answer>4</answer>"}) == 0.5
    assert leaf.required_columns() == set()


def test_format_writes_a_field_by_any_of_its_tags_as_verifiers_does() -> None:
    """Issue 47.22: `XMLParser(["reasoning", ("code", "answer")]).format(reasoning=..., answer=...)`
    formats with the alternative tag in Verifiers; so does XMLFormat."""
    fmt = XMLFormat(["reasoning", ("code", "answer")])
    text = fmt.format(reasoning="because", answer="4")
    assert text == "<reasoning>\nbecause\n</reasoning>\n<answer>\n4\n</answer>"
    assert fmt.parse(text) == {"reasoning": "because", "code": "4"} and fmt.format_reward(text) == 1.0
    assert "<code>\nx = 4\n</code>" in fmt.format(reasoning="r", code="x = 4")
    with pytest.raises(ValueError, match="given twice \\[\\['code', 'answer'\\]\\]"):
        fmt.format(reasoning="r", code="a", answer="b")
    with pytest.raises(ValueError, match="missing \\['code'\\], unknown \\['other'\\]"):
        fmt.format(reasoning="r", other="b")
