"""The python environment's sandbox (`harness.runtimes`, one per call): what model code can and cannot reach."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path

import pytest

from envs.reference import _python_env as python_env
from envs.reference._sandbox import CodeRunner, SandboxLimits, run_code
from harness import Message
from harness.runtimes import RuntimeUnavailableError, prune
from harness.runtimes._state import state_root
from tests.harness.runtimes.conftest import DOCKER, TEST_ROOTFS, run_without_cgroups

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

REPO = Path(__file__).resolve().parents[3]


def _marker() -> str:
    return f"rubric-canary-{uuid.uuid4().hex}"


def _processes_with(marker: str) -> list[int]:
    """Host processes whose command line contains `marker` (zombies do not count)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (
                marker.encode() in (entry / "cmdline").read_bytes()
                and "State:\tZ" not in (entry / "status").read_text()
            ):
                found.append(int(entry.name))
        except OSError:
            continue
    return found


async def _gone(marker: str, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while _processes_with(marker):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


def _sleeper(marker: str, seconds: int = 60) -> str:
    """Code that starts a detached (setsid) child sleeping with `marker` in its command line."""
    return (
        "import subprocess, sys\n"
        f"subprocess.Popen([sys.executable, '-c', 'import time; time.sleep({seconds})', {marker!r}],\n"
        "                 start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
        "print('started', flush=True)\n"
    )


# The attacks run three ways: the default (a fresh bwrap sandbox over the host's system per
# call, with the harness's interpreter mounted), a fresh bwrap sandbox over a root filesystem
# folder per call (its own python3), and a fresh Docker container per call.
RUNTIMES = [
    pytest.param(None, id="default"),
    pytest.param(f"bwrap:{TEST_ROOTFS}", id="bwrap-rootfs"),
    pytest.param(DOCKER, id="docker", marks=pytest.mark.docker),
]


@pytest.fixture(params=RUNTIMES)
def runtime(request: pytest.FixtureRequest) -> str | None:
    return request.param  # type: ignore[no-any-return]


def _host_file_seen(path: str) -> str:
    """Code printing whether the sandbox sees the host's own `path` (same bytes), not just a file
    of that name (a container image has its own /etc/shadow)."""
    try:
        digest = __import__("hashlib").sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        digest = "absent-on-host"
    return (
        f"(lambda p: __import__('os').access(p, 4) and __import__('hashlib').sha256(open(p, 'rb').read())"
        f".hexdigest() == {digest!r})({path!r})"
    )


# ----------------------------------------------------------------------------- basics


async def test_runs_code_in_a_scratch_folder_and_reports_errors(runtime: str | None):
    result = await run_code("import os\nprint(6 * 7)\nprint(os.getcwd())", runtime=runtime)
    assert result.output.split() == ["42", "/tmp"] and result.returncode == 0
    assert (await run_code("x = 1", runtime=runtime)).render() == "(no output)"
    text = (await run_code("def f():\n    return 1 / 0\nf()", runtime=runtime)).render()
    assert "ZeroDivisionError: division by zero" in text and text.endswith("[exit code 1]")
    assert 'File "<cell>", line 3' in text and "exec(" not in text
    assert (await run_code("import sys; sys.exit(3)", runtime=runtime)).render() == "[exit code 3]"


async def test_output_is_truncated_and_says_so(runtime: str | None):
    result = await run_code("print('x' * 100000)", SandboxLimits(output_limit=100), runtime=runtime)
    assert result.truncated and result.total_bytes == 100001 and result.output == "x" * 100
    assert result.render().endswith("[output truncated: showing the first 100 of 100001 bytes]")


async def test_runs_are_concurrent():
    started = time.monotonic()
    results = await asyncio.gather(*(run_code("import time; time.sleep(1); print('done')") for _ in range(4)))
    assert [r.output.strip() for r in results] == ["done"] * 4
    assert time.monotonic() - started < 3.5  # four 1 s sleeps overlap


def test_bad_limits():
    with pytest.raises(ValueError, match="timeout must be > 0"):
        SandboxLimits(timeout=0)
    with pytest.raises(ValueError, match="output_limit"):
        SandboxLimits(output_limit=0)
    with pytest.raises(ValueError, match="max_processes"):
        SandboxLimits(max_processes=1)


# ----------------------------------------------------------------------------- secrets and files


async def test_parent_secrets_and_host_files_are_invisible(
    monkeypatch: pytest.MonkeyPatch, runtime: str | None
):
    canary = _marker()
    monkeypatch.setenv("OPENAI_API_KEY", canary)
    code = textwrap.dedent(
        f"""
        import os, glob
        seen = [repr(dict(os.environ))]
        for path in glob.glob('/proc/*/environ') + ['/proc/{os.getpid()}/environ', '/proc/{os.getppid()}/environ']:
            try:
                seen.append(open(path, 'rb').read().decode(errors='replace'))
            except OSError:
                pass
        print({canary!r} in ''.join(seen), {_host_file_seen("/etc/shadow")}, os.path.exists({str(REPO)!r}),
              {_host_file_seen(os.path.expanduser("~root/.bashrc"))}, sorted(os.listdir('/proc'))[-3:])
        """
    )
    result = await run_code(code, runtime=runtime)
    found, shadow, repo, home, _pids = result.output.split(maxsplit=4)
    assert (found, shadow, repo, home) == ("False", "False", "False", "False"), result.output


async def test_writes_outside_scratch_fail_and_change_nothing(tmp_path: Path, runtime: str | None):
    target = REPO / "rubrics" / "__init__.py"
    before = target.read_bytes()
    code = textwrap.dedent(
        f"""
        import sys
        for path in [{str(target)!r}, sys.executable, '/usr/lib/rubric-canary', {str(tmp_path / "x")!r}]:
            try:
                open(path, 'a').write('pwned')
                print('WROTE', path)
            except OSError as exc:
                print('refused', type(exc).__name__)
        open('/tmp/ok', 'w').write('scratch is writable'); print(open('/tmp/ok').read())
        """
    )
    result = await run_code(code, runtime=runtime)
    assert "WROTE" not in result.output and "scratch is writable" in result.output
    assert target.read_bytes() == before and not (tmp_path / "x").exists()


async def test_other_calls_and_rollouts_see_nothing_of_each_other(runtime: str | None):
    box = CodeRunner(runtime=runtime)
    writer = "open('/tmp/secret.txt', 'w').write('a'); import time; time.sleep(1.5); print('wrote')"
    reader = "import os, time; time.sleep(0.5); print(sorted(os.listdir('/tmp')))"
    wrote, read = await asyncio.gather(box.run(writer), CodeRunner(runtime=runtime).run(reader))
    assert wrote.output.strip() == "wrote" and read.output.strip() == "[]"
    assert (await box.run("import os; print(os.listdir('.'))")).output.strip() == "[]"  # nothing survives


async def test_no_network_unless_the_environment_opts_in(runtime: str | None):
    server = socket.create_server(("127.0.0.1", 0))
    port = server.getsockname()[1]
    code = (
        "import socket\n"
        f"try:\n    socket.create_connection(('127.0.0.1', {port}), timeout=2); print('connected')\n"
        "except OSError as exc:\n    print('refused', type(exc).__name__)\n"
    )
    try:
        assert (await run_code(code, runtime=runtime)).output.startswith("refused")
        assert (await CodeRunner(network=True, runtime=runtime).run(code)).output.strip() == "connected"
    finally:
        server.close()


# ----------------------------------------------------------------------------- processes


async def test_cannot_kill_the_harness(runtime: str | None):
    code = textwrap.dedent(
        f"""
        import os, signal
        print('ppid', os.getppid(), flush=True)
        for pid in ({os.getpid()}, {os.getppid()}):  # the harness and its parent, by host pid
            try:
                os.kill(pid, signal.SIGKILL); print('killed', pid, flush=True)
            except OSError as exc:
                print('refused', type(exc).__name__, flush=True)
        # The namespace's init (its own, not ours), or with ppid 0 (entered by nsenter or docker
        # exec) kill(0): its own process group, i.e. itself.
        os.kill(os.getppid(), signal.SIGKILL)
        print('still here')
        """
    )
    result = await run_code(code, runtime=runtime)
    lines = result.output.splitlines()
    # ppid 1: the namespace's init; 0: entered from outside it (nsenter, docker exec)
    assert lines[0] in ("ppid 1", "ppid 0") and lines[1:3] == ["refused ProcessLookupError"] * 2, (
        result.render()
    )


async def test_setsid_background_process_does_not_survive_the_call(runtime: str | None):
    marker = _marker()
    result = await run_code(_sleeper(marker), SandboxLimits(timeout=10), runtime=runtime)
    assert result.output.strip() == "started" and result.returncode == 0
    assert await _gone(marker), "a setsid child outlived the call"


async def test_timeout_kills_the_whole_tree(runtime: str | None):
    marker = _marker()
    started = time.monotonic()
    result = await run_code(
        _sleeper(marker) + "while True:\n    pass\n", SandboxLimits(timeout=1.5), runtime=runtime
    )
    assert result.timed_out and result.output.startswith("started") and time.monotonic() - started < 6
    assert "[timed out after 1.5 s; the process was killed]" in result.render()
    assert await _gone(marker)


def test_killing_the_harness_kills_the_sandbox(tmp_path: Path, runtime: str | None):
    marker = _marker()
    script = tmp_path / "run_one.py"
    script.write_text(
        "import asyncio\nfrom envs.reference._sandbox import run_code, SandboxLimits\n"
        f"asyncio.run(run_code({_sleeper(marker) + 'import time; time.sleep(60)'!r}, SandboxLimits(timeout=60), runtime={runtime!r}))\n"
    )
    harness = subprocess.Popen([sys.executable, str(script)], cwd=REPO)
    try:
        deadline = time.monotonic() + 20
        while len(_processes_with(marker)) < 1 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _processes_with(marker), "the sandboxed child never started"
    finally:
        harness.send_signal(signal.SIGKILL)
        harness.wait(5)
    assert asyncio.run(_gone(marker)), "the sandbox outlived a SIGKILLed harness"


async def test_fork_bomb_is_capped(runtime: str | None):
    code = textwrap.dedent(
        """
        import os, time
        made = 0
        for _ in range(200):
            try:
                pid = os.fork()
            except OSError:
                break
            if pid == 0:
                time.sleep(2)
                os._exit(0)
            made += 1
        print(made)
        """
    )
    result = await run_code(code, SandboxLimits(max_processes=16, timeout=15), runtime=runtime)
    assert 0 < int(result.output.split()[-1]) < 16, result.render()


async def test_memory_bomb_across_processes_is_capped(runtime: str | None):
    # Six children each try to hold 150 MB under a 256 MB limit (one process alone is allowed).
    code = textwrap.dedent(
        """
        import os, sys, time
        for _ in range(6):
            if os.fork() == 0:
                try:
                    block = b'x' * (150 << 20)
                    print('held', flush=True)
                    time.sleep(3)
                    print('kept', flush=True)  # still alive, still holding, after every allocation
                except MemoryError:
                    pass
                os._exit(0)
        while True:
            try:
                os.wait()
            except ChildProcessError:
                break
        """
    )
    limits = SandboxLimits(memory_mb=256, timeout=30)
    result = await run_code(code, limits, runtime=runtime)
    # "held" counts allocations that succeeded at some moment: the cgroup's OOM killer may have
    # taken an earlier holder to make room. "kept" counts the blocks held at once, at the end.
    kept = result.output.count("kept")
    assert kept * 150 <= limits.memory_mb, result.render()
    single = await run_code("block = b'x' * (1 << 30)\nprint('allocated')", limits, runtime=runtime)
    assert "MemoryError" in single.output and "allocated" not in single.output


async def test_disk_bomb_is_capped_and_leaves_nothing(runtime: str | None):
    code = textwrap.dedent(
        """
        written = 0
        try:
            with open('/tmp/big', 'wb') as f:
                for _ in range(1024):
                    f.write(b'x' * (1 << 20)); f.flush(); written += 1
        except OSError as exc:
            print('stopped', type(exc).__name__)
        print(written)
        """
    )
    started = time.monotonic()
    result = await run_code(code, SandboxLimits(disk_mb=32, timeout=20), runtime=runtime)
    assert "stopped" in result.output and int(result.output.split()[-1]) <= 32, result.render()
    assert time.monotonic() - started < 15


async def test_cpu_limit_kills_a_busy_loop(runtime: str | None):
    result = await run_code(
        "while True:\n    pass", SandboxLimits(timeout=20, cpu_seconds=1), runtime=runtime
    )
    assert not result.timed_out and result.returncode is not None and result.returncode < 0
    assert "SIGXCPU" in result.render() or "SIGKILL" in result.render()


# ----------------------------------------------------------------------------- without bubblewrap


def test_missing_bubblewrap_refuses_to_build_with_the_install_line(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(RuntimeUnavailableError) as caught:
        python_env.load_environment(num_examples=1)
    message = str(caught.value)
    assert "\n" not in message and "apt-get install bubblewrap" in message
    assert "unsafe_sandbox=True" in message


def test_root_without_a_cgroup_refuses_to_build():
    """As root with no cgroup to make, the kernel would not cap the code's processes: the
    environment refuses to build, in one line naming the fix (and builds with unsafe_sandbox)."""
    probe = textwrap.dedent(
        """
        from envs.reference._python_env import load_environment
        from harness.runtimes import RuntimeUnavailableError
        try:
            load_environment(num_examples=1)
        except RuntimeUnavailableError as exc:
            print("refused:", exc)
        print("unsafe:", load_environment(num_examples=1, unsafe_sandbox=True).runner.describe())
        """
    )
    done = run_without_cgroups(probe)
    refused, unsafe = done.stdout.splitlines()
    assert "runs as root" in refused and "writable cgroup" in refused and "unsafe_sandbox=True" in refused
    assert unsafe.startswith("unsafe: a fresh sandbox per call: local"), done.stderr


def test_unsafe_opt_out_runs_and_warns_on_every_run(capsys: pytest.CaptureFixture[str]):
    env = python_env.load_environment(num_examples=2, unsafe_sandbox=True)
    assert "WITHOUT isolation" in capsys.readouterr().err
    env.get_dataset()
    assert "WITHOUT isolation" in capsys.readouterr().err
    code = "import os, tempfile; print(os.getcwd()); print(tempfile.gettempdir())"
    result = asyncio.run(env.runner.run(code))
    workdir, temporary = (Path(line) for line in result.output.split())
    assert workdir.parent.parent == state_root() and temporary == workdir and not workdir.parent.exists()


def test_scratch_folders_of_killed_unsafe_runs_are_pruned(tmp_path: Path):
    """A SIGKILLed run leaves its unsafe scratch folder (nothing isolates an unsafe run, so
    nothing ends with it); `prune` (which `rubric eval` runs at start) removes the folder."""
    marker = _marker()
    code = f"import subprocess, sys\nsubprocess.run([sys.executable, '-c', 'import time; time.sleep(30)', {marker!r}])"
    script = tmp_path / "run_one.py"
    script.write_text(
        "import asyncio\nfrom envs.reference._sandbox import run_code, SandboxLimits\n"
        f"asyncio.run(run_code({code!r}, SandboxLimits(timeout=60), unsafe=True))\n"
    )
    harness = subprocess.Popen([sys.executable, str(script)], cwd=REPO, stderr=subprocess.DEVNULL)
    try:
        deadline = time.monotonic() + 20
        while not _processes_with(marker) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _processes_with(marker), "the unsafe run never started"
    finally:
        harness.send_signal(signal.SIGKILL)
        harness.wait(5)
    try:
        left = [r for r in prune(docker=False) if r["owner"] == str(harness.pid)]
        assert [(r["kind"], r["removed"]) for r in left] == [("local", "True")]
        assert not list(state_root().glob(f"rubric-sandbox-{harness.pid}-*"))
    finally:  # the orphans an unsafe run leaves: the program and its child
        for pid in _processes_with(marker):
            with contextlib.suppress(OSError):
                parent = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1]
                if b"<cell>" in Path(f"/proc/{parent}/cmdline").read_bytes():  # the bootstrap
                    os.kill(int(parent), signal.SIGKILL)
                os.kill(pid, signal.SIGKILL)


# ----------------------------------------------------------------------------- environment


async def test_tool_calls_per_turn_are_capped():
    env = python_env.load_environment(num_examples=1, max_tool_calls=2)
    rollout = await env.setup_rollout(env.get_dataset()[0])
    calls = [
        {
            "id": f"c{i}",
            "type": "function",
            "function": {"name": "run_python", "arguments": '{"code": "print(1)"}'},
        }
        for i in range(5)
    ]
    rollout.completion.append(
        Message.model_validate({"role": "assistant", "content": None, "tool_calls": calls})
    )
    replies = await env.respond(rollout)
    assert [r.tool_call_id for r in replies] == [f"c{i}" for i in range(5)]
    assert [r.text for r in replies[:2]] == ["1", "1"] and rollout.state["python_runs"] == 2
    assert all("at most 2 tool calls run per turn" in r.text for r in replies[2:])


# ----------------------------------------------------------------------------- a base (non-venv) install


def test_a_base_install_answer_key_and_packages_are_invisible(tmp_path: Path) -> None:
    """pip into a base interpreter puts datasets/ under <prefix>/share/rubric and the project in
    its site-packages, both inside the interpreter's own tree. Made real in a private mount
    namespace (the real interpreter is untouched), the sandbox must still show neither."""
    prefix = Path(os.path.realpath(sys.base_prefix))
    share, packages = prefix / "share", Path(os.path.realpath(os.path.dirname(os.__file__))) / "site-packages"
    assert share.is_dir() and packages.is_dir(), (share, packages)
    key = share / "rubric" / "datasets" / "python_questions.jsonl"
    envs_dir = packages / "envs"
    (tmp_path / "probe.py").write_text(
        textwrap.dedent(
            f"""
            import asyncio, os
            from envs.reference._sandbox import run_code
            print("host", open({str(key)!r}).read().strip(), os.path.isdir({str(envs_dir)!r}))
            code = (
                "import os, json\\n"
                "print(os.path.exists({str(key)!r}), os.path.exists({str(envs_dir)!r}), json.dumps([1]))"
            )
            print("sandbox", asyncio.run(run_code(code)).output.strip())
            """
        )
    )
    script = (
        f"set -e; mount -t tmpfs tmpfs {share}; mkdir -p {key.parent}; "
        f'echo \'{{"answer": "SECRET-ANSWER-KEY"}}\' > {key}; '
        f"mount -t tmpfs tmpfs {packages}; mkdir -p {envs_dir}; "
        f"exec {sys.executable} {tmp_path / 'probe.py'}"
    )
    done = subprocess.run(
        ["unshare", "--mount", "--map-root-user", "sh", "-c", script],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr
    host, inside = done.stdout.strip().splitlines()
    assert host == 'host {"answer": "SECRET-ANSWER-KEY"} True'  # the layout is there for the host...
    assert inside == "sandbox False False [1]"  # ...not for model code, which still runs
    assert "SECRET" not in inside
