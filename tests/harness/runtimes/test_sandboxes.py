"""harness.runtimes: the one sandbox interface, the same tests on bwrap, Docker and local."""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest
import uvloop

from harness import ConfigError
from harness.runtimes import SandboxConfig, SandboxError, get_runtime, list_sandboxes
from harness.runtimes._state import state_folders
from tests.harness.runtimes.conftest import ALL, ISOLATING

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]


@pytest.mark.parametrize("spec", ALL)
async def test_exec_argv_shell_env_cwd_and_exit_codes(spec: str) -> None:
    async with get_runtime(spec).sandbox(env={"GREETING": "hello"}) as sb:
        done = await sb.exec(
            ["sh", "-c", 'echo "$GREETING $EXTRA"; echo oops >&2; exit 3'], env={"EXTRA": "x"}
        )
        assert (done.exit_code, done.stdout, done.stderr, done.timed_out) == (3, "hello x\n", "oops\n", False)
        assert done.duration > 0 and not done.ok
        await sb.exec("mkdir -p sub/dir")
        assert (await sb.exec("pwd", cwd="sub/dir")).stdout.strip() == f"{sb.workdir}/sub/dir"
        missing = await sb.exec(["no-such-command-here"])
        assert missing.exit_code == 127 and "no-such-command-here" in missing.stderr
        assert (await sb.exec("cat", stdin="fed")).stdout == "fed"
        assert (await sb.exec("kill -9 $$")).exit_code == -9
        with pytest.raises(SandboxError, match="working directory"):
            await sb.exec("true", cwd="/no/such/dir")


@pytest.mark.parametrize("spec", ALL)
async def test_state_persists_between_commands(spec: str) -> None:
    """One machine for the sandbox's whole life: files and background processes stay."""
    async with get_runtime(spec).sandbox() as sb:
        await sb.exec("echo 1 > counter; sleep 30 > /dev/null 2>&1 & echo $! > bg.pid")
        assert (await sb.exec("cat counter")).stdout == "1\n"
        assert (await sb.exec('kill -0 "$(cat bg.pid)" && echo alive')).stdout == "alive\n"


@pytest.mark.parametrize("spec", ALL)
async def test_files_and_folders_round_trip(spec: str, tmp_path: Path) -> None:
    source = tmp_path / "src"
    (source / "deep").mkdir(parents=True)
    (source / "a.txt").write_text("alpha")
    (source / "deep" / "b.bin").write_bytes(bytes(range(256)))
    async with get_runtime(spec).sandbox() as sb:
        await sb.write("notes/n.txt", "text")
        await sb.write(f"{sb.workdir}/raw.bin", b"\x00\xff")
        assert await sb.read("notes/n.txt") == b"text"
        assert await sb.read("raw.bin") == b"\x00\xff"
        with pytest.raises(SandboxError, match="cannot read 'nope.txt'"):
            await sb.read("nope.txt")
        await sb.upload(source, "repo")
        assert (await sb.exec("cat repo/a.txt; ls repo/deep")).stdout == "alphab.bin\n"
        await sb.upload(source / "a.txt", "single/copy.txt")
        assert await sb.read("single/copy.txt") == b"alpha"
        await sb.exec("echo made > repo/new.txt")
        await sb.download("repo", tmp_path / "back")
        assert (tmp_path / "back" / "new.txt").read_text() == "made\n"
        assert (tmp_path / "back" / "deep" / "b.bin").read_bytes() == bytes(range(256))
        await sb.download("notes/n.txt", tmp_path / "one.txt")
        assert (tmp_path / "one.txt").read_text() == "text"


@pytest.mark.parametrize("spec", ALL)
async def test_timeout_kills_the_command_and_what_it_started(spec: str) -> None:
    async with get_runtime(spec).sandbox() as sb:
        started = time.monotonic()
        done = await sb.exec("sleep 60 & echo $! > child.pid; sleep 60", timeout=0.5)
        assert done.timed_out and done.exit_code is None
        assert time.monotonic() - started < 5
        await asyncio.sleep(0.2)
        alive = 'p=$(cat child.pid); [ -d /proc/$p ] && ! grep -q "State:.*Z" /proc/$p/status && echo alive'
        assert (await sb.exec(alive)).stdout == ""  # gone, or a zombie not yet reaped
        assert (await sb.exec("echo still usable")).ok


