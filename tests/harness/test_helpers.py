"""The shared helpers in tests/helpers.py: the fakes implement the protocol, their policies answer sensibly, `serving` reports a server that never listens."""

from __future__ import annotations

import sys

import pytest

from harness.protocol import EnvironmentProtocol
from tests.helpers import FakeEnv, MultiTurnFakeEnv, ToolFakeEnv, _free_port, bisect_policy, serving


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


def test_serving_names_a_server_that_exits_before_it_listens() -> None:
    crash = [sys.executable, "-c", "import os, sys; print(os.environ['WHY'], file=sys.stderr); sys.exit(3)"]
    with pytest.raises(RuntimeError, match=r"did not start listening on \d+: \(.*'no such app\\n'\)"):
        with serving(crash, _free_port(), env={"WHY": "no such app"}, timeout=30):
            raise AssertionError("not reached")
