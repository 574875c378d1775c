"""`rubric doctor` / `harness.doctor`: each property RL training needs, checked against the scripted
endpoint told to get each one wrong, from Python and from the command line."""

from __future__ import annotations

import json
from typing import Any

import pytest

from harness import DoctorReport, EndpointError, ScriptedEndpoint, doctor
from tests.helpers.processes import run

pytestmark = [pytest.mark.timeout(120)]

#: Each property the scripted endpoint can get wrong, the check that must catch it, and
#: whether training needs it (then the report is not ok).
BROKEN = [
    ("tool_calls", "tool calls", "fail", True),
    ("token_ids", "token ids", "fail", True),
    ("prefix", "prefix property", "fail", True),
    ("template", "chat template", "fail", True),
    ("logprobs", "logprobs", "fail", True),
    ("stream", "streaming", "fail", False),
    ("model_version", "model version", "warn", False),
    ("concurrency", "concurrency", "warn", False),
]


def agent_policy(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Any:
    """Calls the first tool offered; otherwise answers in words."""
    if tools:
        return {
            "tool_calls": [
                {"function": {"name": tools[0]["function"]["name"], "arguments": {"city": "Paris"}}}
            ]
        }
    return "hello there friend"


def check(broken: tuple[str, ...] = (), latency: float = 0.0) -> DoctorReport:
    with ScriptedEndpoint(agent_policy, broken=broken, latency=latency) as endpoint:
        return doctor(endpoint.base_url, max_concurrency=8)


def test_a_healthy_endpoint_passes_every_check() -> None:
    report = check(latency=0.3)
    assert [c.status for c in report.checks] == ["pass"] * 9, report.checks
    assert report.ok and report.model == "scripted"
    assert report.check("tool calls").detail == 'parsed get_weather({"city": "Paris"})'
    assert report.check("prefix property").detail.startswith("turn 2's")
    served = int(report.check("concurrency").detail.split()[0])
    assert served >= 2, report.check("concurrency")


@pytest.mark.parametrize(("broken", "name", "status", "needed"), BROKEN, ids=[b[0] for b in BROKEN])
def test_each_broken_property_is_found_with_its_fix(
    broken: str, name: str, status: str, needed: bool
) -> None:
    report = check((broken,), latency=0.3 if broken == "concurrency" else 0.0)
    found = report.check(name)
    assert found.status == status and found.fix, found
    assert report.ok is not needed
    others = [c for c in report.checks if c.name != name and c.status != "pass"]
    if broken == "token_ids":  # what needs the ids says so, and nothing else fails
        assert {c.name for c in others} == {"prefix property", "chat template"}
        assert all(c.detail == "not checked: no token ids" for c in others)
    else:
        assert not others, others
    if broken == "concurrency":
        assert found.detail.startswith("1 at once"), found


def test_nothing_answering_is_one_clear_error() -> None:
    with ScriptedEndpoint(agent_policy) as endpoint:
        url = endpoint.base_url
    with pytest.raises(EndpointError, match=r"cannot list the models at .*name the model with -m"):
        doctor(url)


@pytest.mark.slow
def test_rubric_doctor_prints_the_table_and_exits_by_what_training_needs(tmp_path: Any) -> None:
    with ScriptedEndpoint(agent_policy) as endpoint:
        healthy = run("doctor", endpoint.base_url, "--max-concurrency", "2", cwd=tmp_path, timeout=120)
    assert healthy.returncode == 0, healthy.stderr
    assert "ready for training" in healthy.stdout and "prefix property" in healthy.stdout
    with ScriptedEndpoint(agent_policy, broken=("prefix",)) as endpoint:
        broken = run("doctor", endpoint.base_url, "-m", "scripted", "--json", cwd=tmp_path, timeout=120)
    assert broken.returncode == 1, broken.stderr
    report = json.loads(broken.stdout)
    assert report["ok"] is False
    assert {c["name"]: c["status"] for c in report["checks"]}["prefix property"] == "fail"
