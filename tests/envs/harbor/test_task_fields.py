"""task.toml fields beyond 1.0: each honoured in real sandboxes, or refused naming the field (issues 48.1, 48.2, 47.5)."""

from __future__ import annotations

import contextlib
import json
import math
import os
import subprocess
import threading
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

from envs import from_harbor
from envs._harbor import HarborEnvironment, HarborTaskError, load_task
from harness import ConfigError
from harness._core.aio import run_sync
from harness._core.types import Rollout
from harness.runtimes import SandboxConfig, get_runtime
from harness.scripted import ShellScript
from tests.envs.agents.conftest import DOCKER, left_behind
from tests.helpers.processes import run

pytestmark = [pytest.mark.agents, pytest.mark.slow]

IMAGE = "rubric-test-base:bookworm"
#: The agent's command writing the sandbox's network interfaces, one a line, to /tmp/ifaces.
IFACES = "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' > /tmp/ifaces"
#: test.sh: reward 1 when the shell test in $1 holds, else 0.
REWARD_IF = (
    "if {check}; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n"
)


def make_task(root: Path, name: str, check: str, toml: str = "", *, image: bool = True) -> Path:
    """A task whose test.sh rewards 1 when the shell test `check` holds (on the test image)."""
    folder = root / name
    (folder / "tests").mkdir(parents=True)
    head = f'[environment]\ndocker_image = "{IMAGE}"\n' if image else "[environment]\n"
    (folder / "task.toml").write_text(head + toml)
    (folder / "instruction.md").write_text(f"Task {name}.")
    (folder / "tests" / "test.sh").write_text(REWARD_IF.format(check=check))
    return folder


def refused(folder: Path) -> str:
    with pytest.raises(HarborTaskError) as said:
        load_task(folder)
    return str(said.value)


# ---------------------------------------------------------------- parsing and refusals


