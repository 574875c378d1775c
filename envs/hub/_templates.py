"""The files `rubric init` writes, as `string.Template` texts ($name, $module, ... placeholders).

Three environment modules, one per `--kind` (and `--kind mcp`: the tool module with its tool
behind an MCP server in the package); each builds with its defaults, ships a `demo`
scripted policy (so `rubric eval ./NAME -m scripted:demo` runs offline) and reward fixtures
that `rubric check` scores.
"""

from __future__ import annotations

PYPROJECT = """\
[build-system]
requires = ["setuptools>=77"]
build-backend = "setuptools.build_meta"

[project]
name = "$name"
version = "0.1.0"
description = "$description"
readme = "README.md"
requires-python = ">=3.11"
license = "Apache-2.0"
dependencies = ["$requirement"]

[project.optional-dependencies]
# `pip install -e ".[test]"`, then `python -m pytest`: the package's own tests.
test = ["pytest>=8"]

[project.entry-points."rubric.environments"]
$name = "$module.environment:load_environment"

[tool.setuptools]
packages = ["$module"]

[tool.setuptools.package-data]
# rubric_card.json is written by `rubric build`: the card, rubric summary and compatibility record.
$module = ["*.jsonl", "rubric_card.json"]

[tool.pytest.ini_options]
pythonpath = ["."]
testpaths = ["tests"]
"""

README = """\
---
name: $name
description: "$description"
tags: [$tags]
license: Apache-2.0
kind: $kind
reward_range: [0, 1]
needs:
  api_keys: []
  sandbox: false
  network: false
---

# $name

$description

```bash
rubric eval $name -m scripted:demo -n 3     # offline, with the scripted demo policy
rubric eval $name -m gpt-4.1-mini -n 20     # a real model (OPENAI_API_KEY)
```

Before installing, run it from this folder: `rubric eval ./$name -m scripted:demo -n 3`.
Its tests: `pip install -e ".[test]" && python -m pytest`.
`rubric check` runs the hub's checks; `rubric build` and `rubric push` publish it.
"""

INIT = '''\
"""$name: a rubric environment package (entry point: $module.environment:load_environment)."""

from $module.environment import load_environment

__all__ = ["load_environment"]
'''

TEST = '''\
"""$name: the environment builds with its defaults and passes the hub's checks."""

from pathlib import Path

from envs.hub import check_package
from $module import load_environment


def test_builds_with_defaults() -> None:
    env = load_environment()
    assert len(env.get_dataset()) > 0


def test_hub_checks_pass() -> None:
    report = check_package(Path(__file__).resolve().parents[1])
    assert report.ok, report.text()
'''

# The tagged-answer reward both the single-turn and the tool template use (each generated
# package is standalone, so the code is written into both).
ANSWER_REWARDS = '''\
def tagged_answer(text: str | None) -> str | None:
    """The text inside the first <answer> tag, or None."""
    match = re.search(r"<answer>\\s*(.*?)\\s*</answer>", text or "", re.S)
    return match.group(1) if match else None


@reward
def correct(response: str, answer: str) -> float:
    """1.0 when the tagged answer equals the reference answer."""
    return float(tagged_answer(response) == answer)
'''

SINGLE = (
    '''\
"""$name: a single-turn environment: one question, one answer, a weighted rubric."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from envs import SingleTurnEnv
from rubrics import WeightedSum, reward

DATA = Path(__file__).with_name("data.jsonl")
SYSTEM_PROMPT = "Reply with the number only, inside <answer></answer> tags."


'''
    + ANSWER_REWARDS
    + '''

@reward
def formatted(response: str) -> float:
    """1.0 when the reply holds exactly one <answer> tag."""
    return float((response or "").count("<answer>") == 1)


def demo(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
    """A scripted model for trying the environment offline: it does the sum."""
    numbers = [int(n) for n in re.findall(r"\\d+", messages[-1]["content"])]
    return f"<answer>{sum(numbers)}</answer>"


def load_environment(num_examples: int | None = None) -> SingleTurnEnv:
    """Additions of two numbers; `num_examples` keeps the first N rows."""
    rows = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()][:num_examples]
    env = SingleTurnEnv(
        rows,
        WeightedSum({"correct": correct, "formatted": formatted}, weights=[0.8, 0.2]),
        system_prompt=SYSTEM_PROMPT,
        name="$name",
    )
    env.scripted_policies = {"demo": demo}
    # `rubric check` scores these: gold must score 1, bad must score 0.
    env.reward_fixtures = {
        "gold": [{"completion": "<answer>5</answer>", "answer": "5"}],
        "bad": [{"completion": "I do not know.", "answer": "5"}],
    }
    return env
'''
)

