"""The shared fakes in tests/helpers.py: they implement the protocol and their policies answer sensibly."""

from __future__ import annotations

from harness.protocol import EnvironmentProtocol
from tests.helpers import FakeEnv, MultiTurnFakeEnv, ToolFakeEnv, bisect_policy


def test_fakes_implement_the_protocol() -> None:
    for env in (FakeEnv(), ToolFakeEnv(), MultiTurnFakeEnv()):
        assert isinstance(env, EnvironmentProtocol)


def test_bisect_policy_narrows() -> None:
    msgs = [
        {"role": "user", "content": "Guess"},
        {"role": "assistant", "content": "7"},
        {"role": "user", "content": "higher"},
    ]
    assert bisect_policy(msgs, None) == "11"
