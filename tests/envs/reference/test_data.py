"""Locating the reference data files (checkout first, then an installed prefix), the
scripted-policy helpers, and finding the reference environments by name."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import envs
from envs.reference import _data as data
from envs.reference._scripting import (
    RowLookup,
    first_user_text,
    message_text,
    seeded_rng,
)


def test_data_path_prefers_the_checkout():
    assert data.data_path("wordle_words.txt") == data.REPO_DATASETS / "wordle_words.txt"


def test_data_path_falls_back_to_the_installed_prefix(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    installed = tmp_path / "prefix" / "share" / "rubric" / "datasets"
    installed.mkdir(parents=True)
    (installed / "wordle_words.txt").write_text("crane\n")
    monkeypatch.setattr(data, "REPO_DATASETS", tmp_path / "no-checkout")
    monkeypatch.setattr(sys, "prefix", str(tmp_path / "prefix"))
    assert data.data_path("wordle_words.txt") == installed / "wordle_words.txt"
    with pytest.raises(
        FileNotFoundError, match=r"data file 'missing.txt' not found \(looked in: .*no-checkout"
    ):
        data.data_path("missing.txt")


def test_read_jsonl_reports_the_bad_line(tmp_path: Path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"a": 1}\n\n{"a": \n')
    with pytest.raises(ValueError, match=r"rows.jsonl:3: not valid JSON"):
        data.read_jsonl(path)
    path.write_text("[1, 2]\n")
    with pytest.raises(ValueError, match="expected a JSON object, got list"):
        data.read_jsonl(path)
    data.write_jsonl([{"b": "é"}], tmp_path / "out" / "x.jsonl")
    assert data.read_jsonl(tmp_path / "out" / "x.jsonl") == [{"b": "é"}]


def test_no_python_in_datasets():
    assert not list(data.REPO_DATASETS.glob("*.py"))  # a `datasets` package would shadow HF datasets


def test_row_lookup():
    rows = [{"question": "Game #1: go"}, {"question": "Game #10: go"}]
    lookup = RowLookup(rows)
    assert (
        lookup.find([{"role": "system", "content": "rules"}, {"role": "user", "content": "Game #10: go"}])
        is rows[1]
    )
    wrapped = [{"role": "user", "content": [{"type": "text", "text": "Please solve: Game #1: go (thanks)"}]}]
    assert lookup.find(wrapped) is rows[0]
    with pytest.raises(LookupError, match="no user message"):
        first_user_text([{"role": "system", "content": "x"}])
    with pytest.raises(KeyError, match="no 'question' column"):
        RowLookup([{"prompt": "x"}])
    assert message_text({"role": "assistant", "content": None}) == ""


def test_seeded_rng_is_stable_across_processes():
    # sha256-based, unlike hash(): the same arguments give the same stream in every process.
    assert seeded_rng("a", 1).random() == seeded_rng("a", 1).random()
    assert seeded_rng("a", 1).random() != seeded_rng("a", 2).random()
    assert seeded_rng("x").randint(0, 10**9) == 804338924


@pytest.mark.parametrize("name", ["gsm8k", "wordle", "python"])
def test_reference_environments_are_registered(name: str):
    registered = {e.name: e.value for e in envs.list_environments()}
    assert registered[name].startswith("envs.reference.")
    env = envs.load_environment(name)
    assert env.name == name and set(env.scripted_policies) == {"oracle", "noisy"}
    json.dumps(env.config())


def test_registry_rejects_unknown_arguments():
    with pytest.raises(TypeError, match="does not accept argument"):
        envs.load_environment("wordle", colour="green")


def test_evaluate_with_an_unknown_policy_names_the_available_ones() -> None:
    from harness import ConfigError

    env = envs.load_environment("gsm8k")
    with pytest.raises(ConfigError, match=r"no scripted policy 'psychic' \(available: noisy, oracle\)"):
        env.evaluate("scripted:psychic", num_examples=1)
