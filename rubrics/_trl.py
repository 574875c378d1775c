"""A rubric tree as TRL reward functions: GRPOTrainer's signature, NaN as None, per-node metrics.

TRL (1.x) calls a reward function as `f(prompts, completions, completion_ids, **kwargs)` with
every dataset column in `kwargs` as a list, plus `trainer_state`, `log_metric(name, value)`
and `log_extra(column, values)`, and reads back one `float | None` per completion: `None`
becomes NaN, and a row every reward function left as `None` stays out of the group baseline.
That is this project's "unscored is NaN, never a silent 0" rule, so an unscorable rollout
reaches the trainer as `None`, not as a zero that would teach the policy something false.

What TRL (1.16, `GRPOTrainer._generate_and_score_completions`) does with `None`: it becomes NaN
in `rewards_per_func`; a row where *every* reward function gave NaN is "unscorable": its reward
stays NaN, so the group's mean and std (`nanmean`/`nanstd`) leave it out, its advantage is set
to 0 (it contributes no policy-gradient signal; a KL term with beta > 0 still applies), and the
logged reward means skip it. With one reward function (`as_trl_reward`) an unscored completion
is therefore out of its group's baseline. With several (`as_trl_reward_funcs`), a row that
another function scored is not unscorable: TRL `nansum`s the weighted rewards, so that
function's None counts as 0 in the sum (in "normalize_then_sum" it is still left out of that
function's own per-group mean and std).

An unscorable row's tokens still count in the loss normaliser, and nothing `env.trl()` passes
can change that. TRL's default `loss_type="dapo"` divides by `num_items_in_batch`, the sum of
`completion_mask` (times `tool_mask`) over the generation batch, computed in
`_generate_and_score_completions` before any reward function runs; "bnpo" divides by the same
mask's sum, "grpo" and "sapo" average per-sequence means over every row, "dr_grpo" divides by
rows times `max_completion_length`. Reward functions, `environment_factory` and `rollout_func`
(GRPOTrainer's keyword arguments) cannot zero a row's mask, so with beta = 0 an unscored row
adds no gradient but shrinks every scored token's weight by (scored tokens) / (all tokens).
Dropping it from the normaliser needs the trainer changed (a subclass overriding
`_generate_and_score_completions`); verl's agent loop here zeroes the row's response mask instead.

Group nodes: when the tree holds one (`rubrics._group`), the completions of one prompt (TRL's
`num_generations` copies) get one `example_id` (`group_by_prompt`) unless the dataset has an
`example_id` column, and are scored together as a group.

Nothing here imports TRL or torch: the objects are plain callables, so they can be built,
pickled and tested without the `[trl]` extra. The async form is a separate class because
TRL decides whether to await a callable object by inspecting its `__call__`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Protocol

from harness._core.defaults import DEFAULT_CONCURRENCY
from harness._core.errors import ConfigError
from harness._core.types import Rollout


class TRLScored(Protocol):
    """The members of a `rubrics.Rubric` the TRL reward uses. `Rubric.as_trl_reward()` builds the
    reward, so this module cannot name `Rubric` without a circle; `Rubric` satisfies this."""

    @property
    def name(self) -> str | None: ...

    @property
    def label(self) -> str: ...

    @property
    def _group_node(self) -> bool: ...

    def _group_is_async(self) -> bool: ...

    def _check_scoreable(self) -> None: ...

    def _is_sync_tree(self) -> bool: ...

    def rubrics(self) -> Iterator[TRLScored]: ...

    def named_rubrics(self, prefix: str = "") -> Iterator[tuple[str, TRLScored]]: ...

    def named_children(self) -> Iterator[tuple[str, TRLScored]]: ...

    def score_batch(
        self, rollouts: Iterable[Rollout | Mapping[str, Any]], *, concurrency: int = DEFAULT_CONCURRENCY
    ) -> list[float]: ...

    async def ascore_batch(
        self, rollouts: Iterable[Rollout | Mapping[str, Any]], *, concurrency: int = DEFAULT_CONCURRENCY
    ) -> list[float]: ...


#: Keyword arguments TRL adds next to the dataset columns; they are not columns of a rollout.
TRAINER_KWARGS = frozenset({"trainer_state", "log_metric", "log_extra", "environments"})
#: Dataset columns that fill a Rollout field of their own instead of `info`.
_ROLLOUT_COLUMNS = {"answer": "answer", "task": "task", "example_id": "example_id"}
METRIC_PREFIX = "rubric/"


def rollouts_from_batch(
    prompts: Sequence[Any], completions: Sequence[Any], columns: Mapping[str, Sequence[Any]]
) -> list[Rollout]:
    """One Rollout per completion from what TRL passes a reward function.

    Conversational prompts/completions are lists of message dicts; standard ones are text
    (a text completion becomes one assistant message). `answer`, `task` and `example_id`
    columns fill those fields, an `info` column (dict or JSON text) is merged into `info`,
    and every other column lands in `info`, where reward leaves find it by name.
    """
    if len(prompts) != len(completions):
        raise ConfigError(f"TRL passed {len(prompts)} prompts but {len(completions)} completions")
    data = {k: v for k, v in columns.items() if k not in TRAINER_KWARGS}
    for name, values in data.items():
        if len(values) != len(completions):
            raise ConfigError(
                f"column {name!r} has {len(values)} values for {len(completions)} completions; "
                "TRL passes one value per completion"
            )
    rollouts = []
    for i, (prompt, completion) in enumerate(zip(prompts, completions)):
        row = {name: values[i] for name, values in data.items()}
        fields: dict[str, Any] = {"prompt": prompt, "completion": completion, "rollout_index": i}
        info = _as_info(row.pop("info", None))
        for column, value in row.items():
            if column in _ROLLOUT_COLUMNS and value is not None:
                fields[_ROLLOUT_COLUMNS[column]] = value
            else:
                info.setdefault(column, value)
        fields["info"] = info
        if "task" in fields:
            fields["task"] = str(fields["task"])
        rollouts.append(Rollout.model_validate(fields))
    return rollouts


def _as_info(value: Any) -> dict[str, Any]:
    if value is None or value == "":
        return {}
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except json.JSONDecodeError:
            return {"info": value}
        return dict(parsed) if isinstance(parsed, dict) else {"info": parsed}
    return {"info": value}


def group_by_prompt(rollouts: Sequence[Rollout]) -> None:
    """Give the completions of one prompt one `example_id` (its first position in the batch).

    TRL repeats each prompt `num_generations` times in a batch; the tree's group nodes then
    compare those completions with each other (`Rubric.ascore_batch` groups by example_id).
    """
    first: dict[str, int] = {}
    for i, rollout in enumerate(rollouts):
        key = json.dumps([m.model_dump(mode="json") for m in rollout.prompt], sort_keys=True)
        rollout.example_id = first.setdefault(key, i)


def flat_group_frac(rollouts: Sequence[Rollout], path: str | None) -> float | None:
    """Of the groups (same example_id) with two or more members scored by node `path` (None:
    the reward), the fraction whose members do not spread (all scored the same, whatever the
    value: flatness is judged by the spread, not the mean); None when there is none."""
    groups: dict[Any, list[float]] = {}
    for r in rollouts:
        value = r.reward if path is None else r.scores.get(path, math.nan)
        if math.isfinite(value):
            groups.setdefault(r.example_id, []).append(value)
    compared = [values for values in groups.values() if len(values) > 1]
    if not compared:
        return None
    return sum(1 for values in compared if len(set(values)) == 1) / len(compared)


def skipped_groups(rollouts: Sequence[Rollout], scores: Sequence[float]) -> int:
    """How many prompts (TRL's groups) have no scored completion: nothing of them is trained on."""
    scored: dict[str, bool] = {}
    for rollout, score in zip(rollouts, scores):
        key = json.dumps([m.model_dump(mode="json") for m in rollout.prompt], sort_keys=True)
        scored[key] = scored.get(key, False) or math.isfinite(score)
    return sum(1 for ok in scored.values() if not ok)


def as_trl_value(score: float) -> float | None:
    """A score as TRL reads it: a finite float, or None for unscored (NaN) and non-finite."""
    return score if math.isfinite(score) else None


class TRLReward:
    """A rubric as a synchronous TRL reward function (see `Rubric.as_trl_reward`).

    Attributes:
        rubric: the tree that scores each completion.
        __name__: the name TRL logs the reward under (`rewards/<name>/mean`).
        metric_prefix: per-node metrics are logged as `<metric_prefix><node path>`.
        last_rollouts: the rollouts of the most recent call, scored (for inspection).
        prepare: optional `prepare(rollout)` run before scoring each rollout.
    """

    def __init__(
        self,
        rubric: TRLScored,
        *,
        name: str | None = None,
        metric_prefix: str = METRIC_PREFIX,
        log_metrics: bool = True,
        log_extras: bool = True,
        concurrency: int = DEFAULT_CONCURRENCY,
    ) -> None:
        rubric._check_scoreable()
        if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
            raise ConfigError(f"concurrency must be an int >= 1, got {concurrency!r}")
        self.rubric = rubric
        self.__name__ = name or rubric.name or type(rubric).__name__
        self.metric_prefix = metric_prefix
        self.log_metrics = log_metrics
        self.log_extras = log_extras
        self.concurrency = concurrency
        self.last_rollouts: list[Rollout] = []
        # Set by `as_trl_reward_funcs`: a child's nodes are logged under its path in the whole tree.
        self.path_prefix = ""
        #: Called on each rollout before scoring (an environment's answer parser, set by `env.trl()`).
        self.prepare: Callable[[Rollout], Any] | None = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.__name__!r}, rubric={self.rubric.label})"

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["last_rollouts"] = []  # per-call data, not configuration
        return state

    def __call__(
        self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any
    ) -> list[float | None]:
        """Score one TRL batch; the list has one reward per completion, None where unscored."""
        rollouts = self._prepare(prompts, completions, kwargs)
        scores = self.rubric.score_batch(rollouts, concurrency=self.concurrency)
        return self._report(rollouts, scores, kwargs)

    def _prepare(
        self, prompts: Sequence[Any], completions: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> list[Rollout]:
        rollouts = rollouts_from_batch(prompts, completions, kwargs)
        environments = kwargs.get("environments")
        if environments:
            # An environment from `env.trl()` holds the episode's tool state: it merges it into
            # the rollout and claims the episode, so its `get_reward` does not count it twice.
            for rollout, environment in zip(rollouts, environments):
                attach = getattr(environment, "_attach_rollout", None)
                if callable(attach):
                    attach(rollout)
        if self.prepare is not None:
            for rollout in rollouts:
                self.prepare(rollout)
        if "example_id" not in kwargs and any(n._group_node for n in (self.rubric, *self.rubric.rubrics())):
            group_by_prompt(rollouts)
        return rollouts

    def _report(
        self,
        rollouts: list[Rollout],
        scores: list[float],
        kwargs: Mapping[str, Any],
    ) -> list[float | None]:
        self.last_rollouts = rollouts
        log_metric: Callable[[str, float], Any] | None = kwargs.get("log_metric")
        log_extra: Callable[[str, list[Any]], Any] | None = kwargs.get("log_extra")
        prefix = f"{self.metric_prefix}{self.path_prefix}"
        for path, _ in self.rubric.named_rubrics():
            values = [r.scores.get(path, math.nan) for r in rollouts]
            name = f"{prefix}.{path}" if self.path_prefix else f"{prefix}{path}"
            finite = [v for v in values if math.isfinite(v)]
            if self.log_metrics and callable(log_metric) and finite:
                log_metric(name, sum(finite) / len(finite))
            if self.log_extras and callable(log_extra):
                log_extra(name, [as_trl_value(v) for v in values])
        if self.log_metrics and callable(log_metric) and rollouts:
            unscored = sum(1 for s in scores if not math.isfinite(s))
            where = f"{prefix}/" if self.path_prefix else prefix
            log_metric(f"{where}unscored_frac", unscored / len(rollouts))
            # A prompt whose completions all went unscored is skipped by TRL (advantage 0): say so.
            log_metric(f"{where}skipped_groups", float(skipped_groups(rollouts, scores)))
            # Every node: a group whose members do not spread on a node gets no signal from it.
            for path, _ in [("", self.rubric), *self.rubric.named_rubrics()]:
                flat = flat_group_frac(rollouts, path or None)
                if flat is not None:
                    name = f"{prefix}.{path}" if self.path_prefix else f"{prefix}{path}"
                    log_metric(f"{name}/flat_group_frac" if path else f"{where}flat_group_frac", flat)
        return [as_trl_value(s) for s in scores]


class AsyncTRLReward(TRLReward):
    """The async form, for trees holding async nodes (judges): TRL gathers it concurrently."""

    async def __call__(  # type: ignore[override]
        self, prompts: Sequence[Any], completions: Sequence[Any], completion_ids: Any = None, **kwargs: Any
    ) -> list[float | None]:
        """Score one TRL batch concurrently; one reward per completion, None where unscored."""
        rollouts = self._prepare(prompts, completions, kwargs)  # before any await: see envs._training.trl
        scores = await self.rubric.ascore_batch(rollouts, concurrency=self.concurrency)
        return self._report(rollouts, scores, kwargs)


def as_trl_reward(
    rubric: TRLScored,
    *,
    name: str | None = None,
    metric_prefix: str = METRIC_PREFIX,
    log_metrics: bool = True,
    log_extras: bool = True,
    concurrency: int = DEFAULT_CONCURRENCY,
) -> TRLReward:
    """`rubric` as a picklable TRL reward function; async when the tree has async nodes.

    Args:
        rubric: the tree to score with.
        name: what TRL logs the reward as (default: the rubric's name, else its class).
        metric_prefix: per-node batch means go to `log_metric("<prefix><path>", mean)`.
        log_metrics: log per-node means and the fraction of unscored completions.
        log_extras: log per-completion node scores to TRL's completions table (`log_extra`).
        concurrency: most completions scored at once by an async tree.

    Returns:
        A `TRLReward` (sync) or `AsyncTRLReward`: `f(prompts, completions, completion_ids, **kwargs)`
        returning one float per completion, None where the rubric could not score it.
    """
    # A group node reads as sync per rollout; one that waits on a judge makes the reward async.
    judges = any(n._group_node and n._group_is_async() for n in (rubric, *rubric.rubrics()))
    cls = TRLReward if rubric._is_sync_tree() and not judges else AsyncTRLReward
    return cls(
        rubric,
        name=name,
        metric_prefix=metric_prefix,
        log_metrics=log_metrics,
        log_extras=log_extras,
        concurrency=concurrency,
    )


def child_rewards(
    parent: TRLScored, *, metric_prefix: str = METRIC_PREFIX, concurrency: int = DEFAULT_CONCURRENCY
) -> list[TRLReward]:
    """One TRL reward function per child of `parent`, each logging its nodes under the child's
    path in the whole tree (`WeightedSum.as_trl_reward_funcs` pairs them with the weights)."""
    funcs: list[TRLReward] = []
    for child_name, child in parent.named_children():
        func = as_trl_reward(child, name=child_name, metric_prefix=metric_prefix, concurrency=concurrency)
        func.path_prefix = child_name
        funcs.append(func)
    return funcs


__all__ = [
    "AsyncTRLReward",
    "TRLReward",
    "as_trl_reward",
    "as_trl_value",
    "child_rewards",
    "flat_group_frac",
    "group_by_prompt",
    "rollouts_from_batch",
    "skipped_groups",
]
