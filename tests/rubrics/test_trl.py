"""Rubric.as_trl_reward / as_trl_reward_funcs: TRL's reward signature, pickling, and real GRPOTrainer runs."""

from __future__ import annotations

import asyncio
import inspect
import pickle
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from envs import SingleTurnEnv
from harness import Client, ConfigError, ScriptedEndpoint
from rubrics import Gate, LLMJudge, Sequential, WeightedSum, reward
from rubrics._trl import AsyncTRLReward, TRLReward, rollouts_from_batch
from tests.helpers.training import grpo_config, tiny_chat_model

PROMPTS = [[{"role": "user", "content": "What is 2 + 2?"}], [{"role": "user", "content": "What is 3 + 3?"}]]


def correct(response: str, answer: str) -> float:
    return float(answer in response)


def short(completion: list[Any]) -> float:
    return 1.0 if len(completion[-1].text) < 20 else 0.0


def hard(response: str, difficulty: int) -> float:
    if difficulty < 0:
        raise ValueError("difficulty must be >= 0")
    return 1.0 / (1 + difficulty)


def make_tree() -> WeightedSum:
    return WeightedSum(
        {"correct": correct, "format": Gate(short, 0.5), "hard": hard}, weights=[0.6, 0.2, 0.2]
    )


class Recorder:
    """Collects what a reward function logs through TRL's `log_metric` / `log_extra`."""

    def __init__(self) -> None:
        self.metrics: dict[str, float] = {}
        self.extra: dict[str, list[Any]] = {}

    def kwargs(self) -> dict[str, Any]:
        return {
            "log_metric": self.metrics.__setitem__,
            "log_extra": self.extra.__setitem__,
            "trainer_state": None,
        }


def call(fn: Callable[..., Any], completions: list[Any], **columns: Any) -> Any:
    result = fn(PROMPTS[: len(completions)], completions, None, **columns)
    if not inspect.isawaitable(result):
        return result

    async def run_then_close() -> Any:
        try:
            return await result
        finally:  # the loop ends here: close the judges' HTTP pools that were opened on it
            for node in fn.rubric.rubrics():
                if isinstance(node, LLMJudge) and node.__dict__["_client"] is not None:
                    await node.client.aclose()

    return asyncio.run(run_then_close())


# ----------------------------------------------------------------------------- the reward function
def test_signature_columns_nan_as_none_and_per_node_logs() -> None:
    fn = make_tree().as_trl_reward(name="math")
    log = Recorder()
    completions = [
        [{"role": "assistant", "content": "It is 4"}],
        [{"role": "assistant", "content": "It is 5"}],
    ]
    rewards = call(fn, completions, answer=["4", "6"], difficulty=[1, -1], **log.kwargs())
    assert rewards[0] == pytest.approx(0.6 + 0.2 + 0.1)
    assert rewards[1] is None  # `hard` raised: unscored, never a silent 0
    assert fn.__name__ == "math"
    assert log.metrics["rubric/correct"] == 0.5
    assert log.metrics["rubric/format.short"] == 1.0
    assert log.metrics["rubric/hard"] == 0.5  # the NaN row is left out of the mean
    assert log.metrics["rubric/unscored_frac"] == 0.5
    assert log.extra["rubric/hard"] == [0.5, None]
    assert "ValueError: difficulty must be >= 0" in fn.last_rollouts[1].score_errors["hard"]


def test_plain_text_completions_and_info_columns() -> None:
    fn = reward(lambda response, level: float(response == "4") * level, name="exact").as_trl_reward()
    rewards = fn(
        ["2+2?", "3+3?"], ["4", "7"], [[1], [2]], info=['{"level": 2}', {"level": 3}], task=["m", "m"]
    )
    assert rewards == [2.0, 0.0]
    assert [r.task for r in fn.last_rollouts] == ["m", "m"]
    assert fn.last_rollouts[0].completion[0].role == "assistant"


def test_mismatched_columns_name_the_column() -> None:
    fn = make_tree().as_trl_reward()
    with pytest.raises(ConfigError, match="column 'answer' has 1 values for 2 completions"):
        fn(["a", "b"], ["x", "y"], None, answer=["4"])


def test_sync_tree_gives_sync_callable_and_judge_tree_gives_async(
    scripted_endpoint: Callable[..., ScriptedEndpoint], fast_retry: dict[str, float]
) -> None:
    assert type(make_tree().as_trl_reward()) is TRLReward
    ep = scripted_endpoint(lambda messages, tools: "Score: 8")
    judge = LLMJudge(
        "Grade: {{ response }}", client=Client("j", base_url=ep.base_url, **fast_retry), score_range=(0, 10)
    )
    fn = WeightedSum({"correct": correct, "judge": judge}).as_trl_reward()
    assert isinstance(fn, AsyncTRLReward) and inspect.iscoroutinefunction(fn.__call__)
    log = Recorder()
    rewards = call(fn, [[{"role": "assistant", "content": "4"}]], answer=["4"], **log.kwargs())
    assert rewards == [pytest.approx(0.5 * 1.0 + 0.5 * 0.8)]
    assert log.metrics["rubric/judge"] == pytest.approx(0.8)


