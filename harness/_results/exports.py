"""Training datasets from results: SFT messages, preference pairs, token-faithful RL rows, GRPO prompts.

`EvalResults.to_dataset(format=...)` calls `export_rows`; each format is one function here:
  - "messages": SFT rows `{"messages": [...]}` (prompt + completion), best-of-n by reward.
  - "preference": `{"prompt", "chosen", "rejected"}` from the highest and lowest reward of
    each example (TRL's conversational preference format), only where they differ.
  - "tokens": `prompt_ids`, `completion_ids`, `logprobs`, `env_mask` (1 on tokens the model
    generated, 0 on tool/user tokens between its turns) rebuilt from the token ids the
    endpoint returned for each turn, never by re-tokenizing text; an agent rollout's row adds
    `model_calls`, each proxied call's own ids (side calls, calls before a history rewrite).
  - "trl": one GRPO-ready row per example: `prompt` messages, `answer`, `task`, `info`.
  - "nemo-rl" / "prime-rl": the "tokens" rows of *every* rollout, each group whole, with the
    trainer's own per-sample flag (`mask_sample` for NeMo-RL, `is_filtered` for prime-rl) True
    on an unscored one, whose `reward` stays NaN and whose reason is in `filter_reason`: the
    trainer keeps the group's shape and leaves the flagged sample out of baselines and loss.
Unscored rollouts (NaN reward) never become training data: they are dropped, or flagged.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import Any

from harness._core.errors import ConfigError, ResultsError
from harness._core.types import Rollout, text_messages

FORMATS: tuple[str, ...] = ("records", "messages", "preference", "tokens", "trl", "nemo-rl", "prime-rl")
#: The per-sample flag each trainer reads to leave a sample out of its loss.
MASK_FLAGS: dict[str, str] = {"nemo-rl": "mask_sample", "prime-rl": "is_filtered"}


def _by_example(rollouts: Iterable[Rollout]) -> dict[str, list[Rollout]]:
    groups: dict[str, list[Rollout]] = {}
    for r in rollouts:
        if r.error is None and math.isfinite(r.reward):
            groups.setdefault(str(r.example_id), []).append(r)
    return groups


def messages_rows(
    rollouts: Iterable[Rollout], *, best_of: int = 1, min_reward: float | None = None
) -> list[dict[str, Any]]:
    """SFT rows: the `best_of` highest-reward rollouts of each example (ties: earlier first)."""
    if isinstance(best_of, bool) or not isinstance(best_of, int) or best_of < 1:
        raise ConfigError(f"best_of must be an integer >= 1, got {best_of!r}")
    rows = []
    for group in _by_example(rollouts).values():
        ranked = sorted(group, key=lambda r: (-r.reward, r.rollout_index))[:best_of]
        for r in ranked:
            if min_reward is not None and r.reward < min_reward:
                continue
            rows.append(
                {
                    "example_id": str(r.example_id),
                    "rollout_index": r.rollout_index,
                    "messages": text_messages(r.messages),
                    "reward": r.reward,
                }
            )
    return rows


def preference_rows(rollouts: Iterable[Rollout]) -> list[dict[str, Any]]:
    """Chosen = highest reward, rejected = lowest, within each example (skipped when equal).

    Raises:
        ResultsError: no example has two scored rollouts, so there is no pair to make (a run
            with one rollout per example): say `-r 2` or more.
    """
    groups = _by_example(rollouts)
    if groups and all(len(group) < 2 for group in groups.values()):
        raise ResultsError(
            f"preference pairs need at least two scored rollouts of an example, and each of these "
            f"{len(groups)} examples has at most one; run with rollouts_per_example >= 2 (rubric eval -r 2)"
        )
    rows = []
    for group in groups.values():
        ranked = sorted(group, key=lambda r: (-r.reward, r.rollout_index))
        chosen, rejected = ranked[0], ranked[-1]
        if chosen.reward <= rejected.reward:
            continue
        rows.append(
            {
                "example_id": str(chosen.example_id),
                "prompt": text_messages(chosen.prompt),
                "chosen": text_messages(chosen.completion),
                "rejected": text_messages(rejected.completion),
                "score_chosen": chosen.reward,
                "score_rejected": rejected.reward,
            }
        )
    return rows


def token_row(r: Rollout) -> dict[str, Any]:
    """One rollout as prompt ids + completion ids with logprobs and the model/env token mask."""
    turns = sorted(r.turn_tokens, key=lambda t: t.turn)
    if not turns:
        raise ResultsError(
            f"rollout {r.example_id!r}/{r.rollout_index} has no token ids; ask the endpoint for them "
            "with Client(return_token_ids=True) (vLLM, or the scripted endpoint) and run again"
        )
    prompt_ids = list(turns[0].prompt_token_ids)
    sequence = list(prompt_ids)
    mask: list[int] = []
    logprobs: list[float] = []
    for turn in turns:
        if turn.prompt_token_ids[: len(sequence)] != sequence:
            raise ResultsError(
                f"rollout {r.example_id!r}/{r.rollout_index}: turn {turn.turn}'s prompt does not start with the "
                "tokens before it (the chat template is not prefix-preserving), so the turns cannot be joined"
            )
        between = turn.prompt_token_ids[len(sequence) :]  # tool results / user replies: not the model's
        sequence += between
        mask += [0] * len(between)
        logprobs += [0.0] * len(between)
        sequence += turn.completion_token_ids
        mask += [1] * len(turn.completion_token_ids)
        given = turn.logprobs if turn.logprobs is not None else [0.0] * len(turn.completion_token_ids)
        if len(given) != len(turn.completion_token_ids):
            raise ResultsError(
                f"rollout {r.example_id!r}/{r.rollout_index}: turn {turn.turn} has {len(given)} logprobs for "
                f"{len(turn.completion_token_ids)} tokens"
            )
        logprobs += [float(v) for v in given]
    return {
        "example_id": str(r.example_id),
        "rollout_index": r.rollout_index,
        "prompt_ids": prompt_ids,
        "completion_ids": sequence[len(prompt_ids) :],
        "logprobs": logprobs,
        "env_mask": mask,
        "reward": r.reward,
        "turn_rewards": list(r.turn_rewards),
        "model_calls": call_token_rows(r),
    }


def call_token_rows(r: Rollout) -> list[dict[str, Any]]:
    """Each model call of an agent rollout that has token ids, as the engine returned them:
    `index` (its place among the calls), `prompt_ids`, `completion_ids`, `logprobs`,
    `served_by` (the model version that answered). The row's
    joined sequence holds only the main line; these hold every call."""
    return [
        {
            "index": c.index,
            "prompt_ids": list(c.tokens.prompt_token_ids),
            "completion_ids": list(c.tokens.completion_token_ids),
            "logprobs": list(c.tokens.logprobs or []),
            "served_by": c.served_by,
        }
        for c in r.model_calls
        if c.tokens is not None
    ]


def tokens_rows(rollouts: Iterable[Rollout]) -> list[dict[str, Any]]:
    """Token-faithful RL rows for every scored rollout (see `token_row`)."""
    return [token_row(r) for group in _by_example(rollouts).values() for r in group]


def flagged_token_rows(rollouts: Iterable[Rollout], flag: str) -> list[dict[str, Any]]:
    """Token rows for every rollout, with `flag` True (and the reason) where it is unscored.

    A scored rollout needs its token ids (see `token_row`); an unscored one without them (its
    generation failed) becomes a row with empty ids, flagged, so its group keeps its size.
    """
    rows = []
    for r in rollouts:
        unscored = r.error is not None or not math.isfinite(r.reward)
        if unscored and not r.turn_tokens:
            row: dict[str, Any] = {
                "example_id": str(r.example_id),
                "rollout_index": r.rollout_index,
                "prompt_ids": [],
                "completion_ids": [],
                "logprobs": [],
                "env_mask": [],
                "reward": math.nan,
                "turn_rewards": list(r.turn_rewards),
                "model_calls": call_token_rows(r),
            }
        else:
            row = token_row(r)
        if unscored:
            row["reward"] = math.nan  # never 0: the flag says why it does not count
        row[flag] = unscored
        row["filter_reason"] = (r.error or "unscored (NaN reward)") if unscored else None
        rows.append(row)
    return rows


def trl_rows(rollouts: Iterable[Rollout]) -> list[dict[str, Any]]:
    """One GRPO-ready row per example: its prompt messages and the columns a rubric reads."""
    seen: dict[str, dict[str, Any]] = {}
    for r in rollouts:
        key = str(r.example_id)
        if key not in seen and r.prompt:
            seen[key] = {
                "example_id": key,
                "prompt": text_messages(r.prompt),
                "answer": None
                if r.answer is None
                else json.dumps(r.answer)
                if not isinstance(r.answer, str)
                else r.answer,
                "task": r.task,
                "info": json.dumps(r.info, default=str),
            }
    return list(seen.values())


def export_rows(
    rollouts: list[Rollout], format: str, *, best_of: int = 1, min_reward: float | None = None
) -> list[dict[str, Any]]:
    """Rows for `format` (one of FORMATS except "records", which `EvalResults.to_records` gives)."""
    if format == "messages":
        return messages_rows(rollouts, best_of=best_of, min_reward=min_reward)
    if format == "preference":
        return preference_rows(rollouts)
    if format == "tokens":
        return tokens_rows(rollouts)
    if format == "trl":
        return trl_rows(rollouts)
    if format in MASK_FLAGS:
        return flagged_token_rows(rollouts, MASK_FLAGS[format])
    raise ConfigError(f"to_dataset(format={format!r}); use one of {', '.join(FORMATS)}")


__all__ = [
    "FORMATS",
    "MASK_FLAGS",
    "export_rows",
    "flagged_token_rows",
    "messages_rows",
    "preference_rows",
    "token_row",
    "tokens_rows",
    "trl_rows",
]
