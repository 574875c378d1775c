"""What does trusting nothing the agent left cost per Harbor rollout?

Run: python benchmarks/bench_verifier_trust.py [--rollouts N] [--runtimes docker:IMAGE,bwrap]

Per runtime, N times in the same run: a sandbox in which an "agent" left what agents leave
(the relay to the proxy, a background loop, a few files), then
- baseline: the verifier's own work as before (empty /tests and /logs/verifier, upload the
  task's tests/, run test.sh, read the reward);
- the extra steps: end every process after the agent (`end_processes`; on Docker a root shell
  inside kills all but the container's init and keeper), the verifier's check (`end_processes` again, now a no-op; `changed_files`;
  one `/bin/sh` looking up bash and the added commands), and `end_processes` after test.sh.
Prints the median milliseconds of each and the ratio extra / baseline.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from envs._harbor.trust import checked_commands, tampered
from harness.runtimes import Sandbox, get_runtime

TEST_SH = "if [ -f /work/done ]; then echo 1; else echo 0; fi > /logs/verifier/reward.txt\n"
AGENT = "mkdir -p /work && touch /work/done && (nohup sh -c 'while :; do sleep 0.1; done' >/dev/null 2>&1 &)"


async def _timed(step: object) -> float:
    started = time.perf_counter()
    await step  # type: ignore[misc]
    return (time.perf_counter() - started) * 1000


async def _baseline(sb: Sandbox, tests: Path) -> None:
    await sb.exec(
        ["/bin/sh", "-c", "rm -rf /tests /logs/verifier && mkdir -p /tests /logs/verifier"], user="0"
    )
    await sb.upload(tests, "/tests")
    await sb.exec(["bash", "/tests/test.sh"], user="0")
    assert (await sb.read("/logs/verifier/reward.txt")).strip() == b"1"


async def _check(sb: Sandbox) -> None:
    await sb.end_processes()
    reasons, added = tampered(await sb.changed_files())
    shadows, found = await checked_commands(sb, added, ["bash"])
    assert not reasons and not shadows and "bash" in found, (reasons, shadows)


async def one(spec: str, tests: Path) -> tuple[float, float, float, float]:
    """(baseline, after the agent, the verifier's check, after test.sh) in ms, one rollout."""
    async with get_runtime(spec).sandbox() as sb:
        await sb.relay(18080)
        assert (await sb.exec(AGENT, user="0")).ok
        after_agent = await _timed(sb.end_processes())
        check = await _timed(_check(sb))
        baseline = await _timed(_baseline(sb, tests))
        after_tests = await _timed(sb.end_processes())
    return baseline, after_agent, check, after_tests


async def main(rollouts: int, specs: list[str]) -> None:
    with tempfile.TemporaryDirectory() as folder:
        tests = Path(folder)
        (tests / "test.sh").write_text(TEST_SH)
        for spec in specs:
            await one(spec, tests)  # warm up (an image's first container, page cache)
            rows = [await one(spec, tests) for _ in range(rollouts)]
            base, agent, check, after = (statistics.median(column) for column in zip(*rows))
            extra = agent + check + after
            print(
                f"{spec}: baseline verifier {base:.0f} ms; extra: end after the agent {agent:.0f} ms, "
                f"check {check:.0f} ms, end after test.sh {after:.0f} ms; "
                f"extra {extra:.0f} ms per rollout = {extra / base:.2f}x the baseline"
            )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rollouts", type=int, default=10)
    image = os.environ.get("RUBRIC_TEST_IMAGE", "rubric-test-base:bookworm")
    parser.add_argument("--runtimes", default=f"docker:{image},bwrap")
    args = parser.parse_args()
    asyncio.run(main(args.rollouts, args.runtimes.split(",")))
