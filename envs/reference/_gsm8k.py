"""`gsm8k`: grade-school math word problems, answered after "####" (single turn).

The simplest useful environment, and a template for your own: a dataset with `question` and
`answer`, a system prompt, and a rubric of two plain functions combined by `WeightedSum`.

    env = load_environment()                          # bundled synthetic problems, offline
    env = load_environment(dataset="openai/gsm8k")    # the real GSM8K test split (network)

Reward = 0.8 * correct + 0.2 * format. `correct` compares the number after the last "####"
(or, without one, the last number in the reply) with the reference; `format` checks that the
reply's last line is "#### <number>".
"""

from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from decimal import Decimal, InvalidOperation
from pathlib import Path
from typing import Any

from envs._presets import SingleTurnEnv
from envs.reference._data import data_path, read_jsonl
from envs.reference._scripting import RowLookup, seeded_rng
from harness._core.errors import ConfigError
from harness._core.hf_import import hf_import
from rubrics import WeightedSum
from rubrics.parsers import extract_after, extract_last_number, strip_think

SYSTEM_PROMPT = (
    "Solve the math word problem. Think step by step, showing your reasoning, then give the "
    'final answer as a plain number on the last line after "####", for example:\n#### 42'
)
BUNDLED = "gsm8k_synthetic.jsonl"
_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?|[-+]?\.\d+")


# ----------------------------------------------------------------------------- parsing


def parse_number(text: str | None) -> Decimal | None:
    """The first number in `text` ("$1,234.50" -> 1234.50), exactly, or None."""
    if not text:
        return None
    match = _NUMBER.search(text.replace("\u2212", "-"))
    if match is None:
        return None
    try:
        return Decimal(match.group(0).replace(",", ""))
    except InvalidOperation:
        return None


def final_answer(text: str | None) -> Decimal | None:
    """The number a reply commits to: after the last "####", else its last number."""
    after = extract_after(text, "####")
    if after is not None:
        return parse_number(after)
    last = extract_last_number(text, as_text=True)
    return parse_number(str(last)) if last is not None else None


def split_solution(answer: str) -> tuple[str, str]:
    """GSM8K's answer field "reasoning\\n#### 72" -> ("reasoning", "72")."""
    if "####" not in answer:
        raise ValueError(f"a GSM8K answer must end with '#### <number>', got {answer[-60:]!r}")
    reasoning, _, number = answer.rpartition("####")
    number = number.strip().replace(",", "")
    if parse_number(number) is None:
        raise ValueError(f"no number after '####' in GSM8K answer {answer[-60:]!r}")
    return reasoning.strip(), number


# ----------------------------------------------------------------------------- reward


def correct(response: str, answer: str) -> float:
    """1.0 when the reply's final number equals the reference answer exactly."""
    got, want = final_answer(response), parse_number(answer)
    return 1.0 if got is not None and want is not None and got == want else 0.0


def format_ok(response: str) -> float:
    """1.0 when the reply's last line is "#### <number>" (what the prompt asks for).

    Only the last line counts: a "####" earlier in the reply, such as the prompt's own
    example echoed back, is not the format (`rubric audit gsm8k` found that hack).
    """
    lines = strip_think(response or "").strip().splitlines()
    last = lines[-1].strip() if lines else ""
    return 1.0 if last.startswith("####") and parse_number(last[4:]) is not None else 0.0


def make_rubric() -> WeightedSum:
    """Correctness dominates; the format bonus teaches the model where to put its answer."""
    return WeightedSum({"correct": correct, "format": format_ok}, weights={"correct": 0.8, "format": 0.2})


# ----------------------------------------------------------------------------- data


