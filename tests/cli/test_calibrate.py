"""`rubric calibrate ENV LABELS --node PATH`: an environment's judge against labels, from the shell."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness import ScriptedEndpoint
from tests.cli.conftest import Invoke

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
    rubric: Invoke, tmp_path: Path, scripted_endpoint: Callable[..., ScriptedEndpoint]
) -> None:
    ep = scripted_endpoint(grader)
    _files(tmp_path)
    proc = rubric(
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


def test_calibrate_names_the_judges_when_the_node_is_wrong(rubric: Invoke, tmp_path: Path) -> None:
    _files(tmp_path)
    proc = rubric("calibrate", "judge_env.py", "labels.jsonl", "-a", '{"judges": 2}', cwd=tmp_path)
    assert proc.returncode == 2
    assert "several judges (judges: 'grade.judge', 'style'); pick one with node= (--node PATH)" in proc.stderr
    proc = rubric("calibrate", "judge_env.py", "labels.jsonl", "--node", "grade.short", cwd=tmp_path)
    assert proc.returncode == 2 and "not an LLMJudge; the rubric's judges: 'grade.judge'" in proc.stderr
    proc = rubric("calibrate", "judge_env.py", "labels.jsonl", "--price-prompt", "1e-6", cwd=tmp_path)
    assert proc.returncode == 2 and "give both --price-prompt and --price-completion" in proc.stderr


RUN_ENV = """
from envs import SingleTurnEnv
from rubrics import LLMJudge, WeightedSum

PROMPT = "Question: {{ prompt }}\\n<response>\\n{{ response }}\\n</response>\\nReference: {{ answer }}"


def load_environment(judge_url: str, judges: int = 1):
    judge = LLMJudge(PROMPT, model="judge-model", base_url=judge_url, score_range=(0, 10))
    tree = {"judge": judge}
    if judges == 2:
        tree["second"] = LLMJudge(PROMPT, model="judge-model", base_url=judge_url, score_range=(0, 10), samples=1, sampling={"seed": 2})
    rows = [{"question": f"Q{i}", "answer": "ref"} for i in range(40)]
    return SingleTurnEnv(rows, WeightedSum(tree))
"""


def plays_and_judges(messages: list[dict[str, Any]], tools: Any) -> str:
    """The policy answers "yes" to even questions and "no" to odd ones; the judge gives yes 8, no 3."""
    last = messages[-1]["content"]
    if "<response>" in last:
        return grader(messages, tools)
    return "yes" if int(re.search(r"Q(\d+)", last).group(1)) % 2 == 0 else "no"  # type: ignore[union-attr]


def test_calibrate_corrects_the_judges_mean_over_a_run(
    rubric: Invoke, tmp_path: Path, scripted_endpoint: Callable[..., ScriptedEndpoint]
) -> None:
    """A run judged by a lenient judge (0.8 for every "yes", though a human passes only half of
    them; 0.3 for "no", which a human fails): 20 labelled rollouts correct its mean."""
    import numpy as np

    from harness import load_results
    from harness._core.run.stats import prediction_powered_mean

    ep = scripted_endpoint(plays_and_judges)
    (tmp_path / "run_env.py").write_text(RUN_ENV)
    args = json.dumps({"judge_url": ep.base_url})
    made = rubric(
        "eval", "run_env.py", "-a", args, "-m", "policy", "-b", ep.base_url, "-o", "run", "-c", "4",
        cwd=tmp_path, env={"OPENAI_API_KEY": "k"},
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    # Labels for every other rollout (20 of 40): "yes" passes for a human on Q0, Q4, Q8, ...
    labelled = [{"example_id": i, "rollout_index": 0, "label": int(i % 4 == 0)} for i in range(0, 40, 2)] + [
        {"example_id": i, "rollout_index": 0, "label": 0} for i in range(1, 40, 4)
    ]
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in labelled))
    proc = rubric(
        "calibrate", "run_env.py", "labels.jsonl", "-a", args, "--run", "run", "--no-probes", "--html", "cal.html",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    rollouts = {str(r.example_id): r for r in load_results(tmp_path / "run").rollouts}
    keys = [str(r["example_id"]) for r in labelled]
    expected = prediction_powered_mean(
        [float(r["label"]) for r in labelled],
        [rollouts[k].reward for k in keys],
        [r.reward for k, r in rollouts.items() if k not in keys],
    )
    assert expected.raw_mean == pytest.approx((20 * 0.8 + 20 * 0.3) / 40)
    out = " ".join(proc.stdout.split())
    assert f"judge mean (raw) │ {expected.raw_mean:.4g}" in out  # a score: 4 significant digits
    assert f"corrected mean │ {expected.estimate:.4g}, 95% [{expected.low:.3g}, {expected.high:.3g}]" in out
    assert (
        f"labels it was worth │ {expected.effective_labels:,.0f} (from 30 labels and 10 judged rollouts)"
        in out
    )
    assert not np.isclose(expected.estimate, expected.raw_mean)
    page = (tmp_path / "cal.html").read_text(encoding="utf-8")
    assert "corrected mean" in page and f"{expected.estimate:.4g}" in page


def test_calibrate_against_a_run_names_a_row_the_run_lacks(
    rubric: Invoke, tmp_path: Path, scripted_endpoint: Callable[..., ScriptedEndpoint]
) -> None:
    ep = scripted_endpoint(plays_and_judges)
    (tmp_path / "run_env.py").write_text(RUN_ENV)
    args = json.dumps({"judge_url": ep.base_url, "judges": 2})
    made = rubric(
        "eval", "run_env.py", "-a", args, "-m", "policy", "-b", ep.base_url, "-o", "run", "-n", "8",
        cwd=tmp_path, env={"OPENAI_API_KEY": "k"},
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    (tmp_path / "labels.jsonl").write_text('{"example_id": 99, "label": 1}\n')
    proc = rubric(
        "calibrate", "run_env.py", "labels.jsonl", "-a", args, "--run", "run", "--node", "judge", cwd=tmp_path
    )
    assert proc.returncode == 2
    assert "row 1 labels example '99' rollout 0, which the run does not have" in proc.stderr
    rows = [{"example_id": i, "label": int(i % 4 == 0)} for i in range(8)]
    (tmp_path / "labels.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    proc = rubric(
        "calibrate", "run_env.py", "labels.jsonl", "-a", args, "--run", "run", "--node", "judge", "--no-probes",
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    out = " ".join(proc.stdout.split())
    # Two judges that always agree err together: worth one.
    assert "judges │ 2 (judge, second) worth 1.00 independent: their errors correlate 1.00 on 8" in out
    assert (
        "no corrected mean: it needs at least 2 labelled rollouts the run scored at node 'judge' and 1 unlabelled one (found 8 and 0)"
        in out
    )
