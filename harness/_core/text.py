"""Text that came from outside (a model, tool, judge or dataset) made safe for a terminal.

Such text may hold escape sequences (clear the screen, set the window title, hyperlinks), a
NUL, bidirectional overrides that reorder what the reader sees, or `[bold]`-like strings that
rich would read as markup. `escape_control` turns every such character into a visible escape
(`\\x1b`, `\\u202e`), keeping newlines and tabs; `safe_text` returns a `rich.text.Text`, which
rich never parses as markup. Every terminal view of outside text goes through here (the HTML
report escapes with `html.escape` in harness/_views/html.py).
"""

from __future__ import annotations

import re
from typing import Any

from rich.text import Text

# C0 controls except tab and newline, DEL and C1 controls; bidi embeddings, overrides,
# isolates and marks; zero-width and invisible formatting characters; line/paragraph
# separators; the byte-order mark; interlinear annotation characters.
_UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u115f\u1160\u180e\u200b-\u200f\u2028-\u202e"
    "\u2060-\u2069\u3164\ufeff\ufff9-\ufffb]"
)


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_control(text: object) -> str:
    """`text` (made a str) with every control, bidi and invisible character shown as an escape.

    Args:
        text: Anything; it is shown as `str(text)`.

    Returns:
        Printable text: only newlines and tabs are kept as they are.
    """
    value = text if isinstance(text, str) else str(text)
    return _UNSAFE.sub(_escape, value)


def safe_text(text: Any, style: str = "") -> Text:
    """Outside text as a rich `Text`: control characters escaped, never read as markup."""
    return Text(escape_control(text), style=style)


__all__ = ["escape_control", "safe_text"]
