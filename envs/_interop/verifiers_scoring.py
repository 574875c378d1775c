"""A Verifiers task's rewards and metrics as rubric leaves, scored by Verifiers' own code.

Each `@vf.reward` of a `verifiers.v1.Task` (and each reward plugged through its config)
becomes a leaf of a `rubrics.WeightedSum` with Verifiers' weight; each `@vf.metric` a leaf of
weight 0 (recorded, not summed, as in Verifiers). A leaf rebuilds the rollout as a Verifiers
`Trace` and calls the task's function through Verifiers' own argument injection
(`verifiers.v1.utils.decorators.invoke`, the one `Task.score` uses), so `reward` equals
Verifiers' `trace.reward` (the sum of score x weight) on the same completion, and every
reward is its own node with its own score or NaN reason.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from harness._core.errors import ConfigError
from harness._core.types import Message, Rollout
from rubrics import WeightedSum, reward

#: Where a rollout's `info` keeps the Verifiers task data it was made from.
TASK_KEY = "verifiers_task"


def _vf_types() -> Any:
    import verifiers.v1 as vf  # the [verifiers] extra; checked by envs._interop.verifiers first

    return vf


def task_for(rollout: Rollout, template: Any) -> Any:
    """The Verifiers task a rollout came from: `template`'s class and config, the rollout's data."""
    data = rollout.info.get(TASK_KEY)
    if not isinstance(data, Mapping):
        raise ConfigError(
            f"rollout {rollout.example_id!r} has no Verifiers task data in info[{TASK_KEY!r}]; "
            "score rollouts of an environment made by envs.from_verifiers"
        )
    return type(template)(type(template).data_type().model_validate(dict(data)), template.config)


def _vf_message(message: Message, vf: Any) -> Any:
    """One of our messages as Verifiers' typed message (its tool calls flat, as Verifiers keeps them)."""
    content = message.content if message.content is not None else ""
    if message.role == "system":
        return vf.SystemMessage(content=content)
    if message.role == "user":
        return vf.UserMessage(content=content)
    if message.role == "tool":
        return vf.ToolMessage(tool_call_id=message.tool_call_id or "", content=content, name=message.name)
    calls = [
        vf.ToolCall(id=call.id, name=call.name, arguments=call.arguments) for call in message.tool_calls or []
    ]
    return vf.AssistantMessage(content=message.text or None, tool_calls=calls or None)


def verifiers_trace(rollout: Rollout, task: Any) -> Any:
    """The rollout as the `verifiers.v1.Trace` Verifiers would have recorded for it.

    The conversation is one branch of message nodes (the model's turns `sampled`); the task
    is `task`; `ok` is True unless the rollout failed. What only Verifiers' own harness
    records (token ids, model calls, timing, runtime) is absent.
    """
    vf = _vf_types()
    from verifiers.v1.graph import MessageNode  # the [verifiers] extra, as above
    from verifiers.v1.state import state_cls
    from verifiers.v1.trace import AgentInfo, TraceTask

    nodes = []
    for position, message in enumerate([*rollout.prompt, *rollout.completion]):
        sampled = position >= len(rollout.prompt) and message.role == "assistant"
        parent = position - 1 if position else None
        nodes.append(MessageNode(parent=parent, message=_vf_message(message, vf), sampled=sampled))
    trace = vf.Trace(
        task=TraceTask(type=type(task).__name__, data=task.data, key=task.key, hash=task.hash),
        agent=AgentInfo(config=vf.AgentConfig(), name="agent"),
        nodes=nodes,
        state=state_cls(type(task))(),
    )
    trace.is_completed = True
    trace.ok = rollout.error is None
    trace.stop_condition = rollout.stop_reason
    return trace


class VerifiersSignal:
    """One `@vf.reward` or `@vf.metric` of a Verifiers task, as a reward function of a rollout.

    Keyed scores (a function returning a mapping) are summed: Verifiers records each key
    with the function's weight, so the sum times the weight is the same contribution.
    """

    def __init__(self, template: Any, kind: str, name: str) -> None:
        self.template = template
        self.kind = kind
        self.name = name

    async def __call__(self, rollout: Rollout) -> float:
        from verifiers.v1.utils.decorators import invoke  # the [verifiers] extra, as above

        task = task_for(rollout, self.template)
        fn = next(f for f in task.hooks(self.kind) if f.__name__ == self.name)
        result = await invoke(fn, {"task": task.data, "trace": verifiers_trace(rollout, task)})
        if isinstance(result, Mapping):
            return float(sum(float(v) for v in result.values()))
        return float(result)


def _needs_runtime(fn: Any) -> bool:
    """Verifiers' own test (Task.score): a `runtime` parameter without a default."""
    param = inspect.signature(fn).parameters.get("runtime")
    return param is not None and param.default is inspect.Parameter.empty


def _check_signals(template: Any, rewards: list[Any], metrics: list[Any]) -> None:
    """Reject, when the environment is built, what could never score here."""
    where = type(template).__name__
    judges = template.plugged_judges()
    if judges:
        names = ", ".join(judge.reward_name for judge in judges)
        raise ConfigError(
            f"Verifiers task {where} plugs judges ({names}), which call a model through Verifiers' "
            "own client; from_verifiers does not run them: remove them from the task config and "
            "add a rubrics.LLMJudge to env.rubric instead"
        )
    for fn in [*rewards, *metrics]:
        if _needs_runtime(fn):
            raise ConfigError(
                f"Verifiers {fn.__name__!r} of task {where} needs a `runtime` (a Verifiers sandbox), "
                "which does not carry over to rubric; give the parameter a default (runtime=None) "
                "or evaluate this environment with Verifiers' own vf-eval"
            )
        if not inspect.iscoroutinefunction(inspect.unwrap(fn)) and not inspect.iscoroutinefunction(fn):
            raise ConfigError(
                f"Verifiers {fn.__name__!r} of task {where} is not async; Verifiers' own scoring awaits "
                "every reward and metric, so declare it `async def`"
            )


def verifiers_rubric(template: Any) -> WeightedSum:
    """A `WeightedSum` of the task's rewards (Verifiers' weights) and metrics (weight 0).

    Args:
        template: A `verifiers.v1.Task` of the environment; its class and config define the
            rewards, whatever its data.

    Raises:
        ConfigError: The task plugs judges, a function needs a Verifiers runtime, a function
            is not async, it has no reward at all, or a metric and a reward share a name.
    """
    rewards = template.hooks("reward")
    metrics = template.hooks("metric")
    _check_signals(template, rewards, metrics)
    if not rewards:
        raise ConfigError(
            f"Verifiers task {type(template).__name__} declares no @vf.reward; "
            "an environment needs at least one reward to score rollouts"
        )
    clash = {f.__name__ for f in rewards} & {f.__name__ for f in metrics}
    if clash:
        raise ConfigError(
            f"Verifiers task {type(template).__name__} has a reward and a metric named {sorted(clash)}; rename one"
        )
    leaves: dict[str, Any] = {}
    weights: dict[str, float] = {}
    for kind, fns in (("reward", rewards), ("metric", metrics)):
        for fn in fns:
            leaves[fn.__name__] = reward(VerifiersSignal(template, kind, fn.__name__), name=fn.__name__)
            weights[fn.__name__] = float(getattr(fn, "_vf_weight", 1.0)) if kind == "reward" else 0.0
    return WeightedSum(leaves, weights)


__all__ = ["TASK_KEY", "VerifiersSignal", "task_for", "verifiers_rubric", "verifiers_trace"]
