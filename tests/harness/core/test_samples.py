"""The samples rule (`harness.training_samples`) on hand-recorded calls: skew, steps, the chat loop."""

from __future__ import annotations

import math

import pytest

from harness import Message, ModelCall, ResultsError, Rollout, TurnTokens, training_samples

USER, OK = Message(role="user", content="hi"), Message(role="assistant", content="ok")
MORE, SURE = Message(role="user", content="more"), Message(role="assistant", content="sure")
END, BYE = Message(role="user", content="end"), Message(role="assistant", content="bye")


def _call(
    index: int, messages: list[Message], reply: Message, prompt: list[int], sampled: list[int]
) -> ModelCall:
    tokens = TurnTokens(turn=index, prompt_token_ids=prompt, completion_token_ids=sampled)
    return ModelCall(index=index, dialect="chat", messages=messages, reply=reply, tokens=tokens, status=200)


def _bpe_episode() -> Rollout:
    """Three calls whose engine re-tokenises the sampled [8, 9] as [89] (as BPE merges can)."""
    calls = [
        _call(0, [USER], OK, [0, 5, 6, 0, 7], [8, 9, 1]),
        _call(1, [USER, OK, MORE], SURE, [0, 5, 6, 0, 7, 89, 1, 2, 0, 10], [11, 1]),
        _call(2, [USER, OK, MORE, SURE, END], BYE, [0, 5, 6, 0, 7, 89, 1, 2, 0, 10, 11, 1, 3], [12, 1]),
    ]
    return Rollout(example_id="e", reward=0.5, scores={"": 0.5, "ok": 1.0}, model_calls=calls)


def test_a_re_tokenised_history_still_merges_on_the_sampled_ids_and_the_skew_is_counted() -> None:
    (sample,) = training_samples(_bpe_episode())
    assert sample.calls == [0, 1, 2] and sample.reason is None
    assert sample.prompt_ids == [0, 5, 6, 0, 7]
    # The sampled [8, 9, 1] stay (not the engine's [89, 1]); then the new ids, masked out.
    assert sample.completion_ids == [8, 9, 1, 2, 0, 10, 11, 1, 3, 12, 1]
    assert sample.mask == [1, 1, 1, 0, 0, 0, 1, 1, 0, 1, 1]
    assert [s.exact for s in sample.skew] == [False, True]
    assert (sample.skew[0].common_prefix, sample.skew[0].length_delta) == (5, -1)
    assert sample.skew_tokens == 3  # the history's ids after the first the engine re-tokenised
    assert (sample.reward, sample.scores) == (0.5, {"": 0.5, "ok": 1.0})
    assert sample.message_mask == [0, 1, 0, 1, 0, 1]  # its three replies in the last conversation


def test_ids_that_cannot_be_aligned_start_a_new_sample() -> None:
    rollout = _bpe_episode()
    tokens = rollout.model_calls[1].tokens
    assert tokens is not None
    tokens.prompt_token_ids = [0, 5, 6, 0, 70, 2, 0, 10]  # the previous prompt itself re-tokenised
    third = rollout.model_calls[2].tokens
    assert third is not None
    third.prompt_token_ids = [0, 5, 6, 0, 70, 2, 0, 10, 11, 1, 3]
    first, second = training_samples(rollout)
    assert (first.calls, second.calls) == ([0], [1, 2])
    assert second.reason is not None and "token ids do not continue" in second.reason
    assert [s.common_prefix for s in second.skew] == [4, 10] and second.skew_tokens == 8 - 4
    assert second.prompt_ids == [0, 5, 6, 0, 70, 2, 0, 10]  # what the model saw for that call


def test_steps_split_the_samples_and_carry_their_own_reward() -> None:
    rollout = _bpe_episode()
    rollout.state["steps"] = [
        {"name": "build", "calls": [0, 2], "reward": 1.0},
        {"name": "test", "calls": [2, 3]},
    ]
    build, test = training_samples(rollout)
    assert (build.calls, build.step, build.reward) == ([0, 1], "build", 1.0)
    assert (test.calls, test.step, test.reward, test.reason) == ([2], "test", 0.5, "a new step (test)")


def test_the_chat_loops_turns_join_by_their_ids() -> None:
    turns = [
        TurnTokens(turn=0, prompt_token_ids=[0, 5], completion_token_ids=[8, 1], logprobs=[-0.5, -0.25]),
        TurnTokens(
            turn=1, prompt_token_ids=[0, 5, 8, 1, 2], completion_token_ids=[9, 1], logprobs=[-1.0, -0.5]
        ),
    ]
    (sample,) = training_samples(Rollout(reward=math.nan, turn_tokens=turns))
    assert (sample.prompt_ids, sample.completion_ids, sample.mask) == (
        [0, 5],
        [8, 1, 2, 9, 1],
        [1, 1, 0, 1, 1],
    )
    assert sample.logprobs == [-0.5, -0.25, 0.0, -1.0, -0.5] and math.isnan(sample.reward)


def test_logprobs_that_do_not_match_the_ids_are_named() -> None:
    rollout = _bpe_episode()
    assert rollout.model_calls[1].tokens is not None
    rollout.model_calls[1].tokens.logprobs = [-1.0]
    with pytest.raises(ResultsError, match="call 1 has 1 logprobs for 2 completion ids"):
        training_samples(rollout)
