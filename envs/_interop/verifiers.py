"""Run a Verifiers environment in our harness: `from_verifiers(vf_env)` and the `vf:NAME` spec.

Verifiers 0.4's API is `verifiers.v1`: an environment is a `Taskset` package (a module whose
`__all__` exports one `Taskset` subclass) yielding `Task`s; a task carries `TaskData`
(`prompt`, `system_prompt` and the taskset's own fields such as `answer`), its
`@vf.reward(weight=...)` and `@vf.metric` functions, and `Toolset`s (MCP servers of `@vf.tool`
methods). Verifiers' own loader finds and builds it (`vf:NAME` goes through
`verifiers.v1.load_environment`); this module maps what it built:

- tasks -> dataset rows: the prompt (a system message first when the task has a system
  prompt, as Verifiers' chat harness sends it), `answer`, `id`; the task data itself in
  `info["verifiers_task"]`, from which each reward rebuilds the task;
- rewards and metrics -> a `WeightedSum` scored by Verifiers' own code (`envs._interop.verifiers_scoring`);
- toolsets -> MCP servers serving Verifiers' own tool registration (`envs._interop.verifiers_tools`).

What does not carry over (harnesses, runtimes and sandboxes, judges, stop and intercept
hooks, multi-agent envs) is listed in README's Interoperability section.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, NoReturn

import pydantic

from envs._environment import Environment
from envs._interop.verifiers_scoring import TASK_KEY, verifiers_rubric
from envs._interop.verifiers_tools import toolset_servers
from envs._presets import SingleTurnEnv, ToolEnv
from harness._core.errors import ConfigError, ConfigTypeError, EnvironmentNotFoundError

INSTALL_HINT = "pip install 'rubric-rl[verifiers]'"
#: `vf:NAME` arguments for `from_verifiers` rather than the taskset (unless its config has the field).
_OPTIONS = ("num_tasks", "max_turns", "sampling")


def _vf() -> Any:
    """`verifiers.v1`, or one ConfigError line naming the extra to install."""
    try:
        import verifiers.v1 as vf  # the [verifiers] extra: imported only when it is used
    except ImportError:
        raise ConfigError(f"Verifiers environments need the verifiers package: {INSTALL_HINT}") from None
    return vf


def _taskset_of(vf_env: Any, vf: Any) -> Any:
    if isinstance(vf_env, vf.Env):
        return vf_env.taskset
    if isinstance(vf_env, vf.Taskset):
        return vf_env
    raise ConfigTypeError(
        f"from_verifiers takes a verifiers.v1 Env or Taskset, got {type(vf_env).__name__}; "
        "load one with verifiers.v1.load_environment(...), or pass 'vf:NAME' to envs.load_environment"
    )


def _tasks(taskset: Any, num_tasks: int | None) -> list[Any]:
    if num_tasks is not None and (
        isinstance(num_tasks, bool) or not isinstance(num_tasks, int) or num_tasks < 1
    ):
        raise ConfigTypeError(f"num_tasks must be a positive integer or None, got {num_tasks!r}")
    if num_tasks is not None:
        taskset = taskset.take(num_tasks)
    elif not taskset.bounded:
        raise ConfigError(
            f"Verifiers taskset {type(taskset).__name__} is infinite; bound it with num_tasks=N"
        )
    tasks = list(taskset)
    if not tasks:
        raise ConfigError(f"Verifiers taskset {type(taskset).__name__} yielded no tasks")
    kinds = sorted({type(t).__name__ for t in tasks})
    if len(kinds) > 1:
        raise ConfigError(f"Verifiers taskset {type(taskset).__name__} yielded several task types: {kinds}")
    return tasks


def _prompt(data: Any) -> list[dict[str, Any]]:
    """The task's opening messages: its system prompt first, then its prompt (text or messages)."""
    if data.prompt is None:
        raise ConfigError(
            f"Verifiers task {data.idx} has no prompt (the user opens the conversation); "
            "from_verifiers runs tasks whose prompt the model answers"
        )
    messages: list[dict[str, Any]] = []
    if data.system_prompt is not None:
        messages.append({"role": "system", "content": data.system_prompt})
    if isinstance(data.prompt, str):
        messages.append({"role": "user", "content": data.prompt})
    else:
        messages.extend(_openai_message(m) for m in data.prompt)
    return messages


def _openai_message(message: Any) -> dict[str, Any]:
    """A Verifiers message (a few-shot turn of a task's prompt) in OpenAI's shape: tool calls nested."""
    dumped = message.model_dump(mode="json", exclude_none=True)
    shaped = {k: dumped[k] for k in ("role", "content", "tool_call_id", "name") if k in dumped}
    if dumped.get("tool_calls"):
        shaped["tool_calls"] = [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in dumped["tool_calls"]
        ]
    return shaped


