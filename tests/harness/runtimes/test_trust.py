"""What a harness can prove about a sandbox from outside: no process left, which files changed."""

from __future__ import annotations

import pytest

from harness.runtimes import get_runtime
from harness.runtimes._docker import _layer_changes
from tests.harness.runtimes.conftest import ALL, DOCKER, ISOLATING

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

#: A loop that leaves its process group and session (setsid), as a daemon would.
DAEMON = "nohup setsid sh -c 'while :; do date > /tmp/beat; sleep 0.05; done' >/dev/null 2>&1 &"


@pytest.mark.parametrize("spec", ISOLATING)
async def test_end_processes_ends_a_daemon_and_proves_none_is_left(spec: str) -> None:
    async with get_runtime(spec).sandbox() as sb:
        await sb.relay(18080)
        assert (await sb.exec(f"echo kept > notes.txt; {DAEMON} sleep 0.3")).ok
        assert await sb.end_processes() >= 1
        assert await sb.end_processes() == 0  # nothing left to end
        first = await sb.read("/tmp/beat")
        assert (await sb.exec("sleep 0.3")).ok
        assert await sb.read("/tmp/beat") == first  # the loop is gone
        assert await sb.read("notes.txt") == b"kept\n"  # the files stay
        assert (await sb.exec("echo again")).stdout == "again\n"
        assert await sb.relay(18080) == "http://127.0.0.1:18080"  # started anew


async def test_local_end_processes_ends_what_its_commands_left_in_their_groups() -> None:
    async with get_runtime("local").sandbox() as sb:
        assert (await sb.exec("sleep 1000 > /dev/null 2>&1 &")).ok
        assert await sb.end_processes() == 1
        assert await sb.end_processes() == 0
        assert await sb.changed_files() == {}


@pytest.mark.parametrize("spec", [p for p in ALL if p.id.startswith("bwrap")])
async def test_bwrap_changed_files_reads_the_writable_root_and_masks(spec: str) -> None:
    async with get_runtime(spec).sandbox() as sb:
        assert await sb.changed_files() == {}
        script = "mkdir -p /extra/x && echo 1 > /extra/x/y && echo 2 > /tmp/t && echo 3 > w && rm /bin && ln -s /tmp /bin"
        assert (await sb.exec(script)).ok
        assert await sb.changed_files() == {"/extra/x/y": "added", "/bin": "changed"}


@pytest.mark.docker
async def test_docker_changed_files_are_the_containers_own_changes() -> None:
    async with get_runtime(DOCKER).sandbox() as sb:
        assert await sb.changed_files() == {}
        script = "mkdir -p /opt/x && echo 1 > /opt/x/y && echo 2 > /tmp/t && echo 3 > w && echo 4 >> /usr/bin/tail && rm /usr/bin/tac"  # fmt: skip
        assert (await sb.exec(script)).ok
        assert await sb.changed_files() == {
            "/opt/x": "added",
            "/opt/x/y": "added",
            "/usr/bin/tail": "changed",
            "/usr/bin/tac": "deleted",
        }


@pytest.mark.docker
async def test_docker_reads_the_writable_layer_as_the_engine_does() -> None:
    # Run as root beside a local daemon, the harness reads the overlay's upper folder itself
    # (about 1 ms against the Engine's 0.2-0.3 s); both must tell the same changes.
    async with get_runtime(DOCKER).sandbox() as sb:
        script = (
            "mkdir -p /opt/a/b && echo 1 > /opt/a/b/c && echo 2 >> /etc/issue && rm /usr/bin/tac && "
            "rm -rf /usr/share/doc && mkdir /usr/share/doc && echo 3 > /usr/share/doc/x && "
            "rm /bin && ln -s /usr/bin /bin && ln -s /etc/passwd /opt/link && mkfifo /opt/fifo"
        )
        assert (await sb.exec(script)).ok, script
        layers = await sb._layers()  # type: ignore[attr-defined]
        assert layers is not None, "this test runs as root beside the daemon: the layers are readable"
        assert _layer_changes(*layers) == await sb._engine_changes()  # type: ignore[attr-defined]


@pytest.mark.docker
async def test_docker_ends_processes_from_inside_without_restarting_the_container() -> None:
    # A restart races Docker 20.10's AutoRemove (the container could be removed as it was
    # restarted, under load): the processes are now killed from inside, the container kept.
    async with get_runtime(DOCKER).sandbox() as sb:
        started = (await sb._container.show())["State"]["StartedAt"]  # type: ignore[attr-defined]
        assert (await sb.exec(f"echo kept > notes.txt; {DAEMON} {DAEMON} sleep 0.3")).ok
        assert len(await sb._processes()) > 2  # type: ignore[attr-defined]
        assert await sb.end_processes() == 1
        assert len(await sb._processes()) == 2  # type: ignore[attr-defined]  # init and keeper
        assert (await sb._container.show())["State"]["StartedAt"] == started  # type: ignore[attr-defined]
        assert await sb.read("notes.txt") == b"kept\n"


@pytest.mark.docker
async def test_docker_restarts_the_container_when_the_kill_pass_leaves_a_process() -> None:
    # An image whose shell skips the kill pass (as a replaced /bin/sh could): the restart,
    # the last resort, still ends every process.
    skipping = '#!/usr/bin/dash\ncase "$2" in *keeper=*) exit 0 ;; esac\nexec /usr/bin/dash "$@"\n'
    async with get_runtime(DOCKER).sandbox() as sb:
        started = (await sb._container.show())["State"]["StartedAt"]  # type: ignore[attr-defined]
        replace = "rm /usr/bin/sh && cat > /usr/bin/sh && chmod 755 /usr/bin/sh"
        assert (await sb.exec(replace, user="0", stdin=skipping)).ok
        assert (await sb.exec(f"{DAEMON} sleep 0.3")).ok
        assert await sb.end_processes() == 1
        assert len(await sb._processes()) == 2  # type: ignore[attr-defined]
        assert (await sb._container.show())["State"]["StartedAt"] != started  # type: ignore[attr-defined]
