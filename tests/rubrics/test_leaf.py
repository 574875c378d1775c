"""Leaves: reward(), parameter injection by name, columns, conversion and failures."""

from __future__ import annotations

import functools
import math

import pytest

from harness import Rollout
from rubrics import FunctionRubric, Rubric, WeightedSum, reward


def sample(**extra: object) -> Rollout:
    data = {"prompt": "What is 6x7?", "completion": "42", "answer": "42", "task": "math"}
    data.update(extra)
    return Rollout.model_validate(data)


def test_reward_forms_plain_decorator_and_decorator_with_options() -> None:
    def exact(response, answer):
        return response == answer

    plain = reward(exact)

    @reward
    def decorated(response, answer):
        return response == answer

    @reward(name="lenient", on_error=0.0)
    def configured(response, answer):
        raise RuntimeError("boom")

    assert isinstance(plain, FunctionRubric) and isinstance(decorated, Rubric)
    assert plain.name == "exact" and decorated.name == "decorated" and configured.name == "lenient"
    assert plain(sample()) == 1.0 and decorated(sample()) == 1.0
    assert configured(sample()) == 0.0
    assert plain.fn is exact


def test_every_injected_field_reaches_the_function_by_name() -> None:
    seen: dict[str, object] = {}

    def everything(rollout, prompt, completion, response, answer, info, task, state):
        seen.update(
            rollout=rollout,
            prompt=prompt,
            completion=completion,
            response=response,
            answer=answer,
            info=info,
            task=task,
            state=state,
        )
        return 1

    r = sample(difficulty=3)
    r.state["tries"] = 2
    assert reward(everything)(r) == 1.0
    assert seen["rollout"] is r
    assert seen["prompt"] == r.prompt and seen["completion"] == r.completion
    assert seen["response"] == "42" and seen["answer"] == "42" and seen["task"] == "math"
    assert seen["info"] == {"difficulty": 3} and seen["state"] == {"tries": 2}


def test_other_names_are_dataset_columns_from_info_and_defaults_make_them_optional() -> None:
    def within(response, tolerance, scale=1.0):
        return abs(float(response) - 41.5) <= tolerance * scale

    leaf = reward(within)
    assert leaf.required_columns() == {"tolerance"}
    assert leaf({"completion": "42", "tolerance": 0.5}) == 1.0
    assert leaf({"completion": "42", "tolerance": 0.1}) == 0.0
    assert leaf({"completion": "42", "tolerance": 0.1, "scale": 10}) == 1.0


def test_keyword_only_and_var_kwargs_receive_fields_and_columns() -> None:
    got: dict[str, object] = {}

    def keyword_only(*, response, level):
        return response == "42" and level == 2

    def everything(response, **kwargs):
        got.update(kwargs)
        return 0.5

    assert reward(keyword_only)({"completion": "42", "level": 2}) == 1.0
    assert reward(everything)(sample(level=2)) == 0.5
    assert got["level"] == 2 and got["answer"] == "42" and got["task"] == "math"
    assert "response" not in got and isinstance(got["rollout"], Rollout)


def test_missing_column_is_nan_with_an_error_naming_the_field_and_what_is_available() -> None:
    leaf = reward(lambda response, label: response == label)
    r = sample(source="gsm8k")
    assert math.isnan(leaf(r))
    assert math.isnan(r.reward)
    message = r.score_errors[""]
    assert "'label'" in message and "source" in message and "answer" in message
    assert leaf.last_error is not None and "label" in str(leaf.last_error)


def test_missing_answer_is_an_error_unless_the_parameter_has_a_default() -> None:
    needs = reward(lambda response, answer: response == answer)
    optional = reward(lambda response, answer="42": response == answer)
    r = Rollout.model_validate({"completion": "42"})
    assert math.isnan(needs(r)) and "'answer'" in r.score_errors[""]
    assert optional(r) == 1.0


