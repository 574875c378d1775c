"""A Harbor registry (registry.json) by name and version: tasks fetched once with git from a local
repository (file://) into the cache, reused offline, digests checked; then played end to end."""

from __future__ import annotations

import functools
import http.server
import json
import shutil
import subprocess
import threading
from pathlib import Path

import pytest

from envs import from_harbor, load_environment
from envs._harbor import HarborTaskError
from envs._harbor.digest import task_digest
from tests.envs.harbor.test_harbor_tasks import make_task
from tests.helpers.processes import run

pytestmark = [pytest.mark.agents, pytest.mark.slow]

PASS = "mkdir -p /logs/verifier; test -f /app/done && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt"  # fmt: skip
SOLVE = "mkdir -p /app && touch /app/done"


def git(*args: str, cwd: Path) -> str:
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return done.stdout.strip()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    folder = tmp_path / "cache"
    monkeypatch.setenv("RUBRIC_HARBOR_CACHE", str(folder))
    return folder


def make_repo(root: Path) -> tuple[Path, str]:
    """A git repository holding two task folders, tasks/alpha and tasks/beta; its commit."""
    repo = root / "repo"
    for name in ("alpha", "beta"):
        make_task(repo / "tasks", name, PASS, solve=SOLVE)
    (repo / "other").mkdir()
    (repo / "other" / "big.txt").write_text("not checked out\n")
    git("init", "--quiet", cwd=repo)
    git("add", "-A", cwd=repo)
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "--quiet", "-m", "tasks", cwd=repo)
    return repo, git("rev-parse", "HEAD", cwd=repo)


def make_registry(root: Path, repo: Path, commit: str, **digests: str) -> Path:
    """registry.json: acme/ds at 1.0 (both tasks, pinned to `commit`) and 0.9 (alpha alone)."""
    tasks = [
        {"name": name, "git_url": f"file://{repo}", "git_commit_id": commit, "path": f"tasks/{name}"}
        | ({"digest": digests[name]} if name in digests else {})
        for name in ("alpha", "beta")
    ]
    datasets = [
        {"name": "acme/ds", "version": "1.0", "description": "two tasks", "tasks": tasks},
        {"name": "acme/ds", "version": "0.9", "description": "one task", "tasks": tasks[:1]},
    ]
    path = root / "registry.json"
    path.write_text(json.dumps(datasets))
    return path


def test_resolved_by_name_and_version_and_reused_offline(tmp_path: Path, cache: Path) -> None:
    repo, commit = make_repo(tmp_path)
    registry = make_registry(tmp_path, repo, commit)
    env = from_harbor("acme/ds@1.0", registry=f"file://{registry}")
    assert [row["example_id"] for row in env.dataset] == ["alpha", "beta"] and env.name == "acme-ds@1.0"
    fetched = [Path(row["info"]["harbor"]["path"]) for row in env.dataset]
    assert all(cache in p.parents and commit in p.parts for p in fetched)
    assert task_digest(fetched[0]) == task_digest(repo / "tasks" / "alpha")
    assert not list(cache.rglob("big.txt"))  # only the tasks' folders were checked out
    # Once fetched, the repository is not needed: the cache is read (no second clone).
    shutil.rmtree(repo)
    again = load_environment("harbor:acme/ds@1.0", registry=str(registry))
    assert [Path(row["info"]["harbor"]["path"]) for row in again.dataset] == fetched
    assert [row["example_id"] for row in from_harbor("acme/ds", registry=str(registry)).dataset] == [
        "alpha",
        "beta",
    ]
    assert [row["example_id"] for row in from_harbor("acme/ds@0.9", registry=str(registry)).dataset] == [
        "alpha"
    ]


def test_unknown_name_or_version_lists_what_the_registry_has(tmp_path: Path, cache: Path) -> None:
    repo, commit = make_repo(tmp_path)
    registry = str(make_registry(tmp_path, repo, commit))
    with pytest.raises(
        HarborTaskError, match=r"has no dataset 'acme/other'; it has: acme/ds@0.9, acme/ds@1.0$"
    ):
        from_harbor("acme/other@1.0", registry=registry)
    with pytest.raises(HarborTaskError, match=r"has no version '2.0' of acme/ds; it has: 0.9, 1.0$"):
        from_harbor("acme/ds@2.0", registry=registry)
    assert not cache.exists() or not list(cache.rglob("task.toml"))


