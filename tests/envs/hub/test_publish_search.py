"""envs.hub against a real pypiserver: build, push, refusals, search and info over the simple API."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from envs.hub import HubError, init_package
from envs.hub._build import build_package
from envs.hub._index import Hub, info, search
from envs.hub._publish import push_package
from tests.helpers.hub import HubServer

pytestmark = [pytest.mark.hub, pytest.mark.slow]


def _built(tmp_path: Path, name: str, kind: str = "single") -> Path:
    root = init_package(name, tmp_path, kind)  # type: ignore[arg-type]
    build_package(root, isolation=False)
    return root


def test_the_wheel_carries_card_rubric_summary_and_compatibility(tmp_path: Path) -> None:
    root = _built(tmp_path, "carry-env", "tool")
    wheels = list((root / "dist").glob("*.whl"))
    assert len(wheels) == 1 and len(list((root / "dist").glob("*.tar.gz"))) == 1
    import json

    record = json.loads(zipfile.ZipFile(wheels[0]).read("carry_env/rubric_card.json"))
    assert record["card"]["kind"] == "tool" and record["compatibility"]["rubric-rl"]
    assert {n["path"]: n.get("weight") for n in record["rubric"]} == {
        "": None,
        "correct": 0.9,
        "used_tool": 0.1,
    }
    assert record["content_hash"].startswith("sha256:")


def test_build_refuses_a_package_that_fails_check(tmp_path: Path) -> None:
    root = init_package("failing-build", tmp_path)
    (root / "README.md").write_text("no card\n")
    with pytest.raises(HubError, match="rubric check failed .* first: card"):
        build_package(root, isolation=False)
    assert not (root / "dist").exists()


def test_push_then_search_and_info_read_it_back(tmp_path: Path, hub_server: HubServer) -> None:
    root = _built(tmp_path, "found-env", "multi")
    result = push_package(root)
    assert result.version == "0.1.0" and sorted(p.suffix for p in result.files) == [".gz", ".whl"]
    assert sorted(p.name for p in hub_server.packages.iterdir()) == [
        "found_env-0.1.0-py3-none-any.whl",
        "found_env-0.1.0.tar.gz",
    ]
    entries = search("guess")
    assert [(e.name, e.versions) for e in entries] == [("found-env", ["0.1.0"])]
    assert "multi-turn" in entries[0].tags and entries[0].compatibility["rubric-rl"]
    assert search(tag="games")[0].name == "found-env" and search("nothing-like-this") == []
    entry = info("Found_Env")
    assert entry.record is not None and [n["path"] for n in entry.record["rubric"]] == ["", "won", "speed"]
    assert "rubric eval found-env -m scripted:demo" in entry.readme


def test_repush_is_refused_and_bump_pushes_a_new_version(tmp_path: Path, hub_server: HubServer) -> None:
    root = _built(tmp_path, "again-env")
    push_package(root)
    with pytest.raises(HubError, match=r"again-env 0.1.0 is already on .*--bump patch"):
        push_package(root)
    with pytest.raises(HubError, match="identical content"):
        push_package(root, bump="patch", isolation=False)
    assert '"0.1.0"' in (root / "pyproject.toml").read_text()  # a refused bump leaves the version alone
    (root / "again_env" / "data.jsonl").write_text('{"question": "What is 1 + 1?", "answer": "2"}\n')
    assert push_package(root, bump="minor", isolation=False).version == "0.2.0"
    assert search("again")[0].versions == ["0.1.0", "0.2.0"]


def test_push_needs_a_build_of_the_current_sources(tmp_path: Path, hub_server: HubServer) -> None:
    root = init_package("unbuilt-env", tmp_path)
    with pytest.raises(HubError, match="nothing built for unbuilt-env 0.1.0 .* run rubric build"):
        push_package(root)
    build_package(root, isolation=False)
    (root / "unbuilt_env" / "data.jsonl").write_text('{"question": "What is 1 + 1?", "answer": "2"}\n')
    with pytest.raises(HubError, match="sources changed since the last build"):
        push_package(root)


def test_wrong_credentials_are_one_line_without_the_secret(
    tmp_path: Path, hub_server: HubServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = _built(tmp_path, "secret-env")
    monkeypatch.setenv("RUBRIC_HUB_PASSWORD", "not-the-password-xyz")
    with pytest.raises(HubError) as caught:
        push_package(root)
    message = str(caught.value)
    assert "refused the credentials (HTTP 403)" in message or "(HTTP 401)" in message
    assert "not-the-password-xyz" not in message and "\n" not in message
    monkeypatch.delenv("RUBRIC_HUB_PASSWORD")
    monkeypatch.delenv("RUBRIC_HUB_USER")
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.pypirc
    with pytest.raises(HubError, match="no credentials for .*RUBRIC_HUB_USER"):
        push_package(root)


def test_unreachable_hub_and_a_hub_that_is_not_an_index(tmp_path: Path, scripted_endpoint) -> None:  # type: ignore[no-untyped-def]
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(HubError, match=f"cannot reach the hub at http://127.0.0.1:{port}"):
        search(hub=f"http://127.0.0.1:{port}")
    endpoint = scripted_endpoint(lambda messages, tools: "hi")
    with pytest.raises(HubError, match="is not a package index: GET .*/simple/ answered 404"):
        search(hub=endpoint.base_url)
    with pytest.raises(HubError, match="not an http"):
        search(hub="ftp://example")


def test_hub_urls_for_common_indexes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("RUBRIC_HUB_UPLOAD_URL", raising=False)
    local = Hub.resolve("http://127.0.0.1:8080")
    assert (local.simple_url, local.upload_url) == ("http://127.0.0.1:8080/simple/", "http://127.0.0.1:8080/")
    devpi = Hub.resolve("https://devpi.corp/team/prod/+simple/")
    assert devpi.upload_url == "https://devpi.corp/team/prod/"
    assert Hub.resolve("https://pypi.org/simple").upload_url == "https://upload.pypi.org/legacy/"
    monkeypatch.delenv("RUBRIC_HUB_URL", raising=False)
    with pytest.raises(HubError, match="no hub given; pass --hub URL or set RUBRIC_HUB_URL"):
        Hub.resolve(None)


def test_a_failed_bumped_push_leaves_the_version_alone(tmp_path: Path, hub_server: HubServer) -> None:
    import os
    import subprocess
    import sys

    root = _built(tmp_path, "wrong-creds-env")
    push_package(root)
    data = root / "wrong_creds_env" / "data.jsonl"
    data.write_text(data.read_text() + '{"id": "extra", "question": "What is 1 + 1?", "answer": "2"}\n')
    before = (root / "pyproject.toml").read_text()
    env = {
        **os.environ,
        "RUBRIC_HUB_PASSWORD": "wrong",
        "PYTHON_KEYRING_BACKEND": "keyring.backends.null.Keyring",
    }
    proc = subprocess.run(
        [sys.executable, "-m", "cli", "push", str(root), "--bump", "patch", "--no-isolation"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        cwd=Path(__file__).resolve().parents[3],
    )
    assert proc.returncode != 0 and "refused the credentials" in proc.stderr
    assert (root / "pyproject.toml").read_text() == before  # still 0.1.0: a retry bumps to 0.1.1 again
    assert "--verbose" not in proc.stdout + proc.stderr, proc.stdout + proc.stderr  # one line of ours
    assert push_package(root, bump="patch", isolation=False).version == "0.1.1"
