"""An Environment as TRL GRPOTrainer keyword arguments: dataset, reward functions, tool environment.

`env.trl()` returns a `TRLSpec` whose attributes are exactly GRPOTrainer's keyword arguments
(as TRL's own `OpenRewardSpec` does), so the whole integration is
`GRPOTrainer(model=..., args=..., **env.trl().kwargs)`; nothing subclasses the trainer.

For a tool environment, `environment_factory` builds one `TRLEnvironment` per rollout: TRL
calls `reset(**row)`, exposes each public method as a tool (schema from the signature and
Google docstring, which this module writes from the tool's own schema), and may call
`get_reward()`. TRL's tool loop never shows the environment the model's final message, so
the reward function (which TRL hands both the completion and the environments) scores the
episode: it merges the environment's tool state into the rollout and claims it, and
`get_reward()` then returns None for that episode, so it is not counted twice. Alone (no
reward function), `get_reward()` scores the episode as the environment saw it.

TRL and torch are never imported here: the objects are plain Python.
"""

from __future__ import annotations

import inspect
import json
import keyword
import re
import typing
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from envs._tools.functions import Tool, ToolLike
from envs._tools.schema import TOOL_INJECTED
from envs._training.agents import AgentReward, AgentRolloutFunc
from envs._training.protocol import TrainableEnvironment
from envs.agents._run import AgentRun
from harness._core.aio import run_sync
from harness._core.errors import ConfigError
from harness._core.types import FunctionCall, Message, Rollout, ToolCall, text_messages
from rubrics._trl import as_trl_reward, as_trl_value

if TYPE_CHECKING:  # pragma: no cover
    from datasets import Dataset

_JSON_TYPES = {"string": "text", "integer": "integer", "number": "number", "boolean": "true or false"}


class TRLEnvironment:
    """One rollout's environment for TRL's tool loop (subclassed per Environment with its tools).

    Methods TRL uses: `reset(**row)` starts an episode from a `train_dataset` row, each tool
    method runs that tool (validated exactly as in `rubric eval`, errors come back as text),
    and `get_reward()` scores the episode with the environment's rubric.
    """

    _env: TrainableEnvironment  # set on each generated subclass
    _tools: dict[str, ToolLike]  # the environment's tools by name, set with `_env`

    def __init__(self) -> None:
        self._rollout: Rollout | None = None
        self._claimed = False
        self._calls = 0

    @property
    def rollout(self) -> Rollout:
        """The episode so far: prompt, tool calls and their results, `state`."""
        if self._rollout is None:
            raise RuntimeError(f"{type(self).__name__}.reset(**row) must be called before the episode")
        return self._rollout

    def reset(self, **row: Any) -> None:
        """Start an episode from one `train_dataset` row (TRL passes every column)."""
        self._rollout = run_sync(self._env.setup_rollout(row))
        self._claimed = False
        self._calls = 0

    def _attach_rollout(self, rollout: Rollout) -> None:
        """Give a reward function's rollout this episode's state, and claim the episode.

        Called by `rubrics._trl.TRLReward` with the rollout it built from TRL's completion;
        afterwards `get_reward()` returns None (the reward function scored it already).
        """
        episode = self.rollout
        rollout.state = episode.state
        rollout.example_id = episode.example_id
        rollout.turns = sum(1 for m in rollout.completion if m.role == "assistant")
        self._claimed = True

    def _episode_score(self) -> float | None:
        if self._claimed:
            return None
        episode = self.rollout
        run_sync(self._env.score(episode))
        return as_trl_value(episode.reward)

    def _record(self, name: str, arguments: dict[str, Any], content: str) -> None:
        self._calls += 1
        call = ToolCall(
            id=f"call_{self._calls}", function=FunctionCall(name=name, arguments=json.dumps(arguments))
        )
        episode = self.rollout
        episode.completion.append(Message(role="assistant", content="", tool_calls=[call]))
        episode.completion.append(Message(role="tool", content=content, tool_call_id=call.id, name=name))

    def _run_tool(self, name: str, arguments: dict[str, Any]) -> str:
        episode = self.rollout
        result = run_sync(self._tools[name].call(arguments, state=episode.state, rollout=episode))
        self._record(name, arguments, result.content)
        return result.content

    async def _arun_tool(self, name: str, arguments: dict[str, Any]) -> str:
        episode = self.rollout
        result = await self._tools[name].call(arguments, state=episode.state, rollout=episode)
        self._record(name, arguments, result.content)
        return result.content


def _sync_reward(self: TRLEnvironment) -> float | None:
    """The episode's rubric score; None if unscored or already scored by the reward function."""
    return self._episode_score()


async def _async_reward(self: TRLEnvironment) -> float | None:
    """The episode's rubric score; None if unscored or already scored by the reward function."""
    # Async when the reward function is async, so TRL gathers both and the reward function's
    # claim (made before its first await) is seen here.
    if self._claimed:
        return None
    episode = self.rollout
    await self._env.score(episode)
    return as_trl_value(episode.reward)


