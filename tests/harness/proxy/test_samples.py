"""Episodes recorded through the capture proxy in each agent dialect, made into training samples.

Chat Completions is what `bash`, mini-swe-agent and `command:` agents speak, Anthropic Messages
Claude Code's (with its side calls, a compaction and a changed system prompt), the Responses
API Codex's (continuing by `previous_response_id`). The upstream is the scripted endpoint,
which returns token ids the vLLM way, so each sample is checked id by id.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import anthropic
import openai
import pytest

from harness import ProxySession, Rollout, training_samples
from harness.scripted._tokens import completion_ids, logprob, message_ids, prompt_ids
from tests.harness.proxy.conftest import agent_policy

pytestmark = pytest.mark.timeout(60)
Start = Callable[..., Any]
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
    },
}


def _scored(session: ProxySession) -> Rollout:
    rollout = Rollout(example_id="task", reward=0.75, scores={"": 0.75, "tests_pass": 1.0, "style": 0.5})
    session.record_into(rollout)
    return rollout


async def _chat_episode(sdk: openai.AsyncOpenAI, system: str, task: str, calls: int) -> list[dict[str, Any]]:
    """A bash-agent-like loop: the model calls a tool, its output goes back, `calls` times."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": system},
        {"role": "user", "content": task},
    ]
    for _ in range(calls):
        reply = await sdk.chat.completions.create(model="served-model", messages=messages, tools=[ADD])
        message = reply.choices[0].message.model_dump(exclude_none=True)
        messages.append(message)
        for call in message.get("tool_calls") or []:
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": "5"})
        if not message.get("tool_calls"):
            messages.append({"role": "user", "content": "go on"})
    return messages


