"""A Harbor task's limits as the harness applies them: `storage_mb` on the agent's disk, and no
network for the build of its image unless it allows internet."""

from __future__ import annotations

import json
import math
import socket
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from envs import from_harbor
from tests.envs.harbor.test_harbor_tasks import IMAGE, make_task

# These tasks name the test image and run on bwrap too, on purpose: the warning that --runtime
# replaces their image is tests/envs/harbor/test_harbor_tasks.py's to check.
pytestmark = [
    pytest.mark.agents,
    pytest.mark.slow,
    pytest.mark.filterwarnings("ignore:--runtime .* replaces the image each task names:UserWarning"),
    pytest.mark.filterwarnings("ignore:task .* asks for a network:UserWarning"),  # bwrap gives none
]

MB = 1 << 20
# The agent tries to fill the disk: one 300 MB file, then three of 8 MB; then says what it holds.
FILL = (
    "command:head -c 300000000 /dev/zero > big.bin; "
    "for i in 1 2 3; do head -c 8000000 /dev/zero > f$i.bin; done; "
    "echo big=$(stat -c %s big.bin) total_kb=$(du -sk . | cut -f1); true"
)
# The verifier: 1 when the 300 MB file was cut at the task's 10 MB.
CAPPED = (
    "size=$(stat -c %s big.bin 2>/dev/null || echo 0); mkdir -p /logs/verifier; "
    'if [ "$size" -le 10485760 ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt'
)


def task(root: Path, name: str, toml: str, test_sh: str = "exit 0", dockerfile: str | None = None) -> Path:
    """A task on the test image, or built from `dockerfile`."""
    folder = make_task(root, name, test_sh, toml)
    if dockerfile is not None:
        (folder / "task.toml").write_text(f"[environment]\n{toml}")
        (folder / "environment").mkdir()
        (folder / "environment" / "Dockerfile").write_text(dockerfile)
    return folder


def agent_says(rollout_state: dict[str, object]) -> dict[str, int]:
    agent = rollout_state["agent"]
    assert isinstance(agent, dict)
    words = str(agent["stdout"]).split()
    return {key: int(value) for key, _, value in (word.partition("=") for word in words)}


@pytest.mark.docker
def test_storage_mb_caps_the_agents_files_in_docker(tmp_path: Path) -> None:
    """Before, storage_mb was parsed and never applied: the agent wrote its 300 MB file whole."""
    env = from_harbor(task(tmp_path, "fill-disk", "storage_mb = 10\n", test_sh=CAPPED))
    (rollout,) = env.evaluate("scripted:harbor", agent=FILL, progress=False).rollouts
    assert rollout.reward == 1.0, (rollout.error, rollout.score_errors)
    assert agent_says(rollout.state)["big"] == 10 * MB  # each file; the total only where the daemon can


def test_storage_mb_caps_the_agents_files_and_their_total_in_bwrap(tmp_path: Path) -> None:
    env = from_harbor(task(tmp_path, "fill-disk", "storage_mb = 10\n"))
    (rollout,) = env.evaluate("scripted:harbor", agent=FILL, runtime="bwrap", progress=False).rollouts
    said = agent_says(rollout.state)
    assert said["big"] <= 10 * MB and said["total_kb"] <= 10 * 1024, said


def _host_address() -> str:
    """This machine's address on its default route (a container on a bridge reaches it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the route
        return str(probe.getsockname()[0])


def _build_containers(since: float, until: float, mark: str) -> dict[str, list[str]]:
    """The containers the daemon made between the two times for the build labelled `mark` (its
    RUN steps: they carry the image's labels so far, so other tests' containers never count),
    each with the networks it was connected to."""
    listed = subprocess.run(
        ["docker", "events", "--since", f"{since:.3f}", "--until", f"{until:.3f}", "--format", "{{json .}}",
         "--filter", "type=container", "--filter", "type=network"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout  # fmt: skip
    made: dict[str, list[str]] = {}
    started: set[str] = set()
    for event in map(json.loads, listed.splitlines()):
        attributes = event["Actor"]["Attributes"]
        if event["Type"] == "container" and attributes.get("rubric.test.build") == mark:
            made.setdefault(event["Actor"]["ID"], [])
            if event["Action"] == "start":
                started.add(event["Actor"]["ID"])
        elif event["Type"] == "network" and event["Action"] == "connect":
            made.get(attributes.get("container", ""), []).append(attributes["name"])
    return {container: made[container] for container in started}  # LABEL's step starts none


@pytest.mark.docker
@pytest.mark.parametrize("allow", [False, True], ids=["offline", "allowed"])
def test_a_task_image_builds_with_no_network_unless_the_task_allows_internet(
    tmp_path: Path, allow: bool
) -> None:
    """The build's RUN step tries to reach a server on this machine. Before, every build got
    the daemon's default network."""
    with socket.create_server(("0.0.0.0", 0)) as server:
        server.setblocking(False)
        port = server.getsockname()[1]
        reach = f"import socket; socket.create_connection(('{_host_address()}', {port}), timeout=3)"
        mark = uuid.uuid4().hex
        dockerfile = f'FROM {IMAGE}\nLABEL rubric.test.build={mark}\nRUN python3 -c "{reach}"\n'
        toml = f"allow_internet = {str(allow).lower()}\n"
        env = from_harbor(task(tmp_path, "phone-home", toml, dockerfile=dockerfile))
        since = time.time()
        (rollout,) = env.evaluate("scripted:harbor", agent="command:true", progress=False).rollouts
        made = _build_containers(since, time.time() + 1, mark)
        try:
            server.accept()[0].close()
            reached = True
        except BlockingIOError:
            reached = False
    assert made, "the build started no container"
    if not allow:
        assert not reached
        assert math.isnan(rollout.reward) and "docker build" in (rollout.error or "")
        assert "the build has no network" in (rollout.error or ""), rollout.error
        assert all(networks == ["none"] for networks in made.values()), made
    else:  # the daemon's default: never forced to none (this daemon has no bridge, so it fails too)
        assert not any("none" in networks for networks in made.values()), made


@pytest.mark.docker
def test_a_harbor_container_has_a_pids_cap_though_the_task_names_none(tmp_path: Path) -> None:
    """Issue 47.18: the Security guide lists pids among the docker: limits; a Harbor task (no pids
    field) got none. Its container now holds at most DEFAULT_DOCKER_PIDS processes and threads."""
    from envs.agents._sandboxes import DEFAULT_DOCKER_PIDS

    env = from_harbor(task(tmp_path, "pids", ""))
    show = "command:cat /sys/fs/cgroup/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids/pids.max"
    (rollout,) = env.evaluate("scripted:harbor", agent=show, progress=False).rollouts
    assert rollout.state["agent"]["stdout"].strip() == str(DEFAULT_DOCKER_PIDS), rollout.state["agent"]
