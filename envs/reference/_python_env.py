"""`python`: answer computational questions by running Python code (tool use).

A template for environments whose tools touch the outside world. The model gets one tool,
`run_python(code)`, which runs a complete program in a fresh sandbox of `harness.runtimes`
(bubblewrap by default; see `envs.reference._sandbox`: its own PID, mount, network, IPC and
user namespaces, a read-only view of the system and the interpreter with every package folder
covered, a private size-capped scratch folder, no network, caps on processes, memory and CPU
for the whole process tree, a wall-clock timeout). Nothing of a call survives it: no process,
no file. At most `max_tool_calls` calls run per model turn.

Without bubblewrap the environment refuses to build; `unsafe_sandbox=True` runs the code on
the `local` runtime instead (a plain child process) and warns on every build and every run.

Reward: `correct` (weight 1) compares the number in `<answer>...</answer>` (or else the
reply's last number) exactly with the verified answer; `ran_code` (weight 0) is a metric
recording whether the model used the tool at all.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envs._presets import ToolEnv
from envs._tools.functions import OUTPUT_LIMIT, Tool
from envs.reference._data import data_path, read_jsonl
from envs.reference._sandbox import CodeRunner, SandboxLimits, warn_unsafe
from envs.reference._scripting import Attempts, RowLookup, attempt_seed
from harness._core.errors import ConfigError
from rubrics import WeightedSum
from rubrics.parsers import extract_last_number, extract_xml

if TYPE_CHECKING:  # pragma: no cover
    from datasets import Dataset

QUESTIONS_FILE = "python_questions.jsonl"
SYSTEM_PROMPT = (
    "Answer the question by running Python code: call the run_python tool with a complete "
    "program that prints what you need, and read its output. Each call starts a fresh "
    "interpreter in an empty folder. When you know the answer, reply without a tool call and put the final answer, "
    "a single integer, in <answer></answer>."
)


class PythonEnv(ToolEnv):
    """A ToolEnv whose `run_python` tool runs each program in a fresh sandbox.

    Args:
        dataset: Questions with `question` and `answer`.
        rubric: The rubric.
        limits: Per-call limits (time, CPU, memory, output, disk, processes).
        network: Give the code the host's network (off by default).
        unsafe_sandbox: Run code without isolation where bubblewrap is missing (the `local`
            runtime; warns).
        runtime: The runtime each program's fresh sandbox comes from ("bwrap", the default;
            "docker:IMAGE", "bwrap:ROOTFS_DIR"; see `harness.runtimes`).
        max_tool_calls: Calls run per model turn; each extra call gets a message saying so.
        **kwargs: `ToolEnv` arguments.

    Raises:
        RuntimeUnavailableError: bubblewrap cannot isolate code here and `unsafe_sandbox` is
            not set; the message says how to install it.
    """

    def __init__(
        self,
        dataset: Any,
        rubric: Any,
        *,
        limits: SandboxLimits | None = None,
        network: bool = False,
        unsafe_sandbox: bool = False,
        max_tool_calls: int = 4,
        runtime: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.runner = CodeRunner(limits, network=network, unsafe=unsafe_sandbox, runtime=runtime)
        self.limits = self.runner.limits
        self.max_tool_calls = max_tool_calls
        description = (
            "Run a complete Python program and return what it prints (stdout and stderr). "
            "Each call starts fresh: no variables or files carry over, and there is no network. "
            f"Limits per run: {self.limits.timeout:g} s wall clock, {self.limits.cpu_seconds} s CPU, "
            f"{self.limits.memory_mb} MB memory, {self.limits.disk_mb} MB disk; output beyond "
            f"{self.limits.output_limit} bytes is cut."
        )
        run_tool = Tool.from_function(
            self.run_python, name="run_python", description=description, timeout=self.limits.timeout + 5.0
        )  # backstop; the sandbox times out first
        if kwargs.get("max_turns") is None:
            kwargs["max_turns"] = 6
        super().__init__(dataset, rubric, tools=[run_tool], **kwargs)

    def setup_state(self, state: dict[str, Any], example: Mapping[str, Any]) -> None:
        state["python_runs"] = 0

    def get_dataset(self, split: str = "eval", n: int | None = None, seed: int | None = None) -> Dataset:
        if self.runner.unsafe:  # every run starts by taking its examples: warn each time
            warn_unsafe()
        return super().get_dataset(split, n=n, seed=seed)

    async def run_python(self, code: str, state: dict[str, Any]) -> str:
        """Run a Python program and return its output.

        Args:
            code: a complete Python program; print() the values you want to see.
        """
        result = await self.runner.run(code)
        state["python_runs"] = state.get("python_runs", 0) + 1
        return result.render()


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


def reference_code(row: Mapping[str, Any]) -> str:
    """A question's reference solution, which the scripted policies run."""
    code = row.get("code")
    if not code:
        raise LookupError(f"question {row.get('id')!r} has no reference 'code' for the scripted policies")
    return str(code)


