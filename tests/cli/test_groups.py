"""`rubric eval -r 4` with a RankJudge: the judge (a server written here) orders each example's
members consistently with their known answer quality, and the summary shows the group node."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from harness.scripted.endpoint import ScriptedEndpoint
from tests.rubrics.test_rank_judge import closeness_ranking

RUBRIC = shutil.which("rubric")
pytestmark = pytest.mark.skipif(RUBRIC is None, reason="the rubric console script is not installed")

ENV_FILE = textwrap.dedent(
    '''
    """Three questions whose answer is 10; the policy's n-th reply to a question is 10 + n - 1,
    so its answer quality falls with n, and a RankJudge (the test's server) ranks the group."""
    import os
    import threading

    from envs import SingleTurnEnv
    from rubrics import WeightedSum
    from rubrics.judge.rank import RankJudge

    ROWS = [{"question": f"Name a number near 10 ({i}).", "answer": "10"} for i in range(3)]


    def correct(response: str, answer: str) -> float:
        return float(response.strip() == answer)


    class Drifting:
        def __init__(self) -> None:
            self.seen: dict[str, int] = {}
            self.lock = threading.Lock()

        def fresh(self) -> "Drifting":
            return Drifting()

        def __call__(self, messages, tools):
            question = messages[-1]["content"]
            with self.lock:
                n = self.seen[question] = self.seen.get(question, 0) + 1
            return str(9 + n)


    def load_environment() -> SingleTurnEnv:
        judge = RankJudge(model="judge", base_url=os.environ["JUDGE_URL"], api_key="local", orders=2)
        env = SingleTurnEnv(ROWS, WeightedSum({"correct": correct, "rank": judge}, [0.5, 0.5]), name="ranked")
        env.scripted_policies = {"drifting": Drifting()}
        return env
    '''
)


def test_eval_r4_ranks_members_by_answer_quality(tmp_path: Path) -> None:
    (tmp_path / "ranked_env.py").write_text(ENV_FILE)
    with ScriptedEndpoint(closeness_ranking, record=True) as judge:
        proc = subprocess.run(
            [
                RUBRIC,
                "eval",
                "ranked_env.py",
                "-m",
                "scripted:drifting",
                "-r",
                "4",
                "-o",
                "out",
                "--no-progress",
            ],
            cwd=tmp_path,
            env={**os.environ, "COLUMNS": "200", "JUDGE_URL": judge.base_url},
            capture_output=True,
            text=True,
            timeout=180,
        )
        calls = judge.stats.requests
    assert proc.returncode == 0, proc.stderr
    assert "rank" in proc.stdout
    groups: dict[Any, list[dict[str, Any]]] = defaultdict(list)
    for line in (tmp_path / "out" / "results.jsonl").read_text().splitlines():
        row = json.loads(line)
        groups[row["example_id"]].append(row)
    assert len(groups) == 3 and calls == 6  # two orders per group
    for rows in groups.values():
        by_distance = sorted(rows, key=lambda r: abs(float(r["completion"][-1]["content"]) - 10))
        ranks = [r["scores"]["rank"] for r in by_distance]
        assert ranks == pytest.approx([1.0, 2 / 3, 1 / 3, 0.0])
        assert all(r["score_details"]["rank"]["calls"] == 2 for r in rows)