def _three_tool_calls(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> Any:
    if tools and sum(m["role"] == "tool" for m in messages) < 2:
        return agent_policy([m for m in messages if m["role"] != "tool"], tools)
    return agent_policy(messages, tools)


async def test_a_chat_agents_extending_calls_merge_into_one_sample_with_the_tool_output_masked(
    start_proxy: Start,
) -> None:
    proxy = await start_proxy(_three_tool_calls)
    session = proxy.open_session()
    async with openai.AsyncOpenAI(base_url=f"{proxy.base_url}/v1", api_key=session.key, max_retries=0) as sdk:
        messages = await _chat_episode(sdk, "You run commands.", "add 2 and 3", calls=3)
    (sample,) = training_samples(_scored(session))
    calls = session.turns
    assert sample.calls == [0, 1, 2] and not sample.skew_tokens and all(s.exact for s in sample.skew)
    # The ids: the first prompt, then per call the tool output (masked) and what it sampled.
    assert sample.prompt_ids == prompt_ids(messages[:2])
    last = calls[2].tokens
    assert last is not None and sample.prompt_ids + sample.completion_ids == [
        *last.prompt_token_ids,
        *last.completion_token_ids,
    ]
    expected_mask: list[int] = []
    for call in calls:
        assert call.tokens is not None
        if call.index:
            tool = message_ids(call.messages[-1].to_openai())
            expected_mask += [0] * (len(tool) + 2 + len("assistant\n"))  # the tool message, the next header
        expected_mask += [1] * len(call.tokens.completion_token_ids)
    assert sample.mask == expected_mask
    trained = [i for i, m in zip(sample.completion_ids, sample.mask) if m]
    assert trained == [i for c in calls for i in completion_ids(c.reply.to_openai())]  # type: ignore[union-attr]
    assert [lp for lp, m in zip(sample.logprobs, sample.mask) if m] == [logprob(i) for i in trained]
    assert {lp for lp, m in zip(sample.logprobs, sample.mask) if not m} == {0.0}
    assert (sample.reward, sample.scores["tests_pass"]) == (0.75, 1.0)


async def test_claude_code_like_side_calls_a_compaction_and_a_new_system_prompt_split(
    start_proxy: Start,
) -> None:
    proxy = await start_proxy()
    session = proxy.open_session()
    system = [{"type": "text", "text": "You are Claude Code."}]
    add = {"name": "add", "description": "Add two integers.", "input_schema": ADD["function"]["parameters"]}  # type: ignore[index]
    async with anthropic.AsyncAnthropic(base_url=proxy.base_url, api_key=session.key, max_retries=0) as sdk:

        async def ask(messages: list[dict[str, Any]], system: Any = system, tools: Any = (add,)) -> Any:
            reply = await sdk.messages.create(
                model="served-model", max_tokens=100, system=system, messages=messages, tools=list(tools)
            )
            return [block.model_dump(exclude_none=True) for block in reply.content]

        messages: list[dict[str, Any]] = [{"role": "user", "content": "add 2 and 3"}]
        content = await ask(messages)  # 0: the main line
        await ask([{"role": "user", "content": "a title for: add 2 and 3"}], tools=())  # 1: a side call
        use = next(b for b in content if b["type"] == "tool_use")
        messages += [
            {"role": "assistant", "content": content},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"], "content": "5"}]},
        ]
        content = await ask(messages)  # 2: continues 0
        # 3: compaction, the history replaced by its summary; 4 continues it.
        compacted: list[dict[str, Any]] = [{"role": "user", "content": "Summary: 2 + 3 is 5. Go on."}]
        content = await ask(compacted)
        compacted += [{"role": "assistant", "content": content}, {"role": "user", "content": "and 1 more?"}]
        await ask(compacted)
        # 5: the same conversation under another system prompt.
        await ask(compacted, system=[{"type": "text", "text": "You are terse."}])
    samples = training_samples(_scored(session))
    assert [s.calls for s in samples] == [[0, 2], [1], [3, 4], [5]]
    assert [s.reason for s in samples] == [
        None,
        "the history was rewritten (it extends no earlier call's conversation)",
        "the history was rewritten (it extends no earlier call's conversation)",
        "a different system prompt",
    ]
    assert all(s.reward == 0.75 and s.scores["style"] == 0.5 for s in samples)
    assert all(
        sum(s.mask) == sum(len(session.turns[i].tokens.completion_token_ids) for i in s.calls)
        for s in samples
    )  # type: ignore[union-attr]
    print(f"Claude Code-like episode: {len(samples)} samples from {len(session.turns)} calls")


async def test_a_codex_like_episode_continuing_by_previous_response_id_is_one_sample(
    start_proxy: Start,
) -> None:
    proxy = await start_proxy()
    session = proxy.open_session()
    tool = {"type": "function", "name": "add", "parameters": ADD["function"]["parameters"]}  # type: ignore[index]
    async with openai.AsyncOpenAI(base_url=f"{proxy.base_url}/v1", api_key=session.key, max_retries=0) as sdk:
        first = await sdk.responses.create(
            model="served-model", instructions="You add.", input="add 2 and 3", tools=[tool]
        )  # type: ignore[list-item]
        call = next(item for item in first.output if item.type == "function_call")
        await sdk.responses.create(
            model="served-model",
            instructions="You add.",
            previous_response_id=first.id,
            input=[{"type": "function_call_output", "call_id": call.call_id, "output": "5"}],  # type: ignore[union-attr]
            tools=[tool],  # type: ignore[list-item]
        )
    (sample,) = training_samples(_scored(session))
    assert sample.calls == [0, 1] and sample.skew[0].exact and sum(sample.mask) > 0


async def test_a_template_that_rewrites_past_turns_splits_every_call_and_the_skew_is_reported(
    start_proxy: Start,
) -> None:
    proxy = await start_proxy(_three_tool_calls, endpoint={"broken": ["prefix"]})
    session = proxy.open_session()
    async with openai.AsyncOpenAI(base_url=f"{proxy.base_url}/v1", api_key=session.key, max_retries=0) as sdk:
        await _chat_episode(sdk, "You run commands.", "add 2 and 3", calls=3)
    samples = training_samples(_scored(session))
    assert [s.calls for s in samples] == [[0], [1], [2]]
    for sample in samples[1:]:
        assert sample.reason is not None and "token ids do not continue" in sample.reason
        (skew,) = sample.skew
        assert not skew.exact and sample.skew_tokens == 1  # the end-of-turn id the template dropped
        turn = session.turns[sample.calls[0]].tokens
        assert turn is not None and sample.prompt_ids == turn.prompt_token_ids  # what the model saw
    assert not math.isnan(samples[0].reward)
