"""Harbor task folders: parsing (no Docker), then the shipped tasks played in real Docker sandboxes."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest

from envs import from_harbor, load_environment
from envs._harbor import HarborTaskError, HarborVerifier, load_task, parse_reward
from rubrics import ScoringError, WeightedSum
from tests.envs.agents.conftest import DOCKER, left_behind
from tests.helpers.processes import run

pytestmark = [pytest.mark.agents, pytest.mark.slow]

SHIPPED = Path(__file__).resolve().parents[3] / "datasets" / "harbor"
TASKS = ["count-words", "fix-median", "write-greeting"]
IMAGE = "rubric-test-base:bookworm"


def make_task(root: Path, name: str, test_sh: str, toml: str = "", solve: str | None = None) -> Path:
    """A task on the test image (no build) with this test.sh."""
    folder = root / name
    (folder / "tests").mkdir(parents=True)
    (folder / "task.toml").write_text(f'[environment]\ndocker_image = "{IMAGE}"\n{toml}')
    (folder / "instruction.md").write_text(f"Task {name}.")
    (folder / "tests" / "test.sh").write_text(test_sh)
    if solve is not None:
        (folder / "solution").mkdir()
        (folder / "solution" / "solve.sh").write_text(solve)
    return folder


# ---------------------------------------------------------------- parsing


def test_task_toml_defaults_sizes_and_unknown_fields(tmp_path: Path) -> None:
    folder = make_task(
        tmp_path,
        "t",
        "exit 0",
        toml='memory = "1G"\nstorage = "512M"\nfancy = 3\n[agent]\ntimeout_sec = 30\nretries = 2\n',
    )
    task = load_task(folder)
    assert task.config.environment.memory_mb == 1024 and task.config.environment.storage_mb == 512
    assert task.config.agent.timeout_sec == 30 and task.config.verifier.timeout_sec == 600
    assert task.config.environment.cpus == 1 and task.runtime == f"docker:{IMAGE}"
    assert task.unknown == {"environment": {"fancy": 3}, "agent": {"retries": 2}}
    with pytest.warns(
        UserWarning, match=r"Harbor task t: task.toml keys .* agent.retries, environment.fancy"
    ):
        env = from_harbor(folder)
    (row,) = env.dataset
    assert row["example_id"] == "t" and row["info"]["harbor"]["unknown"]["agent"] == {"retries": 2}


def test_shipped_dataset_loads_by_spec() -> None:
    env = load_environment(f"harbor:{SHIPPED}")
    assert [row["example_id"] for row in env.dataset] == TASKS
    assert env.dataset[2]["info"]["harbor"]["workdir"] == "/app"
    assert "hello, harbor" in str(env.dataset[2]["prompt"])


def test_bad_task_folders_say_what_is_wrong(tmp_path: Path) -> None:
    folder = make_task(tmp_path, "bad", "exit 0")
    (folder / "instruction.md").unlink()
    with pytest.raises(HarborTaskError, match=r"no instruction\.md"):
        from_harbor(folder)
    (folder / "instruction.md").write_text("x")
    (folder / "task.toml").write_text("[verifier]\ntimeout_sec = = 3\n")
    with pytest.raises(HarborTaskError, match=r"does not parse: .*line 2, column"):
        load_task(folder)
    (folder / "task.toml").write_text("[verifier]\ntimeout_sec = -1\n")
    with pytest.raises(HarborTaskError, match=r"verifier\.timeout_sec"):
        load_task(folder)
    (folder / "task.toml").write_text("")
    with pytest.raises(HarborTaskError, match=r"no environment/Dockerfile"):
        load_task(folder)
    with pytest.raises(HarborTaskError, match="no such folder"):
        from_harbor(tmp_path / "nowhere")


def test_reward_files_are_read_as_harbor_specifies() -> None:
    assert parse_reward("0.75\n", None) == (0.75, {})
    # reward.txt first, as Harbor reads them (issue 48.6); reward.json's components beside it
    assert parse_reward("0", '{"reward": 0.5, "a": 1, "b": 0}') == (0.0, {"a": 1.0, "b": 0.0})
    assert parse_reward(None, '{"reward": 0.5, "a": 1, "b": 0}') == (0.5, {"a": 1.0, "b": 0.0})
    assert parse_reward(None, '{"pass_rate": 0.25}') == (0.25, {})
    for txt, js, reason in [
        (None, None, "wrote no reward"),
        ("high", None, "not one number"),
        (None, "{", "not JSON"),
        (None, '{"reward": "yes"}', "not a finite number"),
        ("nan", None, "not a finite number"),
        ("inf", '{"reward": 1}', "not a finite number"),
        (None, '{"reward": NaN}', "not a finite number"),
        (None, '{"a": 1, "b": 2}', "no 'reward' key"),
    ]:
        with pytest.raises(ScoringError, match=reason):
            parse_reward(txt, js)


# ---------------------------------------------------------------- in Docker


@pytest.mark.docker
def test_oracle_scores_each_shipped_task_one_and_components_are_node_scores() -> None:
    env = from_harbor(SHIPPED)
    rollouts = env.evaluate("scripted:harbor", agent="oracle", progress=False).rollouts
    assert [r.example_id for r in rollouts] == TASKS
    assert [r.reward for r in rollouts] == [1.0, 1.0, 1.0], [r.error for r in rollouts]
    assert rollouts[0].scores["a"] == 1.0 and rollouts[0].scores["b"] == 1.0
    assert left_behind(DOCKER) == []


@pytest.mark.docker
def test_do_nothing_agent_scores_zero_and_the_bash_agent_solves_them() -> None:
    env = from_harbor(SHIPPED)
    nothing = env.evaluate("scripted:harbor", agent="command:true", progress=False).rollouts
    assert [r.reward for r in nothing] == [0.0, 0.0, 0.0], [r.error for r in nothing]
    assert all(r.state["agent"]["no_model_call"] for r in nothing)
    assert nothing[0].scores == {"a": 0.0, "b": 0.0}
    solved = env.evaluate("scripted:harbor", agent="bash", progress=False).rollouts
    assert [r.reward for r in solved] == [1.0, 1.0, 1.0], [r.error for r in solved]
    assert all(len(r.model_calls) == 2 for r in solved)


@pytest.mark.docker
def test_users_agent_sees_no_tests_and_cannot_plant_a_reward() -> None:
    # The agent looks for the tests and the solution, and plants a reward of 1.
    look = "ls /tests /solution; mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; true"
    env = from_harbor(SHIPPED / "write-greeting")
    (rollout,) = env.evaluate("scripted:harbor", agent=f"command:{look}", progress=False).rollouts
    agent = rollout.state["agent"]
    assert agent["stdout"] == "" and "/tests" in agent["stderr"] and "/solution" in agent["stderr"]
    assert rollout.reward == 0.0 and rollout.error is None


@pytest.mark.docker
def test_verifier_is_a_node_beside_others() -> None:
    def length(completion: str) -> float:
        return 1.0

    rubric = WeightedSum({"tests": HarborVerifier(), "other": length}, weights=[0.5, 0.5])
    env = from_harbor(SHIPPED / "count-words", rubric=rubric)
    (rollout,) = env.evaluate("scripted:harbor", agent="oracle", progress=False).rollouts
    assert rollout.reward == 1.0, rollout.error
    assert rollout.scores["tests"] == 1.0 and rollout.scores["tests.a"] == 1.0
    assert rollout.score_details["tests"]["components"] == {"a": 1.0, "b": 1.0}


@pytest.mark.docker
def test_bad_tasks_fail_their_own_rollouts_and_the_rest_runs(tmp_path: Path) -> None:
    shutil.copytree(SHIPPED / "write-greeting", tmp_path / "write-greeting")
    (tmp_path / "not-a-task").mkdir()
    (tmp_path / "not-a-task" / "task.toml").write_text("")
    make_task(tmp_path, "garbage-reward", "echo high > /logs/verifier/reward.txt", solve="true")
    make_task(tmp_path, "no-reward", "exit 3", solve="true")
    make_task(tmp_path, "slow-verifier", "sleep 30", toml="[verifier]\ntimeout_sec = 1\n", solve="true")
    make_task(tmp_path, "bad-build", "exit 0", solve="true")
    (tmp_path / "bad-build" / "task.toml").write_text("")
    (tmp_path / "bad-build" / "environment").mkdir()
    (tmp_path / "bad-build" / "environment" / "Dockerfile").write_text(
        "FROM rubric-test-base:bookworm\nRUN false\n"
    )
    env = from_harbor(tmp_path)
    got = {r.example_id: r for r in env.evaluate("scripted:harbor", agent="oracle", progress=False).rollouts}
    assert got["write-greeting"].reward == 1.0
    for name, reason in [
        ("not-a-task", "no instruction.md, tests/test.sh"),
        ("garbage-reward", "not one number"),
        ("no-reward", "wrote no reward"),
        ("slow-verifier", "timeout_sec = 1 s"),
        ("bad-build", "docker build"),
    ]:
        rollout = got[name]
        assert math.isnan(rollout.reward), name
        said = (rollout.error or "") + json.dumps(rollout.score_errors)
        assert reason in said, (name, said)


@pytest.mark.docker
def test_rubric_eval_harbor_dataset_with_the_scripted_policy(tmp_path: Path) -> None:
    out = tmp_path / "run"
    args = ["eval", f"harbor:{SHIPPED}", "--agent", "bash", "-m", "scripted:harbor", "-o", str(out)]
    done = run(*args, "--no-progress", cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    said = [(r["example_id"], r["reward"], r.get("error"), r.get("score_errors")) for r in rows]
    assert sorted(r["example_id"] for r in rows) == TASKS and all(r["reward"] == 1.0 for r in rows), said


@pytest.mark.docker
def test_rubric_eval_oracle_needs_no_model_and_records_the_path(tmp_path: Path) -> None:
    shutil.copytree(SHIPPED / "write-greeting", tmp_path / "tasks" / "write-greeting")
    out = tmp_path / "run"
    done = run("eval", "harbor:tasks", "--agent", "oracle", "-o", str(out), "--no-progress", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    (row,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert row["reward"] == 1.0 and row["model_calls"] == []
    metadata = json.loads((out / "metadata.json").read_text())
    assert f"harbor:{tmp_path / 'tasks'}" in json.dumps(metadata)


@pytest.mark.docker
def test_rubric_init_harbor_scaffold_passes_rubric_check(tmp_path: Path) -> None:
    made = run("init", "my-task", "--harbor", "--base-image", IMAGE, "--dir", str(tmp_path), cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert (tmp_path / "my-task" / "tests" / "test.sh").is_file()
    checked = run("check", str(tmp_path / "my-task"), cwd=tmp_path, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for name in ("oracle", "do-nothing", "image-leak", "planted-reward"):
        assert f"ok   my-task: {name}" in checked.stdout, checked.stdout


@pytest.mark.docker
def test_a_task_whose_image_lacks_bash_says_so(tmp_path: Path) -> None:
    folder = make_task(tmp_path, "no-bash", "echo 1 > /logs/verifier/reward.txt", solve="true")
    (folder / "task.toml").write_text("")
    (folder / "environment").mkdir()
    (folder / "environment" / "Dockerfile").write_text(f"FROM {IMAGE}\nRUN rm -f /bin/bash /usr/bin/bash\n")
    env = from_harbor(folder)
    (oracle,) = env.evaluate("scripted:harbor", agent="oracle", progress=False).rollouts
    assert math.isnan(oracle.reward) and "bash" in (oracle.error or ""), oracle.error
    (nothing,) = env.evaluate("scripted:harbor", agent="command:true", progress=False).rollouts
    assert math.isnan(nothing.reward)
    assert "has no bash" in json.dumps(nothing.score_errors), nothing.score_errors


@pytest.mark.docker
@pytest.mark.filterwarnings("ignore:task .* asks for a network:UserWarning")  # test_task_fields.py's
def test_a_runtime_that_replaces_the_tasks_images_is_said_once(tmp_path: Path) -> None:
    """Issue 47.10: `--runtime bwrap` runs every task outside the image it names; one line says so."""
    for name in ("a", "b"):
        make_task(tmp_path, name, "echo 1 > /logs/verifier/reward.txt")
    env = from_harbor(tmp_path)
    with pytest.warns(UserWarning, match=r"--runtime bwrap replaces the image each task names: a \(docker:rubric-test-base:bookworm\), b .* drop --runtime") as said:  # fmt: skip
        rollouts = env.evaluate(
            "scripted:harbor", agent="command:true", runtime="bwrap", progress=False
        ).rollouts
    replaced = [w for w in said if "replaces the image" in str(w.message)]  # beside: bwrap has no network
    assert len(replaced) == 1 and [r.reward for r in rollouts] == [1.0, 1.0]
    same = env.evaluate("scripted:harbor", agent="command:true", runtime=f"docker:{IMAGE}", progress=False)
    assert [r.reward for r in same.rollouts] == [
        1.0,
        1.0,
    ]  # the image they name: nothing replaced, no warning


@pytest.mark.docker
def test_the_test_runs_ctrf_report_and_output_are_kept_and_reward_txt_wins(tmp_path: Path) -> None:
    """Issue 48.6: reward.txt is read first; the test run's output and ctrf.json stay on the rollout."""
    ctrf = '{"results": {"tool": {"name": "pytest"}, "summary": {"tests": 1, "passed": 1}}}'
    test_sh = (
        f"echo ran the tests; echo '{ctrf}' > /logs/verifier/ctrf.json; "
        'echo 1 > /logs/verifier/reward.txt; echo \'{"reward": 0, "style": 0.5}\' > /logs/verifier/reward.json'
    )
    env = from_harbor(make_task(tmp_path, "reported", test_sh))
    (rollout,) = env.evaluate("scripted:harbor", agent="command:true", progress=False).rollouts
    assert rollout.reward == 1.0 and rollout.scores["style"] == 0.5, (rollout.error, rollout.score_errors)
    detail = rollout.score_details[""]
    assert json.loads(detail["ctrf"])["results"]["summary"]["passed"] == 1
    assert "ran the tests" in detail["output"] and detail["exit_code"] == 0