def load_rows(
    dataset: str | Path | None = None, split: str = "test", subset: str = "main"
) -> list[dict[str, Any]]:
    """Rows with `question`, `answer` (the number) and `solution` (the worked reasoning).

    `dataset`: None for the bundled synthetic problems, a path to a GSM8K-shaped .jsonl file,
    or a Hugging Face dataset name such as "openai/gsm8k" (needs network), read with
    `subset` (GSM8K's configurations are "main" and "socratic") and `split`.
    """
    if dataset is None:
        raw: Sequence[Mapping[str, Any]] = read_jsonl(data_path(BUNDLED))
    elif Path(dataset).is_file():
        raw = read_jsonl(dataset)
    else:
        with hf_import():
            import datasets

        raw = datasets.load_dataset(str(dataset), subset, split=split)  # type: ignore[assignment]  # a Dataset is a sequence of row dicts
    rows = []
    for index, row in enumerate(raw):
        missing = {"question", "answer"} - set(row)
        if missing:
            raise ConfigError(f"gsm8k row {index} lacks {sorted(missing)}; columns: {sorted(row)}")
        reasoning, number = split_solution(str(row["answer"]))
        rows.append(
            {
                "id": row.get("id", f"gsm8k-{index}"),
                "question": row["question"],
                "answer": number,
                "solution": reasoning,
            }
        )
    return rows


# ----------------------------------------------------------------------------- policies


class NoisyPolicy:
    """gsm8k's "noisy" scripted model: wrong in seeded ways, and differently on each attempt at
    a question (the k-th request of it), as a sampled model is, so `-r K` shows pass@k rising.
    Every endpoint serves a fresh copy (`harness.scripted._endpoint.StatefulPolicy`), so a run's figures
    are the same every time."""

    def __init__(self, lookup: RowLookup) -> None:
        self.lookup = lookup
        self._attempts: dict[str, int] = {}
        self._lock = threading.Lock()

    def fresh(self) -> NoisyPolicy:
        return NoisyPolicy(self.lookup)

    def __getstate__(self) -> dict[str, Any]:
        return {"lookup": self.lookup}  # a copy starts counting afresh

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["lookup"])  # type: ignore[misc]

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        row = self.lookup.find(messages)
        with self._lock:
            attempt = self._attempts.get(row["question"], 0)
            self._attempts[row["question"]] = attempt + 1
        # The first attempt keeps the seed it always had; later ones draw their own.
        rng = seeded_rng("gsm8k-noisy", row["question"], *([attempt] if attempt else []))
        draw = rng.random()
        if draw < 0.5:  # right, in the asked format
            return f"{row['solution']}\n#### {row['answer']}"
        if draw < 0.7:  # an arithmetic slip
            wrong = Decimal(row["answer"]) + rng.choice([-10, -2, -1, 1, 3, 12])
            return f"{row['solution']}\n#### {wrong}"
        if draw < 0.85:  # right number, format forgotten
            return f"{row['solution']}\nThe answer is {row['answer']}."
        return "I am not sure how to solve this one."


def make_policies(rows: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Scripted policies: "oracle" answers every question right; "noisy" errs seeded per
    question and per attempt (see `NoisyPolicy`)."""
    lookup = RowLookup(rows)

    def oracle(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> str:
        row = lookup.find(messages)
        return f"{row['solution']}\n#### {row['answer']}"

    return {"oracle": oracle, "noisy": NoisyPolicy(lookup)}


def load_environment(
    dataset: str | Path | None = None,
    split: str = "test",
    subset: str = "main",
    num_examples: int | None = None,
    system_prompt: str = SYSTEM_PROMPT,
    sampling: Mapping[str, Any] | None = None,
) -> SingleTurnEnv:
    """The gsm8k environment: math word problems, the answer after "####".

    Args:
        dataset: None for the bundled synthetic problems, a GSM8K-shaped .jsonl file, or a
            Hugging Face dataset name such as "openai/gsm8k" (needs network).
        split: The Hugging Face dataset's split.
        subset: The Hugging Face dataset's configuration ("main" or "socratic").
        num_examples: Use only the first this many problems (None: all).
        system_prompt: The system prompt.
        sampling: Sampling arguments for the policy, e.g. {"max_tokens": 1024}.

    Returns:
        The environment.
    """
    if num_examples is not None and num_examples < 1:
        raise ConfigError(f"num_examples must be a positive integer or None (all), got {num_examples}")
    rows = load_rows(dataset, split, subset)[:num_examples]
    env = SingleTurnEnv(rows, make_rubric(), system_prompt=system_prompt, sampling=sampling, name="gsm8k")
    env.scripted_policies = make_policies(rows)
    return env


__all__ = [
    "SYSTEM_PROMPT",
    "correct",
    "final_answer",
    "format_ok",
    "load_environment",
    "load_rows",
    "make_policies",
    "make_rubric",
    "parse_number",
    "split_solution",
]
