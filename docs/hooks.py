"""MkDocs hook (mkdocs.yml `hooks:`): a reference page's `::: package` block lists exactly the
package's `__all__`, read at build time, so the reference cannot drift from the public API
(griffe alone cannot read an `__all__` built at import time, as `rubrics`' lazy names are)."""

from __future__ import annotations

import importlib
import re
from typing import Any

PUBLIC_PACKAGES = ("rubrics", "envs", "harness")


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """Add `options: members:` (the package's `__all__`) to each bare `::: package` line."""

    def members(match: re.Match[str]) -> str:
        package = match.group(1)
        names = "".join(f"        - {name}\n" for name in importlib.import_module(package).__all__)
        return f"::: {package}\n    options:\n      members:\n{names}"

    pattern = rf"^::: ({'|'.join(PUBLIC_PACKAGES)})\n(?!    options:)"
    return re.sub(pattern, members, markdown, flags=re.M)
