"""Errors in user code and data are one line naming the file, function or row."""

from __future__ import annotations

from pathlib import Path

import pytest

from envs import SingleTurnEnv, load_environment
from harness import ConfigError, Rollout, UserCodeError
from rubrics import reward


def test_sys_exit_in_load_environment_is_an_error_naming_the_file(tmp_path: Path) -> None:
    env_file = tmp_path / "quits.py"
    env_file.write_text("import sys\n\ndef load_environment():\n    sys.exit(3)\n")
    with pytest.raises(UserCodeError) as caught:
        load_environment(str(env_file))
    message = str(caught.value)
    assert "called sys.exit(3)" in message and f"{env_file}:4 in load_environment" in message
    assert "\n" not in message


def test_key_error_in_load_environment_names_where(tmp_path: Path) -> None:
    env_file = tmp_path / "broken.py"
    env_file.write_text("def load_environment():\n    config = {}\n    return config['model_name']\n")
    with pytest.raises(
        UserCodeError, match=rf"raised KeyError: 'model_name' at {env_file}:3 in load_environment"
    ):
        load_environment(str(env_file))


def test_an_environment_file_that_fails_on_import_names_where(tmp_path: Path) -> None:
    env_file = tmp_path / "bad_import.py"
    env_file.write_text("import no_such_package_xyz\n\ndef load_environment():\n    pass\n")
    with pytest.raises(
        UserCodeError, match=rf"importing '{env_file}' raised ModuleNotFoundError: .*no_such_package_xyz"
    ):
        load_environment(str(env_file))


def test_a_module_whose_own_import_is_missing_is_user_code_not_a_missing_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "needs_more_env.py").write_text("import no_such_package_xyz\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(UserCodeError, match="importing 'needs_more_env' raised ModuleNotFoundError"):
        load_environment("needs_more_env:load_environment")


def test_key_error_in_a_reward_names_where() -> None:
    @reward
    def needs_key(info: dict) -> float:
        return info["missing"]

    rollout = Rollout.model_validate({"completion": "x", "info": {"x": 1}})
    needs_key(rollout)
    reason = rollout.score_errors[""]
    assert reason.startswith("KeyError: 'missing' (at ") and "in needs_key)" in reason


def test_non_utf8_dataset_names_the_file(tmp_path: Path) -> None:
    data = tmp_path / "latin.jsonl"
    data.write_bytes(b'{"question": "ok", "answer": "1"}\n{"question": "caf\xe9", "answer": "2"}\n')
    with pytest.raises(ConfigError, match=r"latin.jsonl' is not UTF-8 text \(byte 0xe9 on line 2\)"):
        SingleTurnEnv(str(data), lambda response: 1.0)


def test_bad_message_role_is_caught_when_the_environment_is_built() -> None:
    rows = [
        {"prompt": [{"role": "user", "content": "fine"}]},
        {"prompt": [{"role": "robot", "content": "beep"}]},
    ]
    with pytest.raises(
        ConfigError, match=r"dataset row 1 has a prompt that is not valid chat messages.*robot"
    ):
        SingleTurnEnv(rows, lambda response: 1.0)
