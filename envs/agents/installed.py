"""Published agents installed on the host once and mounted read-only into every sandbox.

`codex` (@openai/codex, Responses dialect) and `claude-code` (@anthropic-ai/claude-code,
Anthropic Messages) come from npm; both ship native binaries in platform packages (Codex a
static musl build, Claude Code a glibc one), so the sandbox needs no Node.js and no network:
`npm install` puts them in the cache folder (`RUBRIC_AGENT_CACHE`, default
~/.cache/rubric/agents; `.ci/agents-up` fills it), and the sandbox sees the package read-only.
"""

from __future__ import annotations

import asyncio
import os
import shlex
import subprocess
from pathlib import Path
from typing import Any

from envs.agents.base import HOME_DIR, INSTRUCTION_FILE, Agent, AgentContext, AgentError

CODEX_PACKAGE = "@openai/codex@0.169.0"
CLAUDE_PACKAGE = "@anthropic-ai/claude-code@2.1.197"
CODEX_DIR = "/opt/rubric-codex"
CLAUDE_DIR = "/opt/rubric-claude"


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


class CodexAgent(Agent):
    """OpenAI Codex CLI (`codex exec`), pinned; Responses dialect through a config.toml provider
    (Codex ignores OPENAI_BASE_URL), its own sandboxing off (the rollout's sandbox is the box)."""

    name = "codex"
    dialect = "responses"
    inner = "@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl"

    def mounts(self) -> dict[str, str]:
        return {str(npm_package(CODEX_PACKAGE, self.inner)): CODEX_DIR}

    async def prepare(self, ctx: AgentContext) -> None:
        url = ctx.env["OPENAI_BASE_URL"]
        config = (
            f'model = {_toml(ctx.model)}\nmodel_provider = "rubric"\n\n[model_providers.rubric]\n'
            f'name = "rubric"\nbase_url = {_toml(url)}\nenv_key = "OPENAI_API_KEY"\nwire_api = "responses"\n'
        )
        await ctx.sandbox.write(f"{HOME_DIR}/.codex/config.toml", config)

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

    def mounts(self) -> dict[str, str]:
        return {str(npm_package(CLAUDE_PACKAGE, self.inner)): CLAUDE_DIR}

    def command(self, ctx: AgentContext) -> str:
        quiet = "IS_SANDBOX=1 DISABLE_AUTOUPDATER=1 CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 DISABLE_TELEMETRY=1"
        return (
            f'{quiet} {CLAUDE_DIR}/claude -p "$(cat {shlex.quote(INSTRUCTION_FILE)})" '
            f"--model {shlex.quote(ctx.model)} --dangerously-skip-permissions"
        )

    def config(self) -> dict[str, Any]:
        return {**super().config(), "package": CLAUDE_PACKAGE}


def _toml(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


async def amounts(agent: Agent) -> dict[str, str]:
    """The host folders `agent` needs mounted (installing them first, off the event loop)."""
    mounts = getattr(agent, "mounts", None)
    return await asyncio.to_thread(mounts) if callable(mounts) else {}
