"""Summary numbers, exports and reading runs back, on hand-made rollouts."""

from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest

from harness import EvalResults, Rollout, Usage, load_results
from harness._core.errors import ResultsWarning
from harness._core.run.summary import mean_and_stderr, pass_at_k, summarize


def _r(example: int | str, index: int, reward: float, **kw: object) -> Rollout:
    return Rollout(
        example_id=example,
        rollout_index=index,
        reward=reward,
        stop_reason=kw.pop("stop_reason", "completed"),
        completion="x",
        **kw,
    )


def _brute_pass_at_k(outcomes: list[bool], k: int) -> float:
    draws = list(itertools.combinations(outcomes, k))
    return sum(any(d) for d in draws) / len(draws)


@pytest.mark.parametrize("n,c", [(1, 0), (1, 1), (4, 0), (4, 1), (4, 2), (5, 3), (6, 6)])
def test_pass_at_k_matches_enumeration(n: int, c: int) -> None:
    outcomes = [True] * c + [False] * (n - c)
    for k in range(1, n + 1):
        assert pass_at_k(n, c, k) == pytest.approx(_brute_pass_at_k(outcomes, k))


def test_pass_at_k_rejects_k_above_n() -> None:
    with pytest.raises(ValueError, match="k=3, n=2"):
        pass_at_k(2, 1, 3)


def test_mean_and_stderr() -> None:
    assert mean_and_stderr([]) == (None, None)
    assert mean_and_stderr([0.5]) == (0.5, None)
    mean, stderr = mean_and_stderr([0.0, 1.0, 1.0, 0.0])
    assert mean == 0.5
    assert stderr == pytest.approx(math.sqrt((4 * 0.25 / 3) / 4))  # sample std / sqrt(n)


def _hand_made() -> list[Rollout]:
    return [
        # example a: 1 of 3 passes (0.5 is not a pass)
        _r(
            "a",
            0,
            1.0,
            scores={"acc": 1.0, "acc.exact": 1.0, "fmt": 1.0},
            usage=Usage(prompt_tokens=10, completion_tokens=2),
        ),
        _r(
            "a",
            1,
            0.5,
            scores={"acc": 0.0, "acc.exact": 0.0, "fmt": 1.0},
            usage=Usage(prompt_tokens=10, completion_tokens=3),
        ),
        _r("a", 2, 0.0, scores={"acc": 0.0, "acc.exact": 0.0, "fmt": 0.0}, stop_reason="max_turns"),
        # example b: 1 of 2 scored passes; one unscored by the judge
        _r("b", 0, 1.0 - 1e-12, scores={"acc": 1.0, "acc.exact": 1.0, "fmt": 1.0}),
        _r("b", 1, 0.0, scores={"acc": 0.0, "fmt": 0.0, "acc.exact": 0.0}),
        _r(
            "b",
            2,
            math.nan,
            scores={"acc": math.nan, "acc.exact": math.nan, "fmt": 1.0},
            score_errors={"acc": "child unscored", "acc.exact": "judge reply had no score"},
        ),
        # example c: endpoint error, unscored
        _r("c", 0, math.nan, stop_reason="error", error="EndpointError: 500 after 5 retries"),
        _r("c", 1, math.nan, scores={"acc": math.nan}, score_errors={"acc": "judge reply had no score"}),
        _r("c", 2, 1.0, scores={"acc": 1.0, "fmt": 1.0}),
    ]


def test_summary_numbers() -> None:
    s = summarize(_hand_made(), wall_seconds=3.0, max_k=3)
    rewards = [1.0, 0.5, 0.0, 1.0 - 1e-12, 0.0, 1.0]
    mean, stderr = mean_and_stderr(rewards)
    assert (s.num_rollouts, s.num_examples, s.num_scored) == (9, 3, 6)
    assert s.mean_reward == pytest.approx(mean) and s.reward_stderr == pytest.approx(stderr)
    # node means over rollouts where the node has a non-NaN score
    assert s.node_means["acc"] == pytest.approx(3 / 6)
    assert s.node_means["acc.exact"] == pytest.approx(2 / 5)
    assert s.node_means["fmt"] == pytest.approx(5 / 7)
    assert list(s.node_means) == ["acc", "acc.exact", "fmt"]  # tree order
    # pass@k: a: n=3,c=1; b: n=2,c=1; c: n=1,c=1
    assert s.pass_at_k[1] == pytest.approx((1 / 3 + 1 / 2 + 1.0) / 3)
    assert s.pass_at_k[2] == pytest.approx((pass_at_k(3, 1, 2) + 1.0) / 2)
    assert s.pass_at_k[3] == pytest.approx(1.0)  # only example a has 3 scored rollouts, and one passes
    assert s.stop_reasons == {"completed": 7, "max_turns": 1, "error": 1}
    assert s.num_errors == 1 and s.num_unscored == 3
    assert s.unscored_reasons[0] == ("judge reply had no score", 2)
    assert ("rollout error (EndpointError)", 1) in s.unscored_reasons
    assert (s.prompt_tokens, s.completion_tokens) == (20, 5)
    assert s.wall_seconds == 3.0 and s.rollouts_per_second == pytest.approx(3.0)


