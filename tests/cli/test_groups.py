"""`rubric eval -r 4` with a RankJudge: the judge (a server written here) orders each example's
members consistently with their known answer quality, and the summary shows the group node."""

from __future__ import annotations

import json
import textwrap
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from harness import ScriptedEndpoint
from tests.cli.conftest import Invoke
from tests.rubrics.test_rank_judge import closeness_ranking

ENV_FILE = textwrap.dedent(
    '''
    """Three questions whose answer is 10; the policy's n-th reply to a question is 10 + n - 1,
    so its answer quality falls with n, and a RankJudge (the test's server) ranks the group."""
    import os
    import threading

    from envs import SingleTurnEnv
    from rubrics import WeightedSum
    from rubrics._judge.rank import RankJudge

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


def test_eval_r4_ranks_members_by_answer_quality(rubric: Invoke, tmp_path: Path) -> None:
    (tmp_path / "ranked_env.py").write_text(ENV_FILE)
    with ScriptedEndpoint(closeness_ranking, record=True) as judge:
        proc = rubric(
            "eval", "ranked_env.py", "-m", "scripted:drifting", "-r", "4", "-o", "out", "--no-progress",
            cwd=tmp_path, env={"JUDGE_URL": judge.base_url},
        )  # fmt: skip
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


class FlakyJudge:
    """Ranks fairly, but while `broken` its replies about question 0 have no ranking."""

    def __init__(self) -> None:
        self.broken = True
        self.calls = 0

    def __call__(self, messages: list[dict[str, Any]], tools: Any) -> str:
        self.calls += 1
        if self.broken and "(0)" in messages[-1]["content"]:
            return "They all look fine to me."
        return closeness_ranking(messages, tools)


def rows_of(path: Path) -> dict[tuple[int, int], dict[str, Any]]:
    rows = (json.loads(line) for line in path.read_text().splitlines())
    return {(r["example_id"], r["rollout_index"]): r for r in rows}


def test_score_reruns_group_nodes_and_failed_only_reruns_just_what_failed(
    rubric: Invoke, tmp_path: Path
) -> None:
    (tmp_path / "ranked_env.py").write_text(ENV_FILE)
    judge = FlakyJudge()
    with ScriptedEndpoint(judge) as server:
        env = {"JUDGE_URL": server.base_url}
        ran = rubric(
            "eval", "ranked_env.py", "-m", "scripted:drifting", "-r", "4", "-o", "out", "--no-progress",
            cwd=tmp_path, env=env,
        )  # fmt: skip
        assert ran.returncode == 0, ran.stderr
        saved = rows_of(tmp_path / "out" / "results.jsonl")
        assert all(r["scores"]["rank"] is None for k, r in saved.items() if k[0] == 0)
        assert "judge reply has no ranking" in saved[(0, 0)]["score_errors"]["rank"]
        assert "1 failed" not in ran.stdout and "4 failed" in ran.stdout

        judge.broken, judge.calls = False, 0
        fixed = rubric(
            "score", "out", "ranked_env.py", "--failed-only", "-o", "fixed.jsonl", cwd=tmp_path, env=env
        )
        assert fixed.returncode == 0, fixed.stderr
        assert judge.calls == 2  # only example 0's group, in two orders
        after = rows_of(tmp_path / "fixed.jsonl")
        for key, row in after.items():
            if key[0] == 0:
                assert row["score_errors"] == {} and row["score_details"]["rank"]["calls"] == 2
            else:  # untouched: the saved scores, details and judge tokens
                assert {k: row[k] for k in ("scores", "score_details", "judge_usage", "reward")} == {
                    k: saved[key][k] for k in ("scores", "score_details", "judge_usage", "reward")
                }
        ranks = sorted(after[(0, i)]["scores"]["rank"] for i in range(4))
        assert ranks == pytest.approx([0.0, 1 / 3, 2 / 3, 1.0])
        assert json.loads((tmp_path / "fixed.jsonl").read_text().splitlines()[0])["example_id"] == 0

        judge.calls = 0
        full = rubric("score", "out", "ranked_env.py", "-o", "full.jsonl", cwd=tmp_path, env=env)
        assert full.returncode == 0, full.stderr
        assert judge.calls == 6  # every saved group re-ranked, two orders each
        again = rows_of(tmp_path / "full.jsonl")
        assert all(again[k]["scores"]["rank"] == after[k]["scores"]["rank"] for k in again)
