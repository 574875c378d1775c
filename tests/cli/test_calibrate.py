"""`rubric calibrate ENV LABELS --node PATH`: an environment's judge against labels, from the shell."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from harness.scripted.endpoint import ScriptedEndpoint
from tests.helpers import run

ENV_FILE = """
from envs import SingleTurnEnv
from rubrics import LLMJudge, WeightedSum

PROMPT = "Question: {{ prompt }}\\n<response>\\n{{ response }}\\n</response>\\nReference: {{ answer }}"


def load_environment(judges: int = 1):
    judge = LLMJudge(PROMPT, model="judge-model", base_url="http://127.0.0.1:9/v1", score_range=(0, 10))
    tree = {"grade": WeightedSum({"judge": judge, "short": lambda response: 1.0})}
    if judges == 2:
        tree["style"] = LLMJudge(PROMPT, model="other", base_url="http://127.0.0.1:9/v1")
    return SingleTurnEnv([{"question": "q", "answer": "ref"}], WeightedSum(tree))
"""


def grader(messages: list[dict[str, Any]], tools: Any) -> str:
    response = re.search(r"<response>\n(\w+)", messages[-1]["content"])
    return "Score: 8" if response and response.group(1) == "yes" else "Score: 3"


def _files(tmp_path: Path) -> None:
    (tmp_path / "judge_env.py").write_text(ENV_FILE)
    # labels 1 1 1 0, verdicts 1 1 0 0: accuracy 3/4; chance 0.75 * 0.5 + 0.25 * 0.5 = 0.5;
    # kappa (0.75 - 0.5) / 0.5 = 0.5
    rows = [("yes", 1), ("yes", 1), ("no", 1), ("no", 0)]
    lines = [
        json.dumps({"prompt": f"Q{i}", "completion": c, "answer": "ref", "label": v})
        for i, (c, v) in enumerate(rows)
    ]
    (tmp_path / "labels.jsonl").write_text("\n".join(lines) + "\n")


def test_calibrate_a_judge_node_at_another_endpoint(
    tmp_path: Path, scripted_endpoint: Callable[..., ScriptedEndpoint]
) -> None:
    ep = scripted_endpoint(grader)
    _files(tmp_path)
    proc = run(
        "calibrate", "judge_env.py", "labels.jsonl", "--node", "grade.judge", "--judge-base-url", ep.base_url,
        "--judge-model", "local-judge", "--price-prompt", "1e-6", "--price-completion", "2e-6", "--html", "cal.html",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert re.search(r"accuracy\s+│ 0\.75 ", out) and re.search(r"Cohen's kappa\s+│ 0\.5 ", out)
    assert "(model local-judge)" in out and "4 (4 scored by the judge)" in out
    assert "12 for the probes" not in out and "4 for the labels + 8 for the probes" in out
    assert "cost per request" in out and "wrote cal.html" in out
    page = (tmp_path / "cal.html").read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and "confusion" in page
    assert ep.stats.requests == 12


def test_calibrate_names_the_judges_when_the_node_is_wrong(tmp_path: Path) -> None:
    _files(tmp_path)
    proc = run("calibrate", "judge_env.py", "labels.jsonl", "-a", '{"judges": 2}', cwd=tmp_path)
    assert proc.returncode == 2
    assert "several judges (judges: 'grade.judge', 'style'); pick one with node= (--node PATH)" in proc.stderr
    proc = run("calibrate", "judge_env.py", "labels.jsonl", "--node", "grade.short", cwd=tmp_path)
    assert proc.returncode == 2 and "not an LLMJudge; the rubric's judges: 'grade.judge'" in proc.stderr
    proc = run("calibrate", "judge_env.py", "labels.jsonl", "--price-prompt", "1e-6", cwd=tmp_path)
    assert proc.returncode == 2 and "give both --price-prompt and --price-completion" in proc.stderr
