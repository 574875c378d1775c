"""`python`: answer computational questions by running Python code (tool use).

A template for environments whose tools touch the outside world. The model gets one tool,
`run_python(code)`, which runs a complete program in a fresh child process (see
`envs.reference.sandbox`: wall-clock timeout, CPU and memory limits, output cut at a size
limit, a minimal environment without API keys) inside a scratch directory private to the
rollout. Files written there persist across the rollout's calls; the directory is deleted
when the rollout is scored (and any left by failed rollouts when the environment is freed).

Reward: `correct` (weight 1) compares the number in `<answer>...</answer>` (or else the
reply's last number) exactly with the verified answer; `ran_code` (weight 0) is a metric
recording whether the model used the tool at all.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from envs import Tool, ToolEnv
from envs.reference.data import data_path, read_jsonl
from envs.reference.sandbox import SandboxLimits, run_code
from envs.reference.scripting import RowLookup, seeded_rng
from harness.types import Rollout
from rubrics import WeightedSum
from rubrics.parsers import extract_last_number, extract_xml

QUESTIONS_FILE = "python_questions.jsonl"
SYSTEM_PROMPT = (
    "Answer the question by running Python code: call the run_python tool with a complete "
    "program that prints what you need, and read its output. Each call starts a fresh "
    "interpreter. When you know the answer, reply without a tool call and put the final answer, "
    "a single integer, in <answer></answer>."
)


class PythonEnv(ToolEnv):
    """A ToolEnv whose `run_python` tool runs code in a per-rollout scratch directory."""

    def __init__(
        self, dataset: Any, rubric: Any, *, limits: SandboxLimits | None = None, **kwargs: Any
    ) -> None:
        self.limits = limits or SandboxLimits()
        # Every rollout's scratch directory lives under one root that is removed when this
        # environment is garbage-collected or the interpreter exits, whatever happened.
        self.scratch_root = tempfile.mkdtemp(prefix="rubric-python-")
        self._finalizer = weakref.finalize(self, shutil.rmtree, self.scratch_root, ignore_errors=True)
        description = (
            "Run a complete Python program and return what it prints (stdout and stderr). "
            "Variables do not carry over between calls; files in the working directory do. "
            f"Limits per run: {self.limits.timeout:g} s wall clock, {self.limits.cpu_seconds} s CPU, "
            f"{self.limits.memory_mb} MB memory; output beyond {self.limits.output_limit} bytes is cut."
        )
        run_tool = Tool.from_function(
            self.run_python, name="run_python", description=description, timeout=self.limits.timeout + 5.0
        )  # backstop; the sandbox times out first
        if kwargs.get("max_turns") is None:
            kwargs["max_turns"] = 6
        super().__init__(dataset, rubric, tools=[run_tool], **kwargs)

    def setup_state(self, state: dict[str, Any], example: Mapping[str, Any]) -> None:
        state["scratch_dir"] = tempfile.mkdtemp(prefix="rollout-", dir=self.scratch_root)
        state["python_runs"] = 0

    async def run_python(self, code: str, state: dict[str, Any]) -> str:
        """Run a Python program and return its output.

        Args:
            code: a complete Python program; print() the values you want to see.
        """
        scratch = state.get("scratch_dir")
        if not scratch or not Path(scratch).is_dir():
            return "Error: this rollout's scratch directory is gone (the rollout was already scored)."
        result = await run_code(code, scratch, self.limits)
        state["python_runs"] = state.get("python_runs", 0) + 1
        return result.render()

    async def score(self, rollout: Rollout) -> None:
        try:
            await super().score(rollout)
        finally:
            self.cleanup(rollout.state)

    def cleanup(self, state: Mapping[str, Any]) -> None:
        """Delete one rollout's scratch directory (idempotent)."""
        scratch = state.get("scratch_dir")
        if scratch:
            shutil.rmtree(scratch, ignore_errors=True)

    def close(self) -> None:
        """Delete every scratch directory now rather than when the environment is freed."""
        self._finalizer()


# ----------------------------------------------------------------------------- reward


def final_number(response: str | None) -> Decimal | None:
    """The number inside <answer></answer>, or else the last number of the reply."""
    tagged = extract_xml(response, "answer")
    text = extract_last_number(tagged if tagged is not None else response, as_text=True)
    if text is None:
        return None
    try:
        return Decimal(str(text))
    except InvalidOperation:
        return None