def test_a_digest_mismatch_is_refused_by_name(tmp_path: Path, cache: Path) -> None:
    repo, commit = make_repo(tmp_path)
    actual = task_digest(repo / "tasks" / "beta")
    wrong = "sha256:" + "0" * 64
    registry = make_registry(tmp_path, repo, commit, alpha=task_digest(repo / "tasks" / "alpha"), beta=wrong)
    with pytest.raises(HarborTaskError) as caught:
        from_harbor("acme/ds@1.0", registry=str(registry))
    assert f"task beta: file://{repo} at {commit} has digest {actual}, the registry pins {wrong}" in str(
        caught.value
    )
    assert not list(cache.rglob("beta"))  # nothing kept of a task that is not what the registry names
    # A cached copy changed since its fetch is refused too (pins or not), naming both digests.
    registry = make_registry(tmp_path, repo, commit)
    env = from_harbor("acme/ds@1.0", registry=str(registry))
    alpha = Path(env.dataset[0]["info"]["harbor"]["path"])
    (alpha / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    with pytest.raises(HarborTaskError, match=r"task alpha: the copy in .* has digest sha256:\w+, it had sha256:\w+ when fetched"):  # fmt: skip
        from_harbor("acme/ds@1.0", registry=str(registry))


def test_a_registry_served_over_http(tmp_path: Path, cache: Path) -> None:
    repo, commit = make_repo(tmp_path)
    make_registry(tmp_path, repo, commit)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(tmp_path))
    with http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler) as server:
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            url = f"http://127.0.0.1:{server.server_address[1]}/registry.json"
            env = from_harbor("acme/ds@1.0", registry=url)
        finally:
            server.shutdown()
            thread.join()
    assert [row["example_id"] for row in env.dataset] == ["alpha", "beta"]


def test_bad_entries_and_a_name_without_its_registry(tmp_path: Path, cache: Path) -> None:
    registry = tmp_path / "registry.json"
    bad = {"name": "t", "git_url": "--upload-pack=touch /tmp/x", "git_commit_id": "-c", "path": "t"}
    registry.write_text(json.dumps([{"name": "acme/ds", "version": "1.0", "tasks": [bad]}]))
    with pytest.raises(
        HarborTaskError, match=r"is not a list of datasets: 0.tasks.0.git_url: String should match"
    ):
        from_harbor("acme/ds@1.0", registry=str(registry))
    with pytest.raises(
        HarborTaskError, match=r"for a dataset of a Harbor registry give the registry: --registry"
    ):
        from_harbor("acme/ds@1.0")


def test_a_task_without_git_url_is_a_folder_beside_the_registry(tmp_path: Path, cache: Path) -> None:
    make_task(tmp_path / "local", "solo", PASS)
    entry = {"name": "solo", "path": "local/solo", "digest": task_digest(tmp_path / "local" / "solo")}
    (tmp_path / "registry.json").write_text(json.dumps([{"name": "d", "version": "head", "tasks": [entry]}]))
    env = from_harbor("d", registry=str(tmp_path / "registry.json"))  # "head" is Harbor's first choice
    assert [Path(row["info"]["harbor"]["path"]) for row in env.dataset] == [tmp_path / "local" / "solo"]
    (tmp_path / "local" / "solo" / "instruction.md").write_text("Another task.")
    with pytest.raises(
        HarborTaskError, match=r"task solo: .*solo has digest sha256:\w+, the registry pins sha256:"
    ):
        from_harbor("d", registry=str(tmp_path / "registry.json"))


def test_a_commit_the_repository_has_not_is_refused(tmp_path: Path, cache: Path) -> None:
    repo, _ = make_repo(tmp_path)
    registry = make_registry(tmp_path, repo, "f" * 40)
    with pytest.raises(HarborTaskError, match=r"git fetch --quiet --depth 1 origin f{40} failed"):
        from_harbor("acme/ds@1.0", registry=str(registry))


def test_registry_flag_needs_a_harbor_dataset(tmp_path: Path) -> None:
    done = run("eval", "tests/x.py", "--registry", "r.json", "-m", "scripted:x", cwd=tmp_path)
    assert done.returncode != 0 and "--registry names the registry of a Harbor dataset" in done.stderr


@pytest.mark.docker
def test_rubric_eval_registry_dataset_with_the_oracle_scores_one(tmp_path: Path) -> None:
    repo, commit = make_repo(tmp_path)
    make_registry(tmp_path, repo, commit)
    out = tmp_path / "run"
    cache = {"RUBRIC_HARBOR_CACHE": str(tmp_path / "cache")}
    args = ("eval", "harbor:acme/ds@1.0", "--registry", "registry.json", "--agent", "oracle", "--no-progress")
    done = run(*args, "-o", str(out), cwd=tmp_path, env=cache, timeout=300)
    assert done.returncode == 0, done.stderr
    rows = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert sorted((r["example_id"], r["reward"]) for r in rows) == [("alpha", 1.0), ("beta", 1.0)], rows
    metadata = json.dumps(json.loads((out / "metadata.json").read_text()))
    assert "harbor:acme/ds@1.0" in metadata and str(tmp_path / "registry.json") in metadata
    # Resumed with its registry again, offline: the tasks come from the cache.
    shutil.rmtree(repo)
    again = (
        "eval",
        "harbor:acme/ds@1.0",
        "--resume",
        str(out),
        "--registry",
        "registry.json",
        "--agent",
        "oracle",
    )
    resumed = run(*again, "--no-progress", cwd=tmp_path, env=cache)
    assert resumed.returncode == 0, resumed.stderr
    assert len((out / "results.jsonl").read_text().splitlines()) == 2
