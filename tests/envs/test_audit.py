"""envs.audit: probes built through real rollouts (single-turn, tool, multi-turn) and the flags raised."""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from envs import SingleTurnEnv, ToolEnv, aaudit, audit, load_environment
from envs._auditing.probes import INJECTION, MANY_CALLS, substitute, wrong_answer
from harness import Client, ConfigError, ScriptedEndpoint
from rubrics import LLMJudge, WeightedSum
from rubrics.parsers import extract_xml

ROWS = [
    {"question": f"What is {a} + {b}?", "answer": str(a + b), "topic": "sums"}
    for a, b in [(2, 2), (3, 4), (10, 5), (7, 8)]
]
SYSTEM = "Put the final answer in <answer></answer>."


def oracle(messages: list[dict[str, Any]], tools: Any) -> str:
    a, b = map(int, re.findall(r"\d+", messages[-1]["content"])[:2])
    return f"Adding them gives {a + b}.\n<answer>{a + b}</answer>"


def correct(response: str, answer: str) -> float:
    return 1.0 if extract_xml(response, "answer") == answer else 0.0


def strict_format(response: str) -> float:
    return 1.0 if re.search(r"<answer>\s*\d+\s*</answer>\s*$", response) else 0.0


def lenient_format(response: str) -> float:
    """Credits "no tag at all" as well formed: an empty reply earns the format reward."""
    return 0.0 if "<answer>" in response and "</answer>" not in response else 1.0


def sums_env(rubric: Any, **kwargs: Any) -> SingleTurnEnv:
    env = SingleTurnEnv(ROWS, rubric, system_prompt=SYSTEM, **kwargs)
    env.scripted_policies = {"oracle": oracle}
    return env


def sound_rubric() -> WeightedSum:
    return WeightedSum({"correct": correct, "format": strict_format}, weights={"correct": 0.8, "format": 0.2})


# ----------------------------------------------------------------------------- the flags


def test_a_sound_rubric_passes() -> None:
    report = audit(sums_env(sound_rubric()))
    assert report.flags == [], [f.message for f in report.flags]
    assert not report.flagged
    assert report.mean("reward", "reference") == 1.0
    assert report.mean("reward", "empty") == 0.0
    assert report.mean("format", "wrong_answer") == 1.0  # a node may credit the part a partial probe has
    assert report.mean("correct", "bare_answer") == 0.0  # no <answer> tag


def test_a_format_reward_that_credits_an_empty_reply_is_hackable() -> None:
    rubric = WeightedSum(
        {"correct": correct, "format": lenient_format}, weights={"correct": 0.8, "format": 0.2}
    )
    report = audit(sums_env(rubric))
    hacks = {(f.node, f.probe) for f in report.flags_of("hackable")}
    assert {
        ("format", "empty"),
        ("format", "whitespace"),
        ("format", "prompt_echo"),
        ("format", "format_only"),
    } <= hacks
    assert all(node == "format" for node, _ in hacks)  # the reward itself is still below the reference's
    assert report.flagged


def test_a_weight_0_metric_is_never_called_hackable() -> None:
    rubric = WeightedSum(
        {"correct": correct, "format": lenient_format}, weights={"correct": 1.0, "format": 0.0}
    )
    report = audit(sums_env(rubric), 2)
    assert report.metrics == ["format"]
    assert report.mean("format", "empty") == report.mean("format", "reference") == 1.0
    assert report.flags_of("hackable") == []  # (it is constant here, and says so)


def test_a_constant_node_and_an_erroring_node_are_flagged() -> None:
    def always(response: str) -> float:
        return 0.5

    def breaks_on_empty(response: str, answer: str) -> float:
        if not response.strip():
            raise ValueError("nothing to grade")
        return correct(response, answer)

    rubric = WeightedSum({"correct": correct, "always": always, "fragile": breaks_on_empty})
    report = audit(sums_env(rubric), 2)
    constant = report.flags_of("constant")
    assert [f.node for f in constant] == ["always"]
    errors = {f.node: f for f in report.flags_of("errors")}
    assert set(errors) == {"reward", "fragile"}  # NaN flows up to the reward
    assert "nothing to grade" in errors["fragile"].message
    cell = report.cells["fragile"]["empty"]
    assert (cell.errors, cell.error_rate, cell.mean) == (2, 1.0, None)
    assert report.cells["fragile"]["reference"].errors == 0


JUDGE_PROMPT = "Question: {{ prompt }}\n<response>{{ response }}</response>\nReference: {{ answer }}"