def correct(response: str, answer: str) -> float:
    """1.0 when the final number equals the verified answer exactly."""
    got = final_number(response)
    return 1.0 if got is not None and got == Decimal(str(answer).strip()) else 0.0


def ran_code(state: dict[str, Any]) -> float:
    """1.0 if the model ran any code (a metric: weight 0 in the reward)."""
    return 1.0 if state.get("python_runs", 0) > 0 else 0.0


def make_rubric() -> WeightedSum:
    return WeightedSum({"correct": correct, "ran_code": ran_code}, weights={"correct": 1.0, "ran_code": 0.0})


# ----------------------------------------------------------------------------- policies


def _last_tool_output(messages: Sequence[Mapping[str, Any]]) -> str | None:
    for message in reversed(messages):
        if message.get("role") == "tool":
            return str(message.get("content") or "")
    return None


def _run(code: str, call_id: str) -> dict[str, Any]:
    return {
        "role": "assistant",
        "content": "Let me compute it.",
        "tool_calls": [
            {
                "id": call_id,
                "type": "function",
                "function": {"name": "run_python", "arguments": {"code": code}},
            }
        ],
    }


def _answer_from_output(output: str) -> str:
    number = extract_last_number(output, as_text=True)
    return f"The program printed the result.\n<answer>{number if number is not None else 'unknown'}</answer>"


def make_policies(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """ "oracle" runs each question's reference code, then answers with the number it printed;
    "noisy" (seeded per question) sometimes runs buggy code, crashes, or skips the tool."""
    lookup = RowLookup(rows)

    def reference_code(row: Mapping[str, Any]) -> str:
        code = row.get("code")
        if not code:
            raise LookupError(f"question {row.get('id')!r} has no reference 'code' for the scripted policies")
        return str(code)

    def oracle(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any] | str:
        row = lookup.find(messages)
        output = _last_tool_output(messages)
        return _run(reference_code(row), "call_oracle") if output is None else _answer_from_output(output)

    def noisy(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any] | str:
        row = lookup.find(messages)
        rng = seeded_rng("python-noisy", row["question"])
        draw = rng.random()
        output = _last_tool_output(messages)
        if draw < 0.15:  # skips the tool and guesses
            return f"That should be about <answer>{rng.randint(1, 10**6)}</answer>."
        if output is not None:
            return _answer_from_output(output)
        code = reference_code(row)
        if draw < 0.3:  # an off-by-one in the final print
            code = code.replace("print(", "print(1 + ", 1)
        elif draw < 0.45:  # code that crashes: the answer is then a guess from the traceback
            code = "values = {}\nprint(values['total'])\n" + code
        return _run(code, "call_noisy")

    return {"oracle": oracle, "noisy": noisy}


# ----------------------------------------------------------------------------- loading


def load_rows(dataset: str | Path | None = None) -> list[dict[str, Any]]:
    """Questions with `question`, `answer` (an integer as text) and optional `code` and `id`."""
    rows = read_jsonl(data_path(QUESTIONS_FILE) if dataset is None else dataset)
    for index, row in enumerate(rows):
        missing = {"question", "answer"} - set(row)
        if missing:
            raise ValueError(f"python question {index} lacks {sorted(missing)}; columns: {sorted(row)}")
        row["answer"] = str(row["answer"])
    return rows


def load_environment(
    dataset: str | Path | None = None,
    num_examples: int | None = None,
    timeout: float = 10.0,
    cpu_seconds: int = 10,
    memory_mb: int = 512,
    output_limit: int = 4000,
    max_turns: int = 6,
    sampling: Mapping[str, Any] | None = None,
) -> PythonEnv:
    """The python environment over the bundled verified questions (or a .jsonl of your own)."""
    if num_examples is not None and num_examples < 1:
        raise ValueError(f"num_examples must be a positive integer or None (all), got {num_examples}")
    rows = load_rows(dataset)[:num_examples]
    limits = SandboxLimits(
        timeout=timeout, cpu_seconds=cpu_seconds, memory_mb=memory_mb, output_limit=output_limit
    )
    env = PythonEnv(
        rows,
        make_rubric(),
        limits=limits,
        system_prompt=SYSTEM_PROMPT,
        max_turns=max_turns,
        sampling=sampling,
        name="python",
    )
    env.scripted_policies = make_policies(rows)
    return env


__all__ = [
    "SYSTEM_PROMPT",
    "PythonEnv",
    "correct",
    "final_number",
    "load_environment",
    "load_rows",
    "make_policies",
    "make_rubric",
    "ran_code",
]