@pytest.mark.parametrize("spec", ALL)
async def test_an_escaped_process_holding_the_output_does_not_hang_exec(spec: str) -> None:
    """A daemon that leaves its command's process tree (setsid, reparented) but keeps its stdout:
    the timeout still ends the call, within a bounded time."""
    async with get_runtime(spec).sandbox() as sb:
        started = time.monotonic()
        done = await sb.exec("setsid sh -c 'sleep 30' & echo started", timeout=1)
        assert done.timed_out and done.stdout == "started\n"
        assert time.monotonic() - started < 12


@pytest.mark.parametrize("spec", ["bwrap", "local"])
def test_background_process_does_not_hold_the_output_under_uvloop(spec: str) -> None:
    """uvloop (Ray workers' loop) leaves inheritable descriptors, its own stdout/stderr socket
    pairs among them, in every child: a process a command leaves in the background (the relay
    an agent's sandbox starts) must not keep the command's output open, nor see them."""

    async def main() -> tuple[float, str, str]:
        async with get_runtime(spec).sandbox() as sb:
            started = time.monotonic()
            done = await sb.exec("nohup sleep 30 > /dev/null 2>&1 & echo started", timeout=10)
            seconds = time.monotonic() - started
            relay = await sb.relay(18080 if spec == "bwrap" else _free_port())
            assert relay.startswith("http://127.0.0.1:")
            fds = await sb.exec("ls /proc/self/fd")
            return seconds, done.stdout + str(done.exit_code), fds.stdout

    seconds, said, fds = uvloop.run(main())
    assert said == "started\n0" and seconds < 5
    assert sorted(fds.split(), key=int) == ["0", "1", "2", "3"]  # 3: ls's own listing


@pytest.mark.parametrize("spec", ["bwrap", "local"])
def test_no_shell_start_up_file_runs_on_the_host_under_uvloop(spec: str, tmp_path: Path) -> None:
    """Under uvloop a command's stdin is a socket, which bash takes for a remote shell and so
    reads `~/.bashrc` (HOME is the sandbox's working directory, a path that may exist on the
    host): the closer that starts commands there must read no start-up file."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".bashrc").write_text(f"echo ran > {tmp_path / 'planted'}\n")

    async def main() -> tuple[str, str]:
        async with get_runtime(spec).sandbox(workdir=str(home)) as sb:
            fed = await sb.exec("cat", stdin="fed", env={"HOME": str(home)})
            once = await get_runtime(spec).run("cat", stdin="fed", config=sb.config)
            return fed.stdout, once.stdout

    assert uvloop.run(main()) == ("fed", "fed")
    assert not (tmp_path / "planted").exists(), "the host ran a start-up file the sandbox's HOME named"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize("spec", ISOLATING)
async def test_limits_memory_pids_and_file_size(spec: str) -> None:
    async with get_runtime(spec).sandbox(memory_mb=64, pids=24, disk_mb=4, cpus=0.5) as sb:
        hog = await sb.exec(["python3", "-c", "x = bytearray(400 << 20); print('allocated')"], timeout=30)
        assert hog.exit_code != 0 and "allocated" not in hog.stdout
        big = await sb.exec("head -c 8000000 /dev/zero > big.bin", timeout=20)
        assert big.exit_code != 0, big
        size = await sb.exec("stat -c %s big.bin")
        assert 0 < int(size.stdout) <= 4 << 20, size
        bomb = await sb.exec("for i in $(seq 60); do sleep 2 & done; wait", timeout=20)
        assert "fork" in bomb.stderr.lower() or "resource" in bomb.stderr.lower(), bomb


@pytest.fixture
def host_listener() -> Iterator[int]:
    """A TCP server on the host's 127.0.0.1: a sandbox with network none must not reach it."""
    server = socket.create_server(("127.0.0.1", 0))
    yield server.getsockname()[1]
    server.close()


