r"""Pull answers out of model text: XML tags, think blocks, \boxed{}, numbers, "#### 42".

These are plain functions (`str -> str | float | None`) so they can be called inside any
reward function, or passed as `parser=` to an environment. Every extractor ignores text
inside `<think>...</think>` by default: a reasoning model's drafts are not its answer, and
a reward that reads them can be gamed.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Literal, overload

from harness._core.errors import ConfigError, ConfigTypeError
from rubrics._leaf import FunctionRubric
from rubrics._leaf import reward as make_leaf

_THINK = "think"
_TAG_NAME = re.compile(r"^[A-Za-z_][\w.\-]*$")


@dataclass(frozen=True)
class _Span:
    """One properly closed element: `<name>content</name>`."""

    name: str
    start: int  # index of '<' of the opening tag
    end: int  # index just after the closing tag
    content_start: int
    content_end: int


@dataclass
class _Scan:
    spans: list[_Span] = field(default_factory=list)
    unclosed: list[tuple[str, int]] = field(default_factory=list)  # (name, position)
    stray_closes: list[tuple[str, int]] = field(default_factory=list)


def _tag_pattern(names: Iterable[str]) -> re.Pattern[str]:
    alternatives = "|".join(re.escape(n) for n in sorted(set(names), key=len, reverse=True))
    return re.compile(rf"<(/?)({alternatives})\s*>")


def _scan(text: str, names: Iterable[str]) -> _Scan:
    """Match opening and closing tags of `names` with a stack, like an XML parser would.

    A closing tag that does not match the innermost open element closes the nearest
    matching one and marks everything opened after it as unclosed; a closing tag with no
    matching open element is a stray.
    """
    scan = _Scan()
    stack: list[tuple[str, int, int]] = []  # (name, tag start, content start)
    for match in _tag_pattern(names).finditer(text):
        closing, name = match.group(1) == "/", match.group(2)
        if not closing:
            stack.append((name, match.start(), match.end()))
            continue
        depth = next((i for i in range(len(stack) - 1, -1, -1) if stack[i][0] == name), None)
        if depth is None:
            scan.stray_closes.append((name, match.start()))
            continue
        for dropped in stack[depth + 1 :]:
            scan.unclosed.append((dropped[0], dropped[1]))
        _, start, content_start = stack[depth]
        del stack[depth:]
        scan.spans.append(_Span(name, start, match.end(), content_start, match.start()))
    scan.unclosed.extend((name, start) for name, start, _ in stack)
    scan.unclosed.sort(key=lambda item: item[1])
    return scan


def _outermost(spans: list[_Span]) -> list[_Span]:
    """Closed elements not inside another closed element (an unclosed tag does not nest)."""
    return [s for s in spans if not any(o.start < s.start and s.end < o.end for o in spans)]


def _think_cut(text: str, tag: str = _THINK) -> tuple[int, int]:
    """The [start, end) of `text` that lies outside thinking.

    That is after an orphan `</think>` (its `<think>` was in the prompt) and before an
    unclosed `<think>` (a truncated draft).
    """
    scan = _scan(text, [tag])
    start = max((pos for _, pos in scan.stray_closes), default=-1)
    if start >= 0:
        start = text.index(">", start) + 1
    else:
        start = 0
    unclosed = [pos for _, pos in scan.unclosed if pos >= start]
    end = min(unclosed, default=len(text))
    return start, end


def strip_think(text: str, tag: str = _THINK, *, strict: bool = False) -> str:
    """Remove reasoning blocks and return the visible answer, stripped of surrounding whitespace.

    Removed: every `<think>...</think>`, an unclosed `<think>` and all after it, and
    everything before an orphan `</think>` (templates that open the block in the prompt).

    With `strict=True` (Verifiers' strict ThinkParser) a reply that never closed a think
    block has no answer at all: "" is returned, so a model that skips thinking, or is cut off
    while thinking, gets nothing parsed.

    Args:
        text: The model's text.
        tag: The reasoning block's tag name.
        strict: A reply that never closed a think block has no answer ("").

    Returns:
        The visible answer.
    """
    if not text:
        return ""
    if strict and not _closes_think(text, tag):
        return ""
    start, end = _think_cut(text, tag)
    visible = text[start:end]
    spans = _outermost(_scan(visible, [tag]).spans)
    pieces: list[str] = []
    cursor = 0
    for span in sorted(spans, key=lambda s: s.start):
        pieces.append(visible[cursor : span.start])
        cursor = span.end
    pieces.append(visible[cursor:])
    return "".join(pieces).strip()


def _closes_think(text: str, tag: str = _THINK) -> bool:
    """Whether the text closes a think block.

    Either a whole `<think>...</think>`, or an orphan `</think>` whose opening tag was in the prompt.
    """
    scan = _scan(text, [tag])
    return bool(scan.spans or scan.stray_closes)


def _visible(text: str | None, ignore_think: bool) -> str:
    if not text:
        return ""
    return strip_think(text) if ignore_think else text


def extract_xml(
    text: str | None, tag: str, last: bool = True, *, ignore_think: bool = True, strip: bool = True
) -> str | None:
    """Content of the last (or first) properly closed `<tag>...</tag>`, or None.

    Nested elements of the same tag return the outermost one; elements inside `<think>`
    are ignored unless `ignore_think=False` (or `tag` is "think" itself).

    Args:
        text: The model's text (None gives None).
        tag: The tag name, such as "answer".
        last: The last element (False: the first).
        ignore_think: Skip text inside `<think>` blocks (a reasoning model's drafts).
        strip: Strip surrounding whitespace from the content.

    Returns:
        The element's content, or None.
    """
    _check_tag(tag)
    if not text:
        return None
    names = [tag]
    start, end = 0, len(text)
    watch_think = ignore_think and tag != _THINK
    if watch_think:
        names.append(_THINK)
        start, end = _think_cut(text)
    window = text[start:end]
    spans = [s for s in _outermost(_scan(window, names).spans) if s.name == tag]
    if not spans:
        return None
    chosen = spans[-1] if last else min(spans, key=lambda s: s.start)
    content = window[chosen.content_start : chosen.content_end]
    return content.strip() if strip else content


def extract_boxed(text: str | None, last: bool = True, *, ignore_think: bool = True) -> str | None:
    r"""Content of the last (or first) `\boxed{...}` / `\fbox{...}`, braces balanced.

    `\boxed{\frac{1}{2}}` gives `\frac{1}{2}`; escaped braces `\{` do not count; a box
    left unclosed (truncated output) is skipped. `\boxed 5` (no braces) gives `5`.

    Args:
        text: The model's text (None gives None).
        last: The last box (False: the first).
        ignore_think: Skip text inside `<think>` blocks (a reasoning model's drafts).

    Returns:
        The box's content, or None.
    """
    visible = _visible(text, ignore_think)
    found: list[str] = []
    for match in re.finditer(r"\\(?:boxed|fbox)(?:\s*\{|\s+([^\s{}$]+))", visible):
        if match.group(1) is not None:
            found.append(match.group(1))
            continue
        content = _balanced(visible, match.end())
        if content is not None:
            found.append(content.strip())
    if not found:
        return None
    return found[-1] if last else found[0]


def _balanced(text: str, start: int) -> str | None:
    """Text from `start` up to the brace closing the one just before it; None if none does."""
    depth, i = 1, start
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[start:i]
        i += 1
    return None


_MINUS = "\\-\u2212\u2013\ufe63\uff0d"  # (escaped) ASCII, minus sign, en dash, small/fullwidth hyphen-minus
_NUMBER = re.compile(
    rf"(?<![\w.])(?P<sign>[+{_MINUS}](?=[\d.]))?"
    r"(?P<int>\d{1,3}(?:,\d{3}(?!\d))+|\d+)?"
    r"(?P<frac>\.\d+)?"
    r"(?P<exp>[eE][+-]?\d+)?"
)


def _numbers(text: str) -> list[str]:
    """Every number in `text` as canonical text ("-1234.5"), in order."""
    found: list[str] = []
    for match in _NUMBER.finditer(text):
        integer, frac = match.group("int"), match.group("frac")
        if integer is None and frac is None:
            continue
        sign = "-" if match.group("sign") and match.group("sign") != "+" else ""
        prev = text[match.start() - 1] if match.start() > 0 else ""
        if sign and prev and (prev.isalnum() or prev in ")]}"):
            sign = ""  # "10-5" is subtraction, not a negative five
        found.append(sign + (integer or "0").replace(",", "") + (frac or "") + (match.group("exp") or ""))
    return found


@overload
def extract_last_number(
    text: str | None, *, as_text: Literal[False] = False, ignore_think: bool = True
) -> float | None: ...
@overload
def extract_last_number(
    text: str | None, *, as_text: Literal[True], ignore_think: bool = True
) -> str | None: ...
@overload
def extract_last_number(
    text: str | None, *, as_text: bool, ignore_think: bool = True
) -> float | str | None: ...
def extract_last_number(
    text: str | None, *, as_text: bool = False, ignore_think: bool = True
) -> float | str | None:
    """The last number in the text as a float (or canonical text with `as_text=True`).

    Understands signs (including the Unicode minus U+2212), thousands separators
    ("1,234"), decimals (".5", "3.25") and exponents; "10-5" yields 5, not -5.

    Args:
        text: The model's text (None gives None).
        as_text: Return the number as canonical text ("1234", "0.5") instead of a float.
        ignore_think: Skip text inside `<think>` blocks (a reasoning model's drafts).

    Returns:
        The number, or None when there is none.
    """
    numbers = _numbers(_visible(text, ignore_think))
    if not numbers:
        return None
    return numbers[-1] if as_text else float(numbers[-1])


def extract_after(
    text: str | None, marker: str = "####", *, ignore_think: bool = True, line: bool = True
) -> str | None:
    """What follows the last `marker` (GSM8K's "#### 72").

    Its first line, stripped, or everything after it with `line=False`. None if the marker
    is absent or nothing follows.

    Args:
        text: The model's text (None gives None).
        marker: What the answer follows.
        ignore_think: Skip text inside `<think>` blocks (a reasoning model's drafts).
        line: Only the first line after the marker (False: everything after it).

    Returns:
        The answer text, or None.
    """
    if not marker:
        raise ConfigError("extract_after needs a non-empty marker, e.g. '####'")
    visible = _visible(text, ignore_think)
    index = visible.rfind(marker)
    if index < 0:
        return None
    rest = visible[index + len(marker) :].strip()
    if line:
        rest = rest.split("\n", 1)[0].strip()
    return rest or None


def _check_tag(tag: object) -> None:
    if not isinstance(tag, str):
        raise ConfigTypeError(
            f"an XML tag name must be a str such as 'answer', got {type(tag).__name__} {tag!r}"
        )
    if not _TAG_NAME.match(tag):
        raise ConfigError(
            f"invalid XML tag name {tag!r}: use letters, digits, '_', '-' or '.', e.g. 'answer'"
        )


FieldSpec = str | tuple[str, ...]


class XMLFormat:
    """A declared answer format such as `<reasoning>...</reasoning><answer>...</answer>`.

    `parse(text)` reads each field; `format_reward(text)` scores how well the text follows
    the format; `reward()` makes that a rubric leaf named "format". Tags inside a
    `<think>` block never count (unless "think" is itself a declared field).

    A field may accept alternative tags, as in Verifiers: `("code", "answer")` is the field
    "code" (the first name), written as `<code>` or `<answer>`; either counts, once.
    `answer_field` names a field (the answer is whichever of its tags was written) or, as in
    Verifiers, one alternative tag (the answer is that tag's content only).

    Args:
        fields: The tag names in order; a tuple is one field with alternative tags.
        answer_field: The field (or alternative tag) whose content is the answer.
        allow_text_outside: Whether text outside the tags keeps the format reward whole.
    """

    def __init__(
        self, fields: Sequence[FieldSpec], *, answer_field: str | None = None, allow_text_outside: bool = True
    ):
        if isinstance(fields, str) or not isinstance(fields, Sequence):
            raise ConfigTypeError(
                f"XMLFormat needs a list of tag names, e.g. XMLFormat(['reasoning', 'answer']), got {fields!r}"
            )
        if not fields:
            raise ConfigError("XMLFormat needs a list of tag names, e.g. XMLFormat(['reasoning', 'answer'])")
        self.alternatives: dict[str, tuple[str, ...]] = {}
        self._field_of: dict[str, str] = {}  # tag -> the field it writes
        for spec in fields:
            tags = (spec,) if isinstance(spec, str) else spec
            if not isinstance(tags, tuple) or not tags:
                raise ConfigTypeError(
                    f"an XMLFormat field is a tag name or a tuple of alternatives such as ('code', 'answer'), got {spec!r}"
                )
            for tag in tags:
                _check_tag(tag)
                if tag in self._field_of:
                    raise ConfigError(f"XMLFormat fields must be unique; repeated: [{tag!r}]")
                self._field_of[tag] = tags[0]
            self.alternatives[tags[0]] = tuple(tags)
        names = list(self.alternatives)
        if answer_field is not None and answer_field not in self._field_of:
            raise ConfigError(
                f"answer_field {answer_field!r} is not one of the fields {names} or their alternative tags "
                f"{[tag for tag in self._field_of if tag not in self.alternatives]}"
            )
        self.fields: list[str] = names
        self.answer_field: str = answer_field or names[-1]
        self.allow_text_outside = allow_text_outside

    def __repr__(self) -> str:
        return f"XMLFormat({self.fields!r}, answer_field={self.answer_field!r})"

    def _top_level(self, text: str) -> tuple[list[_Span], _Scan, int, int]:
        """Elements of declared fields that sit outside thinking and outside each other."""
        watch_think = _THINK not in self._field_of
        start, end = _think_cut(text) if watch_think else (0, len(text))
        window = text[start:end]
        names = [*self._field_of, _THINK] if watch_think else list(self._field_of)
        scan = _scan(window, names)
        top = [s for s in _outermost(scan.spans) if s.name in self._field_of]
        return top, scan, start, end

    def _contents(self, text: str | None) -> list[tuple[str, str]]:
        """(tag, stripped content) of each top-level element of a declared tag, in order."""
        if not text:
            return []
        top, _, start, _ = self._top_level(text)
        return [(s.name, text[start + s.content_start : start + s.content_end].strip()) for s in top]

    def parse(self, text: str | None) -> dict[str, str | None]:
        """Each field's content (the last top-level occurrence, stripped) or None."""
        values: dict[str, str | None] = {name: None for name in self.fields}
        for tag, content in self._contents(text):
            values[self._field_of[tag]] = content
        return values

    def parse_answer(self, text: str | None) -> str | None:
        """The answer field's content: what an environment's `parser=` hands to rewards."""
        if self.answer_field in self.alternatives:
            return self.parse(text)[self.answer_field]
        # An alternative tag named as the answer (Verifiers' semantics): that tag's content only.
        found = [content for tag, content in self._contents(text) if tag == self.answer_field]
        return found[-1] if found else None

    __call__ = parse_answer

    def format_reward(self, text: str | None) -> float:
        """Fraction of fields that are well formed and in the declared order.

        A field is well formed when it occurs exactly once, outside any other declared tag
        and outside `<think>`, properly closed, with no declared tag inside it and some
        content. Order credit is the longest run of well-formed fields that keeps the
        declared order, so full credit means every field, once, in order. With
        `allow_text_outside=False`, text outside the fields (other than a think block)
        also forfeits full credit.
        """
        if not text:
            return 0.0
        top, scan, start, end = self._top_level(text)
        window = text[start:end]
        thinking = [(s.start, s.end) for s in scan.spans if s.name == _THINK and _THINK not in self._field_of]

        def outside_think(position: int) -> bool:
            return not any(lo < position < hi for lo, hi in thinking)

        field_of = self._field_of
        spans = [s for s in scan.spans if s.name in field_of and outside_think(s.start)]
        bad = {
            field_of[name]
            for name, pos in [*scan.unclosed, *scan.stray_closes]
            if name in field_of and outside_think(pos)
        }
        top_ids = {id(s) for s in top}
        inner_fields = {field_of[s.name] for s in spans if id(s) not in top_ids}
        counts = {name: sum(1 for s in spans if field_of[s.name] == name) for name in self.fields}
        good: dict[str, _Span] = {}
        for span in top:
            name = field_of[span.name]
            content = window[span.content_start : span.content_end]
            nested = any(span.start < s.start and s.end < span.end for s in scan.spans) or any(
                span.start < pos < span.end for _, pos in [*scan.unclosed, *scan.stray_closes]
            )
            if (
                counts[name] == 1
                and name not in bad
                and name not in inner_fields
                and not nested
                and content.strip()
            ):
                good[name] = span
        order = [self.fields.index(field_of[s.name]) for s in sorted(good.values(), key=lambda s: s.start)]
        credit = _longest_increasing(order)
        score = credit / len(self.fields)
        if score == 1.0 and not self.allow_text_outside and self._has_outside_text(window, scan):
            score = (len(self.fields) - 0.5) / len(self.fields)
        return score

    def _has_outside_text(self, window: str, scan: _Scan) -> bool:
        outer = sorted(_outermost(scan.spans), key=lambda s: s.start)
        cursor = 0
        for span in outer:
            if window[cursor : span.start].strip():
                return True
            cursor = span.end
        return bool(window[cursor:].strip())

    def reward(self, name: str = "format") -> FunctionRubric:
        """This format's `format_reward` as a rubric leaf (reads the last assistant message)."""

        def format_reward(response: str) -> float:
            return self.format_reward(response)

        format_reward.__doc__ = (
            f"Follows the format {self.fields} (fraction of fields well formed, in order)."
        )
        return make_leaf(format_reward, name=name)

    def format(self, **values: object) -> str:
        """Write values in this format (for few-shot examples and tests).

        Each field is given once, by its name or one of its alternative tags, and written with
        the tag it was given by (as Verifiers' `XMLParser.format`).

        Args:
            **values: The text of each field, by field name or alternative tag.

        Returns:
            The fields in order, one tag block each.
        """
        written: list[tuple[str, object]] = []
        missing, twice = [], []
        for name in self.fields:
            given = [tag for tag in self.alternatives.get(name, (name,)) if tag in values]
            if not given:
                missing.append(name)
            elif len(given) > 1:
                twice.append(given)
            else:
                written.append((given[0], values[given[0]]))
        unknown = sorted(set(values) - set(self._field_of))
        if missing or unknown or twice:
            raise ConfigError(
                f"XMLFormat.format needs each of the fields {self.fields} once (by its name or an "
                f"alternative tag); missing {missing}, unknown {unknown}"
                + (f", given twice {twice}" if twice else "")
            )
        return "\n".join(f"<{tag}>\n{value}\n</{tag}>" for tag, value in written)

    def instructions(self) -> str:
        """A sentence for a system prompt describing the expected format."""
        layout = "\n".join(f"<{name}>\n...\n</{name}>" for name in self.fields)
        also = "; ".join(
            f"<{name}> may also be written as {' or '.join(f'<{t}>' for t in tags[1:])}"
            for name, tags in self.alternatives.items()
            if len(tags) > 1
        )
        text = f"Respond in the following format, each tag exactly once and in this order:\n{layout}"
        return f"{text}\n({also})" if also else text


class ThinkFormat:
    """A reasoning model's format: one `<think>...</think>` block first, then the answer.

    Verifiers' ThinkParser, with the same format reward.

    `parse_answer(text)` is the text after thinking (through `extract` when given, e.g.
    `extract_boxed`); with `strict=True` a reply that never closed its think block has no
    answer (None). `format_reward(text)` is 1.0 when the reply starts with the think block,
    has exactly one, properly closed, and a non-empty answer after it; else 0.0.
    `reward()` makes it a rubric leaf named "think_format".

    Args:
        tag: The reasoning block's tag name.
        strict: A reply that never closed its think block has no answer.
        extract: Applied to the text after thinking (e.g. `extract_boxed`).
    """

    def __init__(
        self, *, tag: str = _THINK, strict: bool = False, extract: Callable[[str], str | None] | None = None
    ) -> None:
        _check_tag(tag)
        if extract is not None and not callable(extract):
            raise ConfigTypeError(
                f"ThinkFormat extract must be a function such as extract_boxed, got {extract!r}"
            )
        self.tag, self.strict, self.extract = tag, strict, extract

    def __repr__(self) -> str:
        return f"ThinkFormat(tag={self.tag!r}, strict={self.strict})"

    def parse_answer(self, text: str | None) -> str | None:
        """The answer after thinking (None when there is none)."""
        visible = strip_think(text or "", self.tag, strict=self.strict)
        answer = self.extract(visible) if self.extract is not None and visible else visible
        return answer or None

    __call__ = parse_answer

    def format_reward(self, text: str | None) -> float:
        """1.0 for exactly one think block, first and closed, followed by a non-empty answer."""
        if not text:
            return 0.0
        scan = _scan(text, [self.tag])
        if len(scan.spans) != 1 or scan.unclosed or scan.stray_closes:
            return 0.0
        (block,) = scan.spans
        first = not text[: block.start].strip()
        return 1.0 if first and text[block.end :].strip() else 0.0

    def reward(self, name: str = "think_format") -> FunctionRubric:
        """This format's `format_reward` as a rubric leaf (reads the last assistant message)."""

        def think_format(response: str) -> float:
            return self.format_reward(response)

        think_format.__doc__ = f"Thinks first, in exactly one <{self.tag}> block, then answers."
        return make_leaf(think_format, name=name)


def _longest_increasing(values: list[int]) -> int:
    """Length of the longest strictly increasing subsequence (tiny inputs: O(n^2) is fine)."""
    best = [1] * len(values)
    for i in range(len(values)):
        for j in range(i):
            if values[j] < values[i]:
                best[i] = max(best[i], best[j] + 1)
    return max(best, default=0)


__all__ = [
    "ThinkFormat",
    "XMLFormat",
    "extract_after",
    "extract_boxed",
    "extract_last_number",
    "extract_xml",
    "strip_think",
]
