"""Separate verifier environments, `artifacts` and `[[verifier.collect]]`: parsing, then in real Docker."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from envs import from_harbor
from envs._harbor import HarborTaskError, load_task
from tests.envs.agents.conftest import DOCKER, left_behind

pytestmark = [pytest.mark.agents, pytest.mark.slow]

IMAGE = "rubric-test-base:bookworm"
#: The agent: an answer and its hostname where the task collects them, a file it does not
#: collect, a note in the convention folder, a planted reward, and a process left running.
AGENT = (
    "command:echo 42 > /tmp/answer.txt; hostname > /tmp/agent_host; echo secret > /tmp/uncollected.txt; "
    "mkdir -p /logs/artifacts /logs/verifier; echo note > /logs/artifacts/note.txt; "
    "echo 1 > /logs/verifier/reward.txt; (setsid sleep 600 > /dev/null 2>&1 &)"
)
#: The tests: the reward is whether the answer is 42; each other finding is a component.
TEST_SH = """
yes() { if "$@"; then echo 1; else echo 0; fi; }
answer=$(yes grep -qx 42 /tmp/answer.txt)
cat > /logs/verifier/reward.json <<EOF
{"reward": $answer,
 "uncollected_absent": $(yes test ! -e /tmp/uncollected.txt),
 "convention_folder": $(yes grep -qx note /logs/artifacts/note.txt),
 "hook": $(yes grep -qx hooked /tmp/hook.txt),
 "other_host": $(yes test "$(hostname)" != "$(cat /tmp/agent_host)"),
 "no_agent_process": $(yes sh -c '! grep -qx sleep /proc/[0-9]*/comm 2>/dev/null')}
EOF
"""
TOML = f"""artifacts = ["/tmp/answer.txt", "/tmp/agent_host", {{ source = "/tmp/hook.txt", destination = "hook" }}]

[environment]
docker_image = "{IMAGE}"

[verifier]
environment_mode = "separate"

[[verifier.collect]]
command = "echo hooked > /tmp/hook.txt"
"""


def separate_task(root: Path, toml: str = TOML, dockerfile: bool = True) -> Path:
    folder = root / "separate"
    (folder / "tests").mkdir(parents=True, exist_ok=True)
    (folder / "task.toml").write_text(toml)
    (folder / "instruction.md").write_text("Write 42 to /tmp/answer.txt.")
    (folder / "tests" / "test.sh").write_text(TEST_SH)
    if dockerfile:
        (folder / "tests" / "Dockerfile").write_text(f"FROM {IMAGE}\nCOPY test.sh /tests/test.sh\n")
    return folder


def test_separate_verifier_fields_parse_and_bad_ones_are_refused(tmp_path: Path) -> None:
    task = load_task(separate_task(tmp_path))
    assert task.config.verifier.separate and task.config.artifacts[0].source == "/tmp/answer.txt"
    assert (
        task.config.artifacts[2].destination == "hook" and task.config.verifier.collect[0].timeout_sec == 60
    )
    assert task.unknown == {}
    implied = separate_task(tmp_path / "a", TOML.replace('environment_mode = "separate"', f'[verifier.environment]\ndocker_image = "{IMAGE}"'), dockerfile=False)  # fmt: skip
    assert load_task(implied).config.verifier.separate  # [verifier.environment] alone means separate
    no_image = separate_task(tmp_path / "b", TOML.replace(f'[environment]\ndocker_image = "{IMAGE}"\n', ""), dockerfile=False)  # fmt: skip
    (no_image / "environment").mkdir()
    (no_image / "environment" / "Dockerfile").write_text(f"FROM {IMAGE}\n")
    with pytest.raises(HarborTaskError, match=r"needs the verifier's image: a tests/Dockerfile"):
        load_task(no_image)
    shared = separate_task(
        tmp_path, TOML.replace('"separate"', '"shared"') + "[verifier.environment]\ncpus = 2\n"
    )
    with pytest.raises(HarborTaskError, match=r'environment_mode = "shared" with a \[verifier.environment\]'):
        load_task(shared)
    sidecar = separate_task(tmp_path, TOML.replace('destination = "hook"', 'service = "api"'))
    with pytest.raises(HarborTaskError, match=r"service 'api' in artifacts"):
        load_task(sidecar)


@pytest.mark.docker
def test_a_separate_verifier_sees_only_the_artifacts_and_scores_from_them(tmp_path: Path) -> None:
    (rollout,) = (
        from_harbor(separate_task(tmp_path)).evaluate("scripted:harbor", agent=AGENT, progress=False).rollouts
    )
    assert rollout.reward == 1.0, (
        rollout.error,
        rollout.score_errors,
    )  # the planted reward.txt stayed behind
    assert rollout.scores["uncollected_absent"] == 1.0 and rollout.scores["convention_folder"] == 1.0
    assert rollout.scores["hook"] == 1.0 and rollout.scores["other_host"] == 1.0
    assert rollout.scores["no_agent_process"] == 1.0
    artifacts = rollout.score_details[""]["artifacts"]  # kept with the rollout
    assert (
        artifacts["/tmp/answer.txt"]["text"] == "42\n" and artifacts["/tmp/hook.txt"]["destination"] == "hook"
    )
    assert artifacts["/logs/artifacts"]["files"] == {"note.txt": 5}
    # an agent that wrote no answer: the artifact is missing, the verifier scores 0 from that
    (nothing,) = from_harbor(separate_task(tmp_path)).evaluate("scripted:harbor", agent="command:true", progress=False).rollouts  # fmt: skip
    assert nothing.reward == 0.0 and nothing.score_details[""]["artifacts"]["/tmp/answer.txt"] == {
        "missing": True
    }
    assert left_behind(DOCKER) == []


@pytest.mark.docker
def test_shared_mode_keeps_artifacts_and_a_failing_collect_hook_is_unscored(tmp_path: Path) -> None:
    toml = TOML.replace('environment_mode = "separate"', "timeout_sec = 60")
    folder = separate_task(tmp_path, toml, dockerfile=False)
    (rollout,) = from_harbor(folder).evaluate("scripted:harbor", agent=AGENT, progress=False).rollouts
    assert rollout.reward == 1.0 and rollout.scores["hook"] == 1.0, (rollout.error, rollout.score_errors)
    assert (
        rollout.scores["other_host"] == 0.0 and rollout.scores["uncollected_absent"] == 0.0
    )  # its own sandbox
    assert rollout.score_details[""]["artifacts"]["/tmp/answer.txt"]["text"] == "42\n"
    (folder / "task.toml").write_text(toml.replace("echo hooked > /tmp/hook.txt", "echo broken >&2; exit 4"))
    (failed,) = from_harbor(folder).evaluate("scripted:harbor", agent=AGENT, progress=False).rollouts
    assert math.isnan(failed.reward) and "[[verifier.collect]]" in str(failed.score_errors)
    assert "exited 4: broken" in str(failed.score_errors)
    assert left_behind(DOCKER) == []
