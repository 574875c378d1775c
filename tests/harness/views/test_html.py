"""Notebook-facing display and export: HTML reprs, Summary repr, to_pandas, slicing, run order."""

from __future__ import annotations

import asyncio
import json
import math
import random
from pathlib import Path

import pytest

from envs import SingleTurnEnv
from harness import EvalResults, Rollout, aevaluate, load_results
from harness._core.run.summary import summarize
from harness._views.html import histogram_svg, json_script, rollout_html, tree_from_metadata, tree_html
from rubrics import Gate, WeightedSum
from tests.helpers.endpoints import serve

ROWS = [{"question": f"What is {i}+{i + 1}?", "answer": str(2 * i + 1)} for i in range(8)]


def echo_policy(messages: list[dict], tools: list[dict] | None) -> str:
    a, b = (int(x) for x in messages[-1]["content"].removeprefix("What is ").rstrip("?").split("+"))
    return str(a + b)


def correct(response: str, answer: str) -> float:
    return float(response.strip() == answer)


def short(response: str) -> float:
    return 1.0 if len(response) <= 1 else 0.4


def _env() -> SingleTurnEnv:
    tree = WeightedSum({"zeta": correct, "alpha": Gate(short, 0.5)}, weights=[0.6, 0.4])
    return SingleTurnEnv(ROWS, tree, name="adder")


def _hostile() -> Rollout:
    return Rollout.model_validate(
        {
            "example_id": "<img src=x onerror=alert(1)>",
            "prompt": "</script><script>alert(2)</script>",
            "completion": [
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": "c<1>", "function": {"name": "f<b>", "arguments": '{"x": "<i>"}'}}],
                },
                {"role": "tool", "tool_call_id": "c<1>", "content": "<b>bold</b>"},
                {"role": "assistant", "content": "answer & <u>"},
            ],
            "answer": "<answer>",
            "reward": None,
            "scores": {"judge": None},
            "score_errors": {"judge": "reply <had> no score", "": "reply <had> no score"},
            "score_details": {"judge": {"reply": "<script>x</script>", "prompt": "grade <this>"}},
        }
    )


def test_rollout_repr_html_escapes_everything_and_shows_the_tree() -> None:
    page = _hostile()._repr_html_()
    assert "<script>" not in page and "<img" not in page and "<b>bold" not in page and "<u>" not in page
    assert "&lt;/script&gt;&lt;script&gt;alert(2)" in page and "&lt;b&gt;bold&lt;/b&gt;" in page
    assert "f&lt;b&gt;" in page and "tool result · c&lt;1&gt;" in page
    assert 'class="nan"' in page and "unscored: reply &lt;had&gt; no score" in page
    assert "<details><summary>judge prompt</summary>" in page and "judge reply" in page


def test_rollout_repr_is_one_short_line() -> None:
    rollout = Rollout.model_validate({"example_id": 3, "completion": "x" * 500, "reward": 0.25})
    text = repr(rollout)
    assert "\n" not in text and len(text) < 200 and "reward=0.25" in text
    assert str(rollout) == text


def test_json_script_cannot_close_its_element() -> None:
    block = json_script("data", {"a": "</script><!-- & -->"})
    body = block[block.index(">") + 1 : block.rindex("</script>")]
    assert "<" not in body and ">" not in body and "&" not in body
    assert json.loads(body) == {"a": "</script><!-- & -->"}


def test_histogram_counts_every_scored_reward() -> None:
    svg = histogram_svg([0.0, 0.0, 0.55, 1.0, math.nan])
    assert svg.startswith("<svg") and svg.count("<rect") == 10
    assert ": 2</title>" in svg and "4 scored" in svg
    assert "no scored" in histogram_svg([math.nan])


def test_tree_html_shows_gate_decisions_and_weights() -> None:
    nodes = [
        {"path": "", "head": "WeightedSum()", "note": ""},
        {"path": "g", "head": "Gate(threshold=0.5)", "note": "weight=0.4", "threshold": 0.5},
        {"path": "g.short", "head": "reward(short)", "note": ""},
    ]
    page = tree_html(nodes, {"g": 0.0, "g.short": 0.4}, reward=0.0)
    assert "gate closed (0.4 &lt; 0.5)" in page and "weight=0.4" in page


def test_summary_repr_is_readable_without_float_noise() -> None:
    rollouts = [Rollout(example_id=i, reward=0.1 + 0.2, scores={"a": 1 / 3}) for i in range(3)]
    text = repr(summarize(rollouts, planned=5))
    assert text.startswith("Summary(rollouts=3 of 5; examples=3; mean_reward=0.3")
    assert "a=0.3333" in text and "0.30000000000000004" not in text
    assert "<table" in summarize(rollouts)._repr_html_()


