"""Jinja2 templates for the system prompt and the user turn.

StrictUndefined turns a misspelt variable into an error instead of an empty string, and the
variables a template uses are read from its syntax tree at construction, so a template that
refers to a column the dataset lacks fails before any request is sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jinja2
import jinja2.meta

from harness._core.errors import ConfigError, ConfigTypeError

_JINJA = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)


class Template:
    """A compiled template that knows which row columns it reads."""

    def __init__(self, text: str, what: str) -> None:
        if not isinstance(text, str):
            raise ConfigTypeError(f"{what} must be a string (a jinja2 template), got {type(text).__name__}")
        try:
            tree = _JINJA.parse(text)
        except jinja2.TemplateSyntaxError as exc:
            raise ConfigError(
                f"{what} is not a valid jinja2 template (line {exc.lineno}: {exc.message})"
            ) from exc
        self.text = text
        self.what = what
        self.variables: set[str] = set(jinja2.meta.find_undeclared_variables(tree))
        self._template = _JINJA.from_string(text)

    def check(self, columns: set[str], dataset_name: str = "dataset") -> None:
        """Raise if the template reads a column that `columns` lacks, listing what exists."""
        missing = sorted(self.variables - columns)
        if missing:
            raise ConfigError(
                f"{self.what} uses {', '.join('{{ ' + m + ' }}' for m in missing)} but {dataset_name} has no "
                f"such column; available columns: {', '.join(sorted(columns)) or 'none'} "
                f"(map another name with columns={{{missing[0]!r}: 'your_column'}})"
            )

    def render(self, row: Mapping[str, Any]) -> str:
        """Render with the row's columns as variables; errors name the template and example."""
        try:
            return self._template.render(dict(row))
        except jinja2.UndefinedError as exc:
            raise ValueError(
                f"{self.what} failed for example {row.get('example_id')!r}: {exc.message}"
            ) from exc

    def __reduce__(self) -> tuple[Any, ...]:
        # A compiled jinja2 template holds generated code; pickle the text and compile again.
        return (Template, (self.text, self.what))

    def __repr__(self) -> str:
        return f"Template({self.text!r})"


__all__ = ["Template"]
