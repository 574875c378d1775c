"""Published agents installed on the host once and mounted read-only into every sandbox.

`codex` (@openai/codex, Responses dialect) and `claude-code` (@anthropic-ai/claude-code,
Anthropic Messages) come from npm; both ship native binaries in platform packages (Codex a
static musl build, Claude Code a glibc one), so the sandbox needs no Node.js and no network:
`npm install` puts them in the cache folder (`RUBRIC_AGENT_CACHE`, default
~/.cache/rubric/agents; `.ci/agents-up` fills it), and the sandbox sees the package read-only.

Both take a task's MCP servers (Codex: `[mcp_servers.NAME]` in its config.toml, stdio or
streamable HTTP; Claude Code: a `--mcp-config` file) and its skills (each folder of the task's
skills folder copied into `~/.codex/skills` / `~/.claude/skills`, where they read skills).
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

from envs.agents._base import (
    HOME_DIR,
    INSTRUCTION_FILE,
    STATE_DIR,
    Agent,
    AgentContext,
    AgentError,
    McpServer,
)

MINI_SWE_PACKAGE = "mini-swe-agent==2.4.6"
CODEX_PACKAGE = "@openai/codex@0.169.0"
CLAUDE_PACKAGE = "@anthropic-ai/claude-code@2.1.197"
MINI_SWE_DIR = "/opt/rubric-mini-swe-agent"
CODEX_DIR = "/opt/rubric-codex"
CLAUDE_DIR = "/opt/rubric-claude"
#: Claude Code's MCP servers, given with --mcp-config.
CLAUDE_MCP_FILE = f"{HOME_DIR}/.rubric-mcp.json"


def cache_root() -> Path:
    """Where installed agents live on the host (`RUBRIC_AGENT_CACHE`)."""
    return Path(os.environ.get("RUBRIC_AGENT_CACHE") or Path.home() / ".cache" / "rubric" / "agents")


def npm_package(package: str, inner: str) -> Path:
    """The folder `inner` of npm `package` (name@version) in the cache, installed with npm on first use.

    Raises:
        AgentError: npm is missing or the install failed (its output is in the message).
    """
    folder = cache_root() / "npm" / package.replace("/", "+")
    target = folder / "node_modules" / inner
    if target.exists():
        return target
    try:
        done = subprocess.run(
            ["npm", "install", "--no-audit", "--no-fund", "--prefix", str(folder), package],
            capture_output=True,
            text=True,
            timeout=900,
        )
    except FileNotFoundError:
        raise AgentError(f"installing {package} needs npm on this machine (apt-get install npm)") from None
    if done.returncode != 0 or not target.exists():
        raise AgentError(f"npm install {package} into {folder} failed: {(done.stderr or done.stdout)[-800:]}")
    return target


def pip_package(requirement: str) -> Path:
    """A folder holding `requirement` (name==version) and its dependencies, for the sandbox's
    python3 (`pip install --target`, with this interpreter: the same Python version as
    Debian bookworm's and the host's), installed on first use.

    Raises:
        AgentError: the install failed (pip's output is in the message).
    """
    folder = cache_root() / "pip" / requirement
    if (folder / ".complete").exists():
        return folder
    done = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--target", str(folder), requirement],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        raise AgentError(f"pip install --target {folder} {requirement} failed: {done.stderr[-800:]}")
    (folder / ".complete").write_text(requirement)
    return folder


class MiniSweAgent(Agent):
    """mini-swe-agent (PyPI, pinned), its `mini` command line run with the sandbox's python3:
    Chat Completions through litellm (`openai/MODEL`), its `bash` tool, finished by the model
    running `echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT`; no cost map fetch, no prompts."""

    name = "mini-swe-agent"

    def mounts(self) -> dict[str, str]:
        return {str(pip_package(MINI_SWE_PACKAGE)): MINI_SWE_DIR}

    def command(self, ctx: AgentContext) -> str:
        settings = (
            f"PYTHONPATH={MINI_SWE_DIR} OPENAI_API_BASE=$OPENAI_BASE_URL MSWEA_COST_TRACKING=ignore_errors "
            "MSWEA_CONFIGURED=true MSWEA_SILENT_STARTUP=1 LITELLM_LOCAL_MODEL_COST_MAP=True"
        )
        return (
            f"{settings} python3 -m minisweagent.run.mini --yolo --exit-immediately --cost-limit 0 "
            f"--model {shlex.quote('openai/' + ctx.model)} -o {STATE_DIR}/trajectory.json "
            f'--task "$(cat {shlex.quote(INSTRUCTION_FILE)})"'
        )

    def config(self) -> dict[str, Any]:
        return {**super().config(), "package": MINI_SWE_PACKAGE}


class CodexAgent(Agent):
    """OpenAI Codex CLI (`codex exec`), pinned; Responses dialect through a config.toml provider
    (Codex ignores OPENAI_BASE_URL), its own sandboxing off (the rollout's sandbox is the box)."""

    name = "codex"
    dialect = "responses"
    inner = "@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl"
    takes_mcp_servers = True
    takes_skills = True

    def mounts(self) -> dict[str, str]:
        return {str(npm_package(CODEX_PACKAGE, self.inner)): CODEX_DIR}

    async def prepare(self, ctx: AgentContext) -> None:
        url = ctx.env["OPENAI_BASE_URL"]
        config = (
            f'model = {_toml(ctx.model)}\nmodel_provider = "rubric"\n\n[model_providers.rubric]\n'
            f'name = "rubric"\nbase_url = {_toml(url)}\nenv_key = "OPENAI_API_KEY"\nwire_api = "responses"\n'
        )
        config += "".join(_codex_mcp(server) for server in ctx.mcp_servers)
        await ctx.sandbox.write(f"{HOME_DIR}/.codex/config.toml", config)
        await install_skills(ctx, f"{HOME_DIR}/.codex/skills")

    def command(self, ctx: AgentContext) -> str:
        codex = f"{CODEX_DIR}/bin/codex"
        return (
            f"PATH={CODEX_DIR}/codex-path:$PATH {codex} exec --skip-git-repo-check "
            f'--dangerously-bypass-approvals-and-sandbox "$(cat {shlex.quote(INSTRUCTION_FILE)})"'
        )

    def config(self) -> dict[str, Any]:
        return {**super().config(), "package": CODEX_PACKAGE}


class ClaudeCodeAgent(Agent):
    """Anthropic's Claude Code (`claude -p`), pinned; Anthropic Messages via ANTHROPIC_BASE_URL,
    permissions skipped (IS_SANDBOX=1 allows that as root), no telemetry or update checks."""

    name = "claude-code"
    dialect = "messages"
    inner = "@anthropic-ai/claude-code-linux-x64"
    takes_mcp_servers = True
    takes_skills = True

    async def prepare(self, ctx: AgentContext) -> None:
        if ctx.mcp_servers:
            servers = {server.name: _claude_mcp(server) for server in ctx.mcp_servers}
            await ctx.sandbox.write(CLAUDE_MCP_FILE, json.dumps({"mcpServers": servers}, indent=2))
            ctx.notes["mcp_config"] = CLAUDE_MCP_FILE
        await install_skills(ctx, f"{HOME_DIR}/.claude/skills")

    def mounts(self) -> dict[str, str]:
        return {str(npm_package(CLAUDE_PACKAGE, self.inner)): CLAUDE_DIR}

    def command(self, ctx: AgentContext) -> str:
        quiet = "IS_SANDBOX=1 DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1"
        return (
            f'{quiet} {CLAUDE_DIR}/claude -p "$(cat {shlex.quote(INSTRUCTION_FILE)})" '
            f"--model {shlex.quote(ctx.model)} --dangerously-skip-permissions"
            + (f" --mcp-config {ctx.notes['mcp_config']}" if "mcp_config" in ctx.notes else "")
        )

    def config(self) -> dict[str, Any]:
        return {**super().config(), "package": CLAUDE_PACKAGE}


def _codex_mcp(server: McpServer) -> str:
    """One `[mcp_servers.NAME]` table of Codex's config.toml (stdio or streamable HTTP).

    Raises:
        AgentError: an SSE server, which Codex cannot reach.
    """
    quoted = json.dumps  # a JSON string is a TOML basic string (its escapes are TOML's too)
    head = f"\n[mcp_servers.{quoted(server.name)}]\n"
    if server.transport == "stdio":
        return f"{head}command = {quoted(server.command or '')}\nargs = [{', '.join(map(quoted, server.args))}]\n"
    if server.transport == "streamable-http":
        return f"{head}url = {quoted(server.url or '')}\n"
    raise AgentError(
        f"MCP server {server.name!r} uses transport {server.transport!r}, which codex cannot take (it "
        "speaks stdio and streamable-http); play the task with claude-code"
    )


def _claude_mcp(server: McpServer) -> dict[str, Any]:
    """One server of Claude Code's --mcp-config file."""
    if server.transport == "stdio":
        return {"type": "stdio", "command": server.command, "args": list(server.args)}
    return {"type": "sse" if server.transport == "sse" else "http", "url": server.url}


async def install_skills(ctx: AgentContext, target: str) -> None:
    """Copy each folder of the task's skills folder (`ctx.skills_dir`) into `target`, the
    folder the agent reads skills from; nothing when the task gives none.

    Raises:
        AgentError: the task's skills folder is not a folder in the sandbox.
    """
    if ctx.skills_dir is None:
        return
    source = shlex.quote(ctx.skills_dir)
    script = f"test -d {source} && mkdir -p {shlex.quote(target)} && cp -R {source}/. {shlex.quote(target)}/"
    done = await ctx.sandbox.exec(script, timeout=120, user="0")
    if not done.ok:
        raise AgentError(
            f"the task's skills_dir {ctx.skills_dir!r} ([environment] skills_dir) is not a folder in the "
            f"sandbox, or cannot be copied: {done.stderr.strip()[-300:] or 'no such folder'}"
        )


def _toml(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


async def amounts(agent: Agent) -> dict[str, str]:
    """The host folders `agent` needs mounted (installing them first, off the event loop)."""
    mounts = getattr(agent, "mounts", None)
    return await asyncio.to_thread(mounts) if callable(mounts) else {}
