"""MultiTurnEnv hooks, @stop conditions, presets, scoring and config, driven by hand.

The harness loop is replayed here by calling setup_rollout / respond / stop_reason with
hand-written assistant messages, so no endpoint is needed.
"""

from __future__ import annotations

import asyncio
import json
import math

import pytest

import rubrics
from envs import Environment, MultiTurnEnv, SingleTurnEnv, ToolEnv, stop
from harness import ConfigError, ConfigTypeError, EnvironmentProtocol, Message, Rollout

ROWS = [{"question": "Guess my number (1-10).", "answer": "7"}]


def exact(response: str, answer: str) -> float:
    return float(response.strip() == answer)


def double(x: int) -> int:
    """Double a number."""
    return 2 * x


def say(rollout: Rollout, text: str) -> None:
    rollout.completion.append(Message(role="assistant", content=text))
    rollout.turns += 1


class GuessEnv(MultiTurnEnv):
    """Tells the model higher/lower until it guesses; gives up after three wrong guesses."""

    async def setup_state(self, state: dict, example: dict) -> None:
        await asyncio.sleep(0)
        state["target"] = int(example["answer"])
        state["guesses"] = []

    def env_response(self, rollout: Rollout) -> str | None:
        guess = int(rollout.response)
        rollout.state["guesses"].append(guess)
        if guess == rollout.state["target"]:
            return None
        return "higher" if guess < rollout.state["target"] else "lower"

    @stop
    def too_many_guesses(self, rollout: Rollout) -> bool:
        return len(rollout.state["guesses"]) >= 3

    @stop
    async def said_quit(self, rollout: Rollout) -> bool:
        return rollout.response.strip() == "quit"


async def test_env_response_feeds_back_and_none_ends() -> None:
    env = GuessEnv(ROWS, exact)
    rollout = await env.setup_rollout(env.get_dataset()[0])
    assert rollout.state == {"target": 7, "guesses": []}
    say(rollout, "3")
    assert await env.stop_reason(rollout) is None
    reply = await env.respond(rollout)
    assert [(m.role, m.content) for m in reply] == [("user", "higher")]
    rollout.completion.extend(reply)
    say(rollout, "7")
    assert await env.respond(rollout) is None


async def test_stop_conditions_report_their_name_in_definition_order() -> None:
    env = GuessEnv(ROWS, exact)
    rollout = await env.setup_rollout(env.get_dataset()[0])
    say(rollout, "quit")
    assert await env.stop_reason(rollout) == "said_quit"
    rollout.state["guesses"] = [1, 2, 3]
    assert await env.stop_reason(rollout) == "too_many_guesses"  # defined first, checked first


async def test_state_is_fresh_per_rollout() -> None:
    env = GuessEnv(ROWS, exact)
    row = env.get_dataset()[0]
    first, second = await env.setup_rollout(row, 0), await env.setup_rollout(row, 1)
    first.state["guesses"].append(5)
    first.info["mutated"] = True
    assert second.state["guesses"] == [] and "mutated" not in second.info


async def test_setup_state_may_return_a_new_dict() -> None:
    class Fresh(MultiTurnEnv):
        def setup_state(self, state: dict, example: dict) -> dict:
            return {"replaced": example["example_id"]}

        def env_response(self, rollout: Rollout) -> str:
            return "again"

    env = Fresh(ROWS, exact)
    rollout = await env.setup_rollout(env.get_dataset()[0])
    assert rollout.state == {"replaced": 0}


async def test_is_done_means_completed_and_env_response_messages() -> None:
    class Done(MultiTurnEnv):
        async def is_done(self, rollout: Rollout) -> bool:
            return "DONE" in rollout.response

        async def env_response(self, rollout: Rollout) -> list[dict]:
            return [{"role": "user", "content": "go on"}]

    env = Done(ROWS, exact)
    rollout = await env.setup_rollout(env.get_dataset()[0])
    say(rollout, "thinking")
    assert await env.stop_reason(rollout) is None
    assert [m.content for m in await env.respond(rollout)] == ["go on"]
    say(rollout, "DONE")
    assert await env.stop_reason(rollout) == "completed"


async def test_subclass_can_switch_off_an_inherited_stop() -> None:
    class Patient(GuessEnv):
        def too_many_guesses(self, rollout: Rollout) -> bool:  # no @stop: no longer a condition
            return True

    env = Patient(ROWS, exact)
    rollout = await env.setup_rollout(env.get_dataset()[0])
    say(rollout, "5")
    assert await env.stop_reason(rollout) is None


def test_stop_rejects_non_callables() -> None:
    with pytest.raises(TypeError, match="@stop"):
        stop("not a function")


async def test_plain_environment_ends_when_model_answers() -> None:
    env = Environment(ROWS, exact)
    rollout = await env.setup_rollout(env.get_dataset()[0])
    say(rollout, "7")
    assert await env.stop_reason(rollout) is None
    assert await env.respond(rollout) is None


# ---------------------------------------------------------------- presets and arguments


def test_presets_default_max_turns() -> None:
    assert SingleTurnEnv(ROWS, exact).max_turns == 1
    assert GuessEnv(ROWS, exact).max_turns == 10
    assert ToolEnv(ROWS, exact, tools=[double]).max_turns == 10
    assert GuessEnv(ROWS, exact, max_turns=4).max_turns == 4


def test_multi_turn_env_must_script_the_other_side() -> None:
    class Silent(MultiTurnEnv):
        def is_done(self, rollout: Rollout) -> bool:
            return True

    for cls in (MultiTurnEnv, Silent):
        with pytest.raises(ConfigError, match="does not override env_response"):
            cls(ROWS, exact)