@pytest.mark.parametrize("spec", ISOLATING)
async def test_network_none_reaches_nothing(spec: str, host_listener: int) -> None:
    probe = (
        "import socket, sys\n"
        "s = socket.socket(); s.settimeout(3)\n"
        "try:\n    s.connect(('127.0.0.1', int(sys.argv[1]))); print('reached')\n"
        "except OSError as e:\n    print('blocked', e)\n"
    )
    async with get_runtime(spec).sandbox() as sb:
        done = await sb.exec(["python3", "-c", probe, str(host_listener)], timeout=20)
        assert done.stdout.startswith("blocked"), done
        links = await sb.exec("cat /proc/net/dev")
        assert [line.split(":")[0].strip() for line in links.stdout.splitlines()[2:]] == ["lo"]


class _Hello(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = f"hello {self.path}".encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


class _UnixHTTPServer(HTTPServer):
    address_family = socket.AF_UNIX

    def server_bind(self) -> None:
        self.socket.bind(self.server_address)
        self.server_name, self.server_port = "sandbox", 0


@pytest.mark.parametrize("spec", ALL)
async def test_the_unix_socket_is_the_way_out(spec: str) -> None:
    """A host server on `sandbox.socket_path` answers requests from inside, directly and as
    http://127.0.0.1:PORT through the relay."""
    async with get_runtime(spec).sandbox() as sb:
        server = _UnixHTTPServer(str(sb.socket_path), _Hello)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            url = await sb.relay(18080)
            fetch = "import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())"
            done = await sb.exec(["python3", "-c", fetch, url + "/v1/models"], timeout=30)
            assert done.stdout == "hello /v1/models\n", done
            direct = await sb.exec(
                ["python3", "-c", "import socket, sys; s = socket.socket(socket.AF_UNIX); s.connect(sys.argv[1]); "
                 "s.sendall(b'GET /x HTTP/1.0\\r\\n\\r\\n'); print(s.recv(4096).split(b'\\r\\n\\r\\n')[-1].decode())",
                 sb.inside_socket_path], timeout=30)  # fmt: skip
            assert direct.stdout.strip() in ("hello /x", ""), direct
        finally:
            server.shutdown()
            server.server_close()


@pytest.mark.parametrize("spec", ALL)
async def test_fork_copies_files_and_is_independent(spec: str) -> None:
    async with get_runtime(spec).sandbox() as sb:
        await sb.write("setup.txt", "prepared")
        async with await sb.fork() as first, await sb.fork() as second:
            assert await first.read("setup.txt") == b"prepared"
            await first.write("setup.txt", "changed")
            assert await second.read("setup.txt") == b"prepared"
            assert await sb.read("setup.txt") == b"prepared"
            assert first.socket_path != sb.socket_path


@pytest.mark.parametrize("spec", ISOLATING)
@pytest.mark.parametrize("workdir", ["/work/deep/er", "/tmp/job"])
async def test_fork_copies_tmp_the_workdir_and_modes(spec: str, workdir: str) -> None:
    """A fork has the template's /tmp and working directory (nested, or inside /tmp), with
    executable bits kept, and nothing else of the template's writable layer is lost."""
    async with get_runtime(spec).sandbox(workdir=workdir) as sb:
        made = await sb.exec(
            "printf tmp > /tmp/t.txt && printf 'echo run' > run.sh && chmod +x run.sh && mkdir -p a/b && printf deep > a/b/c"
        )
        assert made.ok, made
        async with await sb.fork() as copy:
            assert await copy.read("/tmp/t.txt") == b"tmp"
            assert (await copy.exec("./run.sh")).stdout == "run\n"
            assert await copy.read("a/b/c") == b"deep"
            assert (await copy.exec("pwd")).stdout == f"{workdir}\n"


@pytest.mark.parametrize("spec", ISOLATING)
async def test_fork_copies_writes_outside_tmp_and_the_workdir(spec: str) -> None:
    """A folder made outside /tmp and the working directory (as a setup step makes `/app/out`),
    the files in it and an empty folder below it are in every fork (issue 47.4)."""
    async with get_runtime(spec).sandbox(workdir="/app/work") as sb:
        made = await sb.exec(
            "mkdir -p /app/out/empty /outside && printf hi > /app/out/a.txt && printf d > /outside/d"
        )
        assert made.ok, made
        async with await sb.fork() as copy:
            assert await copy.read("/app/out/a.txt") == b"hi"
            assert await copy.read("/outside/d") == b"d"
            assert (await copy.exec("test -d /app/out/empty && printf x > /app/out/empty/b")).ok
            assert (await sb.exec("test ! -e /app/out/empty/b")).ok  # still independent


@pytest.mark.parametrize("spec", ALL)
def test_sync_face(spec: str) -> None:
    with get_runtime(spec).sandbox() as sb:
        assert sb.exec("echo sync").stdout == "sync\n"
        sb.write("f.txt", "x")
        assert sb.read("f.txt") == b"x"
        with sb.fork() as copy:
            assert copy.read("f.txt") == b"x"


@pytest.mark.parametrize("spec", ALL)
async def test_closing_leaves_nothing_and_state_names_the_owner(spec: str) -> None:
    runtime = get_runtime(spec, run_id="run-abc")
    async with runtime.sandbox() as sb:
        folder = sb.state.directory
        assert folder in state_folders()
        mine = [r for r in list_sandboxes() if r["run"] == "run-abc"]
        assert [(r["owner"], r["alive"]) for r in mine] == [(str(os.getpid()), "True")]
    assert not folder.exists()
    assert not [r for r in list_sandboxes() if r["run"] == "run-abc"]
    with pytest.raises(SandboxError, match="closed"):
        await sb.exec("true")


@pytest.mark.parametrize("spec", ALL)
async def test_cancel_closes_the_sandbox(spec: str) -> None:
    runtime = get_runtime(spec, run_id="run-cancel")
    opened: list[Path] = []

    async def rollout() -> None:
        async with runtime.sandbox() as sb:
            opened.append(sb.state.directory)
            await sb.exec("sleep 60")

    task = asyncio.ensure_future(rollout())
    while not opened:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert not opened[0].exists()
    assert not [r for r in list_sandboxes() if r["run"] == "run-cancel"]


def test_spec_grammar(tmp_path: Path) -> None:
    assert get_runtime("local").kind_name == "local"
    assert get_runtime("bwrap").kind_name == "bwrap"
    assert get_runtime(f"bwrap:{tmp_path}").kind_name == "bwrap"
    assert get_runtime("docker:python:3.11-slim").kind_name == "docker"
    for bad, words in [("podman:x", "unknown runtime"), ("bwrap:/no/such/root", "does not exist"),
                       ("docker:./no/such/dir", "does not exist"), ("docker:", "unknown runtime")]:  # fmt: skip
        with pytest.raises(ConfigError, match=words):
            get_runtime(bad)
    with pytest.raises(ConfigError, match="no Dockerfile"):
        get_runtime(f"docker:{tmp_path}")
    with pytest.raises(ConfigError, match="network must be"):
        get_runtime("local").sandbox(network="internet")  # type: ignore[arg-type]


@pytest.mark.parametrize("spec", ISOLATING)
async def test_a_process_gets_memory_mb_whatever_the_disk_size(spec: str) -> None:
    """With the default disk size, a process holding more than `memory_mb` (less than
    `memory_mb` plus the disk) is killed, in a sandbox and in a one-command run (47.8)."""
    hog = ["python3", "-c", "b = b'x' * (300 << 20); print('held', flush=True)"]
    async with get_runtime(spec).sandbox(memory_mb=128) as sb:
        inside = await sb.exec(hog, timeout=60)
        assert inside.exit_code != 0 and "held" not in inside.stdout, inside
        assert (await sb.exec(["python3", "-c", "b = b'x' * (32 << 20); print('held')"], timeout=60)).ok
    once = await get_runtime(spec).run(hog, config=SandboxConfig(memory_mb=128), timeout=60)
    assert once.exit_code != 0 and "held" not in once.stdout, once
