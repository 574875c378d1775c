"""An environment's episodes as verl's agent loop: token ids in and out, the rubric's score back.

verl (0.9) plays multi-turn rollouts in an agent loop (`verl.experimental.agent_loop`): an
`AgentLoopBase` subclass, registered under a name that a dataset row's `agent_name` picks,
whose `run` talks to verl's rollout servers through `server_manager.generate(prompt_ids=...)`
(token ids in, `TokenOutput.token_ids` out) and returns an `AgentLoopOutput`. That is the layer
that fits an `Environment`: the episode stays ours (its prompt, tools, `env_response`, stop
conditions and `max_turns`, run by the same `setup_rollout` / `env_turn` / `score` steps as
`rubric eval`), and only the model turn goes through verl. verl's own `ToolAgentLoop` would need
the tools rewritten as verl `BaseTool`s and has no place for `env_response`, stop conditions or
the rubric.

Tokens are joined with verl's own Continuous Token builder (what its `ToolAgentLoop` uses), so
the response is the model's tokens (mask 1) with the environment's tool results and replies
between them (mask 0), and tool calls are read with verl's tool parser for
`multi_turn.format`. The rubric scores the finished episode: `reward_score` is its reward and
`extra_fields["reward_extra_info"]` holds every node's score (verl logs them).

Unscored is not 0: an episode that failed, or whose rubric could not score it, returns
`reward_score` NaN, `rubric/scored` 0.0 and a response mask of zeros, so none of its tokens is
in a loss term or a loss normaliser; `algorithm.adv_estimator=rubric_grpo`
(`rubrics._verl.register_advantage_estimator`) keeps its NaN out of its group's baseline.

An environment an agent plays (`env.verl(agent="bash")`, a `command:` agent, ...) has its own loop,
`AgentEpisodeLoop` (`rubric_agent`): the episode runs as `rubric eval --agent` runs it, the
agent in its sandbox and its model calls through the run's capture proxy, whose upstream is
verl's own server manager (`_ServerTransport`: token ids in and out, the prompt of a call that
continues the previous one built by verl's Continuous Token builder from that call's ids, never
re-tokenised). verl gets the episode's training sample (`harness.training_samples`, the one
holding its last call: verl takes one trajectory per row) as its `AgentLoopOutput`.

This module imports verl at the top: verl's worker imports it by the `_target_` path that
`env.verl().agent_loop_config` names.
"""

from __future__ import annotations

import math
from typing import Any
from uuid import uuid4

from omegaconf import DictConfig, OmegaConf
from verl.experimental.agent_loop.agent_loop import AgentLoopBase, AgentLoopMetrics, AgentLoopOutput, register
from verl.experimental.agent_loop.tool_parser import ToolParser

import harness
from envs._environment import Environment
from envs._registry import EnvironmentSpec
from envs._training.agents import episode_sample
from envs._training.verl import (
    AGENT_EPISODE_LOOP_NAME,
    AGENT_LOOP_NAME,
    registered_agent,
    registered_environment,
)
from envs.agents._run import AgentRunSpec
from harness._core.errors import ConfigError, describe_error
from harness._core.protocol import env_turn
from harness._core.samples import link_call, training_samples
from harness._core.types import FunctionCall, Message, ModelCall, Rollout, ToolCall, text_messages
from harness._endpoint.client import Client
from rubrics._verl import reward_extra_info

#: Environments built from a spec in this process, by spec (verl builds one agent loop per sample).
_loaded: dict[tuple[str, str], Environment] = {}


def _environment(environment: Environment | str, kwargs: dict[str, Any] | None) -> Environment:
    """The environment an agent-loop config names: registered here by `env.verl()`, else loaded."""
    if isinstance(environment, Environment):
        return environment
    found = registered_environment(environment)
    if isinstance(found, Environment):  # env.verl() registers itself, an Environment
        return found
    key = (environment, repr(sorted((kwargs or {}).items())))
    if key not in _loaded:
        _loaded[key] = EnvironmentSpec(environment, dict(kwargs or {})).load()
    return _loaded[key]


