"""Read a tool function's docstring into a tool description and per-parameter descriptions.

The model only sees what the schema says, so the prose a developer already wrote for humans
(Google, NumPy or reST style; detected automatically by `docstring_parser`) is reused instead
of asking them to repeat it in decorators.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import docstring_parser


@dataclass(frozen=True)
class DocInfo:
    """What a docstring says: the tool's description and each parameter's description."""

    description: str = ""
    params: dict[str, str] = field(default_factory=dict)


def _unwrap(text: str) -> str:
    """Join a hard-wrapped parameter description into one line (it is sent as one string)."""
    return " ".join(text.split())


def parse_docstring(doc: str | None) -> DocInfo:
    """Parse `doc` in whichever of the Google, NumPy or reST styles it is written.

    The description is the summary line plus any prose paragraphs that follow it (but not
    the Args/Returns/Raises sections). Text that no style can parse is kept whole as the
    description, so an unusual docstring never stops a tool from being built.
    """
    if not doc or not doc.strip():
        return DocInfo()
    try:
        parsed = docstring_parser.parse(doc, style=docstring_parser.DocstringStyle.AUTO)
    except docstring_parser.ParseError:
        return DocInfo(description=inspect.cleandoc(doc))
    parts = [p.strip() for p in (parsed.short_description, parsed.long_description) if p and p.strip()]
    params: dict[str, str] = {}
    for param in parsed.params:
        if not param.description:
            continue
        # NumPy style allows "x, y : int" for two parameters sharing one description.
        for name in param.arg_name.split(","):
            name = name.strip().lstrip("*")
            if name:
                params[name] = _unwrap(param.description)
    return DocInfo(description="\n\n".join(parts), params=params)


def docs_of(fn: Callable[..., Any]) -> DocInfo:
    """The `DocInfo` of a function (or of a callable object's `__call__` if it has no docstring)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    doc = inspect.getdoc(fn)
    if not doc and not inspect.isroutine(fn):
        doc = inspect.getdoc(getattr(fn, "__call__", None))
    return parse_docstring(doc)


__all__ = ["DocInfo", "docs_of", "parse_docstring"]