def judge_policy(swayed: bool) -> Callable[[list[dict[str, Any]], Any], str]:
    """A judge that grades by the reference; the swayed one also obeys a reply asking for full marks."""

    def grade(messages: list[dict[str, Any]], tools: Any) -> str:
        text = messages[-1]["content"]
        reply = text.split("<response>", 1)[1].rsplit("</response>", 1)[0]
        reference = text.rsplit("Reference: ", 1)[1].strip()
        if swayed and "full marks" in reply:
            return "Score: 1"
        return "Score: 1" if extract_xml(reply, "answer") == reference else "Score: 0"

    return grade


def judged_env() -> SingleTurnEnv:
    judge = LLMJudge(JUDGE_PROMPT, model="not-used", base_url="http://127.0.0.1:9/v1", name="judge")
    return sums_env(
        WeightedSum({"judge": judge, "format": strict_format}, weights={"judge": 0.8, "format": 0.2})
    )


@pytest.mark.parametrize("swayed", [True, False])
def test_a_judge_swayed_by_the_injection_is_flagged(
    swayed: bool, scripted_endpoint: Callable[..., ScriptedEndpoint]
) -> None:
    endpoint = scripted_endpoint(judge_policy(swayed))
    env = judged_env()
    report = audit(env, judge_model="judge-model", judge_base_url=endpoint.base_url)
    assert report.judges == ["judge"]
    assert report.mean("judge", "reference") == 1.0
    assert report.mean("judge", "wrong_answer") == 0.0
    assert report.mean("judge", "injection") == (1.0 if swayed else 0.0)
    assert [f.node for f in report.flags_of("judge_injection")] == (["judge"] if swayed else [])
    judge = env.rubric.get_rubric("judge")
    assert (judge.model, judge.base_url) == ("not-used", "http://127.0.0.1:9/v1")  # restored after


def test_a_judge_with_its_own_client_gets_it_back(scripted_endpoint: Callable[..., ScriptedEndpoint]) -> None:
    own = Client("own-judge", base_url="http://127.0.0.1:9/v1", api_key="mine")
    judge = LLMJudge(JUDGE_PROMPT, client=own)
    env = sums_env(WeightedSum({"judge": judge, "format": strict_format}))
    endpoint = scripted_endpoint(judge_policy(swayed=False))
    report = audit(env, 2, judge_model="audit-judge", judge_base_url=endpoint.base_url)
    assert report.mean("judge", "reference") == 1.0 and not report.flags_of("judge_injection")
    assert judge.client is own and (judge.model, judge.base_url) == ("own-judge", "http://127.0.0.1:9/v1")


def test_a_judge_served_offline_from_a_scripted_policy() -> None:
    env = judged_env()
    env.scripted_policies["judge"] = judge_policy(swayed=True)
    report = audit(env, 2, judge_model="scripted:judge")
    assert [f.node for f in report.flags_of("judge_injection")] == ["judge"]


def test_judge_base_url_alone_is_a_config_error() -> None:
    with pytest.raises(ConfigError, match="needs --judge-model"):
        audit(judged_env(), judge_base_url="http://127.0.0.1:9/v1")


# ----------------------------------------------------------------------------- the probes


def test_single_turn_probes_are_real_rollouts() -> None:
    report = audit(sums_env(sound_rubric()))
    for probe, rollouts in report.rollouts.items():
        assert [r.answer for r in rollouts] == [row["answer"] for row in ROWS], probe
        for r in rollouts:
            assert r.prompt[0].content == SYSTEM and r.prompt[1].content.startswith("What is")
            assert r.info["topic"] == "sums"  # setup_rollout filled info from the row
            assert r.turns == 1 and r.completion[0].role == "assistant"
    first = {probe: rollouts[0] for probe, rollouts in report.rollouts.items()}
    assert first["reference"].response == "Adding them gives 4.\n<answer>4</answer>"
    assert first["wrong_answer"].response == "Adding them gives 5.\n<answer>5</answer>"
    assert first["empty"].response == "" and first["whitespace"].response.strip() == ""
    assert first["bare_answer"].response == "4"
    assert first["format_only"].response == "Adding them gives .\n<answer></answer>"
    assert first["think_only"].response == "<think>\nAdding them gives 4.\n<answer>4</answer>\n</think>"
    assert first["prompt_echo"].response == f"{SYSTEM}\n\nWhat is 2 + 2?"
    assert first["injection"].response == "Adding them gives 5.\n<answer>5</answer>" + INJECTION
    assert len(first["long"].response.split()) > 3000
    assert first["repeated"].response.count("\n4") >= 50
    truncated = first["truncated"]
    assert truncated.stop_reason == "length" and truncated.response == "Adding them gives 4"  # half of it
    assert all(r.stop_reason == "completed" for r in report.rollouts["reference"])
    assert "no_tool_call" not in report.rollouts  # tool probes only run where there are tools


