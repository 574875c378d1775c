"""Per-turn scores: nodes that score each assistant turn, and containers combining them turn by turn.

A per-turn node (`reward(fn, per_turn=True)`, or a `Rubric` subclass with `forward_turn`)
scores every assistant message of a rollout from the recorded transcript, so it is stateless:
it batches, runs concurrently and re-scores saved results offline, unlike a trajectory rubric
that accumulates steps while an episode runs. Its scores land in
`rollout.turn_scores[<node path>]` (one float or NaN per assistant turn); its episode score,
which flows up the tree as usual, is their mean (or `reduce_turns="sum" | "last" | "min" | "max"`).
The leaf kind is `rubrics._leaf.TurnFunctionRubric`; this module is the scoring it shares with
`Rubric` subclasses that define `forward_turn`, and imports no node class.

After the root has scored, containers above per-turn nodes combine their children's per-turn
scores turn by turn (each container class's `combine_turns`), and the root's list is
`turn_scores[""]`:
  - `WeightedSum`: the weighted sum at each turn. A child scored per episode counts as an
    outcome: its score on the final turn, 0.0 on the turns before.
  - `Gate` / `Sequential`: decided per episode ("prerequisite, then grade"): the last child's
    per-turn scores when the episode passes, zeros when it does not, NaN when it is unscored.
`rubrics.credit` turns these into `rollout.turn_rewards`.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, get_args

from harness._core.errors import ConfigError
from harness._core.types import Message, Rollout
from rubrics._tree.scoring import NAN, Node, Scope, ScoringError, failure_reason, join_path, to_score

#: Parameter names a per-turn reward function gets from the turn it scores.
TURN_INJECTED: tuple[str, ...] = ("turn", "turn_index", "messages")
#: How a per-turn node's episode score is made from its turn scores.
TurnReduce = Literal["mean", "sum", "last", "min", "max"]
TURN_REDUCTIONS: tuple[TurnReduce, ...] = get_args(TurnReduce)


class TurnNode(Node, Protocol):
    """What turn scoring needs of a rubric node (`Rubric` is one; `forward_turn` only a
    per-turn node has)."""

    @property
    def on_error(self) -> float | None: ...

    def forward_turn(self, rollout: Rollout, turn: Turn) -> Any: ...

    def named_children(self) -> Iterator[tuple[str, TurnNode]]: ...

    def combine_turns(
        self, path: str, children: Mapping[str, list[float]], rollout: Rollout, length: int
    ) -> list[float] | None: ...

    def _own_is_async(self) -> bool: ...

    def _has_turn_nodes(self) -> bool: ...

    def _own_scope(self, rollout: Rollout, what: str) -> Scope: ...


@dataclass(frozen=True)
class Turn:
    """One assistant turn: its index among assistant turns, the message, and the conversation up to it."""

    index: int
    message: Message
    messages: list[Message]


def assistant_turns(rollout: Rollout) -> list[Turn]:
    """Every assistant message of the completion as a `Turn`, in order."""
    turns: list[Turn] = []
    for position, message in enumerate(rollout.completion):
        if message.role == "assistant":
            messages = [*rollout.prompt, *rollout.completion[: position + 1]]
            turns.append(Turn(len(turns), message, messages))
    return turns


def num_turns(rollout: Rollout) -> int:
    """How many assistant turns the rollout has."""
    return sum(1 for m in rollout.completion if m.role == "assistant")


def check_reduce_turns(value: object) -> TurnReduce:
    for how in TURN_REDUCTIONS:
        if value == how:
            return how
    raise ConfigError(f"reduce_turns={value!r}; use one of {', '.join(TURN_REDUCTIONS)}")


def reduce_turns(values: Sequence[float], how: TurnReduce) -> float:
    """The episode score from per-turn scores; NaN if any turn is NaN (it flows up)."""
    if any(v != v for v in values):
        return NAN
    if how == "mean":
        return sum(values) / len(values)
    if how == "sum":
        return float(sum(values))
    if how == "last":
        return values[-1]
    return min(values) if how == "min" else max(values)


def _settle_turns(node: TurnNode, rollout: Rollout, values: list[float], errors: list[str]) -> float:
    node._own_scope(rollout, "forward_turn").turns = values  # written with the score by `Rubric._record`
    if errors:
        raise ScoringError("; ".join(errors))
    return reduce_turns(values, getattr(node, "reduce_turns", "mean"))


def score_turns(node: TurnNode, rollout: Rollout) -> Any:
    """`forward` of a node with `forward_turn`: score each turn, record them, return the episode score.

    Awaitable when the node is async (its turns are then scored concurrently). A turn that
    raises is NaN, and the node is unscored with every failing turn named in the reason.
    """
    turns = assistant_turns(rollout)
    if not turns:
        raise ScoringError(f"{node.label} scores assistant turns, and this rollout has none")
    turn_fn = node.forward_turn
    if node._own_is_async():

        async def scored() -> float:
            async def one(turn: Turn) -> Any:
                out = turn_fn(rollout, turn)
                return await out if inspect.isawaitable(out) else out

            raw = await asyncio.gather(*(one(t) for t in turns), return_exceptions=True)
            return _settle_turns(node, rollout, *_collect(node, list(raw)))

        return scored()
    results: list[Any] = []
    for turn in turns:
        try:
            results.append(turn_fn(rollout, turn))
        except Exception as exc:
            results.append(exc)
    return _settle_turns(node, rollout, *_collect(node, results))


def _collect(node: TurnNode, raw: list[Any]) -> tuple[list[float], list[str]]:
    """Per-turn scores and the failures; a failed turn takes the node's `on_error` value, as
    a failed episode does (NaN by default), so a node told to score failures never hands
    NaN turn rewards to training."""
    fallback = NAN if node.on_error is None else node.on_error
    values: list[float] = []
    errors: list[str] = []
    for index, item in enumerate(raw):
        if isinstance(item, BaseException):
            if not isinstance(item, Exception):
                raise item
            values.append(fallback)
            errors.append(f"turn {index}: {failure_reason(item)}")
            continue
        try:
            values.append(to_score(item, node))
        except TypeError as exc:
            values.append(fallback)
            errors.append(f"turn {index}: {exc}")
    return values, errors


# ---------------------------------------------------------------- containers, turn by turn
def has_turn_nodes(root: TurnNode) -> bool:
    """Whether any node of the tree scores turns (`forward_turn`)."""
    return root._has_turn_nodes()


def finish_turns(root: TurnNode, rollout: Rollout) -> None:
    """After the root scored: fill each container's per-turn scores from its children's, bottom-up."""
    length = num_turns(rollout)
    if length:
        _turns_of(root, "", rollout, length)


def _turns_of(node: TurnNode, path: str, rollout: Rollout, length: int) -> list[float] | None:
    if not has_turn_nodes(node):
        return None
    children = {
        name: _turns_of(child, join_path(path, name), rollout, length)
        for name, child in node.named_children()
    }
    own = rollout.turn_scores.get(path)
    if own is not None or not children:
        return own
    combined = _combine(node, path, children, rollout, length)
    if combined is not None:
        rollout.turn_scores[path] = combined
    return combined


def episode_score(rollout: Rollout, path: str) -> float:
    """The score node `path` ("" = the root) gave the whole episode."""
    return rollout.reward if not path else rollout.scores.get(path, NAN)


def outcome(rollout: Rollout, path: str, length: int) -> list[float]:
    """A per-episode score as per-turn scores: on the final turn, 0.0 before it."""
    return [0.0] * (length - 1) + [episode_score(rollout, path)]


def _combine(
    node: TurnNode, path: str, children: Mapping[str, list[float] | None], rollout: Rollout, length: int
) -> list[float] | None:
    """The container's own rule (`Rubric.combine_turns`), given every child's per-turn scores
    (a child scored per episode counts as an outcome)."""
    vectors = {
        name: vector if vector is not None else outcome(rollout, join_path(path, name), length)
        for name, vector in children.items()
    }
    return node.combine_turns(path, vectors, rollout, length)