def test_str_and_repr_have_no_side_effects(capsys: pytest.CaptureFixture[str]) -> None:
    results = EvalResults([Rollout(example_id=1, reward=1.0)])
    str(results), repr(results), results._repr_html_(), repr(results.summary)
    assert capsys.readouterr() == ("", "")


async def test_a_real_run_reads_back_in_order_with_tree_ordered_nodes(tmp_path: Path) -> None:
    env = _env()
    async with serve(echo_policy, latency=0.0) as (_, client):
        results = await aevaluate(
            env, client, rollouts_per_example=2, output_dir=tmp_path, progress=False, concurrency=8, seed=3
        )
    # results.jsonl holds them in finishing order; reading back gives evaluate's order.
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    shuffled = lines[:]
    random.Random(0).shuffle(shuffled)
    (tmp_path / "results.jsonl").write_text("\n".join(shuffled) + "\n")
    loaded = load_results(tmp_path)
    assert [r.key for r in loaded] == [r.key for r in results]
    assert list(results.summary.node_means) == ["zeta", "alpha", "alpha.short"]
    assert list(loaded.summary.node_means) == ["zeta", "alpha", "alpha.short"]
    assert set(results.summary.node_stderrs) == {"zeta", "alpha", "alpha.short"}
    page = loaded._repr_html_()
    assert page.index(">zeta<") < page.index(">alpha<") < page.index(">short<") and "<svg" in page
    assert ">short<" in loaded[0]._repr_html_()  # a lone rollout draws its tree from the score paths
    panel = rollout_html(loaded[0], tree_from_metadata(loaded.metadata))  # the run recorded the tree
    assert "weight=0.6" in panel and "gate closed (0.4 &lt; 0.5)" in panel


async def test_to_pandas_and_slicing(tmp_path: Path) -> None:
    env = _env()
    async with serve(echo_policy) as (_, client):
        results = await aevaluate(env, client, num_examples=3, progress=False)
    df = results.to_pandas()
    assert list(df.columns[:6]) == ["example_id", "rollout_index", "reward", "zeta", "alpha", "alpha.short"]
    assert len(df) == 3 and (df.answer == "1").sum() == 1  # answers as they were, not JSON text
    assert df.response.tolist() == ["1", "3", "5"] and df.reward.tolist() == [1.0, 1.0, 1.0]
    assert df.completion[0] == [{"role": "assistant", "content": "1"}]
    assert {"stop_reason", "error", "turns", "prompt_tokens", "judge_prompt_tokens"} <= set(df.columns)
    head = results[:2]
    assert isinstance(head, EvalResults) and len(head) == 2 and head.summary.num_rollouts == 2
    assert head.metadata["env"]["name"] == "adder" and results[0] is results.rollouts[0]


async def test_overwrite_replaces_an_earlier_run(tmp_path: Path) -> None:
    env = _env()
    async with serve(echo_policy) as (_, client):
        await aevaluate(env, client, num_examples=2, output_dir=tmp_path, progress=False)
        with pytest.raises(FileExistsError, match="overwrite=True"):
            await aevaluate(env, client, num_examples=2, output_dir=tmp_path, progress=False)
        again = await aevaluate(
            env, client, num_examples=3, output_dir=tmp_path, progress=False, overwrite=True
        )
    assert len(again) == 3 and len(load_results(tmp_path)) == 3
    (tmp_path / "notes.txt").write_text("mine")
    async with serve(echo_policy) as (_, client):
        with pytest.raises(FileExistsError, match="notes.txt"):
            await aevaluate(env, client, num_examples=2, output_dir=tmp_path, progress=False, overwrite=True)
    assert (tmp_path / "notes.txt").exists()


async def test_interrupted_run_says_what_finished_and_what_was_planned(tmp_path: Path) -> None:
    env = _env()
    async with serve(echo_policy, latency=0.2) as (_, client):
        task = asyncio.create_task(
            aevaluate(env, client, rollouts_per_example=4, output_dir=tmp_path, progress=False, concurrency=4)
        )
        await asyncio.sleep(0.5)
        task.cancel()
        with pytest.raises(asyncio.CancelledError) as caught:
            await task
    note = caught.value.__notes__[0]
    assert note.startswith("evaluation interrupted: ") and "of 32 rollouts finished" in note
    assert "resume=True" in note
    loaded = load_results(tmp_path)
    assert loaded.metadata["status"] == "interrupted"
    assert loaded.summary.planned == 32 and loaded.summary.num_rollouts < 32
    assert "of 32 planned" in str(loaded)
