"""`rubric agents install/list`: the published agents installed ahead of time, and the notice a
first-use install prints on stderr (47.9)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.conftest import Invoke

pytestmark = [pytest.mark.agents, pytest.mark.slow]

PUBLISHED = ("mini-swe-agent", "codex", "claude-code")


def test_list_shows_each_published_agent_and_its_installed_version(rubric: Invoke, tmp_path: Path) -> None:
    done = rubric("agents", "list", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines[:3]] == list(PUBLISHED)
    assert (
        "installed 2.4.6" in lines[0] and "installed 0.169.0" in lines[1] and "installed 2.1.197" in lines[2]
    )
    empty = rubric("agents", "list", cwd=tmp_path, env={"RUBRIC_AGENT_CACHE": str(tmp_path / "none")})
    assert [line.split()[-2:] for line in empty.stdout.splitlines()[:3]] == [["not", "installed"]] * 3


def test_install_of_installed_agents_is_quiet_and_offline(rubric: Invoke, tmp_path: Path) -> None:
    done = rubric("agents", "install", *PUBLISHED, cwd=tmp_path, env={"PATH": str(tmp_path)})  # no npm
    assert done.returncode == 0, done.stderr
    assert [line.split(":")[1].split(" in ")[0].strip() for line in done.stdout.splitlines()] == [
        "already installed"
    ] * 3
    assert "installing" not in done.stderr


def test_a_first_install_says_what_where_and_how_big_on_stderr(rubric: Invoke, tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    no_npm = rubric("agents", "install", "codex", cwd=tmp_path, env={"RUBRIC_AGENT_CACHE": str(cache), "PATH": str(tmp_path)})  # fmt: skip
    assert no_npm.returncode == 2
    notice, error = no_npm.stderr.strip().splitlines()
    assert notice.startswith("rubric: installing codex (@openai/codex@0.169.0, about 400 MB) with npm into ")
    assert str(cache / "npm") in notice and "rubric agents install NAME" in notice
    assert "needs npm" in error
    # pip with no index to reach: the notice, then pip's failure (nothing is downloaded)
    offline = {"RUBRIC_AGENT_CACHE": str(cache), "PIP_CONFIG_FILE": "/dev/null", "PIP_NO_INDEX": "1"}
    no_index = rubric("agents", "install", "mini-swe-agent", cwd=tmp_path, env=offline)
    assert no_index.returncode == 2
    assert no_index.stderr.startswith(
        f"rubric: installing mini-swe-agent (mini-swe-agent==2.4.6, about 730 MB) with pip into {cache / 'pip'}"
    )
    assert "mini-swe-agent==2.4.6 failed" in no_index.stderr


def test_an_unknown_name_lists_the_published_agents(rubric: Invoke, tmp_path: Path) -> None:
    done = rubric("agents", "install", "bash", "codx", cwd=tmp_path)
    assert done.returncode == 2
    assert (
        "'bash', 'codx': not a published agent; the published agents are mini-swe-agent, codex, claude-code"
        in done.stderr
    )
