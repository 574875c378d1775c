"""`rubric audit ENV` end to end: the table, --json, --html, --strict exit codes, judges."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from tests.cli.conftest import Invoke

ENV_FILE = """
import re
from envs import SingleTurnEnv
from rubrics import LLMJudge, WeightedSum
from rubrics.parsers import extract_xml

ROWS = [{"question": f"What is {a} + {b}?", "answer": str(a + b)} for a, b in [(2, 2), (3, 4), (10, 5)]]


def oracle(messages, tools):
    a, b = map(int, re.findall(r"\\d+", messages[-1]["content"])[:2])
    return f"<answer>{a + b}</answer>"


def judge(messages, tools):
    text = messages[-1]["content"]
    return "Score: 1" if "full marks" in text or "<answer>" + text.rsplit("Reference: ", 1)[1].strip() + "</answer>" in text else "Score: 0"


def correct(response, answer):
    return 1.0 if extract_xml(response, "answer") == answer else 0.0


def lenient_format(response):
    return 0.0 if "<answer>" in response and "</answer>" not in response else 1.0


def strict_format(response):
    return 1.0 if re.fullmatch(r"\\s*<answer>\\d+</answer>\\s*", response) else 0.0


def load_environment(hackable=False, judged=False):
    nodes = {"correct": correct, "format": lenient_format if hackable else strict_format}
    if judged:
        nodes["judge"] = LLMJudge("{{ response }} Reference: {{ answer }}", model="unset", base_url="http://127.0.0.1:9/v1")
    env = SingleTurnEnv(ROWS, WeightedSum(nodes), name="sums <b>&amp;</b>")
    env.scripted_policies = {"oracle": oracle, "judge": judge}
    return env
"""


@pytest.fixture
def env_file(tmp_path: Path) -> str:
    path = tmp_path / "sums_env.py"
    path.write_text(ENV_FILE)
    return str(path)


def test_gsm8k_table_in_seconds_offline(rubric: Invoke, tmp_path: Path) -> None:
    started = time.perf_counter()
    proc = rubric("audit", "gsm8k", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert time.perf_counter() - started < 30
    out = proc.stdout
    assert "audit of gsm8k" in out and "nothing flagged" in out
    for probe in (
        "reference",
        "empty",
        "bare_answer",
        "wrong_answer",
        "think_only",
        "injection",
        "truncated",
    ):
        assert probe in out
    assert "correct" in out and "format" in out and "20 rows" in out


def test_strict_exits_1_only_when_flagged(rubric: Invoke, tmp_path: Path, env_file: str) -> None:
    sound = rubric("audit", env_file, "--strict", cwd=tmp_path)
    assert sound.returncode == 0, sound.stderr
    assert "nothing flagged" in sound.stdout
    hackable = rubric("audit", env_file, "-a", '{"hackable": true}', "--strict", cwd=tmp_path)
    assert hackable.returncode == 1, hackable.stderr
    assert "hackable: empty" in hackable.stdout and "on format" in hackable.stdout
    without_strict = rubric("audit", env_file, "-a", '{"hackable": true}', cwd=tmp_path)
    assert without_strict.returncode == 0


def test_json_to_stdout_and_to_a_file(rubric: Invoke, tmp_path: Path, env_file: str) -> None:
    proc = rubric("audit", env_file, "-a", '{"hackable": true}', "--json", "-n", "2", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)  # nothing but the JSON on stdout
    assert data["flagged"] is True and data["num_examples"] == 2
    assert {(f["node"], f["probe"]) for f in data["flags"]} >= {("format", "empty"), ("format", "whitespace")}
    assert data["nodes"]["reward"]["reference"]["mean"] == 1.0
    out = tmp_path / "ci" / "audit.json"
    written = rubric("audit", env_file, "--json", str(out), cwd=tmp_path)
    assert written.returncode == 0 and "audit of" in written.stdout and f"wrote {out}" in written.stdout
    assert json.loads(out.read_text())["flagged"] is False


def test_html_report_escapes_every_string(rubric: Invoke, tmp_path: Path, env_file: str) -> None:
    out = tmp_path / "audit.html"
    proc = rubric("audit", env_file, "-a", '{"hackable": true}', "--html", str(out), cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    page = out.read_text()
    assert "<b>" not in page and "sums &lt;b&gt;&amp;amp;&lt;/b&gt;" in page  # the env's name, escaped once
    assert "hackable" in page and "wrong_answer" in page and "&lt;think&gt;" in page
    default = rubric("audit", env_file, "--html", cwd=tmp_path)
    assert default.returncode == 0 and list(tmp_path.glob("audit--sums*.html"))


def test_judge_model_from_a_scripted_policy(rubric: Invoke, tmp_path: Path, env_file: str) -> None:
    args = ("audit", env_file, "-a", '{"judged": true}', "--json", "--judge-model", "scripted:judge")
    proc = rubric(*args, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["judges"] == ["judge"]
    assert [f["probe"] for f in data["flags"] if f["kind"] == "judge_injection"] == ["injection"]
    assert (
        data["nodes"]["judge"]["injection"]["mean"] == 1.0
        and data["nodes"]["judge"]["wrong_answer"]["mean"] == 0.0
    )


def test_errors_are_one_line(rubric: Invoke, tmp_path: Path, env_file: str) -> None:
    proc = rubric("audit", env_file, "--judge-base-url", "http://127.0.0.1:9/v1", cwd=tmp_path)
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "rubric audit: error: --judge-base-url needs --judge-model (the judge's model name, or scripted:POLICY)"
    ]
    unreachable = rubric(
        "audit", env_file, "-a", '{"judged": true}', cwd=tmp_path
    )  # the judge's own endpoint
    assert unreachable.returncode == 2 and len(unreachable.stderr.strip().splitlines()) == 1
    assert "cannot reach its endpoint" in unreachable.stderr
    missing = rubric("audit", "no-such-env", cwd=tmp_path)
    assert missing.returncode == 2 and "cannot load environment 'no-such-env'" in missing.stderr
