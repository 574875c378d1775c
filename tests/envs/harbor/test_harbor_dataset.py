"""A Harbor dataset folder: dataset.toml's `[[tasks]]` (name, digest) pick the tasks run, each
digest verified (no Docker: the tasks are loaded, not played)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from envs import from_harbor, load_environment
from envs._harbor import HarborTaskError, task_folders
from envs._harbor.digest import task_digest
from tests.envs.harbor.test_harbor_tasks import make_task

pytestmark = [pytest.mark.agents, pytest.mark.slow]

PASS = "mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt"


def make_dataset(root: Path, *, pins: dict[str, str] | None = None, extra: str = "") -> Path:
    """Three task folders (acme/alpha, acme/beta, acme/gamma); dataset.toml names beta then alpha."""
    folder = root / "ds"
    for short in ("alpha", "beta", "gamma"):
        make_task(folder, f"{short}-dir", PASS, toml=f'[task]\nname = "acme/{short}"\n', solve="true")
    digests = {
        name: task_digest(folder / f"{name.split('/')[1]}-dir") for name in ("acme/beta", "acme/alpha")
    }
    digests.update(pins or {})
    entries = "".join(
        f'[[tasks]]\nname = "{name}"\ndigest = "{digest}"\n\n' for name, digest in digests.items()
    )
    (folder / "dataset.toml").write_text(f'[dataset]\nname = "acme/ds"\nversion = "1.0"\n\n{entries}{extra}')
    return folder


def test_dataset_toml_runs_the_tasks_it_names_found_by_task_name(tmp_path: Path) -> None:
    folder = make_dataset(tmp_path)
    assert [p.name for p in task_folders(folder)] == ["beta-dir", "alpha-dir"]
    env = load_environment(f"harbor:{folder}")
    played = [Path(row["info"]["harbor"]["path"]).name for row in env.dataset]
    assert played == ["beta-dir", "alpha-dir"]  # gamma is not named


def test_a_changed_task_is_refused_with_both_digests(tmp_path: Path) -> None:
    folder = make_dataset(tmp_path)
    pinned = task_digest(folder / "alpha-dir")
    (folder / "alpha-dir" / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt  # changed\n")
    actual = task_digest(folder / "alpha-dir")
    with pytest.raises(HarborTaskError) as caught:
        from_harbor(folder)
    message = str(caught.value)
    assert "\n" not in message and "task acme/alpha (alpha-dir/)" in message
    assert f"has digest {actual}, dataset.toml pins {pinned}" in message


def test_a_task_not_there_is_refused_listing_the_names_found(tmp_path: Path) -> None:
    folder = make_dataset(tmp_path, pins={"acme/delta": "sha256:" + "0" * 64})
    with pytest.raises(
        HarborTaskError, match=r"task acme/delta is not in .*: acme/alpha, acme/beta, acme/gamma\)"
    ):
        task_folders(folder)


def test_bad_entries_and_dataset_files(tmp_path: Path) -> None:
    folder = make_dataset(tmp_path, pins={"acme/alpha": "md5:abc"})
    with pytest.raises(HarborTaskError, match=r"dataset.toml has bad values: tasks.1.digest"):
        task_folders(folder)
    folder = make_dataset(
        tmp_path / "b", extra='[[files]]\npath = "notes.txt"\ndigest = "sha256:' + "1" * 64 + '"\n'
    )
    (folder / "notes.txt").write_text("hello\n")
    good = "sha256:" + hashlib.sha256(b"hello\n").hexdigest()
    with pytest.raises(
        HarborTaskError, match=rf"file notes.txt has digest {good}, dataset.toml pins sha256:1+$"
    ):
        task_folders(folder)
