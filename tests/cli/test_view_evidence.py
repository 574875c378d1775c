"""`rubric view` shows the evidence behind a score (47.12) and a Harbor verifier's reward.json
components in place (47.13): test.sh's output, the agent's command, exit code, stdout and
stderr, the detail of `command_passes` and `file_contains`, readable in the terminal and in the
HTML report (never raw JSON); the components under the verifier's node, "not run" (not NaN)
on a task that writes none, and in the HTML reward tree."""

from __future__ import annotations

import base64
import gzip
import json
import re
import textwrap
from pathlib import Path

import pytest

from tests.cli.conftest import Invoke
from tests.envs.agents.conftest import TEST_IMAGE

pytestmark = [pytest.mark.agents, pytest.mark.docker, pytest.mark.slow]

# Two Harbor tasks on the test image: one writes reward.json with components, one reward.txt.
WITH_PARTS = (
    'echo "tests ran: marker-out"; echo \'{"reward": 1, "a": 1, "b": 0.5}\' > /logs/verifier/reward.json'
)
PLAIN = "echo 1 > /logs/verifier/reward.txt"
ENV_FILE = textwrap.dedent(
    """
    from envs import HarborVerifier, from_harbor
    from envs.agents import command_passes, file_contains
    from rubrics import WeightedSum


    def load_environment(path):
        tree = WeightedSum(
            {
                "tests": HarborVerifier(),
                "check": command_passes("echo checked-out; echo checked-err >&2"),
                "file": file_contains("/tmp/note.txt", "hi"),
            }
        )
        return from_harbor(path, rubric=tree)
    """
)
AGENT = "command:printf hi > /tmp/note.txt; echo said-out; echo said-err >&2"


def _task(root: Path, name: str, test_sh: str) -> None:
    folder = root / name
    (folder / "tests").mkdir(parents=True)
    (folder / "task.toml").write_text(f'[environment]\ndocker_image = "{TEST_IMAGE}"\n')
    (folder / "instruction.md").write_text(f"Task {name}.")
    (folder / "tests" / "test.sh").write_text(test_sh)


def _rows(view: str) -> list[tuple[str, str]]:
    """The score table's rows: (name with its indent, score)."""
    found = re.finditer(r"^│ ( *\S+) +│ +(\S+) │", view, re.MULTILINE)
    return [(m.group(1), m.group(2)) for m in found]


def _run(rubric: Invoke, root: Path) -> Path:
    _task(root / "tasks", "parts", WITH_PARTS)
    _task(root / "tasks", "plain", PLAIN)
    (root / "env_file.py").write_text(ENV_FILE)
    done = rubric(
        "eval", "env_file.py", "-a", json.dumps({"path": str(root / "tasks")}), "--agent", AGENT,
        "--no-progress", "-o", "out", cwd=root,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return root


def test_view_shows_the_evidence_and_the_components_in_place(rubric: Invoke, tmp_path: Path) -> None:
    run = _run(rubric, tmp_path)
    _check_terminal(rubric, run)
    _check_html(rubric, run)


def _check_terminal(rubric: Invoke, run: Path) -> None:
    parts = rubric("view", "out", "--rollout", "parts", cwd=run, env={"COLUMNS": "160"})
    assert parts.returncode == 0, parts.stderr
    view = parts.stdout
    # the components under the verifier's node, before its siblings
    assert _rows(view)[-6:] == [
        ("reward", "1"),
        ("  tests", "1"),
        ("    a", "1"),
        ("    b", "0.5"),
        ("  check", "1"),
        ("  file", "1"),
    ], view
    assert "tests ran: marker-out" in view and "exit_code 0" in view  # test.sh's output
    assert "agent command · exit 0" in view and "said-out" in view and "said-err" in view
    assert "checked-out" in view and "checked-err" in view  # command_passes' output
    assert "path /tmp/note.txt · exists true · content hi" in view  # file_contains
    assert '{"' not in view  # no raw JSON
    plain = rubric("view", "out", "--rollout", "plain", cwd=run, env={"COLUMNS": "160"}).stdout
    assert "not run" in plain and "nan" not in plain.lower(), plain


def _report(run: Path, rubric: Invoke) -> dict[str, object]:
    done = rubric("view", "out", "--html", cwd=run)
    assert done.returncode == 0, done.stderr
    page = (run / "out" / "report.html").read_text()
    data = json.loads(re.search(r'id="report-data">(.*?)</script>', page, re.DOTALL).group(1))  # type: ignore[union-attr]
    packed = data["packed"]["panels"]
    data["panels"] = json.loads(gzip.decompress(base64.b64decode(packed)))
    return data


def _check_html(rubric: Invoke, run: Path) -> None:
    data = _report(run, rubric)
    assert data["columns"] == ["tests", "tests.a", "tests.b", "check", "file"]
    rows = {row[1]: row[8] for row in data["rows"]}  # type: ignore[attr-defined]
    assert rows == {"parts": [1, 1, 0.5, 1, 1], "plain": [1, "not run", "not run", 1, 1]}
    panels = dict(zip(rows, data["panels"], strict=True))  # type: ignore[call-overload]
    tree = panels["parts"].split('<div class="head">reward tree</div>')[1]
    paths = re.findall(r'data-path="([^"]*)"', tree)
    assert paths == ["", "tests", "tests.a", "tests.b", "check", "file"]
    assert "tests ran: marker-out" in tree and "exit_code 0" in tree
    assert "checked-out" in tree and "path /tmp/note.txt · exists true · content hi" in tree
    assert "&quot;exit_code&quot;" not in tree and '{"' not in tree  # readable, not raw JSON
    agent = panels["parts"].split('<div class="head">reward tree</div>')[0]
    assert "agent command · exit 0" in agent and "said-out" in agent and "said-err" in agent
    plain = panels["plain"].split('<div class="head">reward tree</div>')[1]
    row = re.search(r'data-path="tests.a">(.*?)</tr>', plain).group(1)  # type: ignore[union-attr]
    assert "not run" in row and "NaN" not in row