def test_preset_argument_errors() -> None:
    with pytest.raises(ValueError, match="ToolEnv"):
        SingleTurnEnv(ROWS, exact, tools=[double])
    with pytest.raises(ValueError, match="max_turns=1"):
        SingleTurnEnv(ROWS, exact, max_turns=3)
    with pytest.raises(ValueError, match="needs tools"):
        ToolEnv(ROWS, exact)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "3"])
def test_max_turns_must_be_positive_int(bad: object) -> None:
    with pytest.raises(ValueError, match="max_turns must be an integer >= 1"):
        Environment(ROWS, exact, max_turns=bad)


def test_bad_sampling_parser_rubric() -> None:
    # Wrong types are ConfigTypeError: a ConfigError (RubricError, ValueError) and a TypeError.
    with pytest.raises(ConfigTypeError, match="sampling"):
        Environment(ROWS, exact, sampling=[("max_tokens", 5)])
    with pytest.raises(ConfigTypeError, match="parser"):
        Environment(ROWS, exact, parser=42)
    with pytest.raises(TypeError, match="rubric must be"):
        Environment(ROWS, 42)
    with pytest.raises(ConfigError, match="empty"):
        Environment(ROWS, [])
    with pytest.raises(ConfigError, match="max_turns"):
        Environment(ROWS, exact, max_turns=0)


def test_implements_protocol() -> None:
    assert isinstance(Environment(ROWS, exact), EnvironmentProtocol)
    assert isinstance(GuessEnv(ROWS, exact), EnvironmentProtocol)


# ---------------------------------------------------------------- rubric, parser, score, config


def test_rubric_inputs_are_wrapped() -> None:
    def short(response: str) -> float:
        return float(len(response) < 10)

    assert isinstance(Environment(ROWS, exact).rubric, rubrics.Rubric)
    assert isinstance(Environment(ROWS, [exact, short]).rubric, rubrics.WeightedSum)
    assert isinstance(Environment(ROWS, {"exact": exact, "short": short}).rubric, rubrics.WeightedSum)
    tree = rubrics.WeightedSum([exact])
    assert Environment(ROWS, tree).rubric is tree


async def test_score_sets_reward_and_node_scores() -> None:
    def short(response: str) -> float:
        return float(len(response) < 3)

    env = SingleTurnEnv(ROWS, {"exact": exact, "short": short})
    rollout = await env.setup_rollout(env.get_dataset()[0])
    say(rollout, "7")
    await env.score(rollout)
    assert rollout.reward == pytest.approx(1.0)
    assert rollout.scores["exact"] == 1.0 and rollout.scores["short"] == 1.0


async def test_parser_extracts_answer_into_state() -> None:
    def last_word(text: str) -> str | None:
        return text.split()[-1] if text.split() else None

    def parsed_exact(state: dict, answer: str) -> float:
        return float(state["parsed_answer"] == answer)

    env = SingleTurnEnv(ROWS, parsed_exact, parser=last_word)
    rollout = await env.setup_rollout(env.get_dataset()[0])
    say(rollout, "I think it is 7")
    assert env.parse_answer(rollout) == "7"
    await env.score(rollout)
    assert rollout.state["parsed_answer"] == "7" and rollout.reward == 1.0


def test_parser_object_with_parse_answer() -> None:
    class Upper:
        def parse_answer(self, text: str) -> str:
            return text.upper()

    env = Environment(ROWS, exact, parser=Upper())
    assert env.parse_answer(Rollout(completion="yes")) == "YES"
    assert Environment(ROWS, exact).parse_answer(Rollout(completion="raw")) == "raw"


async def test_rubric_that_raises_is_recorded_not_raised() -> None:
    class Broken(rubrics.Rubric):
        def forward(self, rollout: Rollout) -> float:
            return 1.0

        async def ascore(self, rollout: Rollout) -> float:
            raise RuntimeError("judge endpoint down")

    env = SingleTurnEnv(ROWS, Broken())
    rollout = await env.setup_rollout(env.get_dataset()[0])
    say(rollout, "7")
    await env.score(rollout)
    assert math.isnan(rollout.reward)
    assert "scoring failed: RuntimeError: judge endpoint down" in rollout.error


def test_config_is_json_and_describes_the_env() -> None:
    env = GuessEnv(ROWS, exact, sampling={"max_tokens": 16}, name="guess", system_prompt="S")
    config = env.config()
    assert json.loads(json.dumps(config)) == config
    assert config["class"] == "GuessEnv" and config["name"] == "guess"
    assert config["max_turns"] == 10 and config["sampling"] == {"max_tokens": 16}
    assert config["load_spec"] is None and config["load_kwargs"] is None
    assert GuessEnv(ROWS, exact).name == "GuessEnv"


def test_scripted_policies_default_empty_and_repr() -> None:
    env = Environment(ROWS, exact, name="demo")
    assert env.scripted_policies == {}
    assert "demo" in repr(env) and "1 rows" in repr(env)


async def test_env_response_of_the_wrong_type_is_named() -> None:
    class Bad(MultiTurnEnv):
        def env_response(self, rollout: Rollout) -> int:
            return 5

    env = Bad(ROWS, exact)
    rollout = await env.setup_rollout(env.get_dataset()[0])
    say(rollout, "3")
    with pytest.raises(TypeError, match="Bad.env_response must return"):
        await env.respond(rollout)
