"""The shared helpers in tests/helpers/: the fakes implement the protocol, their policies answer sensibly, `serving` reports a server that never listens, `Reaped` sees what a command leaves behind."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from harness import EnvironmentProtocol
from tests.helpers.endpoints import free_port
from tests.helpers.fakes import FakeEnv, MultiTurnFakeEnv, ToolFakeEnv, bisect_policy
from tests.helpers.processes import Reaped, serving


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


@pytest.mark.serve
@pytest.mark.slow
def test_serving_names_a_server_that_exits_before_it_listens() -> None:
    crash = [sys.executable, "-c", "import os, sys; print(os.environ['WHY'], file=sys.stderr); sys.exit(3)"]
    with pytest.raises(RuntimeError, match=r"did not start listening on \d+: \(.*'no such app\\n'\)"):
        with serving(crash, free_port(), env={"WHY": "no such app"}, timeout=30):
            raise AssertionError("not reached")


@pytest.mark.slow
def test_reaped_names_what_a_command_leaves_behind_even_in_a_new_session(tmp_path: Path) -> None:
    leaver = [
        sys.executable,
        "-c",
        "import subprocess; subprocess.Popen(['sleep', '37'], start_new_session=True)",
    ]
    run = Reaped.start(leaver, log=tmp_path / "log", cwd=tmp_path, settle=1)
    code, left = run.finish()
    assert code == 0 and list(left.values()) == ["sleep 37"]
    tidy = Reaped.start([sys.executable, "-c", "pass"], log=tmp_path / "log2", cwd=tmp_path, settle=1)
    assert tidy.finish() == (0, {})
