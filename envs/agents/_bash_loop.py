"""The `bash` agent's program: run inside the sandbox with the system python3 (stdlib only).

A Chat Completions loop over one tool, `bash`: ask the model (OPENAI_BASE_URL, OPENAI_API_KEY,
RUBRIC_MODEL), run each `bash` call in the working directory (60 s each, output cut to 10 kB),
send the output back, until the model answers without a tool call or MAX_STEPS calls.
Not imported by rubric: it is uploaded into the sandbox as a file.
"""

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from typing import Any

MAX_STEPS = int(os.environ.get("RUBRIC_AGENT_MAX_STEPS", "50"))
TOOL = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a bash command in the task's working directory; returns its output and exit code.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "the command line"}},
            "required": ["command"],
        },
    },
}
SYSTEM = "You solve tasks on a Linux machine with the bash tool. When the task is done, answer without a tool call."


def ask(messages: list[dict[str, Any]]) -> dict[str, Any]:
    body = json.dumps({"model": os.environ["RUBRIC_MODEL"], "messages": messages, "tools": [TOOL]}).encode()
    request = urllib.request.Request(
        os.environ["OPENAI_BASE_URL"].rstrip("/") + "/chat/completions",
        data=body,
        headers={
            "Content-Type": "application/json",
            "Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=600) as response:
            message: dict[str, Any] = json.load(response)["choices"][0]["message"]
            return message
    except urllib.error.HTTPError as exc:
        sys.exit(f"model call failed: HTTP {exc.code}: {exc.read().decode(errors='replace')[:500]}")


def bash(arguments: str | None) -> str:
    try:
        command = json.loads(arguments or "{}")["command"]
    except (ValueError, KeyError, TypeError):
        return 'error: the bash tool takes {"command": "..."}'
    try:
        done = subprocess.run(["bash", "-c", command], capture_output=True, timeout=60)
    except subprocess.TimeoutExpired:
        return "error: the command took more than 60 s and was killed"
    output = (done.stdout + done.stderr).decode(errors="replace")
    return f"{output[-10000:]}\n[exit code {done.returncode}]"


def main() -> None:
    instruction = open(sys.argv[1]).read()
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": instruction},
    ]
    for _ in range(MAX_STEPS):
        message = ask(messages)
        calls = message.get("tool_calls") or []
        messages.append({"role": "assistant", "content": message.get("content"), "tool_calls": calls or None})
        if not calls:
            print(message.get("content") or "")
            return
        for call in calls:
            known = call["function"]["name"] == "bash"
            output = (
                bash(call["function"]["arguments"])
                if known
                else f"error: no tool {call['function']['name']!r}"
            )
            messages.append({"role": "tool", "tool_call_id": call["id"], "content": output})
    sys.exit(f"stopped after {MAX_STEPS} model calls without a final answer")


if __name__ == "__main__":
    main()