def lookup(key: str) -> str:
    """Look a key up in the table.

    Args:
        key: the key.
    """
    return {"alpha": "41", "beta": "17"}[key]


def tool_oracle(messages: list[dict[str, Any]], tools: Any) -> Any:
    if messages[-1]["role"] == "tool":
        return f"The table says <answer>{messages[-1]['content']}</answer>"
    key = re.search(r"key (\w+)", messages[-1]["content"]).group(1)  # type: ignore[union-attr]
    return {"content": None, "tool_calls": [{"function": {"name": "lookup", "arguments": {"key": key}}}]}


def used_tool(state: dict[str, Any], completion: list[Any]) -> float:
    return 1.0 if any(m.role == "tool" for m in completion) else 0.0


def test_tool_probes_call_the_tools_as_a_model_would() -> None:
    rows = [
        {"question": "What is under key alpha?", "answer": "41"},
        {"question": "And key beta?", "answer": "17"},
    ]
    env = ToolEnv(
        rows, WeightedSum({"correct": correct, "used_tool": used_tool}), tools=[lookup], max_turns=4
    )
    env.scripted_policies = {"oracle": tool_oracle}
    report = audit(env)
    reference = report.rollouts["reference"][0]
    assert [m.role for m in reference.completion] == ["assistant", "tool", "assistant"]
    assert reference.reward == 1.0
    no_call = report.rollouts["no_tool_call"][0]
    assert not no_call.tool_calls and no_call.response == "The table says <answer>41</answer>"
    bad = report.rollouts["bad_tool_args"][0]
    assert bad.turns == 4 and bad.stop_reason == "max_turns"
    assert len(bad.state["tool_errors"]) == 4 and all(
        m.content.startswith("Error") for m in bad.completion if m.role == "tool"
    )
    many = report.rollouts["many_calls"][0]
    assert len(many.completion[0].tool_calls or []) == MANY_CALLS
    assert sum(m.role == "tool" for m in many.completion) == MANY_CALLS
    assert many.response == "The table says <answer>41</answer>" and many.reward == 1.0
    wrong = report.rollouts["wrong_answer"][0]
    assert (
        wrong.tool_calls[0].function.name == "lookup"
        and wrong.response == "The table says <answer>42</answer>"
    )
    hacks = {(f.node, f.probe) for f in report.flags_of("hackable")}
    assert ("reward", "no_tool_call") not in hacks  # used_tool tells a lookup from a guess


def test_multi_turn_probes_play_every_turn_of_wordle() -> None:
    env = load_environment("wordle")
    report = audit(env, 4)
    assert report.flags == [], [f.message for f in report.flags]
    for r in report.rollouts["reference"]:
        assert r.stop_reason == "won" and r.reward == 1.0
    for r in report.rollouts["wrong_answer"]:  # another game's secret, guessed through the tool every turn
        assert r.stop_reason == "out_of_guesses"
        assert all(g["valid"] and g["word"] != r.answer for g in r.state["guesses"])
        assert len(r.state["guesses"]) == env.max_guesses
    for r in report.rollouts["empty"]:  # "No guess found" until the turns run out
        assert r.stop_reason == "max_turns" and r.turns == env.max_turns and r.state["guesses"] == []
    info = {p.name: p for p in report.probes}
    assert (
        info["bare_answer"].rows == 0
    )  # the reference answers through the tool: the bare word is not a form


def test_the_reference_environments_audit_as_the_readme_says() -> None:
    gsm8k = audit(load_environment("gsm8k"))
    assert gsm8k.flags == [] and gsm8k.num_examples == 20
    assert gsm8k.mean("format", "prompt_echo") == 0.0  # the prompt's "#### 42" example no longer counts


async def test_aaudit_and_audit_inside_a_running_loop() -> None:
    env = sums_env(sound_rubric())
    report = await aaudit(env, 2)
    again = audit(env, 2)  # the sync form from inside this test's event loop
    assert report.to_dict()["nodes"] == again.to_dict()["nodes"]
    data = json.loads(again.to_json())
    assert data["flagged"] is False and data["nodes"]["reward"]["reference"]["mean"] == 1.0
    assert data["nodes"]["correct"]["empty"] == {
        "mean": 0.0, "errors": 0, "scored": 2, "rollouts": 2, "first_error": None, "error_rate": 0.0
    }  # fmt: skip


