"""Token ids and logprobs from the endpoint (scripted, vLLM-style) kept per turn, and to_dataset exports."""

from __future__ import annotations

import math
import threading
from collections import Counter
from typing import Any

import pytest

from envs import ToolEnv
from harness import (
    Client,
    ConfigError,
    EvalResults,
    ResultsError,
    Rollout,
    ScriptedEndpoint,
    load_results,
    run_sync,
)
from harness._results.exports import token_rows
from harness.scripted._tokens import completion_ids, decode, logprob, prompt_ids

ROWS = [{"question": "Double 3.", "answer": "6"}, {"question": "Double 5.", "answer": "10"}]


def double(x: int) -> int:
    """Double a number.

    Args:
        x: The number.
    """
    return 2 * x


def exact(response: str, answer: str) -> float:
    return float(response.strip() == answer)


class Doubler:
    """Calls `double`, then answers with its result; every second attempt at a question is wrong."""

    def __init__(self) -> None:
        self.attempts: Counter[str] = Counter()
        self.lock = threading.Lock()

    def __call__(self, messages: list[dict[str, Any]], tools: Any) -> Any:
        question = next(m["content"] for m in messages if m["role"] == "user")
        if messages[-1]["role"] == "tool":
            with self.lock:
                self.attempts[question] += 1
                wrong = self.attempts[question] % 2 == 0
            return "nonsense" if wrong else messages[-1]["content"]
        x = int(question.split()[1].rstrip("."))
        return {"tool_calls": [{"function": {"name": "double", "arguments": {"x": x}}}]}


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> EvalResults:
    env = ToolEnv(ROWS, exact, tools=[double], system_prompt="Use the tool.")
    out = tmp_path_factory.mktemp("runs") / "run"
    with ScriptedEndpoint(Doubler(), record=True) as endpoint:
        client = Client("doubler", base_url=endpoint.base_url, return_token_ids=True)
        env.evaluate(client, rollouts_per_example=2, concurrency=1, progress=False, output_dir=out)
        run_sync(client.aclose())
        bodies = endpoint.stats.bodies
    assert all(b["logprobs"] is True and b["return_token_ids"] is True for b in bodies)
    return load_results(out)  # read back from disk: token ids survive results.jsonl


# ----------------------------------------------------------------------------- token ids per turn
def test_each_assistant_turn_keeps_the_endpoints_token_ids_and_logprobs(results: EvalResults) -> None:
    for r in results.rollouts:
        assistant = [m for m in r.completion if m.role == "assistant"]
        assert [t.turn for t in r.turn_tokens] == [0, 1]
        sent = [m.to_openai() for m in r.prompt]
        first = r.turn_tokens[0]
        assert first.prompt_token_ids == prompt_ids(sent)
        for turn, message in zip(r.turn_tokens, assistant):
            assert turn.completion_token_ids == completion_ids(message.to_openai())
            assert turn.logprobs == [logprob(i) for i in turn.completion_token_ids]
        assert decode(r.turn_tokens[1].completion_token_ids) == assistant[1].text + "<|im_end|>"


# ----------------------------------------------------------------------------- exports
def test_tokens_export_joins_turns_with_an_env_mask(results: EvalResults) -> None:
    data = results.to_dataset(format="tokens")
    assert len(data) == 4
    for row, r in zip(data, sorted(results.rollouts, key=lambda r: (str(r.example_id), r.rollout_index))):
        last = r.turn_tokens[-1]
        full = row["prompt_ids"] + row["completion_ids"]
        assert full == last.prompt_token_ids + last.completion_token_ids  # token-faithful, no re-tokenizing
        assert row["prompt_ids"] == r.turn_tokens[0].prompt_token_ids
        assert len(row["env_mask"]) == len(row["completion_ids"]) == len(row["logprobs"])
        model = [t for t, m in zip(row["completion_ids"], row["env_mask"]) if m]
        assert model == [i for t in r.turn_tokens for i in t.completion_token_ids]
        env_text = decode([t for t, m in zip(row["completion_ids"], row["env_mask"]) if not m])
        assert "<|im_start|>tool\n6" in env_text or "<|im_start|>tool\n10" in env_text
        assert all(
            lp == (logprob(t) if m else 0.0)
            for t, m, lp in zip(row["completion_ids"], row["env_mask"], row["logprobs"])
        )
        assert row["reward"] == r.reward