def test_pickle_round_trip_with_a_judge_whose_client_is_built_after_loading(
    scripted_endpoint: Callable[..., ScriptedEndpoint],
) -> None:
    ep = scripted_endpoint(lambda messages, tools: "Score: 1")
    judge = LLMJudge("Grade: {{ response }}", model="j", base_url=ep.base_url, cache=False)
    fn = WeightedSum({"correct": correct, "judge": judge}).as_trl_reward()
    assert call(fn, [[{"role": "assistant", "content": "4"}]], answer=["4"]) == [1.0]  # builds judge.client
    loaded = pickle.loads(pickle.dumps(fn))
    assert loaded.rubric.judge.__dict__["_client"] is None  # no HTTP pool travels in the pickle
    assert call(loaded, [[{"role": "assistant", "content": "5"}]], answer=["4"]) == [0.5]
    assert loaded.rubric.judge.__dict__["_client"] is not None
    assert loaded.__name__ == fn.__name__


def test_sync_reward_pickles_with_function_leaves_rebuilt() -> None:
    fn = pickle.loads(pickle.dumps(make_tree().as_trl_reward()))
    assert call(fn, [[{"role": "assistant", "content": "4"}]], answer=["4"], difficulty=[0]) == [1.0]


def test_rollouts_from_batch_keeps_messages_and_columns() -> None:
    completion = [
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [{"type": "function", "function": {"name": "f", "arguments": {"x": 1}}}],
        },
        {"role": "tool", "name": "f", "content": "2"},
        {"role": "assistant", "content": "done"},
    ]
    (r,) = rollouts_from_batch(
        [PROMPTS[0]], [completion], {"answer": ["2"], "extra": [7], "trainer_state": None}
    )
    assert r.response == "done" and r.tool_calls[0].arguments == '{"x": 1}'
    assert r.answer == "2" and r.info == {"extra": 7}


# ----------------------------------------------------------------------------- GDPO decomposition
def test_reward_funcs_split_a_weighted_sum_with_weights() -> None:
    funcs, weights = make_tree().as_trl_reward_funcs()
    assert [f.__name__ for f in funcs] == ["correct", "format", "hard"]
    assert weights == [0.6, 0.2, 0.2]
    log = Recorder()
    assert call(funcs[1], [[{"role": "assistant", "content": "4"}]], **log.kwargs()) == [1.0]
    assert log.metrics == {
        "rubric/format.short": 1.0,
        "rubric/format/unscored_frac": 0.0,
        "rubric/format/skipped_groups": 0.0,
    }


def test_reward_funcs_refuse_a_tree_that_is_not_a_weighted_sum() -> None:
    with pytest.raises(ConfigError, match=r"Sequential.*not a weighted sum.*as_trl_reward\(\)"):
        Sequential(correct, short).as_trl_reward_funcs()
    tree = make_tree()
    tree.register_forward_hook(lambda node, rollout, score: min(score, 0.5))
    with pytest.raises(ConfigError, match="hooks"):
        tree.as_trl_reward_funcs()
    funcs, weights = reward(correct).as_trl_reward_funcs()
    assert len(funcs) == 1 and weights == [1.0]


# ----------------------------------------------------------------------------- the real trainer
def _math_env() -> SingleTurnEnv:
    rows = [{"question": "What is 2 + 2?", "answer": "4", "difficulty": 1}]
    rows += [{"question": "What is 3 + 3?", "answer": "6", "difficulty": 3}]
    return SingleTurnEnv(rows, make_tree(), name="math")


def _logged(trainer: Any) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {}
    for entry in trainer.state.log_history:
        for key, value in entry.items():
            out.setdefault(key, []).append(value)
    return out


@pytest.mark.trl
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_grpo_trainer_trains_on_as_trl_reward(tmp_path: Path) -> None:
    from trl import GRPOTrainer

    env = _math_env()
    model, tokenizer = tiny_chat_model(" The answer is 4")
    spec = env.trl()
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=env.rubric.as_trl_reward(),
        args=grpo_config(tmp_path, shuffle_dataset=False),
        train_dataset=spec.train_dataset,
        processing_class=tokenizer,
    )
    trainer.train()
    logged = _logged(trainer)
    # The model always answers "The answer is 4": right for 2+2 (difficulty 1), wrong for 3+3 (3).
    assert logged["rewards/WeightedSum/mean"] == [pytest.approx(0.6 + 0.2 + 0.1), pytest.approx(0.2 + 0.05)]
    assert logged["rubric/correct"] == [1.0, 0.0]
    assert logged["rubric/format.short"] == [1.0, 1.0]
    assert logged["rubric/hard"] == [0.5, 0.25]


@pytest.mark.trl
@pytest.mark.slow
@pytest.mark.timeout(300)
def test_grpo_trainer_normalize_then_sum_with_as_trl_reward_funcs(tmp_path: Path) -> None:
    from trl import GRPOTrainer

    env = _math_env()
    funcs, weights = env.rubric.as_trl_reward_funcs()
    model, tokenizer = tiny_chat_model(" The answer is 4")
    args = grpo_config(
        tmp_path,
        shuffle_dataset=False,
        reward_weights=weights,
        multi_objective_aggregation="normalize_then_sum",
    )
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=funcs,
        args=args,
        train_dataset=env.trl().train_dataset,
        processing_class=tokenizer,
    )
    assert trainer.reward_weights.tolist() == pytest.approx([0.6, 0.2, 0.2])
    trainer.train()
    logged = _logged(trainer)
    assert logged["rewards/correct/mean"] == [1.0, 0.0]
    assert logged["rewards/hard/mean"] == [0.5, 0.25]
    assert logged["rewards/format/mean"] == [1.0, 1.0]
    assert logged["rubric/format.short"] == [1.0, 1.0]
    assert all(v == 0.0 for v in logged["rubric/correct/unscored_frac"])
