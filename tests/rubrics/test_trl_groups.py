"""Group nodes in TRL: a batch grouped by prompt, unscored completions as None, a real GRPOTrainer run."""

from __future__ import annotations

import math
import threading
from pathlib import Path
from typing import Any

import pytest

from envs import SingleTurnEnv
from harness import Client, ScriptedEndpoint
from rubrics import LLMJudge, RankJudge, WeightedSum, relative
from tests.helpers.training import grpo_config, tiny_chat_model
from tests.rubrics.test_trl import Recorder, _logged

PROMPTS = [[{"role": "user", "content": "What is 2 + 2?"}], [{"role": "user", "content": "What is 3 + 3?"}]]


def length(response: str) -> float:
    return float(len(response))


def test_the_completions_of_one_prompt_are_one_group() -> None:
    fn = relative(length).as_trl_reward(name="rel")
    log = Recorder()
    prompts = [PROMPTS[0], PROMPTS[0], PROMPTS[1], PROMPTS[1]]
    rewards = fn(prompts, ["a", "bbb", "cc", "c"], None, **log.kwargs())
    assert rewards == [0.0, 1.0, 1.0, 0.0]
    assert [r.example_id for r in fn.last_rollouts] == [0, 0, 2, 2]
    assert log.metrics["rubric/length"] == pytest.approx(7 / 4)
    assert log.metrics["rubric/flat_group_frac"] == 0.0  # the root is the group node here


def test_an_example_id_column_names_the_groups() -> None:
    fn = relative(length).as_trl_reward()
    rewards = fn([PROMPTS[0]] * 4, ["a", "bbb", "cc", "c"], None, example_id=[1, 1, 2, 2])
    assert rewards == [0.0, 1.0, 1.0, 0.0]


def test_an_unscored_member_is_none_never_zero() -> None:
    def picky(response: str) -> float:
        if response == "bad":
            raise ValueError("unreadable")
        return float(len(response))

    fn = relative(picky).as_trl_reward()
    log = Recorder()
    rewards = fn([PROMPTS[0]] * 3, ["a", "bad", "ccc"], None, **log.kwargs())
    assert rewards == [0.0, None, 1.0]
    assert log.metrics["rubric/unscored_frac"] == pytest.approx(1 / 3)
    assert log.extra["rubric/picky"] == [1.0, None, 3.0]


@pytest.mark.trl
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_grpo_trainer_with_a_group_node_and_a_failing_judge(tmp_path: Path) -> None:
    from trl import GRPOTrainer

    seen = {"grade": 0}
    lock = threading.Lock()

    def judge_server(messages: list[dict[str, Any]], tools: Any) -> str:
        text = messages[-1]["content"]
        if "RANKING" in text:  # the RankJudge: both candidates say the same, a tie
            return "RANKING: A = B"
        with lock:
            seen["grade"] += 1
            first = seen["grade"] == 1
        return "I cannot grade this." if first else "Score: 0.8"  # the very first grade fails

    with ScriptedEndpoint(judge_server) as ep:
        client = Client("judge", base_url=ep.base_url, max_retries=0)
        grade = LLMJudge("Grade: {{ response }}", client=client, cache=False)
        tree = WeightedSum(
            {"rel": relative(grade), "rank": RankJudge(client=client, orders=2)}, weights=[0.5, 0.5]
        )
        rows = [{"question": "What is 2 + 2?", "answer": "4"}, {"question": "What is 3 + 3?", "answer": "6"}]
        env = SingleTurnEnv(rows, tree, name="grouped")
        model, tokenizer = tiny_chat_model(" The answer is 4")
        reward = env.rubric.as_trl_reward(name="grouped")
        trainer = GRPOTrainer(
            model=model,
            reward_funcs=reward,
            args=grpo_config(tmp_path, shuffle_dataset=False),
            train_dataset=env.trl().train_dataset,
            processing_class=tokenizer,
        )
        trainer.train()
    logged = _logged(trainer)
    # Step 1: the first completion's grade failed: it is None (left out of its group), the
    # other is a group of one for `rel` (0.5) and ties the RankJudge (0.5): reward 0.5.
    assert logged["rubric/unscored_frac"] == [0.5, 0.0]
    assert logged["rewards/grouped/mean"] == [0.5, 0.5]
    assert logged["rubric/rank"] == [0.5, 0.5]
    # Both completions are the same: the RankJudge ties them, a flat group on every step.
    assert logged["rubric/rank/flat_group_frac"] == [1.0, 1.0]
    assert logged["rubric/rel/flat_group_frac"] == [1.0]  # step 1 had one scored member: no group
    assert logged["rubric/rel.judge"] == [pytest.approx(0.8), pytest.approx(0.8)]
    assert all(math.isfinite(v) for v in logged["loss"])
    last = reward.last_rollouts
    assert [r.example_id for r in last] == [1, 1]  # env.trl() gives an example_id column
