"""How long does a large run's HTML report take to write, how big is it, how fast does it open?

    python benchmarks/bench_report.py [--n 20000] [--words 0] [--chromium /usr/bin/chromium]

Builds N hand-made rollouts like a two-turn tool-use run (prompt, tool call, tool result,
answer; a WeightedSum with a Gate and a judge whose reply is kept), then measures the points
below. Those transcripts differ only in their numbers, which flatters the report's gzip; with
`--words N` each rollout's first assistant message also holds N words drawn at random (seeded)
from the vocabulary of a few stdlib modules' source, text that compresses less than real
model output does, so the two runs bracket a real report's size.

1. `write_report` (the `rubric view DIR --html` path) against writing the same rollouts as
   `results.jsonl` (`EvalResults.to_jsonl`, baseline): seconds and the ratio.
2. the file size against the JSONL's (ratio).
3. time to first render in headless Chromium (navigation start until the table is drawn and
   the page marks itself ready), and until the compressed transcripts are inflated and
   searchable, against opening a page that holds the results.jsonl text in one <pre> and no
   script (baseline): seconds and the ratios.
"""

from __future__ import annotations

import argparse
import html
import inspect
import json
import random
import re
import shutil
import tempfile
import textwrap
import time
from pathlib import Path

from harness import EvalResults, Rollout, write_report

NODES = [
    {"path": "", "head": "WeightedSum()", "note": ""},
    {"path": "correct", "head": "reward(correct)", "note": "weight=0.6"},
    {"path": "format", "head": "Gate(threshold=1)", "note": "weight=0.2", "threshold": 1.0},
    {"path": "format.tags", "head": "reward(tags)", "note": ""},
    {"path": "judge", "head": "LLMJudge(model='judge')", "note": "weight=0.2"},
]


def vocabulary() -> list[str]:
    """Distinct words of a few stdlib modules' source (same words on every machine)."""
    text = "".join(inspect.getsource(m) for m in (argparse, inspect, json, textwrap, random))
    return sorted(set(re.findall(r"[a-z]{2,12}", text)))


def make_results(n: int, words: int = 0) -> EvalResults:
    rollouts = []
    rng, vocab = random.Random(0), vocabulary() if words else []
    for i in range(n):
        prose = " ".join(rng.choices(vocab, k=words)) if words else ""
        a, b = i % 97, (i * 7) % 89
        good = i % 3 != 0
        rollouts.append(
            Rollout.model_validate(
                {
                    "example_id": f"ex-{i // 4:05d}",
                    "rollout_index": i % 4,
                    "prompt": [
                        {"role": "system", "content": "Use the add tool, then answer in <answer> tags."},
                        {"role": "user", "content": f"What is {a} + {b}? Show your reasoning briefly."},
                    ],
                    "completion": [
                        {
                            "role": "assistant",
                            "content": f"I will add the numbers with the tool. {prose}".rstrip(),
                            "tool_calls": [
                                {
                                    "id": f"c{i}",
                                    "function": {"name": "add", "arguments": f'{{"a": {a}, "b": {b}}}'},
                                }
                            ],
                        },
                        {"role": "tool", "tool_call_id": f"c{i}", "name": "add", "content": str(a + b)},
                        {
                            "role": "assistant",
                            "content": f"The sum is <answer>{a + b + (0 if good else 1)}</answer>.",
                        },
                    ],
                    "answer": str(a + b),
                    "turns": 2,
                    "stop_reason": "completed",
                    "usage": {"prompt_tokens": 120, "completion_tokens": 40},
                    "reward": 1.0 if good else 0.4,
                    "scores": {
                        "correct": float(good),
                        "format": 1.0,
                        "format.tags": 1.0,
                        "judge": 1.0 if good else 0.8,
                    },
                    "score_details": {"judge": {"reply": "Clear and correct.\nScore: 8", "cached": False}},
                }
            )
        )
    metadata = {
        "env": {"name": "bench", "rubric": NODES},
        "model": {"model": "bench-model"},
        "status": "completed",
    }
    return EvalResults(rollouts, metadata=metadata)


def first_render(chromium: str, path: Path, ready: str) -> float:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=chromium,
            args=[
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--no-first-run",
            ],
        )
        page = browser.new_page()
        start = time.perf_counter()
        page.goto(path.as_uri(), wait_until="commit")
        page.wait_for_selector(ready, timeout=120_000)
        seconds = time.perf_counter() - start
        browser.close()
    return seconds


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=20_000)
    parser.add_argument("--words", type=int, default=0, help="random words added to each transcript")
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args(argv)
    results = make_results(args.n, args.words)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        start = time.perf_counter()
        jsonl = results.to_jsonl(out / "results.jsonl")
        t_jsonl = time.perf_counter() - start
        start = time.perf_counter()
        report = write_report(results, out / "report.html")
        t_report = time.perf_counter() - start
        size, base_size = report.stat().st_size, jsonl.stat().st_size
        plain = out / "plain.html"
        text = html.escape(jsonl.read_text())
        plain.write_text(f"<!DOCTYPE html><html><body><pre>{text}</pre><p id='end'>end</p></body></html>")

        print(f"{args.n:,} rollouts" + (f", {args.words} random words each" if args.words else ""))
        print(
            f"write report        {t_report:7.2f} s   results.jsonl (baseline) {t_jsonl:6.2f} s   ratio {t_report / t_jsonl:5.1f}x"
        )
        print(
            f"file size           {size / 1e6:7.1f} MB  results.jsonl (baseline) {base_size / 1e6:6.1f} MB  ratio {size / base_size:5.2f}x"
        )
        t_open = first_render(args.chromium, report, "body[data-ready='1']")
        t_panels = first_render(args.chromium, report, "body[data-panels='1']")
        t_plain = first_render(args.chromium, plain, "#end")
        print(
            f"first render        {t_open:7.2f} s   static page of the JSONL {t_plain:6.2f} s   ratio {t_open / t_plain:5.2f}x"
        )
        print(
            f"transcripts ready   {t_panels:7.2f} s   static page of the JSONL {t_plain:6.2f} s   ratio {t_panels / t_plain:5.2f}x"
        )


if __name__ == "__main__":
    main()