def _row(task: Any) -> dict[str, Any]:
    data = task.data
    answer = getattr(data, "answer", None)
    return {
        "id": str(data.id) if data.id is not None else str(data.idx),
        "prompt": _prompt(data),
        "answer": None if answer is None else str(answer),
        "info": json.dumps({TASK_KEY: data.model_dump(mode="json")}),
    }


def from_verifiers(
    vf_env: Any,
    *,
    name: str | None = None,
    num_tasks: int | None = None,
    max_turns: int | None = None,
    sampling: Mapping[str, Any] | None = None,
) -> Environment:
    """An environment written with Verifiers (0.4, `verifiers.v1`), runnable with our harness.

    Args:
        vf_env: A `verifiers.v1.Env` (as `verifiers.v1.load_environment` returns) or a
            `verifiers.v1.Taskset`.
        name: The environment's name in results (default: the taskset's id or class name).
        num_tasks: Read only the first n tasks (required for an infinite taskset).
        max_turns: Most assistant turns (default: 1 without tools, 10 with them).
        sampling: Default sampling arguments for the endpoint, e.g. {"max_tokens": 512}.

    Returns:
        A `SingleTurnEnv`, or a `ToolEnv` when the taskset or its tasks declare toolsets, whose
        rubric is a `WeightedSum` of the task's rewards (Verifiers' weights) and metrics (weight 0).

    Raises:
        ConfigError: Verifiers is not installed, the taskset is empty or infinite, or a task uses
            something that does not carry over (judges, runtime-bound rewards, user-opened prompts).
    """
    vf = _vf()
    taskset = _taskset_of(vf_env, vf)
    tasks = _tasks(taskset, num_tasks)
    rubric = verifiers_rubric(tasks[0])
    tools = toolset_servers(taskset, tasks[0])
    options: dict[str, Any] = {
        "name": name or taskset.config.id or type(taskset).__name__,
        "sampling": sampling,
    }
    rows = [_row(task) for task in tasks]
    if tools:
        return ToolEnv(rows, rubric, tools=tools, max_turns=max_turns, **options)
    return SingleTurnEnv(rows, rubric, max_turns=max_turns, **options)


def load_verifiers(name: str, **kwargs: Any) -> Environment:
    """The installed Verifiers environment `name`, found and built by Verifiers' own loader.

    This is what the spec `vf:NAME` runs (`envs.load_environment("vf:NAME", **kwargs)`,
    `rubric eval vf:NAME -a '{...}'`). `kwargs` are the taskset's config fields (Verifiers'
    `--env.taskset.*`), and `num_tasks`, `max_turns` and `sampling` of `from_verifiers`
    unless the taskset's config declares a field of that name (then it is the taskset's).

    Raises:
        EnvironmentNotFoundError: No Verifiers environment package named `name` is importable.
        ConfigTypeError: An argument the taskset's config does not take, or of the wrong type.
        ConfigError: The package imports a module that is not installed.
    """
    vf = _vf()
    try:
        fields = set(vf.taskset_config_type(name).model_fields) - {"id"}
        # Ours are the options the taskset's own config does not declare: its fields come first.
        options = {key: kwargs.pop(key) for key in _OPTIONS if key in kwargs and key not in fields}
        config = vf.resolve_env_config({"taskset": {"id": name, **kwargs}})
    except ModuleNotFoundError as exc:
        _raise_not_found(name, exc)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"][1:]) or "(config)"
        raise ConfigTypeError(
            f"Verifiers environment {name!r}: argument {where}: {first['msg']}; it takes its taskset "
            f"config's {', '.join(sorted(fields))} and {', '.join(k for k in _OPTIONS if k not in fields)}"
        ) from None
    return from_verifiers(vf.load_environment(config), name=name, **options)


def _raise_not_found(name: str, exc: ModuleNotFoundError) -> NoReturn:
    """The package is not installed, or it imports one that is not: say which."""
    module = name.rsplit("/", 1)[-1].split("@", 1)[0].replace("-", "_").lower()  # as Verifiers names it
    missing = getattr(exc.__cause__, "name", None) or exc.name
    if missing and missing != module and not module.startswith(missing + "."):
        raise ConfigError(
            f"Verifiers environment {name!r} imports {missing!r}, which is not installed; install it"
        ) from None
    raise EnvironmentNotFoundError(
        f"no Verifiers environment package named {name!r} is installed (Verifiers imports it as "
        f"module {module!r}); install it (pip install {name}, or `prime env install OWNER/{name}`) "
        "or run from the folder that holds it (or put that folder on PYTHONPATH)"
    ) from None


__all__ = ["INSTALL_HINT", "from_verifiers", "load_verifiers"]
