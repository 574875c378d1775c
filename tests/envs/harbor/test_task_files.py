"""A Harbor task folder's files: regular files inside the folder, size-capped, or the task is refused."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from envs import from_harbor
from envs._harbor import HarborTaskError, load_task
from envs._harbor.files import MAX_FILE_BYTES, copy_task_folder, read_task_file
from envs._harbor.scaffold import init_harbor_task
from tests.envs.harbor.test_harbor_tasks import IMAGE, make_task

pytestmark = [pytest.mark.agents, pytest.mark.slow]

SECRET = "sk-rubric-test-secret-3141"


@pytest.fixture
def secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The harness holds an API key in its environment, as a run does."""
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)


def test_an_instruction_linked_to_the_harness_environment_is_refused(
    tmp_path: Path, secret_env: None
) -> None:
    folder = make_task(tmp_path, "leaky", "exit 0")
    (folder / "instruction.md").unlink()
    (folder / "instruction.md").symlink_to("/proc/self/environ")
    with pytest.raises(HarborTaskError, match=r"instruction\.md leads outside the task folder") as caught:
        from_harbor(folder)
    assert SECRET not in str(caught.value) and "\n" not in str(caught.value)
    make_task(tmp_path, "fine", "exit 0")
    env = from_harbor(tmp_path)  # in a dataset: that task's rollouts fail, the others run
    assert "instruction.md leads outside" in env.broken["leaky"]
    assert SECRET not in json.dumps(list(env.dataset), default=str)


@pytest.mark.parametrize(
    ("where", "make", "said"),
    [
        ("task.toml", lambda p: p.symlink_to("/etc/passwd"), "task.toml leads outside the task folder"),
        ("tests/helper.py", lambda p: p.symlink_to("/etc/hostname"), "tests/helper.py leads outside"),
        ("tests/data", lambda p: p.symlink_to("/etc"), "tests/data/ leads outside"),
        ("tests/pipe", os.mkfifo, r"tests/pipe is not a regular file \(a FIFO\)"),
        ("solution/solve.sh", lambda p: p.symlink_to("/dev/zero"), "solution/solve.sh leads outside"),
        ("environment/secret", lambda p: p.symlink_to(Path.home()), "environment/secret/ leads outside"),
        ("instruction.md", lambda p: p.write_bytes(b"x" * (MAX_FILE_BYTES + 1)), r"instruction\.md is larger than"),
        ("tests/loop", lambda p: p.symlink_to(p.parent), "tests/loop/ is a link back to a folder above it"),
    ],
)  # fmt: skip
def test_task_files_that_are_not_regular_files_inside_the_folder_are_refused(
    tmp_path: Path, where: str, make: object, said: str
) -> None:
    folder = make_task(tmp_path, "t", "exit 0", solve="true")
    (folder / "environment").mkdir()
    (folder / "environment" / "Dockerfile").write_text(f"FROM {IMAGE}\n")
    (folder / "task.toml").write_text("")  # built from environment/: its context is read too
    path = folder / where
    if path.exists() or path.is_symlink():
        path.unlink()
    assert callable(make)
    make(path)
    with pytest.raises(HarborTaskError, match=said):
        load_task(folder)


def test_links_inside_the_task_are_read_through(tmp_path: Path) -> None:
    folder = make_task(tmp_path, "t", "echo 1 > /logs/verifier/reward.txt")
    (folder / "shared").mkdir()
    (folder / "shared" / "lib.sh").write_text("echo shared\n")
    (folder / "tests" / "lib.sh").symlink_to("../shared/lib.sh")
    (folder / "tests" / "more").symlink_to("../shared")
    load_task(folder)
    assert read_task_file(folder, "tests/lib.sh") == b"echo shared\n"
    copy = tmp_path / "copy"
    copy.mkdir()
    copy_task_folder(folder, "tests", copy)
    assert sorted(str(p.relative_to(copy)) for p in copy.rglob("*")) == [
        "lib.sh",
        "more",
        "more/lib.sh",
        "test.sh",
    ]
    assert not any(p.is_symlink() for p in copy.rglob("*"))


def test_init_harbor_writes_the_current_schema_with_a_task_section(tmp_path: Path) -> None:
    init_harbor_task("my-task", tmp_path)
    task = load_task(tmp_path / "my-task")
    assert task.config.schema_version == "1.1"
    assert task.config.task.name == "my-task" and task.config.task.keywords == ["files"]
    assert task.unknown == {}, task.unknown
