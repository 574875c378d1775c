"""`rubric audit ENV` on agent environments (rubrics that read the sandbox): the file-level hack
probes play as `command:` agents on bwrap, scored by the environment's own rubric; a weak check
is beaten with evidence, a sound one is not, and the do-nothing agent scores 0."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envs import Environment, audit
from envs.agents import command_passes, file_contains
from harness.runtimes import Sandbox
from harness.scripted import ShellScript
from tests.helpers.processes import run

pytestmark = [pytest.mark.agents, pytest.mark.bwrap, pytest.mark.slow, pytest.mark.timeout(300)]

SOLVE = ShellScript(["printf hi > hello.txt", "echo secret-4711 > answer.txt"], "both files are written")
PROMPT = "Write hi into hello.txt, and the code on the card into answer.txt."


def _weak() -> Environment:
    env = Environment(
        [{"prompt": "Write hi into hello.txt."}], {"file": file_contains("hello.txt", "")}, name="weak"
    )
    env.scripted_policies = {"solve": SOLVE}
    return env


def _sound() -> Environment:
    rubric = {
        "hello": file_contains("hello.txt", "hi"),
        "code": command_passes("grep -qx secret-4711 answer.txt"),
    }
    env = Environment([{"prompt": PROMPT}], rubric, name="sound")
    env.scripted_policies = {"solve": SOLVE}
    return env


def _beats(report: object) -> dict[str, dict[str, object]]:
    return {f.probe: f.evidence for f in report.flags_of("hackable")}  # type: ignore[attr-defined]


def test_a_rubric_that_only_checks_a_file_exists_is_beaten_by_weak_empty_with_evidence() -> None:
    report = audit(_weak(), 1, runtime="bwrap")
    assert report.mean("reward", "agent:reference") == 1.0
    assert report.mean("reward", "agent:nothing") == 0.0
    evidence = _beats(report)["agent:weak-empty"]
    assert "wrote hello.txt" in str(evidence["agent"])
    assert evidence["details"] == {"file": {"path": "hello.txt", "exists": True, "content": ""}}
    assert "agent:nothing" not in _beats(report)


def test_a_custom_sandbox_reader_is_probed_when_asked() -> None:
    async def made(sandbox: Sandbox) -> float:
        return 1.0 if (await sandbox.exec(["test", "-e", "out.txt"])).ok else 0.0

    env = Environment([{"prompt": "Write the sum into out.txt."}], {"made": made}, name="custom")
    assert not audit(env, 1).flags_of("hackable")  # no file_contains/command_passes: replies only
    report = audit(env, 1, agent_probes=True, runtime="bwrap")
    assert "agent:weak-empty" in _beats(report)  # no solving policy: beats are against reward 1
    assert "wrote out.txt" in str(_beats(report)["agent:weak-empty"]["agent"])


def test_a_sound_rubric_is_not_beaten_and_doing_nothing_scores_zero() -> None:
    report = audit(_sound(), 1, runtime="bwrap")
    assert report.mean("reward", "agent:reference") == 1.0
    assert report.mean("reward", "agent:nothing") == 0.0
    for probe in ("weak-empty", "weak-constant", "weak-shaped", "pass-markers"):
        assert report.mean("reward", f"agent:{probe}") is not None
        assert report.mean("reward", f"agent:{probe}") < 1.0  # type: ignore[operator]
    assert not report.flags_of("hackable")


ENV_FILE = """
from envs import Environment
from envs.agents import file_contains
from harness.scripted import ShellScript

def load_environment():
    env = Environment([{"prompt": "Write hi into hello.txt."}], {"file": file_contains("hello.txt", "")}, name="weak")
    env.scripted_policies = {"solve": ShellScript(["printf hi > hello.txt"], "the file is written")}
    return env
"""


def test_the_cli_reports_the_beats_with_evidence_in_json_and_html_and_strict_fails(tmp_path: Path) -> None:
    (tmp_path / "weak_env.py").write_text(ENV_FILE)
    out, page = tmp_path / "audit.json", tmp_path / "audit.html"
    args = ["weak_env.py", "-n", "1", "--runtime", "bwrap", "--json", str(out), "--html", str(page)]
    done = run("audit", *args, "--strict", cwd=tmp_path, timeout=240)
    assert done.returncode == 1, done.stderr
    assert "hackable: agent probe weak-empty" in done.stdout and "evidence: wrote hello.txt" in done.stdout
    flags = {f["probe"]: f for f in json.loads(out.read_text())["flags"]}
    assert flags["agent:weak-empty"]["evidence"]["agent"] == "wrote hello.txt\n"
    assert "agent:nothing" not in flags
    assert "wrote hello.txt" in page.read_text()
