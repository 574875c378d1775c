"""What does the crash-safe call log cost per model call, next to recording the call at all?

Run: python benchmarks/bench_call_log.py [--calls N]

Each agent model call is appended to the run's `calls.jsonl` as it finishes (one JSON line,
flushed to the kernel: harness._core.run.calls.CallLog). Measured in the same run, per call,
on a realistic second-turn call (a conversation of four messages with a tool call, its reply
and token ids):
- baseline: `ModelCall.model_dump_json()`, what `results.jsonl` pays for the call anyway when
  its rollout is written;
- call log: `CallLog.write` (serialise, write, flush);
and the ratio. Target: well under the proxy's own cost per call (about 1 ms p50,
benchmarks/bench_proxy.py).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from harness._core.run.calls import CallLog
from harness._core.types import FunctionCall, Message, ModelCall, ToolCall, TurnTokens


def sample_call() -> ModelCall:
    call = ToolCall(id="call_1", function=FunctionCall(name="bash", arguments='{"command": "ls -la /app"}'))
    conversation = [
        Message(role="system", content="You are a coding agent. " * 20),
        Message(role="user", content="Fix the failing test in /app. " * 10),
        Message(role="assistant", content=None, tool_calls=[call]),
        Message(role="tool", tool_call_id="call_1", content="total 12\n" + "-rw-r--r-- file.py\n" * 30),
    ]
    reply = Message(role="assistant", content="The test fails because " * 8)
    tokens = TurnTokens(
        turn=1,
        prompt_token_ids=list(range(900)),
        completion_token_ids=list(range(120)),
        logprobs=[-0.5] * 120,
    )
    return ModelCall(index=1, dialect="chat", conversation=[*conversation, reply], reply=reply, tokens=tokens)


def per_call_us(action, calls: int) -> float:
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        action()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    calls = parser.parse_args().calls
    call = sample_call()
    with tempfile.TemporaryDirectory() as folder:
        log = CallLog(Path(folder) / "calls.jsonl")
        baseline = per_call_us(call.model_dump_json, calls)
        logged = per_call_us(lambda: log.write("task-1", 0, call), calls)
        log.close()
        size = (Path(folder) / "calls.jsonl").stat().st_size / calls
    print(f"calls: {calls}, {size / 1024:.1f} KiB per logged call")
    print(f"baseline  model_dump_json  p50 {baseline:8.1f} us/call")
    print(f"call log  CallLog.write    p50 {logged:8.1f} us/call")
    print(f"ratio call log / baseline: {logged / baseline:.2f}x")


if __name__ == "__main__":
    main()