TOOL = (
    '''\
"""$name: a tool-use environment: the model calls `add`, then answers."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from envs import ToolEnv
from rubrics import WeightedSum, reward

DATA = Path(__file__).with_name("data.jsonl")
SYSTEM_PROMPT = "Use the add tool, then reply with <answer>N</answer>."


def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


'''
    + ANSWER_REWARDS
    + '''

@reward
def used_tool(rollout: Any) -> float:
    """1.0 when the model called a tool at least once."""
    return float(len(rollout.tool_calls) > 0)


def demo(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any] | str:
    """A scripted model for trying the environment offline: call the tool, then answer."""
    last = messages[-1]
    if last["role"] == "tool":
        return f"<answer>{last['content']}</answer>"
    a, b = (int(n) for n in re.findall(r"\\d+", last["content"])[:2])
    call = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": json.dumps({"a": a, "b": b})}}
    return {"role": "assistant", "content": None, "tool_calls": [call]}


def load_environment(num_examples: int | None = None) -> ToolEnv:
    """Additions answered with the `add` tool; `num_examples` keeps the first N rows."""
    rows = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()][:num_examples]
    env = ToolEnv(
        rows,
        WeightedSum({"correct": correct, "used_tool": used_tool}, weights=[0.9, 0.1]),
        system_prompt=SYSTEM_PROMPT,
        tools=[add],
        name="$name",
    )
    env.scripted_policies = {"demo": demo}
    call = {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}
    # `rubric check` scores these: gold must score 1, bad must score 0.
    env.reward_fixtures = {
        "gold": [
            {
                "completion": [
                    {"role": "assistant", "content": None, "tool_calls": [call]},
                    {"role": "tool", "tool_call_id": "c1", "content": "5"},
                    {"role": "assistant", "content": "<answer>5</answer>"},
                ],
                "answer": "5",
            }
        ],
        "bad": [{"completion": "I do not know.", "answer": "5"}],
    }
    return env
'''
)

MULTI = '''\
"""$name: a multi-turn environment: guess a secret number; the environment says higher or lower."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from envs import MultiTurnEnv
from rubrics import WeightedSum, reward

DATA = Path(__file__).with_name("data.jsonl")
SYSTEM_PROMPT = "Guess the secret number. Reply with <guess>N</guess> only."
MAX_TURNS = 8


def guess_of(text: str | None) -> int | None:
    """The number inside the first <guess> tag, or None."""
    match = re.search(r"<guess>\\s*(\\d+)\\s*</guess>", text or "")
    return int(match.group(1)) if match else None


class GuessEnv(MultiTurnEnv):
    """Answers each guess with "higher" or "lower"; a right guess ends the episode."""

    def env_response(self, rollout: Any) -> str | None:
        guess = guess_of(rollout.response)
        if guess is None:
            return "Reply with <guess>N</guess>, a whole number."
        secret = int(rollout.answer)
        if guess == secret:
            return None
        return "higher" if guess < secret else "lower"


@reward
def won(response: str, answer: str) -> float:
    """1.0 when the last guess is the secret number."""
    return float(guess_of(response) == int(answer))


@reward
def speed(rollout: Any) -> float:
    """Fewer guesses score higher: 1.0 for a first-turn win, 0 for a loss."""
    if guess_of(rollout.response) != int(rollout.answer):
        return 0.0
    return 1.0 - (max(rollout.turns, 1) - 1) / MAX_TURNS


def demo(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
    """A scripted model for trying the environment offline: binary search on the feedback."""
    low, high = (int(n) for n in re.findall(r"\\d+", messages[1]["content"])[:2])
    for said, heard in zip(messages[2::2], messages[3::2]):
        guess = guess_of(said.get("content"))
        if guess is not None and heard.get("content") == "higher":
            low = guess + 1
        elif guess is not None and heard.get("content") == "lower":
            high = guess - 1
    return f"<guess>{(low + high) // 2}</guess>"


def load_environment(num_examples: int | None = None) -> GuessEnv:
    """Number guessing from 1 to 100; `num_examples` keeps the first N rows."""
    rows = [json.loads(line) for line in DATA.read_text().splitlines() if line.strip()][:num_examples]
    env = GuessEnv(
        rows,
        WeightedSum({"won": won, "speed": speed}, weights=[0.8, 0.2]),
        system_prompt=SYSTEM_PROMPT,
        max_turns=MAX_TURNS,
        name="$name",
    )
    env.scripted_policies = {"demo": demo}
    # `rubric check` scores these: gold must score 1, bad must score 0.
    env.reward_fixtures = {
        "gold": [{"completion": [{"role": "assistant", "content": "<guess>42</guess>"}], "answer": "42", "turns": 1}],
        "bad": [{"completion": [{"role": "assistant", "content": "<guess>7</guess>"}], "answer": "42", "turns": 8}],
    }
    return env
'''

# `--kind mcp`: the TOOL environment with its `add` tool served by an MCP server in the package
# (written with the official SDK), which the environment starts through envs.mcp_server.
MCP_SERVER = '''\
"""$name: the MCP server behind the environment's tools (run as `python -m $module.server`)."""

from mcp.server.mcpserver import MCPServer

server = MCPServer("$name")


@server.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


if __name__ == "__main__":
    server.run()  # stdio
'''

MCP_TOOL = (
    TOOL.replace(
        '''"""$name: a tool-use environment: the model calls `add`, then answers."""''',
        '''"""$name: a tool-use environment whose `add` tool lives in an MCP server ($module/server.py)."""''',
    )
    .replace("import re\nfrom pathlib", "import re\nimport sys\nfrom pathlib")
    .replace("from envs import ToolEnv", "from envs import ToolEnv, mcp_server")
    .replace(
        '''def add(a: int, b: int) -> int:
    """Add two integers.

    Args:
        a: The first addend.
        b: The second addend.
    """
    return a + b


''',
        """# The server runs as its own process, started at the first call and stopped after the run.
SERVER = [sys.executable, str(Path(__file__).with_name("server.py"))]


""",
    )
    .replace("tools=[add],", "tools=[mcp_server(SERVER)],")
)

MODULES = {"single-turn": SINGLE, "tool": TOOL, "multi-turn": MULTI}

__all__ = ["INIT", "MODULES", "PYPROJECT", "README", "TEST"]
