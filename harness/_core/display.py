"""How the foundation's objects are shown: the page style, escaping, the one formatter of a
score and of "unscored" (NaN with its reason), and the registry through which the view layer
draws them in notebooks.

The data model never imports a view (as pandas' frames do not import their styler): the views
(`harness._views`) register a renderer per kind when they are imported, and the `harness`
package names them with `provide_html_views`, so that they load only when a notebook first
draws something and `import rubrics` does not pay for them.
"""

from __future__ import annotations

import html
import importlib
import math
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

_HTML_VIEWS: dict[str, Callable[..., str]] = {}
_PROVIDERS: list[str] = []


STYLE = """<style>
.rv{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;font-size:13px;line-height:1.45;color:#1f2328}
.rv table{border-collapse:collapse;margin:4px 0}
.rv td,.rv th{padding:2px 10px 2px 4px;text-align:left;vertical-align:top;border-bottom:1px solid #eaeef2}
.rv th{font-weight:600;background:#f6f8fa}
.rv td.num,.rv th.num{text-align:right;font-variant-numeric:tabular-nums}
.rv .muted{color:#656d76}.rv .bad{color:#cf222e}.rv .warn{color:#9a6700}.rv .good{color:#1a7f37}
.rv .nan{background:#fff8c5}
.rv .msg{border-left:3px solid #d0d7de;margin:6px 0;padding:2px 8px}
.rv .msg .role{font-weight:600;font-size:11px;text-transform:uppercase;color:#656d76}
.rv .msg-user{border-color:#0969da}.rv .msg-assistant{border-color:#1a7f37}
.rv .msg-tool{border-color:#8250df}.rv .msg-system{border-color:#afb8c1}
.rv pre{white-space:pre-wrap;word-break:break-word;margin:2px 0;font:12px ui-monospace,SFMono-Regular,Menlo,monospace}
.rv .call{color:#9a6700}
.rv .tree td:first-child{white-space:nowrap}
.rv .score{font-weight:600}
.rv details>summary{cursor:pointer;color:#0969da}
.rv .hist rect{fill:#54aeff}.rv .hist text{font-size:10px;fill:#656d76}
.rv .grid{display:flex;gap:24px;flex-wrap:wrap;align-items:flex-start}
.rv .head{font-weight:600;margin:6px 0 2px}
</style>"""


def esc(value: object) -> str:
    """`value` as text safe inside HTML elements and quoted attributes."""
    return html.escape(value if isinstance(value, str) else str(value), quote=True)


def fmt(value: object, digits: int = 4, *, stderr: float | None = None) -> str:
    """A score for people, the one way every view writes one.

    Args:
        value: A score or a mean of scores. NaN (unscored) is "NaN"; None (no value, such as a
            mean over no scored rollout) is "n/a"; anything that is not a number (a
            hand-edited results file) comes back as its text, which the caller escapes like
            every other value.
        digits: Significant digits, with no float noise and no padding zeros: `0.3333`, `1`,
            `1.5e+06`.
        stderr: A standard error to show after the value, to 2 significant digits.

    Returns:
        The text, e.g. "0.75", "0.75 ± 0.043", "NaN" or "n/a".
    """
    if value is None:
        return "n/a"
    if isinstance(value, float) and math.isnan(value):
        return "NaN"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return str(value)
    return f"{value:.{digits}g}" + (f" ± {fmt(stderr, 2)}" if stderr is not None else "")


def unscored(reason: str | None = None) -> str:
    """Why a score is NaN, for people: "unscored: <reason>", or "unscored (NaN)" when no
    reason was recorded (the caller escapes it)."""
    return f"unscored: {reason}" if reason else "unscored (NaN)"


def unscored_count(count: int, reasons: Iterable[tuple[str, int]] = ()) -> str:
    """How many are unscored and why, commonest reason first (a summary's `unscored_reasons`):
    "3: judge reply had no score (2); timeout (1)", or "0"."""
    listed = "; ".join(f"{why} ({n:,})" for why, n in reasons)
    return f"{count:,}" + (f": {listed}" if count and listed else "")


def register_html_view(kind: str, render: Callable[..., str]) -> None:
    """Draw objects of `kind` with `render` (called by the view layer when it is imported).

    Args:
        kind: The name objects ask for (`HtmlRepr.html_kind`, or `render_html`'s `kind`).
        render: Returns escaped HTML for the object (and any further arguments).
    """
    _HTML_VIEWS[kind] = render


def provide_html_views(module: str) -> None:
    """Name a module whose import registers renderers; it is imported on the first drawing.

    Args:
        module: A dotted module name (the `harness` package names its views).
    """
    if module not in _PROVIDERS:
        _PROVIDERS.append(module)


def html_view(kind: str) -> Callable[..., str] | None:
    """The renderer registered for `kind`, loading the named view modules once if needed."""
    if kind not in _HTML_VIEWS:
        for module in _PROVIDERS:
            importlib.import_module(module)
    return _HTML_VIEWS.get(kind)


def render_html(kind: str, *args: Any, **kwargs: Any) -> str | None:
    """Draw with the renderer for `kind`; None (Jupyter then shows the repr) when there is none."""
    render = html_view(kind)
    return None if render is None else render(*args, **kwargs)


class HtmlRepr:
    """Mixin: `_repr_html_` through the renderer registered for the class's `html_kind`
    (None, so Jupyter falls back to the repr, when no view layer is provided)."""

    html_kind: ClassVar[str] = ""

    def _repr_html_(self) -> str | None:
        return render_html(self.html_kind, self)


__all__ = [
    "STYLE",
    "HtmlRepr",
    "esc",
    "fmt",
    "html_view",
    "provide_html_views",
    "register_html_view",
    "render_html",
    "unscored",
    "unscored_count",
]
