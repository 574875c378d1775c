"""docs/guides/agents.md's CaptureProxy example runs as written and leaves nothing open: no aiohttp
"Unclosed client session" or connector warning at exit (issue 47.17)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.docs import code_block

pytestmark = [pytest.mark.slow]


def test_the_capture_proxy_example_prints_what_the_guide_says_and_closes_everything(tmp_path: Path) -> None:
    (tmp_path / "example.py").write_text(code_block("python", 'model_aliases=["gpt-5"]'))
    done = subprocess.run(
        [sys.executable, "-W", "default", "example.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "responses ['user'] '4' prompt_tokens=3 completion_tokens=1"
    assert "Unclosed" not in done.stderr and "ResourceWarning" not in done.stderr, done.stderr
