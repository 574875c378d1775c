"""Harbor multi-container tasks: environment/docker-compose.yaml, `main` the agent's container,
sidecars reached by name on a private network, and nothing left behind (real Docker)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from envs import from_harbor
from envs._harbor import HarborTaskError, load_task
from harness._core.errors import ConfigError
from harness.runtimes import SandboxError, get_runtime
from harness.runtimes._docker import client

pytestmark = [
    pytest.mark.agents,
    pytest.mark.docker,
    pytest.mark.slow,
    # a compose project has no network but its loopback: a task asking for one is told so
    pytest.mark.filterwarnings("ignore:task .* asks for a network:UserWarning"),
]

IMAGE = "rubric-test-base:bookworm"
PAGE = "the sidecar says 42"
COMPOSE = """\
services:
  main:
    image: ${MAIN_IMAGE_NAME}
    environment:
      PAGE_HOST: web
    depends_on:
      web:
        condition: service_healthy
  web:
    build: ./web
    command: ["python3", "-m", "http.server", "8000", "--directory", "/srv"]
    healthcheck:
      test: ["CMD", "python3", "-c", "import urllib.request as u; u.urlopen('http://localhost:8000/')"]
      interval: 1s
      retries: 30
"""
FETCH = 'import os, urllib.request as u; print(u.urlopen("http://" + os.environ["PAGE_HOST"] + ":8000/").read().decode().strip())'
SOLVE = f"python3 -c '{FETCH}' > /app/answer.txt\n"
TEST = f"""\
got=$(python3 -c '{FETCH}')
answer=$(cat /app/answer.txt 2>/dev/null)
if [ "$got" = "{PAGE}" ] && [ "$answer" = "{PAGE}" ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""


def compose_task(root: Path, compose: str = COMPOSE) -> Path:
    """A task whose environment/ holds the agent's Dockerfile, a sidecar `web` and the compose file."""
    folder = root / "with-sidecar"
    for sub in ("environment/web", "tests", "solution"):
        (folder / sub).mkdir(parents=True)
    (folder / "task.toml").write_text('schema_version = "1.1"\n[agent]\ntimeout_sec = 60\n')
    (folder / "instruction.md").write_text(
        "Fetch the page the service `web` serves on port 8000 into /app/answer.txt."
    )
    (folder / "environment" / "Dockerfile").write_text(f"FROM {IMAGE}\nWORKDIR /app\n")
    (folder / "environment" / "web" / "Dockerfile").write_text(
        f"FROM {IMAGE}\nRUN mkdir -p /srv && echo '{PAGE}' > /srv/index.html\n"
    )
    (folder / "environment" / "docker-compose.yaml").write_text(compose)
    (folder / "tests" / "test.sh").write_text(TEST)
    (folder / "solution" / "solve.sh").write_text(SOLVE)
    return folder


async def _ours(label: str) -> list[str]:
    """Containers (any state) carrying `label` ("key=value")."""
    docker = client()
    try:
        return [c.id for c in await docker.containers.list(all=True, filters={"label": [label]})]
    finally:
        await docker.close()


def _containers(label: str) -> list[str]:
    return asyncio.run(_ours(label))


def test_agent_and_tests_reach_the_sidecar_by_name_and_nothing_is_left(tmp_path: Path) -> None:
    folder = compose_task(tmp_path)
    task = load_task(folder)
    assert task.has_compose and task.runtime == f"compose:{folder / 'environment' / 'docker-compose.yaml'}"
    env = from_harbor(folder)
    oracle, nothing = (
        env.evaluate("scripted:harbor", agent=agent, progress=False).rollouts[0]
        for agent in ("oracle", "command:true")
    )
    assert oracle.reward == 1.0, (oracle.error, oracle.score_details)
    assert nothing.reward == 0.0, (nothing.error, nothing.score_details)
    command = env.evaluate(
        "scripted:harbor", agent=f"command:python3 -c '{FETCH}' > answer.txt", progress=False
    )
    assert command.rollouts[0].reward == 1.0, command.rollouts[0].error
    assert _containers(f"rubric.owner={os.getpid()}") == []


async def test_sidecars_are_reachable_only_inside_their_project(tmp_path: Path) -> None:
    folder = compose_task(tmp_path)
    compose = get_runtime(f"compose:{folder / 'environment' / 'docker-compose.yaml'}?main={IMAGE}")
    resolve = "python3 -c \"import socket; print(socket.gethostbyname('web'))\""
    async with compose.sandbox() as inside, get_runtime(f"docker:{IMAGE}").sandbox() as outside:
        assert (await inside.exec(resolve)).stdout.strip() == "127.0.0.1"
        assert (await inside.exec(f"python3 -c '{FETCH}'", env={"PAGE_HOST": "web"})).stdout.strip() == PAGE
        assert (await outside.exec(resolve)).exit_code != 0  # the name means nothing elsewhere
        # No interface but loopback: not the host, not the internet, not another project.
        assert (await inside.exec("ls /sys/class/net")).stdout.split() == ["lo"]
        # The agent's container does not see the sidecar's processes.
        seen = await inside.exec("cat /proc/[0-9]*/cmdline | tr '\\0' ' '")
        assert "http.server" not in seen.stdout
        copy = await inside.fork()  # a fork is a project of its own, with its own sidecar
        try:
            assert (await copy.exec(f"python3 -c '{FETCH}'", env={"PAGE_HOST": "web"})).stdout.strip() == PAGE
        finally:
            await copy.close()
        await inside.exec("sleep 600 &")
        assert await inside.end_processes() == 1  # main restarted: it rejoins the project's network
        assert (await inside.exec(f"python3 -c '{FETCH}'", env={"PAGE_HOST": "web"})).stdout.strip() == PAGE
    assert await _ours(f"rubric.owner={os.getpid()}") == []


DRIVER = """
import asyncio, sys
from harness.runtimes import SandboxError, get_runtime
async def main():
    sandbox = await get_runtime(sys.argv[1]).open(__import__("harness.runtimes", fromlist=["x"]).SandboxConfig())
    print("open", flush=True)
    await asyncio.sleep(600)
asyncio.run(main())
"""


def test_a_sigkilled_driver_leaves_no_container_after_prune(tmp_path: Path) -> None:
    folder = compose_task(tmp_path)
    run_id = f"compose-{uuid.uuid4().hex[:8]}"
    spec = f"compose:{folder / 'environment' / 'docker-compose.yaml'}?main={IMAGE}"
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, spec], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
        env={**os.environ, "RUBRIC_RUN_ID": run_id, "PYTHONPATH": os.getcwd()},
    )  # fmt: skip
    assert driver.stdout is not None
    assert driver.stdout.readline().strip() == b"open"
    assert len(_containers(f"rubric.run={run_id}")) == 3  # holder, web, main
    driver.kill()
    driver.wait()
    driver.stdout.close()
    deadline = time.monotonic() + 30  # the keepers see their stdin close; the daemon removes all
    while _containers(f"rubric.run={run_id}") and time.monotonic() < deadline:
        time.sleep(0.2)
    assert _containers(f"rubric.run={run_id}") == []
    pruned = subprocess.run(["rubric", "sandboxes", "prune"], capture_output=True, text=True, check=True)
    assert run_id not in pruned.stdout  # the keepers left prune nothing of this run
    assert _containers(f"rubric.run={run_id}") == []