@register(AGENT_LOOP_NAME)
class EnvironmentAgentLoop(AgentLoopBase):
    """One episode of an `Environment` per call of `run`, with verl's model (see the module docstring).

    verl builds it with its own arguments (config, `server_manager`, tokenizer, ...) plus those
    of the agent-loop config entry `env.verl()` writes.

    Args:
        *args: verl's `AgentLoopBase` arguments.
        environment: The environment, or the name `env.verl()` registered it under in this
            process, or an `envs.load_environment` spec (what a worker process builds it from).
        environment_kwargs: The environment's own arguments, with a spec.
        tools: verl's tools (unused: the environment's own tools run).
        **kwargs: verl's `AgentLoopBase` keyword arguments.
    """

    def __init__(
        self,
        *args: Any,
        environment: Environment | str,
        environment_kwargs: dict[str, Any] | None = None,
        tools: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self.env = _environment(environment, environment_kwargs)
        if self.env.needs_groups:
            raise ConfigError(
                f"{self.env.name!r} has a group node, which compares the responses of one prompt: an "
                "agent loop scores one episode; score per batch with env.verl().reward_fn instead"
            )
        self.response_length: int = self.rollout_config.response_length
        self.tool_parser = ToolParser.get_tool_parser(self.rollout_config.multi_turn.format, self.tokenizer)

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """Play one episode of the row verl passes (`extra_info` holds its columns) and score it."""
        example = dict(kwargs.get("extra_info") or {})
        try:
            rollout = await self.env.setup_rollout(example)
        except Exception as exc:  # an environment bug: this row is unscored, the batch goes on
            prompt = [Message.model_validate(m) for m in kwargs.get("raw_prompt") or []]
            rollout = Rollout(example_id=example.get("example_id", 0), prompt=prompt)
            rollout.stop_reason, rollout.error = "error", describe_error(exc)
        tokens = _Tokens()
        schemas = self._tool_schemas()
        messages = text_messages(rollout.prompt)
        tokens.ids = await self.ct_build_initial_tokens(messages, tools=schemas)
        tokens.prompt_length = len(tokens.ids)
        metrics = AgentLoopMetrics()
        try:
            if rollout.error is None:
                await self._episode(rollout, tokens, sampling_params, messages)
        except Exception as exc:  # the environment's code raised: recorded, never raised out of the batch
            rollout.stop_reason, rollout.error = "error", describe_error(exc)
        if rollout.error is None:
            await self.env.score(rollout)
        await self._release(rollout)
        return self._output(rollout, tokens, metrics)

    async def _episode(
        self,
        rollout: Rollout,
        tokens: _Tokens,
        sampling_params: dict[str, Any],
        messages: list[dict[str, Any]],
    ) -> None:
        """Model turns through verl's server, environment turns through `env_turn`, until one stops."""
        schemas = self._tool_schemas()
        request_id = uuid4().hex
        while True:
            if rollout.turns >= self.env.max_turns:
                rollout.stop_reason = "max_turns"
                return
            updated = text_messages(rollout.messages)
            if len(updated) > len(messages):  # the environment's reply, before the next model turn
                merged, tokens.mask, tokens.logprobs = await self.ct_merge_context_msg(
                    messages, updated, tokens.ids, tokens.mask, tokens.logprobs, tools=schemas
                )
                tokens.ids, messages = merged.token_ids, updated
            if len(tokens.mask) >= self.response_length:
                rollout.stop_reason = "length"
                return
            output = await self.server_manager.generate(
                request_id=request_id, prompt_ids=tokens.ids, sampling_params=sampling_params
            )
            merged, tokens.mask, tokens.logprobs = await self.ct_merge_assistant_token(
                tokens.ids,
                output.token_ids,
                tokens.mask,
                tokens.logprobs if output.log_probs else None,
                assistant_logprobs=output.log_probs or None,
            )
            tokens.ids = merged.token_ids
            rollout.completion.append(await self._assistant_message(output.token_ids, rollout.turns))
            rollout.turns += 1
            messages = text_messages(rollout.messages)
            if len(tokens.mask) >= self.response_length:
                rollout.stop_reason = "length"
                return
            if not await env_turn(self.env, rollout):
                return

    def _tool_schemas(self) -> Any:
        """The environment's tool schemas, None without tools (verl's annotation omits None,
        which its methods take as their default)."""
        return self.env.tool_schemas or None

    async def _assistant_message(self, token_ids: list[int], turn: int) -> Message:
        """The generated tokens as an assistant message, tool calls read by verl's parser."""
        content, calls = await self.tool_parser.extract_tool_calls(token_ids, [])
        tool_calls = [
            ToolCall(
                id=call.tool_call_id or f"call_{turn}_{i}",
                function=FunctionCall(name=call.name, arguments=call.arguments),
            )
            for i, call in enumerate(calls)
        ]
        eos: str | None = self.tokenizer.eos_token  # type: ignore[attr-defined]  # verl annotates the Auto class
        text = content.replace(eos, "") if eos else content
        return Message(
            role="assistant", content=text.strip() if tool_calls else text, tool_calls=tool_calls or None
        )

    async def _release(self, rollout: Rollout) -> None:
        """Let the environment stop what this episode held; a failure is noted, never raised."""
        try:
            await self.env.release_rollout(rollout)
        except Exception as exc:
            rollout.state.setdefault("release_errors", []).append(describe_error(exc))

    def _output(self, rollout: Rollout, tokens: _Tokens, metrics: AgentLoopMetrics) -> AgentLoopOutput:
        """verl's output: unscored rows NaN with every token masked out (see the module docstring)."""
        reward = rollout.reward if rollout.error is None else math.nan
        response_ids = tokens.ids[tokens.prompt_length :][: self.response_length]
        mask = tokens.mask[: self.response_length]
        if not math.isfinite(reward):
            mask = [0] * len(mask)
        extra: dict[str, Any] = {
            "reward_extra_info": reward_extra_info(self.env.rubric, rollout, reward),
            "turn_scores": list(rollout.turn_rewards or []),
            "tool_rewards": [],
            "stop_reason": rollout.stop_reason,
        }
        if rollout.error is not None:
            extra["error"] = rollout.error
        return AgentLoopOutput(
            prompt_ids=tokens.ids[: tokens.prompt_length],
            response_ids=response_ids,
            response_mask=mask,
            response_logprobs=tokens.logprobs[: self.response_length] if tokens.logprobs else None,
            reward_score=reward,
            num_turns=len(rollout.messages),
            metrics=metrics,
            extra_fields=extra,
        )


class _Tokens:
    """The runtime token stream of one episode: prompt and response ids, response mask, logprobs."""

    def __init__(self) -> None:
        self.ids: list[int] = []
        self.prompt_length = 0
        self.mask: list[int] = []
        self.logprobs: list[float] | None = None


@register(AGENT_EPISODE_LOOP_NAME)
class AgentEpisodeLoop(EnvironmentAgentLoop):
    """One agent episode per call of `run`, its model calls served by verl (see the module docstring).

    Args:
        *args: verl's `AgentLoopBase` arguments.
        environment: As for `EnvironmentAgentLoop`.
        environment_kwargs: As for `EnvironmentAgentLoop`.
        agent: The agent: the name `env.verl(agent=...)` registered its `AgentRun` under in
            this process, or its `AgentRunSpec` as a dict (what a worker builds it from).
        tools: verl's tools (unused: the agent has its own).
        **kwargs: verl's `AgentLoopBase` keyword arguments.
    """

    def __init__(
        self,
        *args: Any,
        environment: Environment | str,
        environment_kwargs: dict[str, Any] | None = None,
        agent: str | dict[str, Any],
        tools: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, environment=environment, environment_kwargs=environment_kwargs, **kwargs)
        # One run per loop (verl builds a loop per row), so the episode's proxy closes with it.
        found = registered_agent(agent) if isinstance(agent, str) else None
        spec = found.source if found is not None else None
        if found is not None and spec is None:
            self.agent = found  # an agent given as an object: shared, closed by its owner
            self._owned = False
        else:
            # verl hands the config entry's values over as OmegaConf nodes.
            settings: Any = OmegaConf.to_container(agent) if isinstance(agent, DictConfig) else agent
            self.agent = (spec or AgentRunSpec(**settings)).load()
            self._owned = True

    async def run(self, sampling_params: dict[str, Any], **kwargs: Any) -> AgentLoopOutput:
        """Play the row's episode with the agent, verl's server answering its calls, and score it."""
        example = dict(kwargs.get("extra_info") or {})
        row = {**example, "prompt": list(kwargs.get("raw_prompt") or [])}
        row.setdefault("example_id", example.get("index", 0))
        client = _VerlClient(self, sampling_params)
        try:
            rollout = await harness.rollout(self.env, client, row, 0, episodes=self.agent)
        finally:
            if self._owned:
                await self.agent.close()
            await client.aclose()
        return await self._sample_output(rollout, text_messages(rollout.prompt))

    async def _sample_output(self, rollout: Rollout, prompt: list[dict[str, Any]]) -> AgentLoopOutput:
        """verl's output from the episode's sample (unscored: NaN, every token masked out)."""
        reward = rollout.reward if rollout.error is None else math.nan
        sample = episode_sample(rollout)
        if sample is None:  # no call answered: the prompt alone, nothing to train on
            prompt_ids, response, mask, logprobs = await self.ct_build_initial_tokens(prompt), [], [], None
            turns = len(prompt)
        else:
            prompt_ids, response, mask = sample.prompt_ids, sample.completion_ids, sample.mask
            logprobs = (
                sample.logprobs if any(c.tokens and c.tokens.logprobs for c in rollout.model_calls) else None
            )
            turns = len(sample.messages)
        cut = self.response_length
        extra: dict[str, Any] = {
            "reward_extra_info": reward_extra_info(self.env.rubric, rollout, reward),
            "turn_scores": [],
            "tool_rewards": [],
            "stop_reason": rollout.stop_reason,
            "num_samples": len(training_samples(rollout)),
            "num_calls": sum(c.ok for c in rollout.model_calls),  # answered (the samples rule reads these)
            "skew_tokens": sample.skew_tokens if sample is not None else 0,
        }
        if rollout.error is not None:
            extra["error"] = rollout.error
        return AgentLoopOutput(
            prompt_ids=prompt_ids,
            response_ids=response[:cut],
            response_mask=(mask if math.isfinite(reward) else [0] * len(mask))[:cut],
            response_logprobs=logprobs[:cut] if logprobs is not None else None,
            reward_score=reward,
            num_turns=turns,
            metrics=AgentLoopMetrics(),
            extra_fields=extra,
        )


class _VerlClient(Client):
    """A `Client` whose requests verl's server manager answers (`_ServerTransport`)."""

    def __init__(self, loop: EnvironmentAgentLoop, sampling_params: dict[str, Any]) -> None:
        super().__init__("verl", base_url="verl://server-manager", api_key="verl", return_token_ids=True)
        self._verl = _ServerTransport(loop, sampling_params)

    def _open_transport(self) -> Any:
        return self._verl


class _ServerTransport:
    """Chat requests answered by verl's `server_manager.generate`, as vLLM answers them (with
    `prompt_token_ids`, `token_ids` and logprobs). A call that continues an earlier one (the
    samples rule's `link_call`) gets that call's prompt and sampled ids, then its new messages
    rendered by verl's Continuous Token builder; any other call starts from its messages."""

    name = "verl"

    def __init__(self, loop: EnvironmentAgentLoop, sampling_params: dict[str, Any]) -> None:
        self.loop = loop
        self.sampling_params = dict(sampling_params)
        self.request_id = uuid4().hex
        self.calls: list[ModelCall] = []
        self.ids: dict[int, list[int]] = {}  # per call: its prompt and sampled ids as verl merged them

    async def chat(self, body: dict[str, Any]) -> dict[str, Any]:
        messages = [Message.model_validate(m) for m in body["messages"]]
        tools = body.get("tools") or None
        prompt_ids = await self._prompt_ids(messages, tools)
        output = await self.loop.server_manager.generate(
            request_id=self.request_id, prompt_ids=prompt_ids, sampling_params=self.sampling_params
        )
        reply = await self.loop._assistant_message(output.token_ids, len(self.calls))
        merged, _, _ = await self.loop.ct_merge_assistant_token(prompt_ids, output.token_ids, [], None)
        self.ids[len(self.calls)] = list(merged.token_ids)
        self.calls.append(ModelCall(index=len(self.calls), dialect="chat", messages=messages, reply=reply))
        choice: dict[str, Any] = {
            "index": 0,
            "message": reply.to_openai(),
            "finish_reason": "tool_calls" if reply.tool_calls else "stop",
            "token_ids": list(output.token_ids),
        }
        if output.log_probs:
            choice["logprobs"] = {"content": [{"token": "", "logprob": float(v)} for v in output.log_probs]}
        used = {"prompt_tokens": len(prompt_ids), "completion_tokens": len(output.token_ids)}
        return {
            "id": f"verl-{self.request_id}-{len(self.calls)}",
            "model": body.get("model"),
            "choices": [choice],
            "usage": {**used, "total_tokens": sum(used.values())},
            "prompt_token_ids": prompt_ids,
        }

    async def _prompt_ids(self, messages: list[Message], tools: Any) -> list[int]:
        continued, _ = link_call(messages, None, self.calls)
        wire = text_messages(messages)
        if continued is None:
            return await self.loop.ct_build_initial_tokens(wire, tools=tools)
        before = text_messages(continued.conversation)
        merged, _, _ = await self.loop.ct_merge_context_msg(
            before, wire, self.ids[continued.index], [], None, tools=tools
        )
        return list(merged.token_ids)

    async def aclose(self) -> None:
        return None


__all__ = ["AgentEpisodeLoop", "EnvironmentAgentLoop"]
