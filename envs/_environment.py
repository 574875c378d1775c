"""`Environment`: a dataset, a prompt format, optional tools and a rubric, checked together.

Everything that can be wrong with that combination (a missing column, a template reading a
column that does not exist, a rubric leaf asking for one, duplicate tool names) is reported
when the environment is built, with what is available listed, because the alternative is
finding out after a thousand paid requests. The per-rollout methods (`setup_rollout`,
`respond`, `stop_reason`, `score`) are what `harness.rollout` drives; see
`harness._core.protocol.EnvironmentProtocol` for the loop.

An environment is a task and holds no agent: who plays it (an agent in a sandbox, its runtime
and limits) is a run setting, `envs.agents.AgentRun`, handed to the engine. The environment
keeps the task hooks an agent run reads (`envs.agents.AgentTask`: `instruction`,
`task_sandbox`, `setup_sandbox`, `solution`); `evaluate(model, agent="bash")` builds an
`AgentRun` for that call and leaves the environment as it was.

Over 500 lines for one class, `Environment`, the object users build; its inputs, prompts,
conditions, tools and TRL bridge already live in their own modules.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import difflib
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextvars import ContextVar
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, ClassVar, TypeAlias, TypedDict, Unpack

import harness
from envs import _dataset as ds_utils
from envs._conditions import stop_condition_names
from envs._inputs import (
    AnswerParser,
    DatasetSource,
    ParserSource,
    RubricSource,
    ToolSource,
    as_rubric,
    build_tools,
)
from envs._prompts import Template
from envs._tools.functions import ToolLike, ToolResult, call_tool
from envs._tools.mcp import MCPServer, MCPTool
from envs._training.protocol import RegistrySource
from envs._training.trl import TRLSpec
from envs._training.verl import VerlSpec
from envs.agents import Agent, AgentRun, AgentTask
from harness._core.aio import maybe_await, run_sync
from harness._core.defaults import DEFAULT_CONCURRENCY
from harness._core.errors import ConfigError, ConfigTypeError
from harness._core.run.options import EvaluateOptions, check_evaluate_options
from harness._core.types import INJECTED, Message, Rollout, ToolCall, as_messages, jsonable
from harness._endpoint.client import Client
from harness._endpoint.connect import open_client
from rubrics._tree.grouping import has_group_nodes
from rubrics.credit import assign_credit

if TYPE_CHECKING:  # pragma: no cover
    from datasets import Dataset
    from harness import EvalResults

#: True while `envs._registry.EnvironmentSpec.load(worker=True)` builds an environment in a worker process.
DEFER_DATASETS: ContextVar[bool] = ContextVar("DEFER_DATASETS", default=False)
#: What `Environment.env_response` returns: messages (or dicts in OpenAI shape), the text of
#: one user message, or None to end the episode.
EnvReply: TypeAlias = Sequence[Message | Mapping[str, Any]] | str | None
#: Row columns that a rollout stores in its own fields rather than in `info`.
_ROLLOUT_FIELDS = frozenset(ds_utils.STANDARD_COLUMNS)
#: What `evaluate(agent=...)` and `trl(agent=...)` take: an agent's name, an agent, or a run.
AgentSource: TypeAlias = str | Agent | AgentRun


class EnvironmentOptions(TypedDict, total=False):
    """`Environment`'s keyword arguments, typed once for the presets that pass them on.

    Each means what it means for `Environment` (see its Args).

    Attributes:
        system_prompt: Text, or a jinja2 template over the row's columns.
        prompt_template: A jinja2 template for the user turn.
        tools: Functions, `envs.Tool`s or MCP servers' tools the model may call.
        parser: What pulls the answer out of the final response.
        max_turns: The most assistant turns per rollout.
        sampling: Default sampling arguments for the endpoint.
        eval_dataset: A separate dataset for the "eval" split.
        name: The identifier written to results.
        columns: {standard name: your column}.
        split: Which split of a `DatasetDict` to use.
        credit: Credit assignment run after scoring (`rubrics.credit`).
        success: What counts as solved for pass@k: a node path, or (path, threshold).
    """

    system_prompt: str | None
    prompt_template: str | None
    tools: Sequence[ToolSource] | None
    parser: ParserSource | None
    max_turns: int | None
    sampling: Mapping[str, Any] | None
    eval_dataset: DatasetSource | None
    name: str | None
    columns: Mapping[str, str] | None
    split: str | None
    credit: Callable[[Rollout], Sequence[float]] | None
    success: str | tuple[str, float] | None


class Environment(AgentTask):
    """A task to evaluate or train on; implements `harness._core.protocol.EnvironmentProtocol`.

    Its task hooks for agents (`instruction`, `task_sandbox`, `setup_sandbox`, `solution`)
    come from `envs.agents.AgentTask`; the agent itself is a run setting (`evaluate(agent=...)`).

    Args:
        dataset: a `datasets.Dataset`, a `DatasetDict` (with `split=`), a list of row dicts,
            or a path to a .jsonl/.json/.csv/.parquet file. Rows need `prompt` (text or
            messages) or `question`; `answer`, `info` (dict or JSON text), `task`, `id` are
            optional, and any other column reaches the rubric through the rollout's `info`.
        rubric: a `rubrics.Rubric`, a plain reward function, or a list/dict of them
            (averaged: `rubrics.WeightedSum` with weights 1/n).
        system_prompt: text, or a jinja2 template over the row's columns.
        prompt_template: jinja2 template for the user turn (default: the row's `question`).
            When given it renders the user turn for every row, whether or not it has `prompt`.
        tools: functions, `envs.Tool`s, or MCP servers' tools (`envs.mcp_server(...)`) the
            model may call.
        parser: `parser(text) -> str | None` (or an object with `parse_answer(text)`) that
            pulls the answer out of the final response; see `parse_answer`.
        max_turns: the most assistant turns per rollout (default: the class's `default_max_turns`).
        sampling: default sampling arguments for the endpoint, e.g. {"max_tokens": 512}.
        eval_dataset: a separate dataset for `get_dataset("eval")`; same columns as `dataset`.
        name: identifier written to results (default: the registry name or the class name).
        columns: {standard name: your column}, e.g. {"question": "problem"}.
        split: which split of a `DatasetDict` to use as `dataset`.
        credit: credit assignment run after scoring, filling `rollout.turn_rewards` (one
            reward per assistant turn): `rubrics.credit.discounted(0.9)`, `returns_to_go()`,
            `outcome()`, or your own `(rollout) -> list[float]`.
        success: what counts as a pass for pass@k: a node path ("grade.win", its score must
            reach 1) or (path, threshold); default: the reward reaches 1. Named beside pass@k
            in the summary and recorded in metadata.json.
    """

    default_max_turns: ClassVar[int] = 10
    #: Tool calls run per assistant turn (None: all); each extra call gets a tool message
    #: saying it was not run, so one turn cannot start a hundred sandboxes.
    max_tool_calls: int | None = None
    #: How the registry built this environment (`envs._registry.EnvironmentSpec`), so worker
    #: processes, TRL workers and resumed runs build it again instead of pickling it; set by
    #: `envs.load_environment`, None when built directly in Python.
    source: RegistrySource | None = None
    #: Where the registry found it (distribution and version, or a source hash); in metadata.json.
    provenance: dict[str, Any] | None = None
    #: Policies for the scripted endpoint (`-m scripted:NAME` demos the environment offline).
    scripted_policies: Mapping[str, Any] = MappingProxyType({})
    tools: list[ToolLike]
    mcp_servers: list[MCPServer]
    _tool_map: dict[str, ToolLike]

    def __init__(
        self,
        dataset: DatasetSource,
        rubric: RubricSource,
        *,
        system_prompt: str | None = None,
        prompt_template: str | None = None,
        tools: Sequence[ToolSource] | None = None,
        parser: ParserSource | None = None,
        max_turns: int | None = None,
        sampling: Mapping[str, Any] | None = None,
        eval_dataset: DatasetSource | None = None,
        name: str | None = None,
        columns: Mapping[str, str] | None = None,
        split: str | None = None,
        credit: Callable[[Rollout], Sequence[float]] | None = None,
        success: str | tuple[str, float] | None = None,
    ) -> None:
        if credit is not None and not callable(credit):
            raise ConfigError(
                f"credit must be a function (rollout) -> list[float] such as rubrics.credit.discounted(0.9), "
                f"got {type(credit).__name__}"
            )
        self.credit = credit
        self._max_turns = _check_max_turns(self.default_max_turns if max_turns is None else max_turns)
        #: Whether `max_turns` was given or set (not the class's default): then it caps an
        #: agent's model calls too (`envs.agents.AgentRun`; else the agent's own default, 250).
        self.max_turns_set = max_turns is not None
        if sampling is not None and not isinstance(sampling, Mapping):
            raise ConfigTypeError(
                f"sampling must be a dict such as {{'max_tokens': 512}}, got {type(sampling).__name__}"
            )
        self.sampling: dict[str, Any] = dict(sampling or {})
        if name is not None and (not isinstance(name, str) or not name):
            raise ConfigError(f"name must be a non-empty string, got {name!r}")
        self._name_given = name is not None
        self.name: str = name or type(self).__name__
        self._set_tools(build_tools(tools))
        if parser is not None and not (callable(parser) or callable(getattr(parser, "parse_answer", None))):
            raise ConfigTypeError(
                f"parser must be callable (text -> str | None) or have parse_answer(text); got {type(parser).__name__}"
            )
        self.parser = parser
        self.rubric = as_rubric(rubric)
        self.success = _check_success(success, self.rubric)
        self.columns = dict(columns or {})
        self.split = split
        self.system_prompt = system_prompt
        self.prompt_template = prompt_template
        self._system = Template(system_prompt, "system_prompt") if system_prompt is not None else None
        self._user = Template(prompt_template, "prompt_template") if prompt_template is not None else None
        self._source_columns: dict[str, set[str]] = {}
        if DEFER_DATASETS.get():
            # A worker process (see envs._registry.EnvironmentSpec.load(worker=True)): the driver checked
            # the data and sends examples as dicts, so `datasets` is loaded only if asked for.
            self.__dict__["_deferred"] = (dataset, eval_dataset, split)
        else:
            self._load_datasets(dataset, eval_dataset, split)
        #: Named policies for the scripted endpoint (`--model scripted:NAME`); filled by envs that ship them.
        self.scripted_policies: dict[str, Callable[..., Any]] = {}

    @property
    def max_turns(self) -> int:
        """The most assistant turns per rollout (and, when set, an agent's model calls)."""
        return self._max_turns

    @max_turns.setter
    def max_turns(self, value: int) -> None:
        self._max_turns = _check_max_turns(value)
        self.max_turns_set = True

    # ------------------------------------------------------------------ dataset

    def _load_datasets(self, dataset: Any, eval_dataset: Any, split: str | None) -> None:
        self.dataset: Dataset = self._prepare(dataset, "dataset", split=split)
        self.eval_dataset: Dataset | None = None
        if eval_dataset is not None:
            self.eval_dataset = self._prepare(eval_dataset, "eval_dataset", split=None)
            _check_same_columns(self._source_columns)

    def __getattr__(self, name: str) -> Any:
        # Only reached for missing attributes: `dataset` / `eval_dataset` of a worker's
        # environment, built when first used.
        deferred = self.__dict__.pop("_deferred", None) if name in ("dataset", "eval_dataset") else None
        if deferred is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        self._load_datasets(*deferred)
        return getattr(self, name)

    def _prepare(self, source: Any, what: str, *, split: str | None) -> Dataset:
        """Load, rename, normalise and validate one dataset against templates and rubric."""
        data = ds_utils.rename_columns(
            ds_utils.load_source(source, split=split, what=what), self.columns, what
        )
        self._source_columns[what] = set(data.column_names)
        if self._user is None and not ({"prompt", "question"} & set(data.column_names)):
            raise ConfigError(
                f"{what} needs a 'prompt' or a 'question' column (or a prompt_template); "
                f"available columns: {ds_utils.name_list(data.column_names)}; "
                "map yours with columns={'question': 'your_column'}"
            )
        data = ds_utils.normalise(data, what)
        if self._user is None:
            ds_utils.check_prompts(data, what)
        present = set(data.column_names)
        for template in (self._system, self._user):
            if template is not None:
                template.check(present, what)
        required = set(getattr(self.rubric, "required_columns", lambda: set())())
        available = (present - _ROLLOUT_FIELDS) | ds_utils.info_keys(data)  # what reaches rollout.info
        missing = sorted(required - available)
        if missing:
            fields = sorted(INJECTED)
            hints = [
                f"{name!r} -> did you mean {close[0]!r}?"
                for name in missing
                if (
                    close := difflib.get_close_matches(name, [*fields, *map(str, available)], n=1, cutoff=0.6)
                )
            ]
            raise ConfigError(
                f"the rubric asks for column(s) {', '.join(map(repr, missing))} that {what} lacks; "
                f"available columns (including info keys): {ds_utils.name_list(available)}; "
                f"rollout fields: {', '.join(fields)}" + (f"; {'; '.join(hints)}" if hints else "")
            )
        return data

    def get_dataset(self, split: str = "eval", n: int | None = None, seed: int | None = None) -> Dataset:
        """The normalised examples of `split` ("eval" falls back to `dataset` without an eval set).

        `seed` shuffles (reproducibly), then `n` keeps the first n; `example_id`s never change.
        """
        if split not in ("eval", "train"):
            raise ConfigError(f"split must be 'eval' or 'train', got {split!r}")
        data = self.eval_dataset if split == "eval" and self.eval_dataset is not None else self.dataset
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or n < 0):
            raise ConfigError(f"n must be a non-negative integer or None, got {n!r}")
        if seed is not None:
            data = data.shuffle(seed=seed)
        if n is not None and n < len(data):
            data = data.select(range(n))
        return data

    def format_prompt(self, row: Mapping[str, Any]) -> list[Message]:
        """The prompt messages for one row: system prompt, then the rendered question or given prompt."""
        messages: list[Message] = []
        if self._user is not None:
            messages.append(Message(role="user", content=self._user.render(row)))
        elif row.get("prompt") is not None:
            messages.extend(as_messages(row["prompt"]))
        elif row.get("question") is not None:
            messages.append(Message(role="user", content=str(row["question"])))
        else:
            raise ConfigError(
                f"example {row.get('example_id')!r} has neither a prompt nor a question "
                f"(columns: {ds_utils.name_list(k for k, v in row.items() if v is not None)})"
            )
        if self._system is not None and not (messages and messages[0].role == "system"):
            messages.insert(0, Message(role="system", content=self._system.render(row)))
        return messages

    @property
    def tool_schemas(self) -> list[dict[str, Any]]:
        """The OpenAI `tools=` list (empty without tools)."""
        return [t.schema for t in self.tools]

    # ------------------------------------------------------------------ hooks (override in subclasses)

    def setup_state(
        self, state: dict[str, Any], example: Mapping[str, Any]
    ) -> dict[str, Any] | Awaitable[dict[str, Any] | None] | None:
        """Fill the fresh per-rollout `state` from the example (sync or async; may return a new dict)."""
        return None

    def env_response(self, rollout: Rollout) -> EnvReply | Awaitable[EnvReply]:
        """The environment's reply after a turn without tool calls: messages, a str (one user
        message), or None to end the episode as "completed". Sync or async."""
        return None

    def is_done(self, rollout: Rollout) -> bool | Awaitable[bool]:
        """True ends the episode with stop_reason "completed" (sync or async)."""
        return False

    # ------------------------------------------------------------------ EnvironmentProtocol

    async def setup_rollout(self, example: Mapping[str, Any], rollout_index: int = 0) -> Rollout:
        """A fresh Rollout for `example` (a row of `get_dataset()`); never shares state between rollouts."""
        if "example_id" not in example:
            raise ConfigError(
                "example has no 'example_id'; pass rows from env.get_dataset() "
                f"(got columns: {ds_utils.name_list(example)})"
            )
        info = copy.deepcopy(ds_utils.parse_info(example.get("info"), f"example {example['example_id']!r}"))
        for key, value in example.items():
            if key not in _ROLLOUT_FIELDS:
                info.setdefault(key, copy.deepcopy(value))
        task = example.get("task")
        state: dict[str, Any] = {}
        rollout = Rollout(
            example_id=example["example_id"],
            rollout_index=rollout_index,
            prompt=self.format_prompt(example),
            answer=copy.deepcopy(example.get("answer")),
            info=info,
            task=None if task is None else str(task),
            state=state,
        )
        returned = await maybe_await(self.setup_state(rollout.state, example))
        if isinstance(returned, dict):
            rollout.state = returned
        return rollout

    async def respond(self, rollout: Rollout) -> list[Message] | None:
        """Run the last assistant message's tool calls concurrently, else ask `env_response`."""
        last = rollout.completion[-1] if rollout.completion else None
        if last is not None and last.role == "assistant" and last.tool_calls:
            return await self._run_tool_calls(rollout, last.tool_calls)
        reply = await maybe_await(self.env_response(rollout))
        if reply is None:
            return None
        try:
            return as_messages(reply, default_role="user")
        except (TypeError, ValueError) as exc:  # pydantic's ValidationError is a ValueError
            raise TypeError(
                f"{type(self).__name__}.env_response must return a list of messages, a str or None; "
                f"got {type(reply).__name__}: {exc}"
            ) from exc

    async def _run_tool_calls(self, rollout: Rollout, calls: list[ToolCall]) -> list[Message]:
        limit = self.max_tool_calls
        if limit is not None and len(calls) > limit:
            refused = [
                Message(
                    role="tool",
                    content=f"Error: not run: at most {limit} tool calls run per turn; this turn made "
                    f"{len(calls)}. Make the remaining calls in a later turn.",
                    tool_call_id=call.id,
                    name=call.name,
                )
                for call in calls[limit:]
            ]
            return [*await self._run_tool_calls(rollout, calls[:limit]), *refused]
        results: list[ToolResult | BaseException]
        if len(calls) == 1:
            # The common case skips gather's task creation: on a busy loop every extra task
            # is another wait for a loop turn, which a run of thousands of rollouts pays.
            try:
                results = [await call_tool(self._tool_map, calls[0], state=rollout.state, rollout=rollout)]
            except Exception as exc:
                results = [exc]
        else:
            results = await asyncio.gather(
                *(call_tool(self._tool_map, call, state=rollout.state, rollout=rollout) for call in calls),
                return_exceptions=True,
            )
        messages: list[Message] = []
        for call, result in zip(calls, results):
            if isinstance(result, BaseException):
                if not isinstance(result, Exception):
                    raise result  # cancellation and interrupts are not tool failures
                result = ToolResult(
                    content=f"Error: tool {call.name!r} failed: {type(result).__name__}: {result}",
                    error=f"{type(result).__name__}: {result}",
                    tool_call_id=call.id,
                    name=call.name,
                )
            if result.error:
                rollout.state.setdefault("tool_errors", []).append(
                    {"turn": rollout.turns, "tool": call.name, "tool_call_id": call.id, "error": result.error}
                )
            if result.parts:  # an MCP result's content blocks, kept as the server sent them
                rollout.state.setdefault("tool_content", []).append(
                    {
                        "turn": rollout.turns,
                        "tool": call.name,
                        "tool_call_id": call.id,
                        "content": result.parts,
                    }
                )
            content = result.content if result.content or not result.error else f"Error: {result.error}"
            messages.append(Message(role="tool", content=content, tool_call_id=call.id, name=call.name))
        return messages

    async def stop_reason(self, rollout: Rollout) -> str | None:
        """The first `@stop` condition that holds (by method name), "completed" if `is_done`, else None."""
        # A class is hashable; mypy checks the instance's __hash__ (pydantic-style __eq__) instead.
        for name in stop_condition_names(type(self)):  # type: ignore[arg-type]
            if await maybe_await(getattr(self, name)(rollout)):
                return name
        if await maybe_await(self.is_done(rollout)):
            return "completed"
        return None

    async def preflight(self) -> None:
        """Fail now, with the fix, when the rubric cannot score at all (a judge with no key or
        endpoint): called by `evaluate` before any rollout runs."""
        await self.rubric.acheck_ready()

    def add_tools(self, tools: Sequence[ToolSource]) -> None:
        """Add tools after construction (`rubric eval --mcp`); names must stay unique."""
        self._set_tools(build_tools([*self.tools, *tools]))

    def _set_tools(self, tools: list[ToolLike]) -> None:
        self.tools = tools
        self._tool_map = {t.name: t for t in tools}
        #: The MCP servers behind some of `tools`, started at their first call (envs._tools.mcp).
        self.mcp_servers = list(dict.fromkeys(t.server for t in tools if isinstance(t, MCPTool)))

    async def release_rollout(self, rollout: Rollout) -> None:
        """Stop what this rollout alone held: its own MCP servers (`per_rollout=True`)."""
        for server in self.mcp_servers:
            await server.release_rollout(rollout)

    async def release(self) -> None:
        """Stop what the run held on this event loop: the MCP servers started for it and the
        rubric's judge connections (a pool left open warns "Unclosed client session" once its
        loop is gone)."""
        for server in self.mcp_servers:
            await server.release()
        await self.rubric.aclose()

    def parse_answer(self, rollout: Rollout) -> str | None:
        """The answer extracted from the final response by `parser` (the raw response without one)."""
        text = rollout.response
        if self.parser is None:
            return text
        if isinstance(self.parser, AnswerParser):
            return self.parser.parse_answer(text)
        return self.parser(text)

    def prepare_for_scoring(self, rollout: Rollout) -> None:
        """With a parser, put its answer in `state["parsed_answer"]` (a failure is recorded, not raised)."""
        if self.parser is None:
            return
        try:
            rollout.state["parsed_answer"] = self.parse_answer(rollout)
        except Exception as exc:
            rollout.state["parsed_answer"] = None
            _add_error(rollout, f"parser failed: {type(exc).__name__}: {exc}")

    def trl(
        self,
        *,
        split: str = "train",
        num_examples: int | None = None,
        base_url: str | None = None,
        model: str | None = None,
        agent: AgentSource | None = None,
    ) -> TRLSpec:
        """GRPOTrainer keyword arguments for this environment: `GRPOTrainer(..., **env.trl().kwargs)`.

        Args:
            split: "train" (default) or "eval" examples.
            num_examples: keep only the first n examples.
            base_url: with `agent`, the OpenAI-compatible server the agent calls (default: the
                trainer's vLLM server).
            model: with `agent`, the model name there (default: the trainer's model).
            agent: an agent playing the episodes in sandboxes: its name ("bash", ...), an
                `envs.agents.Agent`, or an `envs.agents.AgentRun` (runtime, files, limits).

        Returns:
            An `envs._training.trl.TRLSpec` with `train_dataset`, `reward_funcs`, and, with tools,
            `environment_factory`, or with `agent` a `rollout_func` (its episodes against
            `base_url`/`model`, default the trainer's vLLM server); `.kwargs` holds them as a
            dict. Needs no TRL to build.
        """
        run = agent_run(agent) if agent is not None else None
        return TRLSpec(
            self, split=split, num_examples=num_examples, base_url=base_url, model=model, agent=run
        )

    def verl(
        self, *, split: str = "train", num_examples: int | None = None, agent: AgentSource | None = None
    ) -> VerlSpec:
        """What verl needs to train on this environment: its dataset rows and its reward.

        Args:
            split: "train" (default) or "eval" examples.
            num_examples: keep only the first n examples.
            agent: an agent playing the episodes in sandboxes (its name, an `envs.agents.Agent`
                or an `envs.agents.AgentRun`): verl's agent loop `rubric_agent` runs it, its
                model calls served by verl's rollout server.

        Returns:
            An `envs._training.verl.VerlSpec` with `train_dataset` (verl's RL schema; write it
            with `.to_parquet`), `reward_fn` (unscored is NaN, never 0) and `overrides`.
            Needs no verl to build.

        Raises:
            ConfigError: only an agent can play this environment (a Harbor task, a rubric that
                reads the agent's sandbox) and no `agent` is given: verl's loop plays the chat
                loop. The message names what works instead.
        """
        run = agent_run(agent) if agent is not None else None
        return VerlSpec(self, split=split, num_examples=num_examples, agent=run)

    async def score(self, rollout: Rollout) -> None:
        """Score with the rubric; with a parser, its result is in `state["parsed_answer"]` first.

        A rubric that raises (rather than recording a failing leaf) leaves reward NaN and the
        reason in `rollout.error`: one broken rollout never stops an evaluation.
        """
        self.prepare_for_scoring(rollout)
        try:
            await self.rubric.ascore(rollout)
        except Exception as exc:
            rollout.reward = math.nan
            _add_error(rollout, f"scoring failed: {type(exc).__name__}: {exc}")
        if self.credit is not None:
            try:
                assign_credit(rollout, self.credit)
            except Exception as exc:
                _add_error(rollout, f"credit assignment failed: {type(exc).__name__}: {exc}")

    @property
    def needs_groups(self) -> bool:
        """Whether the rubric compares the rollouts of one example (it holds a group node):
        `evaluate` then scores each example's rollouts together, with `score_group`."""
        return has_group_nodes(self.rubric)

    async def score_group(self, rollouts: list[Rollout]) -> None:
        """Score the rollouts of one example together (group nodes see them all).

        A member whose episode errored is left out of the comparison, with the reason recorded
        on it; a rubric that raises leaves every member's reward NaN with the reason in
        `rollout.error`, as `score` does for one rollout.
        """
        # Only an episode's error leaves a member out: a parser's failure is noted after scoring.
        noted: dict[int, str] = {}
        for rollout in rollouts:
            if rollout.error is None:
                self.prepare_for_scoring(rollout)
                if rollout.error is not None:
                    noted[id(rollout)], rollout.error = rollout.error, None
        try:
            await self.rubric.ascore_group(rollouts)
        except Exception as exc:
            for rollout in rollouts:
                rollout.reward = math.nan
                if rollout.error is None:
                    _add_error(rollout, f"scoring failed: {type(exc).__name__}: {exc}")
        if self.credit is not None:
            for rollout in rollouts:
                if rollout.error is None:
                    try:
                        assign_credit(rollout, self.credit)
                    except Exception as exc:
                        _add_error(rollout, f"credit assignment failed: {type(exc).__name__}: {exc}")
        for rollout in rollouts:
            if id(rollout) in noted:
                _add_error(rollout, noted[id(rollout)])

    async def rescore_failed(
        self, rollouts: list[Rollout], *, concurrency: int = DEFAULT_CONCURRENCY
    ) -> None:
        """Score again, in place, only the rubric nodes that failed on saved rollouts (see
        `Rubric.arescore_failed`); a rubric that raises is recorded on each rollout it was scoring."""
        try:
            await self.rubric.arescore_failed(rollouts, concurrency=concurrency)
        except Exception as exc:
            for rollout in rollouts:
                if rollout.reward != rollout.reward:
                    rollout.score_errors[""] = f"scoring failed: {type(exc).__name__}: {exc}"

    @property
    def load_spec(self) -> str | None:
        """What `envs.load_environment` was given (`source.spec`); None when built directly."""
        return self.source.spec if self.source is not None else None

    @property
    def load_kwargs(self) -> dict[str, Any] | None:
        """The environment's own arguments as loaded (`source.kwargs`); None when built directly."""
        return dict(self.source.kwargs) if self.source is not None else None

    def config(self) -> dict[str, Any]:
        """What identifies this environment in metadata.json (compared when a run resumes)."""
        identity: dict[str, Any] = jsonable(
            {
                "class": type(self).__name__,
                "name": self.name,
                "max_turns": self.max_turns,
                "sampling": self.sampling,
                "tools": [t.name for t in self.tools],
                "system_prompt": self.system_prompt,
                "prompt_template": self.prompt_template,
                "load_spec": self.load_spec,
                "load_kwargs": self.load_kwargs,
                # The tree (heads, weights, gate thresholds) so a saved run can be drawn
                # and its node means listed in tree order without the code.
                "rubric": self.rubric.tree(),
            }
        )
        if self.success is not None:  # the pass@k criterion (absent by default: reward >= 1)
            identity["success"] = {"node": self.success[0], "threshold": self.success[1]}
        if self.mcp_servers:  # where the MCP tools come from (no key for environments without)
            identity["mcp_servers"] = [server.config() for server in self.mcp_servers]
        return identity

    # ------------------------------------------------------------------ running

    async def aevaluate(
        self,
        model: Client | str,
        *,
        agent: AgentSource | None = None,
        agent_files: str | None = None,
        runtime: str | None = None,
        **options: Unpack[EvaluateOptions],
    ) -> EvalResults:
        """Evaluate with `model`; returns `EvalResults`.

        With `agent` (a name, an `envs.agents.Agent`, or an `envs.agents.AgentRun`; with a
        name or an agent, optionally `agent_files` and `runtime`), the agent plays every
        episode in a sandbox: an `AgentRun` built for this call is the engine's `episodes`,
        and the environment is left as it was.

        `model` is a `harness.Client`, a model name (endpoint and key from OPENAI_BASE_URL /
        OPENAI_API_KEY), or "scripted:POLICY": one of `scripted_policies` served on loopback
        for the call, exactly as `rubric eval ENV -m scripted:POLICY` does. Keyword options
        are `harness.evaluate`'s (num_examples, rollouts_per_example, concurrency,
        output_dir, resume, overwrite, ...). A client built here is closed after.
        """
        check_evaluate_options(options, f"{type(self).__name__}.aevaluate")
        if agent is not None:
            if options.get("episodes") is not None:
                raise ConfigError("give agent= or episodes=, not both (they both say who plays the episodes)")
            options["episodes"] = agent_run(agent, runtime=runtime, files=agent_files)
        elif agent_files is not None or runtime is not None:
            raise ConfigError("agent_files= and runtime= go with agent=NAME (the agent they are for)")
        if isinstance(model, Client):
            return await harness.aevaluate(self, model, **options)
        if not isinstance(model, str):
            raise ConfigTypeError(
                f"model must be a harness.Client, a model name or 'scripted:POLICY', got {type(model).__name__}"
            )
        # Size the connection pool to the run, so `concurrency` above the default is real.
        pool = max(1, int(options.get("concurrency") or DEFAULT_CONCURRENCY))
        with contextlib.ExitStack() as stack:
            client = open_client(stack, model, env=self, max_concurrency=pool)
            try:
                return await harness.aevaluate(self, client, **options)
            finally:
                await client.aclose()

    def evaluate(
        self,
        model: Client | str,
        *,
        agent: AgentSource | None = None,
        agent_files: str | None = None,
        runtime: str | None = None,
        **options: Unpack[EvaluateOptions],
    ) -> EvalResults:
        """Synchronous `aevaluate` (works in scripts and inside Jupyter)."""
        check_evaluate_options(options, f"{type(self).__name__}.evaluate")
        return run_sync(
            self.aevaluate(model, agent=agent, agent_files=agent_files, runtime=runtime, **options)
        )

    def __repr__(self) -> str:
        tools = f", tools=[{', '.join(self._tool_map)}]" if self.tools else ""
        eval_part = f", eval_dataset={len(self.eval_dataset)} rows" if self.eval_dataset is not None else ""
        return (
            f"{type(self).__name__}(name={self.name!r}, dataset={len(self.dataset)} rows{eval_part}, "
            f"max_turns={self.max_turns}{tools})"
        )


def agent_run(agent: AgentSource, *, runtime: str | None = None, files: str | None = None) -> AgentRun:
    """The `AgentRun` an `agent=` argument names: a run as given, or one built from a name or
    an agent with `runtime` and `files` (which go with a name, not with a run)."""
    if isinstance(agent, AgentRun):
        if runtime is not None or files is not None:
            raise ConfigError(
                "runtime= and agent_files= go with an agent's name; an AgentRun carries its own: "
                "AgentRun(NAME, runtime=..., files=...)"
            )
        return agent
    return AgentRun(agent, runtime=runtime, files=files)


def _check_success(success: object, rubric: Any) -> tuple[str, float] | None:
    """`success=` as (node path, threshold) of a node `rubric` has, or a ConfigError saying what it takes."""
    if success is None:
        return None
    path, threshold = (
        (success, 1.0)
        if isinstance(success, str)
        else (success if isinstance(success, tuple) and len(success) == 2 else (None, None))
    )
    if (
        not isinstance(path, str)
        or isinstance(threshold, bool)
        or not isinstance(threshold, (int, float))
        or not math.isfinite(threshold)
    ):
        raise ConfigError(
            f"success must be a rubric node path such as 'grade.win' or (path, threshold) like ('grade.win', 1.0), got {success!r}"
        )
    if path:
        try:
            rubric.get_rubric(path)
        except KeyError:
            nodes = ", ".join(p for p, _ in rubric.named_rubrics()) or "(none)"
            raise ConfigError(
                f"success names node {path!r}, which the rubric lacks; its nodes: {nodes}"
            ) from None
    return path, float(threshold)


def _check_max_turns(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"max_turns must be an integer >= 1, got {value!r}")
    return value


def _check_same_columns(source_columns: dict[str, set[str]]) -> None:
    """The eval set must have the train set's columns (ids aside), or the rubric sees different data."""
    ignore = {"id", "example_id"}
    a, b = source_columns["dataset"] - ignore, source_columns["eval_dataset"] - ignore
    if a != b:
        raise ConfigError(
            "eval_dataset must have the same columns as dataset; "
            f"only in dataset: {ds_utils.name_list(a - b)}; only in eval_dataset: {ds_utils.name_list(b - a)} "
            f"(dataset columns: {ds_utils.name_list(a)}; eval_dataset columns: {ds_utils.name_list(b)})"
        )


def _add_error(rollout: Rollout, message: str) -> None:
    rollout.error = message if not rollout.error else f"{rollout.error}; {message}"


__all__ = ["AgentSource", "Environment", "EnvironmentOptions", "agent_run"]
