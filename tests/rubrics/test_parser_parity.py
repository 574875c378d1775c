"""Verifiers parser parity (issue 24.3): tag alternatives, a think-format reward, strict think
parsing, and wrong types in a declaration named as type errors."""

from __future__ import annotations

import pickle

import pytest

from harness import ConfigError, ConfigTypeError
from rubrics import WeightedSum
from rubrics.parsers import ThinkFormat, XMLFormat, extract_boxed, extract_xml, strip_think


def test_a_field_accepts_its_alternative_tags_once() -> None:
    fmt = XMLFormat(["think", ("code", "answer")])
    assert fmt.fields == ["think", "code"] and fmt.answer_field == "code"
    assert fmt.parse("<think>hm</think><answer>print(1)</answer>") == {"think": "hm", "code": "print(1)"}
    assert fmt.parse_answer("<think>hm</think><code>x = 2</code>") == "x = 2"
    assert fmt.format_reward("<think>hm</think>\n<answer>42</answer>") == 1.0
    assert fmt.format_reward("<think>hm</think>\n<code>42</code>") == 1.0
    # the field twice, once under each name, is not "exactly once"
    assert fmt.format_reward("<think>hm</think><code>1</code><answer>2</answer>") == 0.5
    assert "<code> may also be written as <answer>" in fmt.instructions()
    assert fmt.format(think="a", code="b") == "<think>\na\n</think>\n<code>\nb\n</code>"


def test_an_alternative_tag_may_be_the_answer_field_as_in_verifiers() -> None:
    # Verifiers' own test fixture: XMLParser(fields=["reasoning", ("code", "answer")], answer_field="answer")
    fmt = XMLFormat(["reasoning", ("code", "answer")], answer_field="answer")
    assert fmt.fields == ["reasoning", "code"] and fmt.answer_field == "answer"
    assert fmt.parse_answer("<reasoning>r</reasoning>\n<answer>42</answer>") == "42"
    assert (
        fmt.parse_answer("<reasoning>r</reasoning>\n<code>print(1)</code>") is None
    )  # <code> is not <answer>
    assert fmt.parse("<reasoning>r</reasoning><answer>42</answer>") == {"reasoning": "r", "code": "42"}
    assert (
        fmt.format_reward("<reasoning>r</reasoning>\n<code>print(1)</code>") == 1.0
    )  # still the field's tag
    # Naming the field itself takes whichever of its tags was written.
    assert (
        XMLFormat(["reasoning", ("code", "answer")], answer_field="code").parse_answer("<answer>7</answer>")
        == "7"
    )
    with pytest.raises(
        ConfigError,
        match=r"'final' is not one of the fields \['reasoning', 'code'\] or their alternative tags \['answer'\]",
    ):
        XMLFormat(["reasoning", ("code", "answer")], answer_field="final")


def test_think_format_reward_has_verifiers_semantics() -> None:
    think = ThinkFormat()
    assert think.format_reward("<think>\nreasoning\n</think>\nThe answer is 4.") == 1.0
    assert think.format_reward("  <think>r</think> 4") == 1.0  # leading whitespace is fine
    for wrong in (
        "4",  # no thinking
        "<think>r</think>",  # no answer after it
        "<think>r</think>   \n",  # only whitespace after it
        "intro <think>r</think> 4",  # not first
        "<think>a</think><think>b</think> 4",  # two blocks
        "<think>r",  # never closed
        "<think>r</think> 4 </think>",  # a stray close
    ):
        assert think.format_reward(wrong) == 0.0, wrong
    leaf = think.reward()
    assert leaf.name == "think_format" and leaf({"completion": "<think>r</think> 4"}) == 1.0
    tree = WeightedSum({"format": ThinkFormat().reward(), "right": lambda response: float("4" in response)})
    assert tree({"completion": "<think>2+2</think> 4"}) == 1.0
    pickle.loads(pickle.dumps(think))


def test_strict_think_refuses_a_reply_without_a_closed_block() -> None:
    assert (
        strip_think("<think>draft 3</think> 4") == strip_think("<think>draft 3</think> 4", strict=True) == "4"
    )
    assert strip_think("just 4") == "just 4" and strip_think("just 4", strict=True) == ""
    assert strip_think("<think>cut off while thinking 4", strict=True) == ""
    assert strip_think("opened in the prompt</think> 4", strict=True) == "4"  # an orphan close counts
    lenient, strict = ThinkFormat(), ThinkFormat(strict=True, extract=extract_boxed)
    assert lenient.parse_answer("4") == "4" and strict.parse_answer("\\boxed{4}") is None
    assert strict.parse_answer("<think>so 4</think> \\boxed{4}") == "4"
    assert extract_xml("<think><answer>3</answer></think><answer>4</answer>", "answer") == "4"


def test_a_wrong_type_in_a_declaration_is_a_type_error() -> None:
    with pytest.raises(ConfigTypeError, match=r"tuple of alternatives .*, got 3"):
        XMLFormat(["answer", 3])  # type: ignore[list-item]
    with pytest.raises(ConfigTypeError, match="list of tag names"):
        XMLFormat("answer")
    with pytest.raises(ConfigTypeError, match="tuple of alternatives"):
        XMLFormat([["code", "answer"]])  # type: ignore[list-item]
    with pytest.raises(ConfigTypeError, match="extract must be a function"):
        ThinkFormat(extract="boxed")  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="invalid XML tag name"):
        XMLFormat(["an answer"])  # a bad value stays a ConfigError (a ConfigTypeError is one too)
    with pytest.raises(ConfigError, match="unique; repeated"):
        XMLFormat(["answer", ("code", "answer")])
    with pytest.raises(ConfigError, match="needs a list"):
        XMLFormat([])
