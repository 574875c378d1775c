"""harness._core.types: messages read by key as OpenAI message dicts are."""

from __future__ import annotations

import pytest

from harness import Message, Rollout


def _tool_turn() -> Message:
    rollout = Rollout.model_validate(
        {
            "completion": [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c1", "function": {"name": "add", "arguments": {"a": 2}}}],
                    "reasoning_content": "adding",
                }
            ]
        }
    )
    return rollout.completion[-1]


def test_a_message_reads_by_key_like_an_openai_dict() -> None:
    message = _tool_turn()
    assert message["role"] == "assistant" and message["content"] is None
    assert message["tool_calls"][0]["function"]["name"] == "add"
    assert message["tool_calls"][0]["function"]["arguments"] == '{"a": 2}'
    assert message["reasoning_content"] == "adding"  # a provider's extra field
    assert message.get("reasoning_content") == "adding" and message.get("missing", 7) == 7
    assert "content" in message and "missing" not in message
    assert dict(message)["tool_call_id"] is None
    assert Message(role="user", content="hi")["content"] == "hi"


def test_an_unknown_key_names_the_keys_there_are() -> None:
    with pytest.raises(KeyError, match="'contents'.*'content'"):
        _tool_turn()["contents"]