def test_messages_export_keeps_the_best_of_n(results: EvalResults) -> None:
    rows = results.to_dataset(format="messages")
    assert len(rows) == 2 and all(row["reward"] == 1.0 for row in rows)
    system = rows[0]["messages"][0]  # Arrow gives every message the same keys (None where unset)
    assert (system["role"], system["content"], system["tool_calls"]) == ("system", "Use the tool.", None)
    assert rows[0]["messages"][-1]["role"] == "assistant"
    assert len(results.to_dataset(format="messages", best_of=2)) == 4
    assert len(results.to_dataset(format="messages", best_of=2, min_reward=0.5)) == 2


def test_preference_export_pairs_best_and_worst_of_each_example(results: EvalResults) -> None:
    rows = results.to_dataset(format="preference")
    assert len(rows) == 2
    for row in rows:
        assert row["score_chosen"] == 1.0 and row["score_rejected"] == 0.0
        assert row["chosen"][-1]["content"] in ("6", "10") and row["rejected"][-1]["content"] == "nonsense"
        assert row["prompt"][-1]["content"] == ("Double 3." if row["example_id"] == "0" else "Double 5.")


def test_trl_export_has_one_grpo_prompt_per_example(results: EvalResults) -> None:
    rows = results.to_dataset(format="trl")
    assert rows["example_id"] == ["0", "1"]
    assert [(m["role"], m["content"]) for m in rows[1]["prompt"]] == [
        ("system", "Use the tool."),
        ("user", "Double 5."),
    ]
    assert rows[1]["answer"] == "10"


def test_unscored_rollouts_are_left_out_and_missing_ids_are_an_error() -> None:
    scored = Rollout.model_validate({"example_id": 0, "completion": "a", "reward": 1.0})
    unscored = Rollout.model_validate({"example_id": 0, "rollout_index": 1, "completion": "b"})
    results = EvalResults([scored, unscored])
    assert math.isnan(unscored.reward)
    assert len(results.to_dataset(format="messages", best_of=5)) == 1
    with pytest.raises(ResultsError, match="at least two scored rollouts of an example"):
        results.to_dataset(format="preference")  # one scored rollout: no pair, said, not an empty set
    with pytest.raises(ResultsError, match="has no token ids.*return_token_ids=True"):
        results.to_dataset(format="tokens")
    with pytest.raises(ConfigError, match=r"to_dataset\(format='sft'\); use one of records, messages"):
        results.to_dataset(format="sft")


def test_client_without_the_option_asks_for_nothing_extra() -> None:
    env = ToolEnv(ROWS[:1], exact, tools=[double])
    with ScriptedEndpoint(Doubler(), record=True) as endpoint:
        client = Client("d", base_url=endpoint.base_url)
        results = env.evaluate(client, progress=False)
        run_sync(client.aclose())
        bodies = endpoint.stats.bodies
    assert all("logprobs" not in b and "return_token_ids" not in b for b in bodies)
    assert results.rollouts[0].turn_tokens == []


def test_preferences_from_one_rollout_per_example_are_refused_with_the_fix() -> None:
    rollouts = [
        Rollout.model_validate({"example_id": i, "completion": "a", "reward": float(i)}) for i in range(3)
    ]
    with pytest.raises(ResultsError, match=r"each of these 3 examples has at most one.*-r 2"):
        EvalResults(rollouts).to_dataset(format="preference")


@pytest.mark.parametrize(("format", "flag"), [("nemo-rl", "mask_sample"), ("prime-rl", "is_filtered")])
def test_trainer_exports_keep_every_rollout_and_flag_the_unscored(
    results: EvalResults, format: str, flag: str
) -> None:
    rollouts = [r.model_copy(deep=True) for r in results.rollouts]
    rollouts[1].reward = math.nan  # the judge failed after the model answered: tokens, no score
    rollouts[1].error = "judge: no score in the reply"
    lost = Rollout.model_validate({"example_id": 1, "rollout_index": 2, "completion": "", "error": "timeout"})
    data = EvalResults([*rollouts, lost]).to_dataset(format=format)
    tokens = EvalResults(rollouts).to_dataset(format="tokens")
    assert len(data) == 5  # every rollout: groups keep their size
    assert set(data.column_names) == {*tokens.column_names, flag, "filter_reason"}
    assert data[flag] == [False, True, False, False, True]
    assert math.isnan(data["reward"][1]) and math.isnan(data["reward"][4])  # never 0
    assert data["filter_reason"] == [None, "judge: no score in the reply", None, None, "timeout"]
    assert data["completion_ids"][1] == token_rows(rollouts[1])[0]["completion_ids"]  # its tokens, flagged
    assert data["completion_ids"][4] == [] and data["prompt_ids"][4] == []
    assert data["reward"][0] == rollouts[0].reward
