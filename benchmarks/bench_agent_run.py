"""What does one capture proxy per run save over one per rollout, on a real agent run?

Run: python benchmarks/bench_agent_run.py [--rollouts 16] [--concurrency 4] [--rounds 3] [--agent bash]

A 16-rollout agent run: the `bash` agent (or `--agent 'command:...'`) in bubblewrap sandboxes
writes a file, two model calls each against the scripted endpoint (in its own process, so this
process does only the harness's work), `file_contains` scores it in the sandbox. The same run
twice in each round, in alternation so background load on a shared machine hits both alike:
- one proxy per run: `envs.agents.AgentRun` as it is (one `CaptureProxy` for the run, one Unix
  listener per sandbox, one session per rollout);
- one proxy per rollout (the baseline, what each episode paid before): the same run whose
  proxy is a new `CaptureProxy` started for each episode and closed at its end.
Printed, best of the rounds: wall seconds of the run, this process's CPU seconds, proxies
started, and the ratio of the baseline to one per run.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from envs import Environment
from envs.agents import AgentRun, file_contains
from harness import CaptureProxy, Client, ScriptedEndpoint, aevaluate
from harness._core.protocol import Resources
from harness.scripted import ShellScript

TASK = "Write the word hi into the file hello.txt in the current folder."


class ProxyPerRollout(AgentRun):
    """The baseline: every episode starts its own proxy and closes it when the episode ends."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._own: dict[asyncio.Task[Any] | None, CaptureProxy] = {}

    async def _proxy(self, client: Client) -> CaptureProxy:
        proxy = await CaptureProxy(client, model_aliases=["*"], untranslatable="drop").astart()
        self.proxies_started += 1
        self._own[asyncio.current_task()] = proxy
        return proxy

    async def play(self, env: Any, rollout: Any, client: Client, sampling: Mapping[str, Any]) -> Resources:
        try:
            return await super().play(env, rollout, client, sampling)
        finally:
            proxy = self._own.pop(asyncio.current_task(), None)
            if proxy is not None:
                await proxy.aclose()


async def _one_run(run: AgentRun, base_url: str, rollouts: int, concurrency: int) -> tuple[float, float]:
    env = Environment([{"prompt": TASK}], file_contains("hello.txt", "hi"), name="file-task", max_turns=8)
    client = Client("served", base_url=base_url, max_concurrency=concurrency)
    wall, cpu = time.perf_counter(), time.process_time()
    try:
        results = await aevaluate(
            env, client, rollouts_per_example=rollouts, concurrency=concurrency, progress=False, episodes=run
        )
    finally:
        await client.aclose()
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    rewards = [r.reward for r in results]
    assert rewards == [1.0] * rollouts, [r.error for r in results]
    return wall, cpu


async def _bench(base_url: str, agent: str, rollouts: int, concurrency: int, rounds: int) -> None:
    await _one_run(AgentRun(agent), base_url, 2, 2)  # warm-up: imports, the page cache, bwrap
    best: dict[str, tuple[float, float, int]] = {}
    for _ in range(rounds):
        for name, make in (("one proxy per run", AgentRun), ("one proxy per rollout", ProxyPerRollout)):
            run = make(agent)
            wall, cpu = await _one_run(run, base_url, rollouts, concurrency)
            row = (wall, cpu, run.proxies_started)
            best[name] = min(best.get(name, row), row)
    print(
        f"{rollouts} rollouts of agent {agent!r} on bwrap, concurrency {concurrency}, best of {rounds} rounds"
    )
    print(f"{'':<24}{'wall s':>9}{'CPU s':>9}{'proxies':>9}")
    for name, (wall, cpu, proxies) in best.items():
        print(f"{name:<24}{wall:>9.2f}{cpu:>9.2f}{proxies:>9}")
    (run_wall, run_cpu, _), (roll_wall, roll_cpu, _) = best.values()
    print(
        f"one per rollout / one per run: wall x{roll_wall / run_wall:.2f}, CPU x{roll_cpu / run_cpu:.2f}; "
        f"per rollout: {(roll_wall - run_wall) / rollouts * 1e3:+.1f} ms wall, "
        f"{(roll_cpu - run_cpu) / rollouts * 1e3:+.1f} ms CPU"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rollouts", type=int, default=16)
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--agent", default="bash")
    args = parser.parse_args()
    with ScriptedEndpoint(ShellScript(["printf hi > hello.txt"], "done"), process=True) as endpoint:
        asyncio.run(_bench(endpoint.base_url, args.agent, args.rollouts, args.concurrency, args.rounds))


if __name__ == "__main__":
    main()
