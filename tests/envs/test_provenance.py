"""envs._provenance: where a loaded environment came from, and how a change shows on resume and in view."""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

import pytest

from cli import main
from envs import load_environment
from envs._provenance import changes, describe_provenance
from envs.hub import init_package


def test_an_installed_name_records_its_distribution_and_version() -> None:
    env = load_environment("gsm8k", num_examples=2)
    assert env.provenance == {
        "source": "distribution",
        "distribution": "rubric-rl",
        "version": version("rubric-rl"),
        "entry_point": "envs.reference._gsm8k:load_environment",
    }
    assert describe_provenance(env.provenance) == (
        f"rubric-rl {version('rubric-rl')} (installed distribution, envs.reference._gsm8k:load_environment)"
    )


def test_a_changed_environment_is_named_on_both_sides() -> None:
    gsm8k, wordle = load_environment("gsm8k", num_examples=2), load_environment("wordle")
    line = changes(gsm8k.provenance, wordle.provenance, names=(gsm8k.name, wordle.name))
    assert line is not None and "was 'gsm8k' from rubric-rl" in line and "now 'wordle' from rubric-rl" in line
    assert "gsm8k:load_environment" in line and "wordle:load_environment" in line


def test_a_file_records_a_hash_of_its_source(tmp_path: Path) -> None:
    source = tmp_path / "tiny_env.py"
    source.write_text(
        "from envs import SingleTurnEnv\n\n"
        "def load_environment():\n"
        "    return SingleTurnEnv([{'question': 'q', 'answer': 'a'}], lambda response: 1.0)\n"
    )
    first = load_environment(str(source)).provenance
    assert first["source"] == "file" and first["path"] == str(source.resolve())
    assert first["hash"].startswith("sha256:")
    source.write_text(source.read_text() + "# edited\n")
    second = load_environment(str(source)).provenance
    assert second["hash"] != first["hash"]
    assert "the environment changed since the run started" in str(changes(first, second))
    assert changes(first, dict(first)) is None


def test_module_function_records_the_distribution_that_provides_it() -> None:
    env = load_environment("envs.reference._gsm8k:load_environment", num_examples=2)
    assert (
        env.provenance["distribution"] == "rubric-rl" and env.provenance["module"] == "envs.reference._gsm8k"
    )


def test_eval_records_it_view_shows_it_and_resume_warns_on_change(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    package = init_package("prov-env", tmp_path)
    argv = ["eval", "./prov-env", "-m", "scripted:demo", "-n", "2", "--no-progress"]
    assert main([*argv, "-o", "run"]) == 0
    recorded = json.loads((tmp_path / "run" / "metadata.json").read_text())["provenance"]
    assert recorded["source"] == "directory" and recorded["distribution"] == "prov-env"
    assert recorded["version"] == "0.1.0" and recorded["hash"].startswith("sha256:")
    capsys.readouterr()
    assert main(["view", "run"]) == 0
    assert "environment: prov-env 0.1.0 from folder" in capsys.readouterr().out
    assert main([*argv, "--resume", "run"]) == 0
    assert "changed" not in capsys.readouterr().err
    module = package / "prov_env" / "environment.py"
    module.write_text(module.read_text() + "\n# a new scoring idea\n")
    assert main([*argv, "--resume", "run"]) == 0
    err = capsys.readouterr().err
    assert "warning: the environment changed since the run started: was 'prov-env' from prov-env 0.1.0" in err