def _docstring(tool: ToolLike, params: list[inspect.Parameter]) -> str:
    """A Google-style docstring from the tool's schema (what transformers reads for TRL)."""
    properties = tool.parameters.get("properties", {})
    lines = [tool.description or f"Call the {tool.name} tool."]
    if params:
        lines += ["", "Args:"]
        for p in params:
            prop = properties.get(p.name, {})
            text = (
                prop.get("description")
                or f"The {p.name} argument ({_JSON_TYPES.get(prop.get('type'), 'value')})."
            )
            lines.append(f"    {p.name}: {' '.join(str(text).split())}")
    lines += ["", "Returns:", "    The tool's result as text."]
    return "\n".join(lines)


_PYTHON_TYPES: dict[str, Any] = {
    "integer": int,
    "number": float,
    "string": str,
    "boolean": bool,
    "array": list,
    "object": dict,
}


def _function_params(tool: Tool) -> list[inspect.Parameter]:
    """A Python tool's visible parameters: resolved types (not strings), positional-only made
    nameable (TRL calls with keywords)."""
    signature = inspect.signature(tool.fn)
    hints = typing.get_type_hints(tool.fn, include_extras=False)
    return [
        p.replace(
            kind=p.KEYWORD_ONLY if p.kind is p.KEYWORD_ONLY else p.POSITIONAL_OR_KEYWORD,
            annotation=hints.get(p.name, Any),
        )
        for p in signature.parameters.values()
        if p.name not in TOOL_INJECTED and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]


def _schema_params(tool: ToolLike) -> list[inspect.Parameter]:
    """Parameters from a JSON Schema (an MCP tool): required ones first, the rest default None."""
    properties = tool.parameters.get("properties") or {}
    required = set(tool.parameters.get("required") or [])
    ordered = sorted(properties, key=lambda name: name not in required)
    return [
        inspect.Parameter(
            name,
            inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if name in required else None,
            annotation=_PYTHON_TYPES.get(str((properties[name] or {}).get("type")), Any),
        )
        for name in ordered
        if name.isidentifier() and not keyword.iskeyword(name)
    ]


def _tool_method(tool: ToolLike) -> Callable[..., Any]:
    """A method with the tool's visible parameters, types and docs, that runs the tool."""
    params = _function_params(tool) if isinstance(tool, Tool) else _schema_params(tool)
    name = tool.name
    if not isinstance(tool, Tool) or tool._is_async:  # an MCP tool's call is always async

        async def method(self: TRLEnvironment, *args: Any, **kwargs: Any) -> str:
            return await self._arun_tool(name, _bind(method, self, args, kwargs))

    else:

        def method(self: TRLEnvironment, *args: Any, **kwargs: Any) -> str:  # type: ignore[misc]
            return self._run_tool(name, _bind(method, self, args, kwargs))

    self_param = inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD)
    method.__signature__ = inspect.Signature([self_param, *params], return_annotation=str)  # type: ignore[attr-defined]
    method.__annotations__ = {p.name: p.annotation for p in params} | {"return": str}
    method.__name__ = method.__qualname__ = name
    method.__doc__ = _docstring(tool, params)
    return method


