"""MkDocs hook (mkdocs.yml `hooks:`): a reference page's `::: package` block lists exactly the
package's (or public module's) `__all__`, read at build time, so the reference cannot drift from the public API
(griffe alone cannot read an `__all__` built at import time, as `rubrics`' lazy names are)."""

from __future__ import annotations

import importlib
import inspect
import re
from typing import Any

PUBLIC_PACKAGES = ("rubrics", "envs", "harness")
# The public modules (DESIGN.md), each with a reference page of its own.
PUBLIC_MODULES = (
    "rubrics.judges", "rubrics.parsers", "rubrics.credit", "rubrics.calibration",
    "envs.hub", "envs.reference", "envs.agents",
    "harness.runtimes", "harness.proxy", "harness.scripted",
)  # fmt: skip


def on_page_markdown(markdown: str, **kwargs: Any) -> str:
    """Add `options: members:` (the package's `__all__`) to each bare `::: package` line.

    A public module in `__all__` (`rubrics.judges`) has a reference page of its own: it is listed
    with a link there (its anchor kept) rather than documented twice, which autorefs refuses.
    """

    def members(match: re.Match[str]) -> str:
        package = match.group(1)
        module = importlib.import_module(package)
        own = [name for name in module.__all__ if not inspect.ismodule(getattr(module, name))]
        names = "".join(f"        - {name}\n" for name in own)
        pages = "".join(
            f'\n<a id="{package}.{name}"></a>[`{package}.{name}`]({package}.{name}.md): a public module, '
            "on a page of its own.\n"
            for name in module.__all__
            if name not in own
        )
        return f"::: {package}\n    options:\n      members:\n{names}{pages}"

    names = "|".join(re.escape(name) for name in (*PUBLIC_MODULES, *PUBLIC_PACKAGES))
    pattern = rf"^::: ({names})\n(?!    options:)"
    return re.sub(pattern, members, markdown, flags=re.M)