@pytest.mark.parametrize(
    "bad",
    [lambda *args: 1.0, lambda response, /: 1.0],
    ids=["var-positional", "positional-only"],
)
def test_star_args_and_positional_only_are_rejected_at_construction(bad) -> None:
    with pytest.raises(ValueError, match="lambda"):
        reward(bad)


def test_star_args_error_names_the_function() -> None:
    def my_scorer(*values):
        return 1.0

    with pytest.raises(ValueError, match="my_scorer"):
        reward(my_scorer)


def test_bool_and_int_results_become_floats() -> None:
    r = sample()
    assert reward(lambda: True)(r) == 1.0 and type(reward(lambda: True)(r)) is float
    assert reward(lambda: 0)(r) == 0.0 and type(reward(lambda: 3)(r)) is float


@pytest.mark.parametrize("value", ["0.5", None, [1.0], {"score": 1}])
def test_non_number_result_is_an_error_on_that_node(value) -> None:
    def weird():
        return value

    leaf = reward(weird)
    r = sample()
    assert math.isnan(leaf(r))
    assert "weird" in r.score_errors[""] and "must be a number" in r.score_errors[""]
    assert isinstance(leaf.last_error, TypeError)


def test_raising_leaf_scores_nan_and_keeps_the_exception() -> None:
    boom = ZeroDivisionError("division by zero")

    def divide(response):
        raise boom

    leaf = reward(divide)
    r = sample()
    assert math.isnan(leaf(r))
    assert leaf.last_error is boom
    assert r.score_errors[""] == "ZeroDivisionError: division by zero"
    assert not r.scored


def test_on_error_replaces_nan_but_still_records_why() -> None:
    leaf = reward(lambda label: 1.0, on_error=0.25)
    r = sample()
    assert leaf(r) == 0.25 and r.reward == 0.25
    assert "label" in r.score_errors[""]


def test_leaf_names_lambdas_partials_callables_and_uniqueness_among_siblings() -> None:
    def check(response):
        return 1.0

    class Scorer:
        def __call__(self, response):
            return 1.0

    ws = WeightedSum([check, check, lambda response: 1.0, functools.partial(check), Scorer()])
    assert [name for name, _ in ws.named_children()] == ["check", "check_1", "lambda", "check_2", "scorer"]
    assert ws(sample()) == pytest.approx(1.0)


def test_reward_rejects_non_callables_and_existing_rubrics() -> None:
    with pytest.raises(TypeError, match="needs a function"):
        reward(3)  # type: ignore[call-overload]
    leaf = reward(lambda: 1.0)
    with pytest.raises(TypeError, match="already a Rubric"):
        reward(leaf)


async def test_async_leaf_with_injection() -> None:
    async def judge(response, answer):
        return float(response == answer)

    leaf = reward(judge)
    r = sample()
    assert await leaf.ascore(r) == 1.0
    assert leaf(sample(completion="41")) == 0.0


def test_sync_function_returning_an_awaitable_is_awaited() -> None:
    async def inner(response):
        return 0.75

    leaf = reward(lambda response: inner(response))
    assert leaf(sample()) == 0.75


def test_dict_input_unknown_keys_land_in_info_for_columns() -> None:
    leaf = reward(lambda response, expected: response == expected)
    assert leaf({"completion": "yes", "expected": "yes"}) == 1.0
    assert leaf.required_columns() == {"expected"}


def test_bad_input_type_is_a_clear_error() -> None:
    leaf = reward(lambda: 1.0)
    with pytest.raises(TypeError, match="Rollout or a dict"):
        leaf(42)  # type: ignore[arg-type]


async def test_sync_function_returning_an_awaitable_inside_a_loop_is_a_clear_error() -> None:
    async def inner() -> float:
        return 0.75

    async def real_async() -> float:
        return 1.0

    tree = WeightedSum({"odd": lambda: inner(), "fine": real_async})
    r = Rollout.model_validate({"completion": "x"})
    assert math.isnan(await tree.ascore(r))
    assert "declare it `async def`" in r.score_errors["odd"] and r.scores["fine"] == 1.0
