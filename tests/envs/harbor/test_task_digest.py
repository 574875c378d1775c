"""A Harbor task's digest (`envs._harbor.digest`), as Harbor's package manifests define it.

The expected digests were computed by Harbor 0.25.0 itself (`harbor.publisher.packager.
Packager.compute_content_hash`, the function `harbor publish`, `harbor dataset add` and
`harbor sync` use) on folders built by `build_task` below, under Python 3.12 outside this
project (Harbor needs 3.12). One by-hand vector checks the record format on its own.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest

from envs._harbor import HarborTaskError
from envs._harbor.digest import task_digest, task_files

pytestmark = [pytest.mark.agents, pytest.mark.slow]

# Computed by Harbor 0.25.0 on build_task(root) and build_task(root, gitignore="*.md\n").
HARBOR_DIGEST = "sha256:39144bf0ef6ddc22e46cb1aa5e55eca5e601918e3298cb9d3e3eab4f995d007f"
HARBOR_DIGEST_GITIGNORE = "sha256:8e954ae4a8922774f1303f531c78025b506d8e7bd4d6162757e00b086c77d017"


def build_task(root: Path, *, gitignore: str | None = None) -> Path:
    """A task with every kind of file the digest treats differently."""
    files = {
        "task.toml": '[task]\nname = "acme/digest"\n',
        "instruction.md": "Count the words.\n",
        "README.md": "# Digest\n",
        "notes.txt": "not part of the task\n",  # only four top-level files count
        "environment/Dockerfile": "FROM debian:bookworm-slim\nWORKDIR /app\n",
        "environment/data.txt": "in the image\n",
        "environment/.harborignore": "*.txt\n",  # left out itself; applies to tests/ and solution/ only
        "tests/test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
        "tests/.harborignore": "scratch/\n*.log\n!keep.log\n",
        "tests/scratch/tmp.txt": "left out\n",
        "tests/run.log": "left out\n",
        "tests/keep.log": "kept by the negation\n",
        "tests/data/expected.txt": "42\n",
        "tests/data/.harborignore": "*.bak\n",
        "tests/data/expected.bak": "left out by the inner file\n",
        "tests/données.txt": "unicode name\n",
        "solution/solve.sh": "#!/bin/bash\necho done\n",
        "solution/helper.pyc": "compiled\n",
        "solution/__pycache__/helper.cpython-312.pyc": "compiled\n",
        "steps/one/instruction.md": "Step one.\n",
        "steps/one/tests/test.sh": "exit 0\n",
    }
    folder = root / "digest-task"
    for relative, text in files.items():
        (folder / relative).parent.mkdir(parents=True, exist_ok=True)
        (folder / relative).write_text(text)
    (folder / "tests" / "blob.bin").write_bytes(bytes(range(256)))
    os.symlink("test.sh", folder / "tests" / "link.sh")  # a link to a file counts as that file
    if gitignore is not None:
        (folder / ".gitignore").write_text(gitignore)
    return folder


def test_digest_is_harbors(tmp_path: Path) -> None:
    folder = build_task(tmp_path)
    assert task_files(folder) == [
        "README.md", "environment/Dockerfile", "environment/data.txt", "instruction.md",
        "solution/solve.sh", "steps/one/instruction.md", "steps/one/tests/test.sh", "task.toml",
        "tests/blob.bin", "tests/data/expected.txt", "tests/donn\u00e9es.txt", "tests/keep.log",
        "tests/link.sh", "tests/test.sh",
    ]  # fmt: skip
    assert task_digest(folder) == HARBOR_DIGEST


def test_a_task_gitignore_replaces_the_default_ignores(tmp_path: Path) -> None:
    folder = build_task(tmp_path, gitignore="*.md\n")
    files = task_files(folder)
    assert "solution/__pycache__/helper.cpython-312.pyc" in files and "solution/helper.pyc" in files
    assert not [f for f in files if f.endswith(".md")]
    assert task_digest(folder) == HARBOR_DIGEST_GITIGNORE


def test_record_format_by_hand(tmp_path: Path) -> None:
    """sha256 over `PATH NUL sha256(file) LF` per file, sorted by path."""
    folder = tmp_path / "t"
    (folder / "tests").mkdir(parents=True)
    (folder / "task.toml").write_bytes(b"")
    (folder / "tests" / "test.sh").write_bytes(b"exit 0\n")
    records = b"".join(
        f"{path}\0{hashlib.sha256(data).hexdigest()}\n".encode()
        for path, data in (("task.toml", b""), ("tests/test.sh", b"exit 0\n"))
    )
    assert task_digest(folder) == "sha256:" + hashlib.sha256(records).hexdigest()


def test_any_change_changes_the_digest(tmp_path: Path) -> None:
    folder = build_task(tmp_path)
    before = task_digest(folder)
    (folder / "tests" / "run.log").write_text("ignored: no change\n")
    assert task_digest(folder) == before
    (folder / "tests" / "data" / "expected.txt").write_text("43\n")
    assert task_digest(folder) != before


def test_links_out_of_the_task_and_to_folders_are_refused(tmp_path: Path) -> None:
    folder = build_task(tmp_path)
    outside = tmp_path / "secret"
    outside.write_text("x")
    os.symlink(outside, folder / "tests" / "out.txt")
    with pytest.raises(HarborTaskError, match=r"tests/out.txt leads outside the task folder"):
        task_digest(folder)
    (folder / "tests" / "out.txt").unlink()
    os.symlink("data", folder / "tests" / "more")
    with pytest.raises(
        HarborTaskError, match=r"tests/more is a link to a folder, which a task digest cannot hold"
    ):
        task_digest(folder)
