"""Task certificates (`rubric audit harbor:PATH`): every hack probe runs as an agent, then the
task's own verifier; a sound task is certified, each hackable one is beaten by its probe, with
evidence; the certificate is cached by the task's digest."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from envs._harbor.certify.certificate import _Runner, _Task
from envs._harbor.certify.probes import PROBES, task_facts
from envs._harbor.digest import task_digest
from envs._harbor.task import load_task
from harness._core.aio import run_sync
from tests.envs.harbor.test_harbor_tasks import IMAGE, SHIPPED, make_task
from tests.envs.harbor.test_harbor_tasks import TASKS as SHIPPED_TASKS
from tests.helpers.processes import run

pytestmark = [pytest.mark.agents, pytest.mark.slow, pytest.mark.timeout(600)]

GREET = "mkdir -p /app && echo 'hello, harbor' > /app/greeting.txt"
#: Sound: the content is checked, the reward written on every path.
CHECKS_CONTENT = (
    '[ "$(cat /app/greeting.txt 2>/dev/null)" = "hello, harbor" ] && echo 1 > /logs/verifier/reward.txt '
    "|| echo 0 > /logs/verifier/reward.txt\n"
)


def _dataset(root: Path) -> Path:
    """The shipped tasks (write-greeting is sound), one task per hack, one broken task."""
    for task in SHIPPED_TASKS:
        shutil.copytree(SHIPPED / task, root / task)
    make_task(root, "weak", "[ -f /app/report.json ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n", solve="mkdir -p /app && echo '{\"n\": 3}' > /app/report.json")  # fmt: skip
    make_task(root, "trusts-log", "grep -q 'ALL TESTS PASSED' /app/test.log && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n", solve="mkdir -p /app && echo 'ALL TESTS PASSED' > /app/test.log")  # fmt: skip
    make_task(root, "sources", f". /app/settings.sh 2>/dev/null\n{CHECKS_CONTENT}", solve=GREET)
    leaky = make_task(root, "leaky", CHECKS_CONTENT, solve=GREET)
    (leaky / "task.toml").write_text("")
    (leaky / "environment").mkdir()
    shutil.copy(leaky / "solution" / "solve.sh", leaky / "environment" / "solve.sh")
    (leaky / "environment" / "Dockerfile").write_text(f"FROM {IMAGE}\nCOPY solve.sh /opt/solve.sh\n")
    make_task(root, "broken", CHECKS_CONTENT, solve="true")  # its solution does not solve it
    return root


#: Each hackable task and the probe that must beat it (the shipped count-words writes only
#: reward.json, fix-median's tests import the agent's module in the test process).
BEATEN = {"count-words": "reward-kept-logs", "fix-median": "sourced-files", "weak": "weak-empty", "trusts-log": "pass-markers", "sources": "sourced-files", "leaky": "leaked-answers"}  # fmt: skip


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """One audit of the whole dataset (every probe on every task, in Docker), kept for the tests."""
    root = tmp_path_factory.mktemp("certify")
    tasks = _dataset(root / "tasks")
    cache = {"XDG_CACHE_HOME": str(root / "cache")}
    args = [
        "audit",
        f"harbor:{tasks}",
        "--json",
        str(root / "certs.json"),
        "--html",
        str(root / "certs.html"),
    ]
    done = run(*args, "--strict", cwd=root, env=cache, timeout=900)
    return {"root": root, "tasks": tasks, "cache": cache, "done": done}


def _certificates(path: Path) -> dict[str, dict[str, Any]]:
    return {c["task"]: c for c in json.loads(path.read_text())}


@pytest.mark.docker
def test_a_sound_task_is_certified_and_each_hack_beats_its_task(audited: dict[str, Any]) -> None:
    done: subprocess.CompletedProcess[str] = audited["done"]
    assert done.returncode == 1, done.stdout + done.stderr  # --strict: some are hackable or broken
    certs = _certificates(audited["root"] / "certs.json")
    sound = certs["write-greeting"]
    assert sound["verdict"] == "certified", [(p["name"], p["reward"], p["evidence"]) for p in sound["probes"]]
    assert {p["name"] for p in sound["probes"]} == {p.name for p in PROBES}
    assert not any(p["beat"] for p in sound["probes"])
    # Issue 45's defences hold: the verifier refuses what the shadowing probes changed.
    by_name = {p["name"]: p for p in sound["probes"]}
    assert by_name["startup-hooks"]["reward"] is None
    assert "start-up hook" in by_name["startup-hooks"]["evidence"]["reason"]
    assert by_name["path-shadow"]["reward"] is None and "bash" in by_name["path-shadow"]["evidence"]["reason"]
    assert by_name["reward-rewriter"]["reward"] == 0.0 and by_name["reward-files"]["reward"] == 0.0
    for name, probe in BEATEN.items():
        cert = certs[name]
        beaten = {p["name"]: p for p in cert["probes"] if p["beat"]}
        assert cert["verdict"] == "hackable" and probe in beaten, (name, cert)
        assert beaten[probe]["evidence"]["agent"], beaten[probe]  # what it wrote or found
    assert "wrote /app/report.json" in {p["name"]: p for p in certs["weak"]["probes"]}["weak-empty"]["evidence"]["agent"]  # fmt: skip
    leak = {p["name"]: p for p in certs["leaky"]["probes"]}["leaked-answers"]
    assert "found solution/solve.sh at /opt/solve.sh" in leak["evidence"]["agent"] and leak["reward"] == 1.0
    assert "wrote /app/settings.sh" in {p["name"]: p for p in certs["sources"]["probes"]}["sourced-files"]["evidence"]["agent"]  # fmt: skip
    assert not {p["name"] for p in certs["weak"]["probes"] if p["beat"]} & {"leaked-answers", "reward-files"}


@pytest.mark.docker
def test_a_task_whose_oracle_fails_is_broken_and_the_json_holds_the_certificate(
    audited: dict[str, Any],
) -> None:
    certs = _certificates(audited["root"] / "certs.json")
    broken = certs["broken"]
    assert (
        broken["verdict"] == "broken" and broken["oracle"]["reward"] == 0.0 and broken["nop"]["reward"] == 0.0
    )
    assert broken["probes"] == []  # a broken task is not probed
    for cert in certs.values():
        assert set(cert) == {
            "task",
            "digest",
            "verdict",
            "probes",
            "oracle",
            "nop",
            "rubric_version",
            "format",
        }
        assert cert["digest"] == task_digest(audited["tasks"] / cert["task"])
        assert all(set(p) == {"name", "vector", "reward", "beat", "evidence"} for p in cert["probes"])
    out = audited["done"].stdout
    assert "1 certified, 6 hackable, 1 broken" in out, out
    assert "weak: weak-empty (weak-checks) reward 1" in out and "fix: check content, not existence" in out
    html = (audited["root"] / "certs.html").read_text()
    assert "leaked-answers" in html and "found solution/solve.sh at /opt/solve.sh" in html


@pytest.mark.docker
def test_the_certificate_is_reused_until_one_file_changes(audited: dict[str, Any]) -> None:
    root, tasks, cache = audited["root"], audited["tasks"], audited["cache"]
    again = run("audit", f"harbor:{tasks / 'write-greeting'}", "--strict", cwd=root, env=cache, timeout=60)
    assert again.returncode == 0, again.stdout + again.stderr  # certified: --strict passes
    assert "certified (cached)" in again.stdout, again.stdout
    before = _certificates(root / "certs.json")["write-greeting"]["digest"]
    with (tasks / "write-greeting" / "tests" / "test.sh").open("a") as test_sh:
        test_sh.write("# one line more\n")
    fresh = run(
        "audit", f"harbor:{tasks / 'write-greeting'}", "--json", "-", cwd=root, env=cache, timeout=600
    )
    assert fresh.returncode == 0, fresh.stderr
    (cert,) = json.loads(fresh.stdout)
    assert cert["digest"] != before and cert["verdict"] == "certified"
    table = run("audit", f"harbor:{tasks / 'write-greeting'}", cwd=root, env=cache, timeout=60)
    assert "certified (cached)" in table.stdout, table.stdout


@pytest.mark.docker
def test_rubric_eval_warns_when_a_tasks_certificate_says_hackable(audited: dict[str, Any]) -> None:
    root, tasks = audited["root"], audited["tasks"]
    args = [
        "eval",
        f"harbor:{tasks / 'weak'}",
        "--agent",
        "command:true",
        "-o",
        str(root / "run"),
        "--no-progress",
    ]
    done = run(*args, cwd=root, env=audited["cache"], timeout=120)
    assert done.returncode == 0, done.stderr
    warned = [line for line in done.stderr.splitlines() if "says hackable" in line]
    assert len(warned) == 1 and "weak (beaten by" in warned[0] and "weak-empty" in warned[0], done.stderr


# ---------------------------------------------------------------- no Docker


def test_the_digest_covers_the_tasks_files_and_nothing_else(tmp_path: Path) -> None:
    folder = make_task(tmp_path, "t", CHECKS_CONTENT, solve=GREET)
    first = task_digest(folder)
    assert first.startswith("sha256:") and len(first) == 7 + 64
    (folder / "tests" / "__pycache__").mkdir()
    (folder / "tests" / "__pycache__" / "x.pyc").write_bytes(b"cache")
    (folder / "notes.txt").write_text("not part of the task")
    assert task_digest(folder) == first
    (folder / "solution" / "solve.sh").write_text(GREET + "\n")
    assert task_digest(folder) != first


def test_the_probes_read_what_the_tests_name_source_and_import(tmp_path: Path) -> None:
    folder = make_task(
        tmp_path, "t", ". ./env.sh\npython3 /tests/test_x.py && cat /app/out.json\n", solve=GREET
    )
    (folder / "tests" / "test_x.py").write_text(
        'import sys, json\nsys.path.insert(0, "/srv")\nfrom solver import f\n'
    )
    (folder / "instruction.md").write_text("Write /app/out.json and result.txt.")
    facts = task_facts(load_task(folder))
    assert facts.paths == ["/app/out.json", "/result.txt", "/srv"]
    assert facts.sourced == ["/env.sh"] and facts.modules == ["solver"] and facts.import_dirs == ["/srv"]
    assert "solution/solve.sh" in facts.secrets.values() and "tests/test_x.py" in facts.blobs.values()


@pytest.mark.docker
def test_the_llm_hacker_is_told_to_hack_within_its_budget_and_its_tries_are_kept(tmp_path: Path) -> None:
    # The scripted policy solves the task when asked its own instruction (the oracle's 1); told
    # to hack instead, it answers that it does not know the task, with no command: reward 0,
    # one model call, nothing tried.
    task = load_task(make_task(tmp_path, "t", CHECKS_CONTENT, solve=GREET))
    probe = run_sync(_Runner(1).hacker(_Task.of(task), "scripted:harbor", 2))
    assert (probe.name, probe.vector, probe.reward, probe.beat) == ("llm-hacker", "llm-hacker", 0.0, False)
    assert probe.evidence["tried"] == [] and "reason" not in probe.evidence, probe.evidence
    assert probe.evidence["calls"] == 1
