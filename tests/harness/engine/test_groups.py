"""evaluate with a rubric that compares rollouts of one example: groups scored whole, in process,
in worker processes, across shards and on resume; an errored member is left out and recorded."""

from __future__ import annotations

import json
import textwrap
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

import envs
from harness import Rollout

ENV_FILE = textwrap.dedent(
    '''
    """Six questions; the scripted policy's n-th reply to a question is n characters long."""
    import threading

    from envs import SingleTurnEnv
    from harness.scripted._app import ScriptedHTTPError
    from rubrics import WeightedSum
    from rubrics._group import relative

    ROWS = [{"question": f"question {i}", "answer": "x"} for i in range(6)]


    def length(response: str) -> float:
        return float(len(response))


    def starts_right(response: str, answer: str) -> float:
        return float(response.startswith(answer))


    class Counting:
        def __init__(self, fail_on: int = 0) -> None:
            self.seen: dict[str, int] = {}
            self.lock = threading.Lock()
            self.fail_on = fail_on

        def fresh(self) -> "Counting":
            return Counting(self.fail_on)

        def __call__(self, messages, tools):
            question = messages[-1]["content"]
            with self.lock:
                n = self.seen[question] = self.seen.get(question, 0) + 1
            if n == self.fail_on and question == "question 0":
                raise ScriptedHTTPError(400, "bad request")
            return "x" * n


    def load_environment() -> SingleTurnEnv:
        rubric = WeightedSum({"rel": relative(length), "right": starts_right})
        env = SingleTurnEnv(ROWS, rubric, name="groups")
        env.scripted_policies = {"counting": Counting(), "failing": Counting(fail_on=2)}
        return env
    '''
)
THIRDS = [0.0, 1 / 3, 2 / 3, 1.0]


@pytest.fixture
def env_file(tmp_path: Path) -> Path:
    path = tmp_path / "group_env.py"
    path.write_text(ENV_FILE)
    return path


def by_example(path: Path) -> dict[str, list[dict[str, Any]]]:
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for line in path.read_text().splitlines():
        row = json.loads(line)
        groups[str(row["example_id"])].append(row)
    return groups


def assert_ranked_whole(groups: dict[str, list[dict[str, Any]]], size: int = 4) -> None:
    for rows in groups.values():
        assert len(rows) == size
        assert sorted(r["scores"]["rel"] for r in rows) == pytest.approx(THIRDS)
        assert sorted(r["scores"]["rel.length"] for r in rows) == [1.0, 2.0, 3.0, 4.0]


def test_needs_groups_follows_the_rubric(env_file: Path) -> None:
    env = envs.load_environment(str(env_file))
    assert env.needs_groups
    env.rubric = env.rubric.get_rubric("right")
    assert not env.needs_groups


def test_eval_scores_each_group_when_its_last_member_finishes(env_file: Path, tmp_path: Path) -> None:
    env = envs.load_environment(str(env_file))
    results = env.evaluate(
        "scripted:counting",
        rollouts_per_example=4,
        concurrency=8,
        output_dir=tmp_path / "out",
        progress=False,
    )
    assert results.summary.num_rollouts == 24
    assert_ranked_whole(by_example(tmp_path / "out" / "results.jsonl"))
    lines = (tmp_path / "out" / "results.jsonl").read_text().splitlines()
    # A group is written together: each example's four rows are adjacent in the file.
    order = [json.loads(line)["example_id"] for line in lines]
    assert all(len(set(order[i : i + 4])) == 1 for i in range(0, 24, 4))


@pytest.mark.slow  # worker processes
def test_workers_keep_groups_together(env_file: Path, tmp_path: Path) -> None:
    env = envs.load_environment(str(env_file))
    env.evaluate(
        "scripted:counting",
        rollouts_per_example=4,
        concurrency=4,
        workers=2,
        output_dir=tmp_path / "out",
        progress=False,
    )
    assert_ranked_whole(by_example(tmp_path / "out" / "results.jsonl"))


def test_shards_hold_whole_groups(env_file: Path, tmp_path: Path) -> None:
    env = envs.load_environment(str(env_file))
    seen: set[str] = set()
    for shard in ("0/2", "1/2"):
        out = tmp_path / shard.replace("/", "-")
        env.evaluate("scripted:counting", rollouts_per_example=4, shard=shard, output_dir=out, progress=False)
        groups = by_example(out / "results.jsonl")
        assert_ranked_whole(groups)
        assert not seen & set(groups)
        seen |= set(groups)
    assert len(seen) == 6


def test_resume_runs_a_partly_saved_group_again_whole(env_file: Path, tmp_path: Path) -> None:
    env = envs.load_environment(str(env_file))
    out = tmp_path / "out"
    env.evaluate("scripted:counting", rollouts_per_example=4, output_dir=out, progress=False)
    results = out / "results.jsonl"
    lines = results.read_text().splitlines(keepends=True)
    cut = [
        line for line in lines if not (json.loads(line)["example_id"] == 3 and '"rollout_index":1' in line)
    ]
    assert len(cut) == 23
    results.write_text("".join(cut))
    untouched = {line for line in cut if json.loads(line)["example_id"] != 3}
    resumed = env.evaluate(
        "scripted:counting", rollouts_per_example=4, output_dir=out, resume=True, progress=False
    )
    assert resumed.summary.num_rollouts == 24
    after = results.read_text().splitlines(keepends=True)
    assert untouched <= set(after) and len(after) == 24
    assert_ranked_whole(by_example(results))  # example 3 ran again: a fresh group of four


def test_an_errored_member_is_left_out_of_its_group(env_file: Path, tmp_path: Path) -> None:
    env = envs.load_environment(str(env_file))
    env.evaluate(
        "scripted:failing", rollouts_per_example=4, concurrency=1, output_dir=tmp_path / "out", progress=False
    )
    groups = by_example(tmp_path / "out" / "results.jsonl")
    rows = groups["0"]
    errored = [r for r in rows if r["error"]]
    assert len(errored) == 1 and errored[0]["reward"] is None  # NaN: unscored
    assert "left out of the group: the rollout errored" in errored[0]["score_errors"]["rel"]
    scored = [r for r in rows if not r["error"]]
    assert sorted(r["scores"]["rel"] for r in scored) == [0.0, 0.5, 1.0]
    assert all(r["score_details"]["rel"] == {"group_size": 3, "scored_members": 3} for r in scored)
    assert_ranked_whole({k: v for k, v in groups.items() if k != "0"})


def test_one_rollout_alone_is_a_group_of_one(env_file: Path) -> None:
    env = envs.load_environment(str(env_file))
    r = Rollout.model_validate({"completion": "xx", "answer": "x"})
    env.rubric(r)
    assert r.scores["rel"] == 0.5 and r.reward == 0.75


@pytest.mark.slow
@pytest.mark.ray
@pytest.mark.timeout(240)
def test_ray_actors_keep_groups_together(env_file: Path, tmp_path: Path) -> None:
    import ray  # the [ray] extra, which the test environment installs

    ray.init(num_cpus=2, include_dashboard=False, logging_level="warning")
    try:
        env = envs.load_environment(str(env_file))
        env.evaluate(
            "scripted:counting",
            rollouts_per_example=4,
            concurrency=4,
            workers=2,
            executor="ray",
            output_dir=tmp_path / "out",
            progress=False,
        )
    finally:
        ray.shutdown()
    assert_ranked_whole(by_example(tmp_path / "out" / "results.jsonl"))