def _bind(
    method: Callable[..., Any], self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    bound = inspect.signature(method).bind(self, *args, **kwargs)
    arguments = dict(bound.arguments)
    arguments.pop("self", None)
    return arguments


def _class_name(env: TrainableEnvironment) -> str:
    name = re.sub(r"\W+", "_", env.name).strip("_") or "environment"
    if name[0].isdigit() or keyword.iskeyword(name):
        name = f"env_{name}"
    return name


def environment_class(env: TrainableEnvironment) -> type[TRLEnvironment]:
    """The TRLEnvironment subclass for `env`: one method per tool, named after the environment."""
    taken = set(dir(TRLEnvironment))
    namespace: dict[str, Any] = {
        "_env": env,
        "_tools": {tool.name: tool for tool in env.tools},
        "__doc__": f"TRL tool environment for {env.name!r}.",
    }
    for tool in env.tools:
        if tool.name in taken or tool.name.startswith("_") or not tool.name.isidentifier():
            raise ConfigError(
                f"tool {tool.name!r} of {env.name!r} cannot be a TRL environment method (a Python identifier "
                f"not starting with '_' and not one of reset/get_reward/rollout); rename it with envs.tool(name=...)"
            )
        namespace[tool.name] = _tool_method(tool)
    namespace["get_reward"] = _sync_reward if env.rubric._is_sync_tree() else _async_reward
    return type(_class_name(env), (TRLEnvironment,), namespace)


class _EnvironmentRef:
    """Holds an environment; pickles as its `source` (`envs._registry.EnvironmentSpec`) when it
    has one, so a TRL worker builds it again, else as the environment itself."""

    def __init__(self, env: TrainableEnvironment) -> None:
        self.env = env

    def __getstate__(self) -> dict[str, Any]:
        if self.env.source is not None:
            return {"source": self.env.source}
        return {"env": self.env}

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        self.env = state["source"].load() if "source" in state else state["env"]


class PrepareForScoring(_EnvironmentRef):
    """`prepare(rollout)` for a TRL reward: the environment's parser fills `state["parsed_answer"]`."""

    def __call__(self, rollout: Rollout) -> None:
        self.env.prepare_for_scoring(rollout)


class EnvironmentFactory(_EnvironmentRef):
    """Zero-argument, picklable: each call returns a fresh `TRLEnvironment` for the environment.

    Pickles as the environment's registry spec when it has one (`envs.load_environment`),
    otherwise as the environment itself.
    """

    def __init__(self, env: TrainableEnvironment) -> None:
        super().__init__(env)
        self._cls: type[TRLEnvironment] | None = None

    def __call__(self) -> TRLEnvironment:
        if self._cls is None:
            self._cls = environment_class(self.env)
        return self._cls()

    def __repr__(self) -> str:
        return f"EnvironmentFactory({self.env.name!r}, tools=[{', '.join(t.name for t in self.env.tools)}])"

    def __setstate__(self, state: Mapping[str, Any]) -> None:
        super().__setstate__(state)
        self._cls = None


class TRLSpec:
    """GRPOTrainer keyword arguments for one environment: `GRPOTrainer(..., **spec.kwargs)`.

    Attributes:
        train_dataset: a Hugging Face Dataset whose `prompt` column holds the messages the
            model sees (system prompt and rendered template included), with every other
            column of the environment's dataset kept for the rubric.
        reward_funcs: the environment's rubric as a TRL reward function (a list of one), named
            after the rubric (TRL logs `rewards/<rubric name>/mean`).
        environment_factory: for an environment with tools, an `EnvironmentFactory`; else None.
        rollout_func: for an environment played by an agent (`env.trl(agent=...)`), an
            `envs._training.agents.AgentRolloutFunc` (then `reward_funcs` is its `AgentReward`).

    Args:
        env: The environment to train on.
        split: The dataset split the training prompts come from.
        num_examples: Use only the first this many examples (None: all).
        base_url: With `agent`, the OpenAI-compatible server the agents' calls go to
            (default: the trainer's vLLM server).
        model: With `agent`, the model name there (default: the trainer's).
        agent: The agent playing the episodes (None: the environment's own loop).
    """

    def __init__(
        self,
        env: TrainableEnvironment,
        *,
        split: str = "train",
        num_examples: int | None = None,
        base_url: str | None = None,
        model: str | None = None,
        agent: AgentRun | None = None,
    ) -> None:
        self.env = env
        self.train_dataset: Dataset = train_dataset(env, split=split, num_examples=num_examples)
        self.rollout_func: AgentRolloutFunc | None = None
        if agent is not None:  # the agent plays each episode; its rubric reward rides along
            rows = {json.dumps(row["prompt"], sort_keys=True, default=str): row for row in self.train_dataset}
            self.rollout_func = AgentRolloutFunc(env, agent, rows, base_url=base_url, model=model)
            self.reward_funcs: list[Any] = [AgentReward()]
            self.environment_factory: EnvironmentFactory | None = None
            return
        reward = as_trl_reward(env.rubric)  # named after the rubric, as `rubric.as_trl_reward()` is
        if env.parser is not None:
            reward.prepare = PrepareForScoring(env)
        self.reward_funcs = [reward]
        self.environment_factory = EnvironmentFactory(env) if env.tools else None

    @property
    def kwargs(self) -> dict[str, Any]:
        """The attributes as a dict of GRPOTrainer keyword arguments (unset ones left out)."""
        out: dict[str, Any] = {"train_dataset": self.train_dataset, "reward_funcs": self.reward_funcs}
        if self.environment_factory is not None:
            out["environment_factory"] = self.environment_factory
        if self.rollout_func is not None:
            out["rollout_func"] = self.rollout_func
        return out

    def __repr__(self) -> str:
        return f"TRLSpec({self.env.name!r}, {len(self.train_dataset)} prompts, kwargs={sorted(self.kwargs)})"


def train_dataset(
    env: TrainableEnvironment, *, split: str = "train", num_examples: int | None = None
) -> Dataset:
    """The environment's examples with `prompt` as the chat messages the model is shown."""
    data = env.get_dataset(split, n=num_examples)
    prompts = [text_messages(env.format_prompt(row)) for row in data]
    if env.parser is not None and "parsed_answer" in data.column_names:
        data = data.remove_columns("parsed_answer")
    if "prompt" in data.column_names:
        data = data.remove_columns("prompt")
    info = data["info"]
    if any(isinstance(v, Mapping) for v in info):
        # A struct column gains other rows' keys as None; JSON text keeps each row's own.
        data = data.remove_columns("info").add_column("info", [json.dumps(v, default=str) for v in info])
    return data.add_column("prompt", prompts)  # type: ignore[no-any-return]  # datasets is untyped here


__all__ = [
    "EnvironmentFactory",
    "PrepareForScoring",
    "TRLEnvironment",
    "TRLSpec",
    "environment_class",
    "train_dataset",
]
