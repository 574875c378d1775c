"""Agent tests: a small file task, the users' own agent programs, the runtimes they run on.

The task: write `hello.txt` holding "hi" in the working directory; `file_contains` checks it
in the sandbox. The scripted endpoint plays the model (`harness.scripted.ShellScript`: the
command as a call of the agent's own shell tool, then a final answer).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from envs import Environment
from envs.agents import file_contains
from harness.runtimes import list_sandboxes
from harness.scripted import ShellScript

TEST_IMAGE = os.environ.get("RUBRIC_TEST_IMAGE", "rubric-test-base:bookworm")
DOCKER = f"docker:{TEST_IMAGE}"
RUNTIMES = [pytest.param("bwrap", id="bwrap"), pytest.param(DOCKER, id="docker", marks=pytest.mark.docker)]
TASK = "Write the word hi into the file hello.txt in the current folder."
SOLVE = "printf hi > hello.txt"

# A user's own agent speaking Chat Completions with urllib: one shell tool, run until a final answer.
CHAT_AGENT = r"""
import json, os, subprocess, sys, urllib.request
tools = [{"type": "function", "function": {"name": "bash", "description": "run a shell command",
          "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}}]
messages = [{"role": "user", "content": open(sys.argv[1]).read()}]
for _ in range(10):
    request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
        data=json.dumps({"model": "my-model", "messages": messages, "tools": tools}).encode(),
        headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"], "Content-Type": "application/json"})
    message = json.load(urllib.request.urlopen(request))["choices"][0]["message"]
    messages.append(message)
    if not message.get("tool_calls"):
        print("final:", message["content"]); break
    for call in message["tool_calls"]:
        command = json.loads(call["function"]["arguments"])["command"]
        out = subprocess.run(command, shell=True, capture_output=True, text=True)
        messages.append({"role": "tool", "tool_call_id": call["id"], "content": out.stdout + out.stderr})
"""

# The same in Anthropic Messages: tool_use blocks out, tool_result blocks back.
MESSAGES_AGENT = r"""
import json, os, subprocess, sys, urllib.request
tools = [{"name": "Bash", "description": "run a shell command",
          "input_schema": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]}}]
messages = [{"role": "user", "content": open(sys.argv[1]).read()}]
for _ in range(10):
    request = urllib.request.Request(os.environ["ANTHROPIC_BASE_URL"] + "/v1/messages",
        data=json.dumps({"model": "claude-x", "max_tokens": 256, "messages": messages, "tools": tools}).encode(),
        headers={"x-api-key": os.environ["ANTHROPIC_API_KEY"], "anthropic-version": "2023-06-01",
                 "content-type": "application/json"})
    reply = json.load(urllib.request.urlopen(request))
    messages.append({"role": "assistant", "content": reply["content"]})
    uses = [b for b in reply["content"] if b["type"] == "tool_use"]
    if not uses:
        print("final:", "".join(b.get("text", "") for b in reply["content"])); break
    results = []
    for use in uses:
        out = subprocess.run(use["input"]["command"], shell=True, capture_output=True, text=True)
        results.append({"type": "tool_result", "tool_use_id": use["id"], "content": out.stdout + out.stderr})
    messages.append({"role": "user", "content": results})
"""


def task_env(**policies: Any) -> Environment:
    """The file task, with `file_contains` on hello.txt and the policies for the scripted endpoint."""
    env = Environment([{"prompt": TASK}], file_contains("hello.txt", "hi"), name="file-task", max_turns=8)
    env.scripted_policies = {
        "solve": ShellScript([SOLVE], "the file is written"),
        # mini-swe-agent ends when the model runs its own finishing command.
        "solve-mini": ShellScript([SOLVE, "echo COMPLETE_TASK_AND_SUBMIT_FINAL_OUTPUT"]),
        **policies,
    }
    return env


def left_behind(runtime: str = "bwrap") -> list[dict[str, str]]:
    """The sandboxes of this process still on the machine (none once a run is over)."""
    return [s for s in list_sandboxes(docker=runtime != "bwrap") if s["owner"] == str(os.getpid())]


@pytest.fixture
def agent_files(tmp_path: Path) -> Path:
    """A folder with the users' own agents: chat.py (Chat Completions), messages.py (Anthropic)."""
    folder = tmp_path / "agent"
    folder.mkdir()
    (folder / "chat.py").write_text(CHAT_AGENT)
    (folder / "messages.py").write_text(MESSAGES_AGENT)
    return folder
