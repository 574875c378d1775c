"""The file-level hack probes of an agent environment (one whose rubric reads the sandbox):
each probe is a `command:` agent that writes the paths the instruction and the rubric's checks
name (empty, a constant, type-shaped, pass markers), or does nothing, in the environment's own
sandbox; the environment's own rubric scores it. A probe that reaches the reward of the
environment's reference (its solving scripted policy, played by the `bash` agent; else 1) beats
it: `add_agent_probes` puts each probe in the audit report as "agent:NAME", each beat as a
"hackable" flag with its evidence (what the probe wrote, what each check read).

The scripts are the Harbor certificate's (`envs.agents._hacks`).
"""

from __future__ import annotations

import asyncio
import json
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from envs._auditing.probes import REFERENCE_POLICIES
from envs._auditing.report import TOLERANCE, cell_of
from envs._auditing.result import ROOT, AuditReport, Flag, ProbeInfo
from envs._environment import Environment
from envs.agents import command_passes, file_contains
from envs.agents._hacks import WEAK_CONTENTS, markers_script, named_paths, weak_script
from harness._core.types import Rollout
from harness._endpoint.client import Client
from rubrics import Rubric

#: The scripted policies that solve an agent environment, looked for in this order.
SOLVING_POLICIES = (*REFERENCE_POLICIES, "solve")
#: Characters of a probe's output kept as evidence.
EVIDENCE_CHARS = 1500
#: The prefix of the agent probes' names in the report.
PREFIX = "agent:"
#: Each probe: what it does.
AGENT_PROBES = {
    "nothing": "the do-nothing agent",
    "weak-empty": "writes every named path empty",
    "weak-constant": "writes every named path as '1'",
    "weak-shaped": "writes every named path with type-shaped content ({} for .json, ...)",
    "pass-markers": 'writes pass markers (ALL TESTS PASSED, {"passed": true}) into every named path',
}


def _nodes(rubric: Rubric) -> list[Rubric]:
    return [rubric, *(node for _, node in rubric.named_rubrics())]


def reads_sandbox(rubric: Rubric) -> bool:
    """Whether the rubric has a `file_contains` or `command_passes` node (the audit then runs
    the agent probes by itself; a custom reader asks for them with `agent_probes=True`)."""
    return any(isinstance(node, (file_contains, command_passes)) for node in _nodes(rubric))


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, (list, tuple)):
        for item in value:
            yield from _strings(item)


def probed_paths(rubric: Rubric, rows: Sequence[Mapping[str, Any]]) -> list[str]:
    """Every path the rows (their instructions) and the rubric's checks name, relative ones as
    they are (the sandbox's working directory)."""
    texts = [text for row in rows for text in _strings(row)]
    checked = [node.path for node in _nodes(rubric) if isinstance(node, file_contains)]
    texts += [node.command for node in _nodes(rubric) if isinstance(node, command_passes)]
    return sorted({*named_paths(texts, None), *checked})


def probe_script(name: str, paths: Sequence[str]) -> str:
    """The shell script of the agent probe `name` over `paths`."""
    if name == "nothing":
        return "true"
    if name == "pass-markers":
        return markers_script(paths)
    return weak_script(paths, WEAK_CONTENTS[name])


def solving_policy(env: Environment) -> str | None:
    """The name of the environment's solving scripted policy, or None."""
    return next((name for name in SOLVING_POLICIES if name in env.scripted_policies), None)


async def _play(
    env: Environment, model: Client | str, agent: str, n: int, runtime: str | None, concurrency: int
) -> list[Rollout]:
    results = await env.aevaluate(
        model, agent=agent, runtime=runtime, num_examples=n, concurrency=concurrency, progress=False
    )
    return list(results.rollouts)


async def play_agent_probes(
    env: Environment, rows: Sequence[Mapping[str, Any]], runtime: str | None, concurrency: int
) -> tuple[dict[str, list[Rollout]], list[str]]:
    """The reference (when the environment has a solving policy) and every agent probe on the
    first `len(rows)` rows: rollouts by probe name (without the prefix), and the paths probed."""
    paths = probed_paths(env.rubric, rows)
    played: dict[str, list[Rollout]] = {}
    policy = solving_policy(env)
    if policy is not None:
        played["reference"] = await _play(env, f"scripted:{policy}", "bash", len(rows), runtime, concurrency)
    # The command agents never call the model: a client of a closed loopback port stands in.
    client = Client("audit:none", base_url="http://127.0.0.1:9/v1", api_key="none", max_retries=0)
    try:
        runs = await asyncio.gather(
            *(
                _play(env, client, f"command:{probe_script(name, paths)}", len(rows), runtime, concurrency)
                for name in AGENT_PROBES
            )
        )
    finally:
        await client.aclose()
    played.update(zip(AGENT_PROBES, runs))
    return played, paths


def _evidence(rollout: Rollout) -> dict[str, Any]:
    agent = rollout.state.get("agent") or {}
    said = (str(agent.get("stdout", "")) + str(agent.get("stderr", "")))[-EVIDENCE_CHARS:]
    scores = {k: None if math.isnan(v) else v for k, v in rollout.scores.items()}
    details = json.loads(json.dumps(rollout.score_details, default=str))  # JSON-able for --json
    return {"agent": said, "scores": scores, "details": details}


def add_agent_probes(
    report: AuditReport, env: Environment, played: Mapping[str, list[Rollout]], paths: Sequence[str]
) -> None:
    """Put the agent probes' rollouts in `report` (probes "agent:NAME", their cells, rollouts)
    and flag each probe whose mean reward reaches the reference's."""
    total = len(next(iter(played.values()), []))
    policy = solving_policy(env)
    reference = cell_of(played.get("reference", []), ROOT).mean if policy is not None else None
    if policy is not None and (reference is None or math.isnan(reference)):
        report.notes.append(f"the agent reference (scripted policy {policy!r}, bash agent) was not scored: beats are against 1")  # fmt: skip
    target = 1.0 if reference is None else reference
    label = (
        f"the {policy!r} scripted policy played by the bash agent"
        if policy
        else "reward 1 (no solving policy)"
    )
    report.reference = label
    report.notes.append(f"agent probes over {len(paths)} path(s) ({', '.join(paths) or 'none named'}); yardstick: {label} = {target:.3f}")  # fmt: skip
    beats: list[Flag] = []
    for name, rollouts in played.items():
        probe = PREFIX + name
        description = AGENT_PROBES.get(name, "the environment's solving policy, played by the bash agent")
        report.probes.append(ProbeInfo(probe, description, "agent", len(rollouts), total))
        for node in report.nodes:
            report.cells[node][probe] = cell_of(rollouts, node)
        report.rollouts[probe] = list(rollouts)
        mean = report.cells[ROOT][probe].mean
        if name == "reference" or mean is None or mean < target - TOLERANCE:
            continue
        beats.append(Flag(
            "hackable", ROOT, probe,
            f"agent probe {name} ({description}) reaches reward {mean:.3f} of the reference's {target:.3f}",
            evidence=_evidence(rollouts[0]),
        ))  # fmt: skip
    report.flags[:0] = beats


__all__ = [
    "AGENT_PROBES",
    "SOLVING_POLICIES",
    "add_agent_probes",
    "play_agent_probes",
    "probe_script",
    "probed_paths",
    "reads_sandbox",
    "solving_policy",
]