def make_policies(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """ "oracle" runs each question's reference code, then answers with the number it printed;
    "noisy" is a `NoisyCoder`."""
    lookup = RowLookup(rows)

    def oracle(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> dict[str, Any] | str:
        row = lookup.find(messages)
        output = _last_tool_output(messages)
        return _run(reference_code(row), "call_oracle") if output is None else _answer_from_output(output)

    return {"oracle": oracle, "noisy": NoisyCoder(lookup)}


class NoisyCoder:
    """python's "noisy" scripted model: sometimes runs buggy code, crashes, or skips the tool,
    differently on each attempt at a question (`Attempts`), so `-r K` shows pass@k rising."""

    def __init__(self, lookup: RowLookup) -> None:
        self.lookup = lookup
        self.attempts = Attempts()

    def fresh(self) -> NoisyCoder:
        return NoisyCoder(self.lookup)

    def __getstate__(self) -> dict[str, Any]:
        return {"lookup": self.lookup}  # a copy counts afresh

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["lookup"])  # type: ignore[misc]

    def __call__(
        self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None
    ) -> dict[str, Any] | str:
        output = _last_tool_output(messages)
        if output is not None:  # the second turn answers from what the code printed
            return _answer_from_output(output)
        row = self.lookup.find(messages)
        rng = attempt_seed("python-noisy", row["question"], attempt=self.attempts.start(str(row["question"])))
        draw = rng.random()
        if draw < 0.15:  # skips the tool and guesses
            return f"That should be about <answer>{rng.randint(1, 10**6)}</answer>."
        code = reference_code(row)
        if draw < 0.3:  # an off-by-one in the final print
            code = code.replace("print(", "print(1 + ", 1)
        elif draw < 0.45:  # code that crashes: the answer is then a guess from the traceback
            code = "values = {}\nprint(values['total'])\n" + code
        return _run(code, "call_noisy")


# ----------------------------------------------------------------------------- loading


def load_rows(dataset: str | Path | None = None) -> list[dict[str, Any]]:
    """Questions with `question`, `answer` (an integer as text) and optional `code` and `id`."""
    rows = read_jsonl(data_path(QUESTIONS_FILE) if dataset is None else dataset)
    for index, row in enumerate(rows):
        missing = {"question", "answer"} - set(row)
        if missing:
            raise ConfigError(f"python question {index} lacks {sorted(missing)}; columns: {sorted(row)}")
        row["answer"] = str(row["answer"])
    return rows


def load_environment(
    dataset: str | Path | None = None,
    num_examples: int | None = None,
    timeout: float = 10.0,
    cpu_seconds: int = 10,
    memory_mb: int = 512,
    output_limit: int = OUTPUT_LIMIT,
    max_turns: int = 6,
    sampling: Mapping[str, Any] | None = None,
    disk_mb: int = 64,
    max_processes: int = 32,
    max_tool_calls: int = 4,
    network: bool = False,
    unsafe_sandbox: bool = False,
    runtime: str | None = None,
) -> PythonEnv:
    """The python environment over the bundled verified questions (or a .jsonl of your own).

    Args:
        dataset: A .jsonl file of questions with `question` and `answer` (None: the bundled ones).
        num_examples: Use only the first this many questions (None: all).
        timeout: Seconds of wall clock per program.
        cpu_seconds: Seconds of CPU per program.
        memory_mb: Memory per program, in MB.
        output_limit: Bytes of output kept per program (the rest is cut).
        max_turns: Model turns per rollout.
        sampling: Sampling arguments for the policy, e.g. {"max_tokens": 1024}.
        disk_mb: Scratch disk per program, in MB.
        max_processes: Processes per program.
        max_tool_calls: Calls run per model turn; each extra call gets a message saying so.
        network: Give the code the host's network (off by default).
        unsafe_sandbox: Run code without isolation where bubblewrap is missing (the `local`
            runtime; warns).
        runtime: The runtime each program's fresh sandbox comes from ("bwrap", the default;
            "docker:IMAGE", "bwrap:ROOTFS_DIR"; see `harness.runtimes`).

    Returns:
        The environment.

    Raises:
        RuntimeUnavailableError: bubblewrap cannot isolate code here and `unsafe_sandbox`
            is not set.
    """
    if num_examples is not None and num_examples < 1:
        raise ConfigError(f"num_examples must be a positive integer or None (all), got {num_examples}")
    rows = load_rows(dataset)[:num_examples]
    limits = SandboxLimits(
        timeout=timeout,
        cpu_seconds=cpu_seconds,
        memory_mb=memory_mb,
        output_limit=output_limit,
        disk_mb=disk_mb,
        max_processes=max_processes,
    )
    env = PythonEnv(
        rows,
        make_rubric(),
        limits=limits,
        network=network,
        unsafe_sandbox=unsafe_sandbox,
        runtime=runtime,
        max_tool_calls=max_tool_calls,
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
