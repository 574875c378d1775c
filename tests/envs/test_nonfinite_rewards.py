"""A reward returning ±inf or NaN: unscored with its reason, and the run still finishes cleanly."""

from __future__ import annotations

import json
import math
from pathlib import Path

from envs import SingleTurnEnv
from harness import Client, ScriptedEndpoint
from rubrics import WeightedSum

ROWS = [{"question": f"{i}?", "answer": str(i)} for i in range(4)]


def correct(response: str, answer: str) -> float:
    return math.inf if answer == "1" else -math.inf if answer == "2" else float(response == answer)


def fmt(response: str, answer: str) -> float:
    return math.nan if answer == "3" else 1.0


def echo(messages: list[dict], tools: list[dict] | None) -> str:
    return messages[-1]["content"].rstrip("?")


def test_inf_and_nan_rewards_are_unscored_with_reasons_and_the_run_is_finalized(tmp_path: Path) -> None:
    env = SingleTurnEnv(ROWS, WeightedSum({"correct": correct, "fmt": fmt}))
    with ScriptedEndpoint(echo) as endpoint:
        results = env.evaluate(
            Client("scripted", base_url=endpoint.base_url, api_key="x"),
            progress=False,
            output_dir=tmp_path / "run",
        )
    errors = {r.example_id: r.score_errors for r in results.rollouts}
    assert errors[0] == {}
    assert errors[1] == {"correct": "correct returned inf"}
    assert errors[2] == {"correct": "correct returned -inf"}
    assert errors[3] == {"fmt": "fmt returned NaN"}
    assert [math.isnan(r.reward) for r in results.rollouts] == [False, True, True, True]
    metadata = json.loads((tmp_path / "run" / "metadata.json").read_text())
    assert metadata["status"] == "completed" and metadata["summary"]["num_unscored"] == 3
