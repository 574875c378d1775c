"""Multi-step Harbor tasks (`[[steps]]`, steps/NAME/): parsing, then played in real Docker sandboxes."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from envs import from_harbor
from envs._harbor import HarborTaskError, load_task
from envs._harbor.task_audit import check_harbor_tasks
from tests.envs.agents.conftest import DOCKER, left_behind

pytestmark = [pytest.mark.agents, pytest.mark.slow]

IMAGE = "rubric-test-base:bookworm"
#: An agent that runs its instruction as a shell script: each step's instruction is what it does.
RUN_INSTRUCTION = "command:sh {instruction_file}"
#: test.sh of a step: reward 1 when FILE holds WORD, else 0 (the task-level helper does the work).
STEP_TEST = 'source /tests/helper.sh\nscore "{file}" "{word}"\n'
HELPER = 'score() { if grep -qx "$2" "$1" 2>/dev/null; then echo 1; else echo 0; fi > /logs/verifier/reward.txt; }\n'


def write(folder: Path, files: dict[str, str]) -> Path:
    for relative, text in files.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)
    return folder


def two_steps(root: Path, name: str = "steps", toml: str = "", first: str = "", second: str = "") -> Path:
    """A task of two steps on the test image, in the agent's working folder: `one` asks for
    one.txt holding "one", `two` for two.txt holding its workdir/'s data.txt (and its setup.sh
    writes setup.txt there before the agent starts)."""
    return write(
        root / name,
        {
            "task.toml": f'{toml}\n[environment]\ndocker_image = "{IMAGE}"\n'
            '[[steps]]\nname = "one"\n' + first + '\n[[steps]]\nname = "two"\n' + second,
            "tests/helper.sh": HELPER,
            "tests/test.sh": "echo 0 > /logs/verifier/reward.txt\n",  # the fallback, overridden
            "steps/one/instruction.md": "echo one > one.txt\n",
            "steps/one/tests/test.sh": STEP_TEST.format(file="one.txt", word="one"),
            "steps/one/solution/solve.sh": "echo one > one.txt\n",
            # step one's tests are gone before step two's agent starts
            "steps/two/instruction.md": "test -e /tests/helper.sh || cat data.txt > two.txt\n",
            "steps/two/workdir/data.txt": "two\n",
            "steps/two/workdir/setup.sh": "echo ready > setup.txt\n",
            "steps/two/tests/test.sh": "test -f setup.txt || { echo 0 > /logs/verifier/reward.txt; exit 0; }\n"
            + STEP_TEST.format(file="two.txt", word="two"),
            "steps/two/solution/solve.sh": "cat data.txt > two.txt\n",
        },
    )


# ---------------------------------------------------------------- parsing


def test_a_multi_step_task_parses_and_bad_ones_say_what_is_wrong(tmp_path: Path) -> None:
    task = load_task(
        two_steps(tmp_path, toml='multi_step_reward_strategy = "final"', first="min_reward = 1.0")
    )
    assert [s.name for s in task.config.steps] == ["one", "two"] and task.has_solution
    assert task.config.steps[0].min_reward == 1.0 and task.config.multi_step_reward_strategy == "final"
    assert "echo one" in task.step_instructions["one"] and task.unknown == {}
    row = from_harbor(task.path).dataset[0]["info"]["harbor"]
    assert row["steps"] == ["one", "two"] and row["multi_step_reward_strategy"] == "final"
    folder = two_steps(tmp_path, "missing")
    (folder / "steps/two/instruction.md").unlink()
    with pytest.raises(HarborTaskError, match=r"no steps/two/instruction\.md"):
        load_task(folder)
    folder = two_steps(tmp_path, "twice", second='\n[[steps]]\nname = "one"\n')
    with pytest.raises(HarborTaskError, match=r"names \['one'\] more than once"):
        load_task(folder)
    folder = two_steps(tmp_path, "extra", first="fancy = 1\n[steps.agent]\nretries = 2\n")
    assert load_task(folder).unknown == {"steps.one": {"fancy": 1}, "steps.one.agent": {"retries": 2}}
    folder = two_steps(tmp_path, "own-verifier", second='[steps.verifier]\nenvironment_mode = "separate"\n')
    with pytest.raises(
        HarborTaskError, match=r"\[steps.verifier\] environment_mode of step 'two' is not supported"
    ):
        load_task(folder)
    folder = two_steps(tmp_path, "separate", toml='[verifier]\nenvironment_mode = "separate"\n')
    (folder / "tests" / "Dockerfile").write_text(f"FROM {IMAGE}\n")
    with pytest.raises(HarborTaskError, match=r'"separate" with \[\[steps\]\] is not supported'):
        load_task(folder)
    folder = two_steps(tmp_path, "strategy", toml='multi_step_reward_strategy = "best"')
    with pytest.raises(HarborTaskError, match="multi_step_reward_strategy"):
        load_task(folder)


# ---------------------------------------------------------------- in Docker


@pytest.mark.docker
def test_the_oracle_passes_every_step_and_each_step_is_a_node(tmp_path: Path) -> None:
    # the task's artifacts are copied after every step, a step's own after that step only
    folder = two_steps(
        tmp_path,
        toml='artifacts = ["/etc/hostname"]',
        first='artifacts = ["/etc/debian_version", "/etc/os-release"]',
    )
    (rollout,) = from_harbor(folder).evaluate("scripted:harbor", agent="oracle", progress=False).rollouts
    assert rollout.reward == 1.0, (rollout.error, rollout.score_errors)
    assert rollout.scores["steps.one"] == 1.0 and rollout.scores["steps.two"] == 1.0
    assert [s["name"] for s in rollout.state["steps"]] == ["one", "two"]
    # the task-level tests/ was under each step's (helper.sh), the step's test.sh won over it
    assert rollout.state["harbor_steps"]["two"]["reward"] == 1.0
    one, two = (rollout.score_details[""]["steps"][name]["detail"]["artifacts"] for name in ("one", "two"))
    assert set(one) == {"/etc/hostname", "/etc/debian_version", "/etc/os-release"} and set(two) == {
        "/etc/hostname"
    }
    assert one["/etc/debian_version"]["text"].startswith("12")
    assert "would link to" in one["/etc/os-release"]["refused"]  # a link out of the artifact: not copied
    assert left_behind(DOCKER) == []


@pytest.mark.docker
def test_min_reward_stops_early_and_a_step_not_run_counts_zero_in_the_mean(tmp_path: Path) -> None:
    # the agent runs each instruction; step one's is sabotaged, so its tests score 0 < min_reward
    folder = two_steps(tmp_path, first="min_reward = 1.0")
    write(folder, {"steps/one/instruction.md": "echo wrong > one.txt\n"})
    (rollout,) = (
        from_harbor(folder).evaluate("scripted:harbor", agent=RUN_INSTRUCTION, progress=False).rollouts
    )
    assert [s["name"] for s in rollout.state["steps"]] == ["one"]  # step two's agent never ran
    assert rollout.state["steps"][0]["stopped"] is True
    assert rollout.scores["steps.one"] == 0.0 and "steps.two" not in rollout.scores
    assert rollout.reward == 0.0 and "two" not in rollout.state["harbor_steps"]
    # with a partial first step (per-key min_reward not reached) the mean counts step two as 0
    write(
        folder,
        {"steps/one/tests/test.sh": 'echo \'{"reward": 0.5, "style": 0}\' > /logs/verifier/reward.json\n'},
    )
    write(
        folder,
        {
            "task.toml": (folder / "task.toml")
            .read_text()
            .replace("min_reward = 1.0", "min_reward = {style = 1.0}")
        },
    )
    (rollout,) = (
        from_harbor(folder).evaluate("scripted:harbor", agent=RUN_INSTRUCTION, progress=False).rollouts
    )
    assert rollout.reward == 0.25 and rollout.scores["steps.one"] == 0.5, (
        rollout.error,
        rollout.score_errors,
    )
    assert len(rollout.state["steps"]) == 1
    final = write(
        folder, {"task.toml": 'multi_step_reward_strategy = "final"\n' + (folder / "task.toml").read_text()}
    )
    (rollout,) = (
        from_harbor(final).evaluate("scripted:harbor", agent=RUN_INSTRUCTION, progress=False).rollouts
    )
    assert rollout.reward == 0.0 and rollout.scores["steps.one"] == 0.5
    assert left_behind(DOCKER) == []


@pytest.mark.docker
def test_both_strategies_with_every_step_run_and_the_workdir_and_setup_in_place(tmp_path: Path) -> None:
    # no min_reward: step one fails (0), step two passes (1) with its workdir/ data and setup.sh
    folder = two_steps(tmp_path)
    write(folder, {"steps/one/instruction.md": "true\n"})
    (mean,) = from_harbor(folder).evaluate("scripted:harbor", agent=RUN_INSTRUCTION, progress=False).rollouts
    assert mean.scores["steps.one"] == 0.0 and mean.scores["steps.two"] == 1.0, mean.state.get("harbor_steps")
    assert mean.reward == 0.5
    write(
        folder, {"task.toml": 'multi_step_reward_strategy = "final"\n' + (folder / "task.toml").read_text()}
    )
    (final,) = from_harbor(folder).evaluate("scripted:harbor", agent=RUN_INSTRUCTION, progress=False).rollouts
    assert final.reward == 1.0 and final.scores["steps.one"] == 0.0
    # a step whose tests write no reward: its node is NaN with the reason, and so is the task's
    write(folder, {"steps/two/tests/test.sh": "exit 3\n"})
    (broken,) = (
        from_harbor(folder).evaluate("scripted:harbor", agent=RUN_INSTRUCTION, progress=False).rollouts
    )
    assert math.isnan(broken.scores["steps.two"]) and math.isnan(broken.reward)
    assert "step two: the verifier wrote no reward" in str(broken.score_errors)
    assert left_behind(DOCKER) == []


@pytest.mark.docker
def test_the_model_calls_are_split_by_step(tmp_path: Path) -> None:
    # the bash agent on the scripted policy: each step's instruction finds its solve.sh
    env = from_harbor(two_steps(tmp_path))
    (rollout,) = env.evaluate("scripted:harbor", agent="bash", progress=False).rollouts
    assert rollout.reward == 1.0, (rollout.error, rollout.score_errors)
    one, two = rollout.state["steps"]
    assert one["calls"][0] == 0 and one["calls"][1] == two["calls"][0] > 0
    assert two["calls"][1] == len(rollout.model_calls) > two["calls"][0]
    first, second = rollout.model_calls[0], rollout.model_calls[two["calls"][0]]
    assert "echo one" in str(first.messages) and "cat data.txt" in str(second.messages)
    assert "cat data.txt" not in str(first.messages)
    assert left_behind(DOCKER) == []


@pytest.mark.docker
def test_rubric_check_runs_each_steps_solution(tmp_path: Path) -> None:
    (check,) = check_harbor_tasks(two_steps(tmp_path))
    assert check.results["oracle"][0], check.lines()
    assert check.results["do-nothing"][0], check.lines()
    assert check.results["planted-reward"][0], check.lines()
    assert check.results["image-leak"][0], check.lines()  # no step's tests are left for the next
    assert left_behind(DOCKER) == []