def test_task_name_is_the_example_id_and_env_defaults_resolve_from_the_host(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RUBRIC_TEST_SET", "from-host")
    monkeypatch.delenv("RUBRIC_TEST_UNSET", raising=False)
    toml = (
        '[task]\nname = "acme/greeter"\nkeywords = ["x"]\n[agent.env]\nA = "${RUBRIC_TEST_SET}"\n'
        'B = "${RUBRIC_TEST_UNSET:-fallback}"\nC = "pre-${RUBRIC_TEST_SET:-no}-post"\n'
    )
    folder = make_task(tmp_path, "folder-name", "true", toml)
    task = load_task(folder)
    assert task.name == "acme/greeter" and task.unknown == {}
    env = from_harbor(folder)
    assert isinstance(env, HarborEnvironment)
    sandbox = env.task_sandbox(_rollout(env))
    assert dict(sandbox.agent_env) == {"A": "from-host", "B": "fallback", "C": "pre-from-host-post"}
    (row,) = from_harbor(folder).dataset
    assert row["example_id"] == "acme/greeter"
    assert row["info"]["harbor"]["env_keys"] == {"agent": ["A", "B", "C"]}  # names, never values
    (folder / "task.toml").write_text(
        f'[environment]\ndocker_image = "{IMAGE}"\n[verifier.env]\nK = "${{RUBRIC_TEST_UNSET}}"\n'
    )
    said = refused(folder)
    assert (
        "[verifier] env.K" in said and "$RUBRIC_TEST_UNSET" in said and "${RUBRIC_TEST_UNSET:-VALUE}" in said
    )


def test_what_rubric_cannot_honour_is_refused_naming_the_field(tmp_path: Path) -> None:
    windows = make_task(tmp_path, "windows", "true", 'os = "windows"\n')
    assert '[environment] os = "windows"' in refused(windows)
    gpus = make_task(tmp_path, "gpus", "true", 'gpus = 1\ngpu_types = ["H100"]\n')
    said = refused(gpus)
    assert "[environment] gpus = 1 (gpu_types ['H100'])" in said and "cannot get one" in said
    allow = make_task(
        tmp_path, "allow", "true", '[agent]\nnetwork_mode = "allowlist"\nallowed_hosts = ["pypi.org"]\n'
    )
    said = refused(allow)
    assert '[agent] network_mode = "allowlist"' in said and "pypi.org" in said
    switch = make_task(
        tmp_path, "switch", "true", 'network_mode = "public"\n[verifier]\nnetwork_mode = "no-network"\n'
    )
    assert '[verifier] network_mode "no-network" differs from the agent\'s "public"' in refused(switch)
    newer = make_task(tmp_path, "newer", "true")
    (newer / "task.toml").write_text(f'schema_version = "2.0"\n[environment]\ndocker_image = "{IMAGE}"\n')
    assert "schema_version '2.0'" in refused(newer)
    # An allowlist of no hosts allows nothing: Harbor's no-network, honoured as such.
    empty = make_task(tmp_path, "empty", "true", 'network_mode = "allowlist"\n')
    assert load_task(empty).config.network("agent") == "no-network"
    # In a dataset, a refused task is a row whose rollouts fail with the reason; the rest run.
    env = from_harbor(tmp_path)
    assert "windows" in env.broken and "gpus" in env.broken and "empty" not in env.broken


def test_unknown_keys_are_named_in_one_warning_per_task(tmp_path: Path) -> None:
    make_task(
        tmp_path,
        "a",
        "true",
        "fancy = 1\n[agent]\nretries = 2\n[environment.healthcheck]\ncommand = 'true'\nevery = 3\n",
    )
    make_task(tmp_path, "b", "true", "[solution]\nhint = 'x'\n")
    make_task(tmp_path, "c", "true")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        env = from_harbor(tmp_path)
    lines = [str(w.message) for w in caught if "does not know" in str(w.message)]
    assert lines == [
        "Harbor task a: task.toml keys rubric does not know, ignored (kept on the rollouts' info): "
        "agent.retries, environment.fancy, environment.healthcheck.every",
        "Harbor task b: task.toml keys rubric does not know, ignored (kept on the rollouts' info): solution.hint",
    ]
    info = env.dataset[0]["info"]  # several rows of mixed info: kept as JSON text
    assert json.loads(info)["harbor"]["unknown"]["agent"] == {"retries": 2}


def test_mcp_servers_and_skills_are_refused_for_agents_that_cannot_take_them(tmp_path: Path) -> None:
    toml = '[[environment.mcp_servers]]\nname = "calc"\ntransport = "stdio"\ncommand = "python3"\n'
    make_task(tmp_path, "mcp", "true", toml)
    make_task(tmp_path, "skills", "true", 'skills_dir = "/skills"\n')
    env = from_harbor(tmp_path)
    mcp, skills = env.evaluate("scripted:harbor", agent="command:true", progress=False).rollouts
    assert "MCP servers (calc; Harbor [[environment.mcp_servers]])" in (mcp.error or ""), mcp.error
    assert "agent 'command'" in (mcp.error or "") and "codex or claude-code" in (mcp.error or "")
    assert "skills_dir = '/skills'" in (skills.error or ""), skills.error
    assert math.isnan(mcp.reward) and "sandbox" not in mcp.state  # refused before any sandbox


# ---------------------------------------------------------------- in Docker


@pytest.mark.docker
def test_verifier_secrets_reach_test_sh_only_never_the_agent_or_the_results(tmp_path: Path) -> None:
    secret = "s3cret-9f1c2e"
    # The agent dumps every variable any process in the sandbox holds, and its own.
    dump = "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\\\0' '\\\\n' > /tmp/seen; env >> /tmp/seen; echo $GREETING > /tmp/greeting"
    check = '[ -n "$API_TOKEN" ] && ! grep -qF "$API_TOKEN" /tmp/seen && [ "$(cat /tmp/greeting)" = hello ]'
    toml = (
        '[verifier.env]\nAPI_TOKEN = "${RUBRIC_TEST_SECRET}"\n'
        '[agent.env]\nGREETING = "${RUBRIC_TEST_GREETING_UNSET:-hello}"\n'
    )
    make_task(tmp_path / "tasks", "secret", check, toml)
    out = tmp_path / "out"
    done = run(
        "eval", f"harbor:{tmp_path / 'tasks'}", "--agent", f"command:{dump}", "-o", str(out), "--no-progress",
        cwd=tmp_path, env={"RUBRIC_TEST_SECRET": secret}, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (row,) = [json.loads(line) for line in (out / "results.jsonl").read_text().splitlines()]
    assert row["reward"] == 1.0, row.get("error") or row["score_details"]
    saved = [p for p in out.rglob("*") if p.is_file()]
    assert saved and not [p for p in saved if secret in p.read_text(errors="replace")]
    assert secret not in done.stdout + done.stderr
    assert left_behind(DOCKER) == []


@pytest.mark.docker
def test_agent_user_workdir_and_a_healthcheck_passing_after_retries(tmp_path: Path) -> None:
    """[agent] user runs the agent as that OS user, [verifier] user test.sh as its own;
    [environment] workdir is where it starts;
    the healthcheck fails twice, passes the third time, and only then does the agent run."""
    probe = "n=$(cat /tmp/n 2>/dev/null || echo 0); echo $((n+1)) > /tmp/n; [ $n -ge 2 ]"
    toml = (
        'workdir = "/srv/work"\n[environment.healthcheck]\n'
        f"command = '{probe}'\ninterval_sec = 0.1\nretries = 3\n[agent]\nuser = \"nobody\"\n"
        '[verifier]\nuser = "daemon"\n'
    )
    check = '[ "$(id -u)" = 1 ] && [ "$(cat /tmp/uid)" = 65534 ] && [ "$(cat /tmp/pwd)" = /srv/work ] && [ "$(cat /tmp/n)" = 3 ]'
    env = from_harbor(make_task(tmp_path, "user", check, toml))
    (rollout,) = env.evaluate("scripted:harbor", agent="command:id -u > /tmp/uid; pwd > /tmp/pwd", progress=False).rollouts  # fmt: skip
    assert rollout.error is None and rollout.reward == 1.0, rollout.error or rollout.score_details
    assert left_behind(DOCKER) == []


@pytest.mark.docker
def test_a_failing_healthcheck_fails_the_rollout_and_no_agent_runs(tmp_path: Path) -> None:
    toml = "[environment.healthcheck]\ncommand = 'echo not ready >&2; false'\ninterval_sec = 0\nretries = 2\n"
    env = from_harbor(make_task(tmp_path, "unhealthy", "true", toml))
    (rollout,) = env.evaluate("scripted:harbor", agent="command:touch /tmp/ran", progress=False).rollouts
    assert math.isnan(rollout.reward) and rollout.error is not None
    assert "[environment.healthcheck] 'echo not ready >&2; false' failed 2 time(s) in a row" in rollout.error
    assert "not ready" in rollout.error and "the agent did not start" in rollout.error
    assert "command" not in rollout.state.get("agent", {})  # the agent was never started
    assert left_behind(DOCKER) == []


@pytest.mark.docker
def test_network_mode_is_what_the_docker_sandbox_is_given_at_agent_time(tmp_path: Path) -> None:
    """public: Docker's bridge network (this daemon has no bridge, so only the container's
    NetworkMode can show it); no-network (or allow_internet = false): NetworkMode none and no
    interface but loopback while the agent runs."""
    only_lo = '[ "$(cat /tmp/ifaces)" = lo ]'
    make_task(tmp_path, "closed", only_lo, 'network_mode = "no-network"\nenv = { MARK = "closed" }\n')
    make_task(tmp_path, "legacy", only_lo, 'allow_internet = false\nenv = { MARK = "legacy" }\n')
    make_task(tmp_path, "open", "true", 'env = { MARK = "open" }\n')
    env = from_harbor(tmp_path)
    with _network_modes() as modes:
        rollouts = env.evaluate(
            "scripted:harbor", agent=f"command:{IFACES}; sleep 2", progress=False
        ).rollouts
    assert [r.example_id for r in rollouts] == ["closed", "legacy", "open"]
    assert [r.reward for r in rollouts] == [1.0, 1.0, 1.0], [r.error or r.score_details for r in rollouts]
    assert modes == {"closed": "none", "legacy": "none", "open": "bridge"}
    assert [r.state["sandbox"] for r in rollouts] == [
        {"network": "none"},
        {"network": "none"},
        {"network": "bridge"},
    ]
    assert left_behind(DOCKER) == []


@contextlib.contextmanager
def _network_modes() -> Iterator[dict[str, str]]:
    """While the block runs, each of this process's containers' NetworkMode, by its MARK variable."""
    modes: dict[str, str] = {}
    done = threading.Event()

    def watch() -> None:
        while not done.wait(0.2):
            listed = subprocess.run(
                ["docker", "ps", "-q", "--filter", f"label=rubric.owner={os.getpid()}"],
                capture_output=True, text=True, timeout=30,
            ).stdout.split()  # fmt: skip
            for container in listed:
                seen = subprocess.run(
                    ["docker", "inspect", "-f", "{{.HostConfig.NetworkMode}} {{json .Config.Env}}", container],
                    capture_output=True, text=True, timeout=30,
                ).stdout.split(" ", 1)  # fmt: skip
                if len(seen) == 2:
                    marks = [v.split("=", 1)[1] for v in json.loads(seen[1]) if v.startswith("MARK=")]
                    modes.update(dict.fromkeys(marks, seen[0]))

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield modes
    finally:
        done.set()
        watcher.join()


@pytest.mark.docker
def test_build_timeout_sec_bounds_the_image_build(tmp_path: Path) -> None:
    folder = make_task(tmp_path, "slow-build", "true", "build_timeout_sec = 2\n", image=False)
    (folder / "environment").mkdir()
    (folder / "environment" / "Dockerfile").write_text(f"FROM {IMAGE}\nRUN sleep 60\n")
    env = from_harbor(folder)
    (rollout,) = env.evaluate("scripted:harbor", agent="command:true", progress=False).rollouts
    assert "ran past its 2 s build timeout" in (rollout.error or ""), rollout.error
    assert str(folder / "environment") in (rollout.error or "")


# ---------------------------------------------------------------- in bwrap


@pytest.mark.bwrap
def test_network_mode_in_bwrap_none_enforced_and_public_said_not_given(tmp_path: Path) -> None:
    make_task(tmp_path, "closed", '[ "$(cat /tmp/ifaces)" = lo ]', 'network_mode = "no-network"\n')
    make_task(tmp_path, "open", '[ "$(cat /tmp/ifaces)" = lo ]')
    env = from_harbor(tmp_path)
    with pytest.warns(UserWarning) as caught:
        rollouts = env.evaluate(
            "scripted:harbor", agent=f"command:{IFACES}", runtime="bwrap", progress=False
        ).rollouts
    said = [str(w.message) for w in caught if "asks for a network" in str(w.message)]
    assert len(said) == 1 and said[0].startswith("task open asks for a network (network_mode public")
    assert [r.reward for r in rollouts] == [1.0, 1.0], [r.error for r in rollouts]
    assert [r.state["sandbox"] for r in rollouts] == [
        {"network": "none"},
        {"network": "none", "asked": "public"},
    ]
    assert left_behind() == []


def _rollout(env: HarborEnvironment) -> Rollout:
    """A rollout of `env`'s first row."""
    row = env.dataset[0]
    return Rollout(example_id=row["example_id"], info=row["info"])


# ---------------------------------------------------------------- MCP servers and skills, with the published agents

#: A stdio MCP server (JSON-RPC lines, standard library only) offering one tool, `add`.
MCP_SERVER = r"""
import json, sys
for line in sys.stdin:
    msg = json.loads(line)
    if "id" not in msg:
        continue
    method, result = msg["method"], None
    if method == "initialize":
        result = {"protocolVersion": msg["params"].get("protocolVersion", "2025-06-18"),
                  "capabilities": {"tools": {}}, "serverInfo": {"name": "calc", "version": "1"}}
    elif method == "tools/list":
        result = {"tools": [{"name": "add", "description": "Add two numbers.", "inputSchema":
                  {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}]}
    elif method == "tools/call":
        result = {"content": [{"type": "text", "text": "3"}]}
    reply = {"result": result} if result is not None else {"error": {"code": -32601, "message": method}}
    print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], **reply}), flush=True)
"""


@pytest.mark.docker
@pytest.mark.parametrize(("agent", "skills"), [("claude-code", ".claude/skills"), ("codex", ".codex/skills")])
def test_published_agents_take_the_tasks_mcp_servers_and_skills(
    tmp_path: Path, agent: str, skills: str
) -> None:
    """The task's stdio MCP server is registered (its tool is among those the agent offers the
    model), and its skills folder is installed where the agent reads skills."""
    toml = (
        'skills_dir = "/skills"\n[[environment.mcp_servers]]\nname = "calc"\ntransport = "stdio"\n'
        f'command = "python3"\nargs = ["-c", {json.dumps(MCP_SERVER)}]\n'
    )
    folder = make_task(tmp_path, "tools", 'grep -q "Say hello" /tmp/skill', toml, image=False)
    (folder / "environment" / "skills" / "greet").mkdir(parents=True)
    (folder / "environment" / "Dockerfile").write_text(f"FROM {IMAGE}\nCOPY skills /skills\n")
    skill = "---\nname: greet\ndescription: Greets people.\n---\nSay hello.\n"
    (folder / "environment" / "skills" / "greet" / "SKILL.md").write_text(skill)
    env = from_harbor(folder)
    env.scripted_policies = {"read": ShellScript([f"cat $HOME/{skills}/greet/SKILL.md > /tmp/skill"], "done")}
    (rollout,) = env.evaluate("scripted:read", agent=agent, progress=False).rollouts
    assert rollout.error is None and rollout.reward == 1.0, rollout.error or rollout.score_details
    offered = {tool.get("function", {}).get("name") for c in rollout.model_calls for tool in c.tools}
    # Codex offers an MCP server as a Responses namespace, which a Chat Completions upstream
    # cannot express: the proxy records it among what it left out.
    dropped = {item for c in rollout.model_calls for item in c.dropped}
    assert "mcp__calc__add" in offered or any("(namespace 'mcp__calc')" in d for d in dropped), (
        offered,
        dropped,
    )
    assert left_behind(DOCKER) == []


# ---------------------------------------------------------------- rubric init --harbor, rubric check


@pytest.mark.docker
def test_init_names_an_org_task_and_check_passes_it_with_the_new_fields(tmp_path: Path) -> None:
    """`rubric init org/NAME --harbor` writes `[task] name = "org/NAME"` in folder NAME; `rubric
    check` reports it by that name, and its probes play a task giving MCP servers, skills and a
    healthcheck (they call no model: nothing to register)."""
    made = run(
        "init", "acme/my-task", "--harbor", "--base-image", IMAGE, "--dir", str(tmp_path), cwd=tmp_path
    )
    assert made.returncode == 0, made.stderr
    folder = tmp_path / "my-task"
    assert f"next: rubric check {folder}" in made.stdout
    task = load_task(folder)
    assert task.name == "acme/my-task" and task.config.schema_version == "1.1" and task.unknown == {}
    with (folder / "task.toml").open("a") as toml:
        toml.write('skills_dir = "/tmp"\n[environment.healthcheck]\ncommand = "test -d /app"\n')
        toml.write('[[environment.mcp_servers]]\nname = "calc"\ntransport = "stdio"\ncommand = "python3"\n')
    checked = run("check", str(folder), cwd=tmp_path, timeout=300)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    for name in ("oracle", "do-nothing", "image-leak", "planted-reward"):
        assert f"ok   acme/my-task: {name}" in checked.stdout, checked.stdout


@pytest.mark.bwrap
def test_a_bwrap_sandbox_refuses_a_network_of_its_own() -> None:
    with pytest.raises(ConfigError, match=r"a bwrap sandbox has no network of its own \(network 'bridge'\)"):
        run_sync(get_runtime("bwrap").open(SandboxConfig(network="bridge")))
    assert left_behind() == []


@pytest.mark.docker
def test_solution_env_reaches_the_oracles_solve_sh_and_not_its_recorded_command(tmp_path: Path) -> None:
    toml = '[solution.env]\nWORD = "${RUBRIC_TEST_UNSET_WORD:-w0rd-from-default}"\n'
    folder = make_task(tmp_path, "solved", '[ "$(cat /tmp/word)" = w0rd-from-default ]', toml)
    (folder / "solution").mkdir()
    (folder / "solution" / "solve.sh").write_text('echo "$WORD" > /tmp/word\n')
    (rollout,) = from_harbor(folder).evaluate("scripted:harbor", agent="oracle", progress=False).rollouts
    assert rollout.error is None and rollout.reward == 1.0, rollout.error or rollout.score_details
    assert "w0rd-from-default" not in rollout.model_dump_json()
    assert left_behind(DOCKER) == []


@pytest.mark.bwrap
def test_an_agent_user_bwrap_cannot_run_as_fails_the_rollout_naming_the_field(tmp_path: Path) -> None:
    folder = make_task(tmp_path, "user", "true", 'allow_internet = false\n[agent]\nuser = "nobody"\n')
    env = from_harbor(folder)
    with pytest.warns(UserWarning, match="replaces the image"):
        (rollout,) = env.evaluate(
            "scripted:harbor", agent="command:true", runtime="bwrap", progress=False
        ).rollouts
    assert "the agent cannot run as the task's user 'nobody' (Harbor [agent] user): bwrap sandboxes" in (
        rollout.error or ""
    )
    assert left_behind() == []