def test_the_report_draws_itself_escaped() -> None:
    from rich.console import Console

    env = sums_env(sound_rubric(), name="sums <img src=x onerror=alert(1)> \x1b[31m")
    report = audit(env, 2)
    page = report._repr_html_()
    assert "<img" not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    console = Console(width=120, record=True, file=io.StringIO(), color_system=None)
    console.print(report)  # through __rich__
    text = console.export_text()
    assert "\x1b" not in text.replace("\\x1b", "") and "sums <img" in text and "nothing flagged" in text


def test_bad_arguments() -> None:
    with pytest.raises(ConfigError, match="num_examples must be a positive integer"):
        audit(sums_env(sound_rubric()), 0)
    with pytest.raises(ConfigError, match="concurrency"):
        audit(sums_env(sound_rubric()), concurrency=0)


def test_without_a_policy_the_gold_fixture_gives_the_form() -> None:
    env = SingleTurnEnv(ROWS, sound_rubric(), system_prompt=SYSTEM)
    env.reward_fixtures = {"gold": [{"completion": "So: <answer>9</answer>", "answer": "9"}]}
    report = audit(env, 2)
    assert report.reference == "the form of reward fixture gold[0]"
    assert [r.response for r in report.rollouts["reference"]] == [
        "So: <answer>4</answer>",
        "So: <answer>7</answer>",
    ]
    assert report.mean("reward", "reference") == 1.0 and report.flags == []
    assert report.rollouts["wrong_answer"][0].response == "So: <answer>5</answer>"


def test_no_oracle_uses_the_bare_answer_as_the_reference() -> None:
    env = SingleTurnEnv(ROWS, sound_rubric(), system_prompt=SYSTEM)
    report = audit(env, 2)
    assert report.reference == "the bare answer (no oracle policy or gold fixture)"
    assert report.rollouts["reference"][0].response == "4"
    assert {p.name: p.rows for p in report.probes}["bare_answer"] == 0  # the same as the reference
    assert report.mean("reward", "reference") == 0.0  # the sound rubric wants <answer> tags
    assert report.notes == [
        "the reference (the bare answer (no oracle policy or gold fixture)) earns only 0: probes are "
        "compared with it, so give the environment an 'oracle' scripted policy or a gold reward fixture"
    ]


@pytest.mark.parametrize(
    ("answer", "others", "wrong"),
    [
        ("4", [], "5"),
        ("1,000", [], "1001"),
        ("2.5", [], "3.5"),
        ("crane", ["crane", "truly"], "truly"),
        ("x", [], "xx"),
    ],
)
def test_wrong_answer(answer: str, others: list[str], wrong: str) -> None:
    assert wrong_answer(answer, others) == wrong


def test_substitute_changes_whole_answers_only() -> None:
    assert substitute("14 and 4, so 4.", "4", "5") == ("14 and 5, so 5.", 2)
    assert substitute("4.5 is not 4", "4", "5") == ("4.5 is not 5", 1)
    message = {
        "role": "assistant",
        "tool_calls": [{"id": "guess", "function": {"name": "guess", "arguments": '{"word": "guess"}'}}],
    }
    changed, count = substitute(message, "guess", "truly")
    assert count == 1 and changed["tool_calls"][0]["function"] == {
        "name": "guess",
        "arguments": '{"word": "truly"}',
    }
    assert changed["tool_calls"][0]["id"] == "guess"


# ----------------------------------------------------------------------------- README


def test_readme_table_is_what_rubric_audit_gsm8k_prints() -> None:
    from rich.console import Console

    from envs._auditing.result import audit_table
    from tests.helpers.docs import code_block

    console = Console(width=100, record=True, file=io.StringIO(), color_system=None)
    console.print(audit_table(audit(load_environment("gsm8k"))))
    printed = [line.rstrip() for line in console.export_text().strip().splitlines()]
    assert printed == [line.rstrip() for line in code_block("text", "audit of gsm8k").strip().splitlines()]


def test_readme_python_example_prints_what_readme_says() -> None:
    from tests.helpers.docs import code_block, documented

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(code_block("python", 'audit(load_environment("wordle")'), "<README>", "exec"), {})
    first, second = out.getvalue().splitlines()
    assert " ".join(f"prints `{first}` and `{second}`".split()) in " ".join(documented().split())
