"""Play every probe on N rows of an environment through the real rollout loop, and report.

No model is involved: the probes' replies are served by the scripted OpenAI-compatible
endpoint on 127.0.0.1 and driven by `harness._engine.runner.rollout`, so setup, tool calls, the
environment's replies, stop conditions, `finish_reason`, and scoring are what a real run
does. The model name of each request says which probe and which row it is
("audit:PROBE:ROW"), so one endpoint serves every probe at once.

The reference probe runs first: its conversations give the other probes their material
(the reference's final text, its tool calls, whether the answer is written in it).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import harness
from envs._auditing.agents import add_agent_probes, play_agent_probes, reads_sandbox
from envs._auditing.probes import (
    PROBES,
    REFERENCE_POLICIES,
    Policy,
    Probe,
    RowContext,
    substitute,
    wrong_answer,
)
from envs._auditing.report import build_report
from envs._auditing.result import AuditReport, ProbeInfo
from envs._environment import Environment
from harness._core.aio import run_sync
from harness._core.errors import ConfigError
from harness._core.types import Rollout
from harness._endpoint.client import Client
from harness._endpoint.connect import open_client
from harness.scripted._endpoint import ScriptedEndpoint, StatefulPolicy
from rubrics._judge.llm import LLMJudge

DEFAULT_NUM_EXAMPLES = 20
#: Probe rollouts in flight at once.
DEFAULT_CONCURRENCY = 16
_PREFIX = "audit"


@dataclass(frozen=True)
class Reference:
    """Where the reference replies come from: a scripted policy, the form of a gold reward
    fixture (its completion with each row's answer in place of its own), or the bare answer."""

    label: str
    policy: Policy | None = None
    form: tuple[str, str] | None = None  # (a gold fixture's reply, its answer)

    def text_for(self, answer: str | None) -> str:
        """The reference reply for a row with `answer`, when no policy writes it."""
        if self.form is not None and answer is not None:
            return str(substitute(self.form[0], self.form[1], answer)[0])
        return answer or ""


def find_reference(env: Environment) -> Reference:
    """The environment's `oracle` (or `demo`, `reference`) scripted policy; else the form of its
    first gold reward fixture whose reply contains its answer; else the bare answer."""
    for name in REFERENCE_POLICIES:
        policy = env.scripted_policies.get(name)
        if policy is not None:
            fresh = policy.fresh() if isinstance(policy, StatefulPolicy) else policy
            return Reference(f"the {name!r} scripted policy", policy=fresh)
    fixtures = getattr(env, "reward_fixtures", None) or {}
    for position, sample in enumerate(fixtures.get("gold") or []):
        try:
            gold = Rollout.model_validate(sample)
        except ValueError:  # `rubric check` reports a malformed fixture; here it is just not used
            continue
        answer = _text(gold.answer)
        if answer and substitute(gold.response, answer, answer)[1]:
            return Reference(f"the form of reward fixture gold[{position}]", form=(gold.response, answer))
    return Reference("the bare answer (no oracle policy or gold fixture)")


class _Dispatcher:
    """The endpoint's one policy: answers "audit:PROBE:ROW" requests with that probe's reply."""

    def __init__(self, reference: Policy | None) -> None:
        self.reference = reference
        self.probes = {p.name: p for p in PROBES}
        self.contexts: dict[int, RowContext] = {}

    def __call__(self, messages: list[dict[str, Any]], tools: Any, body: dict[str, Any]) -> Any:
        _, name, row = str(body.get("model", "")).split(":")
        reply = self.probes[name].reply(self.contexts[int(row)], self.reference, messages, tools)
        return "" if reply is None else reply


def _text(value: Any) -> str | None:
    return None if value is None else str(value)


def _context(
    index: int, first: Rollout, answers: Sequence[str | None], tools: list[dict[str, Any]]
) -> RowContext:
    """What the probes need about one row, taken from its reference conversation."""
    answer = _text(first.answer)
    wrong = wrong_answer(answer, answers)
    assistant = [m for m in first.completion if m.role == "assistant"]
    texts = [m.text for m in assistant if m.text.strip()]
    calls = [c.model_dump() for c in (assistant[0].tool_calls or [])] if assistant else []
    has_answer = False
    if answer is not None and wrong is not None:
        _, count = substitute([m.to_openai() for m in assistant], answer, wrong)
        has_answer = count > 0
    return RowContext(
        index=index,
        answer=answer,
        wrong=wrong,
        reference_text=texts[-1] if texts else (answer or ""),
        reference_calls=calls,
        reference_has_answer=has_answer,
        prompt_text="\n\n".join(m.text for m in first.prompt),
        tools=tools,
    )


async def _play(
    env: Environment,
    client: Client,
    probe: str,
    rows: Sequence[tuple[int, Mapping[str, Any]]],
    limit: asyncio.Semaphore,
) -> list[Rollout]:
    """One rollout of `probe` per (row index, row), in order."""

    async def one(index: int, row: Mapping[str, Any]) -> Rollout:
        async with limit:
            return await harness.rollout(env, client, row, sampling={"model": f"{_PREFIX}:{probe}:{index}"})

    return list(await asyncio.gather(*(one(i, row) for i, row in rows)))


@contextlib.asynccontextmanager
async def _judges_on(
    env: Environment, stack: contextlib.ExitStack[Any], model: str | None, base_url: str | None
) -> AsyncIterator[list[str]]:
    """Point every `LLMJudge` node at `model`/`base_url` for the audit; yields their paths.

    After, each judge gets back its own settings and client: the audit's pools are closed and
    a client the user gave the judge is put back (configuring another model drops it).
    """
    judges = [
        (path, node)
        for path, node in [("", env.rubric), *env.rubric.named_rubrics()]
        if isinstance(node, LLMJudge)
    ]
    if model is None and base_url is None:
        yield [path for path, _ in judges]
        return
    if model is None:
        raise ConfigError("--judge-base-url needs --judge-model (the judge's model name, or scripted:POLICY)")
    saved = [(node, node.model, node.base_url, dict(vars(node))) for _, node in judges]
    client = open_client(stack, model, env=env, base_url=base_url)
    for _, node in judges:
        node.configure(model=client.model, base_url=client.base_url)
    try:
        yield [path for path, _ in judges]
    finally:
        for node, old_model, old_url, old_vars in saved:
            await node.aclose()  # the pool the judge opened for the audit's endpoint
            node.configure(model=old_model, base_url=old_url)
            # LLMJudge keeps its client beside its config; put the user's own back.
            vars(node).update({k: old_vars[k] for k in ("_client", "_owns_client") if k in old_vars})


async def aaudit(
    env: Environment,
    num_examples: int = DEFAULT_NUM_EXAMPLES,
    *,
    judge_model: str | None = None,
    judge_base_url: str | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    seed: int | None = None,
    agent_probes: bool | None = None,
    runtime: str | None = None,
) -> AuditReport:
    """Score probe completions (empty, bare answer, wrong answer, answer in <think>, injection, ...)
    on `num_examples` rows with the environment's rubric, and flag what looks wrong with it.

    Args:
        env: The environment to audit.
        num_examples: Dataset rows to probe (the first ones, or a seeded shuffle with `seed`).
        judge_model: Model for every `LLMJudge` node during the audit ("scripted:POLICY" serves
            one of the environment's scripted policies on 127.0.0.1); default: each judge's own.
        judge_base_url: Endpoint of `judge_model`.
        concurrency: Probe rollouts in flight at once.
        seed: Shuffle the rows with this seed before taking `num_examples`.
        agent_probes: Also run the file-level hack probes as `command:` agents in the
            environment's sandbox (`envs._auditing.agents`); None: when the rubric has a
            `file_contains` or `command_passes` node. They play the first `num_examples` rows.
        runtime: The agent probes' sandbox runtime (as `rubric eval --runtime`).

    Returns:
        An `AuditReport`: per node and probe the mean score and error rate, and the flags.
    """
    _check_arguments(num_examples, concurrency, agent_probes, runtime)
    started = time.perf_counter()
    rows = list(env.get_dataset(n=num_examples, seed=seed))
    if not rows:
        raise ConfigError(f"environment {env.name!r} has no examples to audit")
    with_agents = reads_sandbox(env.rubric) if agent_probes is None else agent_probes
    reference = find_reference(env)
    dispatcher = _Dispatcher(reference.policy)
    answers = [_text(row.get("answer")) for row in rows]
    for i, answer in enumerate(answers):  # what the reference probe needs before it has played
        dispatcher.contexts[i] = RowContext(i, answer, wrong=None, reference_text=reference.text_for(answer))
    with contextlib.ExitStack() as stack:
        async with _judges_on(env, stack, judge_model, judge_base_url) as judges:
            await env.preflight()
            endpoint = stack.enter_context(ScriptedEndpoint(dispatcher))
            if with_agents:  # replies alone reach no sandbox: every reply probe would score NaN
                played: dict[str, list[Rollout]] = {}
                infos: list[ProbeInfo] = []
                agents = await play_agent_probes(env, rows, runtime, concurrency)
            else:
                played, infos = await _play_all(
                    env, endpoint.base_url, rows, dispatcher, answers, concurrency
                )
                agents = None
    report = build_report(
        env_name=env.name,
        rubric=env.rubric,
        judges=judges,
        probes=infos,
        rollouts=played,
        reference=reference.label,
        seconds=0.0,
    )
    if agents is not None:
        report.num_examples = len(rows)
        add_agent_probes(report, env, *agents)
    report.seconds = time.perf_counter() - started
    return report


def _check_arguments(
    num_examples: Any, concurrency: Any, agent_probes: bool | None, runtime: str | None
) -> None:
    """`aaudit`'s arguments, refused by name before anything runs."""
    if isinstance(num_examples, bool) or not isinstance(num_examples, int) or num_examples < 1:
        raise ConfigError(f"num_examples must be a positive integer, got {num_examples!r}")
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigError(f"concurrency must be a positive integer, got {concurrency!r}")
    if runtime is not None and agent_probes is False:
        raise ConfigError(
            "runtime= goes with the agent probes (agent_probes=True, or a rubric that reads the sandbox)"
        )


async def _play_all(
    env: Environment,
    base_url: str,
    rows: Sequence[Mapping[str, Any]],
    dispatcher: _Dispatcher,
    answers: Sequence[str | None],
    concurrency: int,
) -> tuple[dict[str, list[Rollout]], list[ProbeInfo]]:
    """Every probe against the endpoint at `base_url`, through one client closed after."""
    client = Client(_PREFIX, base_url=base_url, api_key=_PREFIX, max_concurrency=concurrency, max_retries=0)
    try:
        return await _play_probes(env, client, rows, dispatcher, answers, asyncio.Semaphore(concurrency))
    finally:
        await client.aclose()


async def _play_probes(
    env: Environment,
    client: Client,
    rows: Sequence[Mapping[str, Any]],
    dispatcher: _Dispatcher,
    answers: Sequence[str | None],
    limit: asyncio.Semaphore,
) -> tuple[dict[str, list[Rollout]], list[ProbeInfo]]:
    """The reference first (the others are built from it), then every other probe that applies."""
    first = await _play(env, client, "reference", list(enumerate(rows)), limit)
    tools = list(env.tool_schemas)
    for i, reference_rollout in enumerate(first):
        dispatcher.contexts[i] = _context(i, reference_rollout, answers, tools)
    played: dict[str, list[Rollout]] = {"reference": first}
    infos: list[ProbeInfo] = []
    pending: list[tuple[Probe, list[int]]] = []
    for probe in PROBES:
        if probe.tools_only and not tools:
            continue
        usable = [i for i in range(len(rows)) if probe.applies(dispatcher.contexts[i])]
        infos.append(
            ProbeInfo(probe.name, probe.description, probe.kind, len(usable), len(rows), probe.needs)
        )
        if probe.name != "reference" and usable:
            pending.append((probe, usable))
    results = await asyncio.gather(
        *(_play(env, client, probe.name, [(i, rows[i]) for i in usable], limit) for probe, usable in pending)
    )
    for (probe, _), rollouts in zip(pending, results):
        played[probe.name] = rollouts
    return played, infos


def audit(
    env: Environment,
    num_examples: int = DEFAULT_NUM_EXAMPLES,
    *,
    judge_model: str | None = None,
    judge_base_url: str | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    seed: int | None = None,
    agent_probes: bool | None = None,
    runtime: str | None = None,
) -> AuditReport:
    """Synchronous `aaudit` (works in scripts and inside a running event loop, as in Jupyter).

    Args:
        env: The environment to audit.
        num_examples: Dataset rows to probe.
        judge_model: Model for every `LLMJudge` node during the audit (see `aaudit`).
        judge_base_url: Endpoint of `judge_model`.
        concurrency: Probe rollouts in flight at once.
        seed: Shuffle the rows with this seed before taking `num_examples`.
        agent_probes: Run the agent probes (see `aaudit`; None: when the rubric reads the sandbox).
        runtime: The agent probes' sandbox runtime.

    Returns:
        The `AuditReport`, as `aaudit` returns it.
    """
    return run_sync(
        aaudit(
            env,
            num_examples,
            judge_model=judge_model,
            judge_base_url=judge_base_url,
            concurrency=concurrency,
            seed=seed,
            agent_probes=agent_probes,
            runtime=runtime,
        )
    )


__all__ = ["DEFAULT_NUM_EXAMPLES", "Reference", "aaudit", "audit", "find_reference"]