@pytest.mark.parametrize(
    ("compose", "said"),
    [
        ("services: [main\n", "does not parse"),
        ("services:\n  web:\n    image: x\n", "no `main` service"),
        (
            "services:\n  main: {}\n  web:\n    image: x\n    ports: ['80:80']\n",
            "key 'ports' is not supported",
        ),
        (
            "services:\n  main:\n    image: ${SECRET_TOKEN}\n",
            r"\$\{SECRET_TOKEN\}, which rubric does not set",
        ),
        ("services:\n  main: {}\nvolumes:\n  data: {}\n", "top-level key 'volumes'"),
        ("services:\n  main:\n    depends_on: [db]\n", "depends on 'db'"),
        ("services:\n  main:\n    environment: [HOME_TOKEN]\n", "environment HOME_TOKEN has no value"),
        ("services:\n  main: {}\n  web:\n    build: ../..\n", "outside the compose file's folder"),
    ],
)
def test_a_bad_compose_file_is_refused_naming_the_file(tmp_path: Path, compose: str, said: str) -> None:
    folder = compose_task(tmp_path, compose)
    file = folder / "environment" / "docker-compose.yaml"
    with pytest.raises(HarborTaskError, match=rf"{file}.*{said}"):
        load_task(folder)
    with pytest.raises(ConfigError, match=rf"{file}.*{said}"):
        get_runtime(f"compose:{file}")


@pytest.mark.parametrize(
    ("sidecar", "said"),
    [
        (
            "    command: ['sleep', '600']\n    healthcheck:\n      test: ['CMD', 'false']\n"
            "      interval: 1s\n      retries: 2\n",
            r"service 'web' is unhealthy",
        ),
        (
            "    command: ['sh', '-c', 'echo setting up; exit 3']\n",
            r"service 'web' exited with code 3: setting up",
        ),
    ],
    ids=["unhealthy", "failed-job"],
)
async def test_a_sidecar_that_fails_its_condition_fails_the_sandbox_and_leaves_nothing(
    tmp_path: Path, sidecar: str, said: str
) -> None:
    condition = "service_healthy" if "healthcheck" in sidecar else "service_completed_successfully"
    compose = (
        f"services:\n  main:\n    depends_on:\n      web:\n        condition: {condition}\n"
        f"  web:\n    image: {IMAGE}\n{sidecar}"
    )
    folder = compose_task(tmp_path, compose)
    runtime = get_runtime(
        f"compose:{folder / 'environment' / 'docker-compose.yaml'}"
    )  # main: the Dockerfile beside it
    with pytest.raises(SandboxError, match=said):
        async with runtime.sandbox():
            pass
    assert await _ours(f"rubric.owner={os.getpid()}") == []
