"""How many model calls an agent episode may make (issue 47.3): 250 by default, the environment's own
`max_turns` when it sets one, `--max-turns` over both; the run's summary says which."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from envs import Environment
from envs.agents import DEFAULT_MAX_CALLS, AgentRun
from tests.helpers.processes import run

pytestmark = [pytest.mark.agents, pytest.mark.bwrap, pytest.mark.slow]

ENV_FILE = """
from envs import Environment

def load_environment():
    env = Environment([{"prompt": "Talk."}], lambda completion: 1.0, name="talk")
    env.scripted_policies = {"talk": lambda messages, tools: "ok"}
    return env
"""

# Makes N model calls, one after the other, and prints each status.
CALLS = r"""
import json, os, sys, urllib.request, urllib.error
statuses = []
for _ in range(int(sys.argv[1])):
    request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode(),
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"})
    try:
        statuses.append(urllib.request.urlopen(request, timeout=60).status)
    except urllib.error.HTTPError as exc:
        statuses.append(exc.code)
print(statuses)
"""


@pytest.fixture
def files(tmp_path: Path) -> Path:
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "calls.py").write_text(CALLS)
    (tmp_path / "talk.py").write_text(ENV_FILE)
    return folder


def _eval(tmp_path: Path, files: Path, calls: int, *flags: str) -> tuple[dict[str, object], str]:
    out = tmp_path / f"run-{calls}-{len(flags)}"
    agent = f"command:python3 /agent/calls.py {calls}"
    args = ["eval", "talk.py", "-m", "scripted:talk", "--agent", agent, "--agent-files", str(files)]
    done = run(
        *args, "--runtime", "bwrap", *flags, "-o", str(out), "--no-progress", cwd=tmp_path, timeout=300
    )
    assert done.returncode == 0, done.stderr
    (row,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    return row, done.stdout


def test_an_agent_makes_more_than_ten_calls_by_default_and_the_summary_says_the_cap(
    tmp_path: Path, files: Path
) -> None:
    row, printed = _eval(tmp_path, files, 12)
    assert len(row["model_calls"]) == 12 and row["stop_reason"] == "completed"  # type: ignore[arg-type]
    assert row["state"]["agent"]["max_calls"] == DEFAULT_MAX_CALLS == 250  # type: ignore[index]
    assert "each agent episode: at most 250 model calls (--max-turns" in printed
    assert "and 600 s (the task's time limit)" in printed
    timing = row["timing"]  # the sandbox's figures too (issue 47.19)
    assert {"image", "sandbox_start", "sandbox_close", "generation", "scoring", "total"} <= set(timing)  # type: ignore[arg-type]
    assert 0 < timing["sandbox_start"] < timing["total"] and timing["sandbox_close"] > 0  # type: ignore[index]


def test_max_turns_caps_an_agents_calls(tmp_path: Path, files: Path) -> None:
    row, printed = _eval(tmp_path, files, 6, "--max-turns", "4")
    assert row["stop_reason"] == "max_turns" and row["state"]["agent"]["max_calls"] == 4  # type: ignore[index]
    assert "[200, 200, 200, 200, 400, 400]" in row["state"]["agent"]["stdout"]  # type: ignore[index]
    assert "at most 4 model calls" in printed


def test_an_environments_own_max_turns_caps_its_agents_calls() -> None:
    plain = Environment([{"prompt": "x"}], lambda completion: 1.0)
    capped = Environment([{"prompt": "x"}], lambda completion: 1.0, max_turns=30)
    assert AgentRun("bash").calls_cap(plain) == 250 and AgentRun("bash").calls_cap(capped) == 30
    assert AgentRun("bash", max_calls=7).calls_cap(capped) == 7
    plain.max_turns = 12  # set after construction: it counts as the environment's own
    assert AgentRun("bash").calls_cap(plain) == 12
