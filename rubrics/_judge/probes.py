"""Bias probes for a judge: the same rollout changed in a way that should not change its grade.

Each probe makes a twin of a labelled rollout; `rubrics.calibration` scores both and
reports how far the judge's score moved. What each twin measures, honestly:

- verbosity: the final response with a paragraph of content-free filler appended (it restates
  nothing, adds no claim and no answer). A judge grading correctness should not move; a shift
  up is a preference for longer answers, a shift down a penalty for length (which a judge of
  conciseness is *meant* to have, so read the number against what the judge is for).
- position: the final response and the reference answer trade places in the judge's prompt
  (the response slot shows the reference, the reference slot shows the response). A judge of
  equivalence ("does the response match the reference?") asks a symmetric question, so its
  verdict should not move; a shift measures how much the verdict depends on which text sits
  where (order and role). Only judges whose template shows both the response (`response`,
  `completion` or `completion_messages`) and `answer` get this probe; for a judge asked an
  asymmetric question (is the response *at least as complete* as the reference?) a shift can be
  legitimate, and the report says what was swapped so a reader can judge.
"""

from __future__ import annotations

from harness._core.types import Message, Rollout

FILLER = (
    "To put the above another way, and to be thorough about how it was reached: the reasoning "
    "has been laid out step by step, each part was considered with care, and the result stated "
    "above is the one this response gives. Restating it at more length does not change it, and "
    "nothing further needs to be added to what has already been said here."
)
RESPONSE_FIELDS = frozenset({"response", "completion", "completion_messages"})


def _with_last_reply(rollout: Rollout, text: str) -> Rollout:
    """A copy of `rollout` whose last assistant message says `text` (one is added if none)."""
    twin = rollout.model_copy(deep=True)
    completion = list(twin.completion)
    for i in range(len(completion) - 1, -1, -1):
        if completion[i].role == "assistant":
            completion[i] = completion[i].model_copy(update={"content": text})
            break
    else:
        completion.append(Message(role="assistant", content=text))
    twin.completion = completion
    return twin


def padded(rollout: Rollout, filler: str = FILLER) -> Rollout:
    """The verbosity twin: the final response followed by a blank line and `filler`."""
    return _with_last_reply(rollout, f"{rollout.response}\n\n{filler}")


def swapped(rollout: Rollout) -> Rollout:
    """The position twin: the final response and the reference answer trade places."""
    twin = _with_last_reply(rollout, "" if rollout.answer is None else str(rollout.answer))
    twin.answer = rollout.response
    return twin


def position_applies(template_fields: frozenset[str] | set[str]) -> str | None:
    """None when the position probe applies to a judge whose template names these fields,
    else the reason it does not."""
    if "answer" in template_fields and template_fields & RESPONSE_FIELDS:
        return None
    return "the judge's prompt does not show both the response and the reference answer"


__all__ = ["FILLER", "RESPONSE_FIELDS", "padded", "position_applies", "swapped"]
