"""Training datasets from results: SFT messages, preference pairs, token-faithful RL rows, GRPO prompts.

`EvalResults.to_dataset(format=...)` calls `export_rows`; each format is one function here:
  - "messages": SFT rows `{"messages": [...]}` (prompt + completion), best-of-n by reward.
  - "preference": `{"prompt", "chosen", "rejected"}` from the highest and lowest reward of
    each example (TRL's conversational preference format), only where they differ.
  - "tokens": one row per training sample (`harness.training_samples`: the calls that extend
    each other joined, a rewritten history starting another): `prompt_ids`, `completion_ids`,
    `logprobs`, `env_mask` (1 on tokens the model generated, 0 on tool/user tokens between its
    turns) from the token ids the endpoint returned, never by re-tokenizing text, with the
    sample's place, calls and skew; an agent rollout's row adds `model_calls`, its calls' own ids.
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
from harness._core.samples import training_samples
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


def token_rows(r: Rollout) -> list[dict[str, Any]]:
    """A rollout's training samples (`harness.training_samples`) as token rows: prompt ids,
    completion ids with logprobs and the model/env token mask, the sample's place, calls, skew
    and reward, and its calls' own ids (`call_token_rows`).

    Raises:
        ResultsError: The rollout has no token ids (none were asked for).
    """
    samples = [s for s in training_samples(r) if s.has_token_ids]
    if not samples:
        raise ResultsError(
            f"rollout {r.example_id!r}/{r.rollout_index} has no token ids; ask the endpoint for them "
            "with Client(return_token_ids=True) (vLLM, or the scripted endpoint) and run again"
        )
    calls = call_token_rows(r)
    return [
        {
            "example_id": str(r.example_id),
            "rollout_index": r.rollout_index,
            "sample_index": s.index,
            "num_samples": len(samples),
            "calls": s.calls,
            "step": s.step,
            "prompt_ids": s.prompt_ids,
            "completion_ids": s.completion_ids,
            "logprobs": s.logprobs,
            "env_mask": s.mask,
            "skew_tokens": s.skew_tokens,
            "reward": s.reward,
            "turn_rewards": list(r.turn_rewards),
            "model_calls": [c for c in calls if not r.model_calls or c["index"] in s.calls],
        }
        for s in samples
    ]


def call_token_rows(r: Rollout) -> list[dict[str, Any]]:
    """Each model call of an agent rollout that has token ids, as the engine returned them:
    `index` (its place in `rollout.model_calls`), `prompt_ids`, `completion_ids`, `logprobs`,
    `served_by` (the model version that answered)."""
    return [
        {
            "index": i,
            "prompt_ids": list(c.tokens.prompt_token_ids),
            "completion_ids": list(c.tokens.completion_token_ids),
            "logprobs": list(c.tokens.logprobs or []),
            "served_by": c.served_by,
        }
        for i, c in enumerate(r.model_calls)
        if c.tokens is not None
    ]


def tokens_rows(rollouts: Iterable[Rollout]) -> list[dict[str, Any]]:
    """Token-faithful RL rows, one per training sample of every scored rollout (`token_rows`)."""
    return [row for group in _by_example(rollouts).values() for r in group for row in token_rows(r)]


def flagged_token_rows(rollouts: Iterable[Rollout], flag: str) -> list[dict[str, Any]]:
    """Token rows for every rollout, with `flag` True (and the reason) where it is unscored.

    A scored rollout needs its token ids (see `token_rows`); an unscored one without them (its
    generation failed) becomes a row with empty ids, flagged, so its group keeps its size.
    """
    rows = []
    for r in rollouts:
        unscored = r.error is not None or not math.isfinite(r.reward)
        if unscored and not any(s.has_token_ids for s in training_samples(r)):
            empty: dict[str, Any] = {
                "example_id": str(r.example_id),
                "rollout_index": r.rollout_index,
                "sample_index": 0,
                "num_samples": 1,
                "calls": [],
                "step": None,
                "prompt_ids": [],
                "completion_ids": [],
                "logprobs": [],
                "env_mask": [],
                "skew_tokens": 0,
                "reward": math.nan,
                "turn_rewards": list(r.turn_rewards),
                "model_calls": call_token_rows(r),
            }
            samples = [empty]
        else:
            samples = token_rows(r)
        for row in samples:
            if unscored:
                row["reward"] = math.nan  # never 0: the flag says why it does not count
            row[flag] = unscored
            row["filter_reason"] = (r.error or "unscored (NaN reward)") if unscored else None
        rows += samples
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
    "token_rows",
    "tokens_rows",
    "trl_rows",
]
