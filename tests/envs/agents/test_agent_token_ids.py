"""`rubric eval ... --agent ...` records token ids by default when the endpoint has them (49.1).

The endpoint is the scripted one, reached over HTTP by `-b URL` like any server, so the run
probes it (one request asking for ids the vLLM way) before the first rollout; the agents are
`bash` and a `command:` program, in bwrap sandboxes. The token exports then work on the run.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from harness import load_results
from harness.scripted import ScriptedEndpoint, ShellScript
from tests.envs.agents.conftest import SOLVE
from tests.helpers.processes import run

pytestmark = [pytest.mark.bwrap, pytest.mark.agents, pytest.mark.slow]

ENV_FILE = """
from envs import Environment
from envs.agents import file_contains

def load_environment():
    rows = [{"prompt": f"Write hi into hello.txt (task {i})."} for i in range(2)]
    return Environment(rows, file_contains("hello.txt", "hi"), name="file-task", max_turns=8)
"""


def _eval(tmp_path: Path, base_url: str, agent: str, *flags: str) -> Path:
    env_file = tmp_path / "file_task.py"
    env_file.write_text(ENV_FILE)
    out = tmp_path / f"run-{len(list(tmp_path.iterdir()))}"
    args = [str(env_file), "-m", "served", "-b", base_url, "--agent", agent, "--runtime", "bwrap"]
    proc: subprocess.CompletedProcess[str] = run(
        "eval", *args, "--no-progress", "-o", str(out), *flags, cwd=Path.cwd(), timeout=300,
        env={"OPENAI_API_KEY": "local"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return out


@pytest.mark.parametrize(
    "agent", ["bash", "command:python3 /agent/chat.py {instruction_file}"], ids=["bash", "command"]
)
def test_an_agent_run_records_token_ids_of_every_call_by_default(
    tmp_path: Path, agent_files: Path, agent: str
) -> None:
    policy = ShellScript([SOLVE], "the file is written")
    with ScriptedEndpoint(policy, model="served", record=True) as endpoint:
        flags = ("--agent-files", str(agent_files)) if agent.startswith("command:") else ()
        results = load_results(_eval(tmp_path, endpoint.base_url, agent, *flags))
        probes = [b for b in endpoint.stats.bodies if b["messages"][-1].get("content") == "ping"]
    assert len(probes) == 1 and probes[0]["return_token_ids"] is True  # probed once per run
    assert results.summary.num_errors == 0 and [r.reward for r in results] == [1.0, 1.0]
    for r in results:
        assert len(r.model_calls) == 2 and all(c.tokens is not None for c in r.model_calls)
        assert all(c.tokens and c.tokens.logprobs for c in r.model_calls)
        assert {c.served_by for c in r.model_calls} == {"served@scripted"}
    for fmt in ("tokens", "nemo-rl", "prime-rl"):
        rows = results.to_dataset(format=fmt).to_list()
        assert len(rows) == 2 and all(row["completion_ids"] and 0 in row["env_mask"] for row in rows)
        assert all(c["served_by"] == "served@scripted" for row in rows for c in row["model_calls"])


def test_no_token_ids_turns_them_off_without_a_probe(tmp_path: Path) -> None:
    with ScriptedEndpoint(ShellScript([SOLVE], "done"), model="served", record=True) as endpoint:
        results = load_results(_eval(tmp_path, endpoint.base_url, "bash", "--no-token-ids"))
        bodies = list(endpoint.stats.bodies)
    assert bodies and not any("return_token_ids" in b for b in bodies)
    assert all(c.tokens is None and c.served_by == "served@scripted" for r in results for c in r.model_calls)
    assert (
        json.loads((tmp_path / "run-1" / "metadata.json").read_text())["model"]["return_token_ids"] is False
    )