def test_summary_of_nothing() -> None:
    s = summarize([])
    assert (
        s.num_rollouts == 0 and s.mean_reward is None and s.pass_at_k == {} and s.rollouts_per_second is None
    )


def test_summary_survives_json() -> None:
    s = summarize(_hand_made(), wall_seconds=1.0)
    back = type(s).model_validate_json(s.model_dump_json())
    assert back == s


def test_printing_shows_the_summary_tree() -> None:
    results = EvalResults(
        _hand_made(),
        metadata={"env": {"name": "toy"}, "model": {"model": "m"}, "arguments": {"rollouts_per_example": 3}},
    )
    text = str(results)
    assert "toy · m" in text and "mean reward" in text and "pass@3" in text
    assert "\n" in text and "    exact" in text and "  acc" in text  # children indented under parents
    unscored = "3: judge reply had no score (2); rollout error (EndpointError) (1)"
    assert unscored in text
    html = results._repr_html_()
    assert "<table" in html and "pass@1" in html and "<svg" in html and "toy · m" in html
    assert unscored in html  # the page says it as the terminal does
    assert results.__rich__().row_count > 5
    assert "EvalResults(rollouts=9" in repr(results)


def test_to_dataset_flattens_messages() -> None:
    rollouts = _hand_made()
    rollouts[0].completion[0].tool_calls = None
    rollouts[0].info = {"nested": {"x": [1, "a"]}}
    results = EvalResults(rollouts)
    ds = results.to_dataset()
    assert len(ds) == 9
    row = ds[0]
    assert json.loads(row["completion"]) == [{"role": "assistant", "content": "x"}]
    assert json.loads(row["info"]) == {"nested": {"x": [1, "a"]}}
    assert row["example_id"] == "a" and row["reward"] == 1.0
    assert set(row["scores"]) == {"acc", "acc.exact", "fmt"}
    assert math.isnan(ds[6]["scores"]["fmt"])  # missing node -> NaN, same keys every row


def test_to_dataset_mixed_id_types_and_empty() -> None:
    ds = EvalResults([_r(1, 0, 1.0), _r("b", 0, 0.0)]).to_dataset()
    assert ds["example_id"] == ["1", "b"]
    assert len(EvalResults([]).to_dataset()) == 0


def test_to_jsonl_and_load_results_round_trip(tmp_path: Path) -> None:
    results = EvalResults(_hand_made())
    path = results.to_jsonl(tmp_path / "out" / "r.jsonl")
    back = load_results(path)
    assert [r.key for r in back.rollouts] == [r.key for r in results.rollouts]
    assert back.rollouts[5].score_errors == results.rollouts[5].score_errors
    assert math.isnan(back.rollouts[6].reward)
    assert back.summary == results.summary


def test_load_results_tolerates_torn_last_line_without_changing_the_file(tmp_path: Path) -> None:
    EvalResults(_hand_made()).to_jsonl(tmp_path / "results.jsonl")
    (tmp_path / "metadata.json").write_text(
        json.dumps(
            {
                "status": "running",
                "arguments": {"rollouts_per_example": 3},
                "summary": {"wall_seconds": 2.0, "rollouts": 9},
            }
        )
    )
    with open(tmp_path / "results.jsonl", "ab") as handle:
        handle.write(b'{"example_id": "d", "rollout_ind')
    size = (tmp_path / "results.jsonl").stat().st_size
    back = load_results(tmp_path)
    assert len(back) == 9 and back.metadata["status"] == "running"
    assert (tmp_path / "results.jsonl").stat().st_size == size
    assert back.summary.wall_seconds == 2.0 and back.summary.rollouts_per_second == pytest.approx(4.5)
    assert "running" in str(back)


def test_load_results_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no results at"):
        load_results(tmp_path / "missing")
    with pytest.raises(FileNotFoundError, match="neither results.jsonl nor metadata.json"):
        load_results(tmp_path)
    (tmp_path / "results.jsonl").write_text(
        '{"example_id": 1, "rollout_index": 0}\nnot json\n{"example_id": 2, "rollout_index": 0}\n'
    )
    with pytest.warns(ResultsWarning, match=r"skipped 1 line\(s\) that are not valid rollouts \(line 2\)"):
        assert [r.example_id for r in load_results(tmp_path)] == [1, 2]


def test_eval_results_accepts_dicts() -> None:
    results = EvalResults([{"example_id": 1, "completion": "4", "reward": 1.0}])
    assert results[0].response == "4" and results.summary.mean_reward == 1.0 and len(results) == 1
