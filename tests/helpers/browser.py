"""Headless Chromium for the tests that open pages: the report, the docs site, stored-XSS checks."""

from __future__ import annotations

import contextlib
import shutil
from collections.abc import Iterator
from typing import Any

#: The Chromium .ci/run installs (Debian's `chromium`).
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """A launched headless Chromium (playwright's `Browser`), closed after the block."""
    from playwright.sync_api import sync_playwright  # the [test] extra; only these tests need it

    with sync_playwright() as p:
        instance = p.chromium.launch(executable_path=CHROMIUM, args=_ARGS)
        try:
            yield instance
        finally:
            instance.close()
