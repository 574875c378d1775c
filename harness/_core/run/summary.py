"""The numbers a run is judged by, computed from its rollouts alone.

Kept apart from running and storage so the same summary comes out of a live run, a run read
back from disk, and a re-scored copy.

Definitions:
- mean reward and its standard error (sample std / sqrt(n)) are over *scored* rollouts only;
  an unscored rollout (reward NaN: a rubric leaf failed, or the rollout errored) is counted
  and explained instead, never averaged in as 0.
- a node's mean is over the rollouts where that node has a non-NaN score.
- a node's failed count is how many rollouts it scored NaN (unscored) on; a node skipped by a
  chain is neither scored nor failed.
- a *zero-variance group* of a node (or of the reward, key "") is an example with at least
  two scored rollouts that all scored the same: GRPO learns nothing from it.
- pass@k uses the unbiased estimator 1 - C(n-c, k) / C(n, k) per example (n scored rollouts,
  c of them passing), averaged over the examples with n >= k. A rollout *passes* when its
  reward >= 1.0 - 1e-9 (it earned the full reward), or, when the environment declares
  `success=(node, threshold)`, when that node's score reaches the threshold (Wordle: a win).
  Views always say what a pass is. Nodes do not declare their reward range, so a tree that
  cannot reach 1 is recognised by its rollouts: with the default criterion, no rollout passed
  and the best reward is above 0 (some rollouts earned reward, none the full 1); then
  `Summary.pass_warning()` says so and points to `success=`.
"""

from __future__ import annotations

import math
from array import array
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from fractions import Fraction
from typing import ClassVar

from pydantic import AliasChoices, BaseModel, Field

from harness._core.display import HtmlRepr, fmt
from harness._core.tree import place_paths
from harness._core.types import Rollout

PASS_THRESHOLD = 1.0 - 1e-9
DEFAULT_PASS_CRITERION = "reward >= 1"


class Summary(HtmlRepr, BaseModel):
    """Aggregate statistics of a set of rollouts (see the module docstring for definitions).

    Attributes:
        num_rollouts: How many rollouts there are.
        num_examples: How many distinct examples they ran.
        num_scored: How many rollouts have a reward (not NaN).
        mean_reward: The mean reward over scored rollouts (None: none scored).
        reward_stderr: The standard error of that mean.
        node_means: Each node's mean score by dotted path.
        pass_at_k: pass@k by k.
        pass_at_k_examples: How many examples each pass@k is over.
        stop_reasons: How many rollouts ended for each stop reason.
        num_errors: How many rollouts errored.
        num_unscored: How many rollouts have a NaN reward.
        unscored_reasons: The commonest reasons rollouts were unscored, with their counts.
        prompt_tokens: Prompt tokens the policy used, summed.
        completion_tokens: Completion tokens the policy generated, summed.
        judge_prompt_tokens: Prompt tokens the judges used, summed.
        judge_completion_tokens: Completion tokens the judges generated, summed.
        wall_seconds: This session's wall-clock time.
        rollouts_per_second: This session's rollouts per second of wall time.
        total_wall_seconds: A resumed run's wall time over all its sessions.
        node_stderrs: The standard error of each node's mean (where it has two scores or more).
        planned: How many rollouts the run set out to make.
        pass_criterion: What counts as a pass for pass@k, e.g. "reward >= 1".
        best_reward: The highest reward of a scored rollout.
        node_failed: Per node, how many rollouts it scored NaN on (the reward's under "").
        num_groups: Per node, how many examples have at least two scored rollouts.
        zero_variance_groups: Per node, how many of those groups scored all alike.
    """

    html_kind: ClassVar[str] = "summary"

    # Counts are num_*; metadata.json files written before the rename say "rollouts",
    # "examples", "scored", "errors", "unscored".
    num_rollouts: int = Field(0, validation_alias=AliasChoices("num_rollouts", "rollouts"))
    num_examples: int = Field(0, validation_alias=AliasChoices("num_examples", "examples"))
    num_scored: int = Field(0, validation_alias=AliasChoices("num_scored", "scored"))
    mean_reward: float | None = None
    reward_stderr: float | None = None
    node_means: dict[str, float] = Field(default_factory=dict)
    pass_at_k: dict[int, float] = Field(default_factory=dict)
    # How many examples each pass@k is over (those with at least k scored rollouts).
    pass_at_k_examples: dict[int, int] = Field(default_factory=dict)
    stop_reasons: dict[str, int] = Field(default_factory=dict)
    num_errors: int = Field(0, validation_alias=AliasChoices("num_errors", "errors"))
    num_unscored: int = Field(0, validation_alias=AliasChoices("num_unscored", "unscored"))
    unscored_reasons: list[tuple[str, int]] = Field(default_factory=list)
    prompt_tokens: int = 0
    completion_tokens: int = 0
    judge_prompt_tokens: int = 0
    judge_completion_tokens: int = 0
    wall_seconds: float | None = None
    rollouts_per_second: float | None = None
    # A resumed run's wall time over all its sessions (wall_seconds and the rate are this session's).
    total_wall_seconds: float | None = None
    # Standard error of each node's mean (absent where a node has fewer than two scores).
    node_stderrs: dict[str, float] = Field(default_factory=dict)
    # How many rollouts the run set out to make (more than `rollouts` when it was interrupted).
    planned: int | None = None
    # What counts as a pass for pass@k, e.g. "reward >= 1" (the default) or "grade.win >= 1".
    pass_criterion: str = DEFAULT_PASS_CRITERION
    # The highest reward of a scored rollout (None: none scored, or a summary from before it).
    best_reward: float | None = None
    # Per node: rollouts it failed on (NaN); examples with >= 2 scored rollouts ("groups"), and
    # how many of them scored all alike (zero variance). The reward's are under "".
    node_failed: dict[str, int] = Field(default_factory=dict)
    num_groups: dict[str, int] = Field(default_factory=dict)
    zero_variance_groups: dict[str, int] = Field(default_factory=dict)

    def __repr__(self) -> str:
        # Readable at a glance, no float noise: the numbers a run is judged by.
        reward = fmt(self.mean_reward, stderr=self.reward_stderr)
        planned = (
            f" of {self.planned}" if self.planned is not None and self.planned != self.num_rollouts else ""
        )
        nodes = ", ".join(f"{p}={fmt(v)}" for p, v in self.node_means.items())
        passes = ", ".join(f"pass@{k}={fmt(v)}" for k, v in self.pass_at_k.items())
        parts = [
            f"rollouts={self.num_rollouts}{planned}",
            f"examples={self.num_examples}",
            f"mean_reward={reward}",
            *([f"nodes: {nodes}"] if nodes else []),
            *([passes] if passes else []),
            f"errors={self.num_errors}",
            f"unscored={self.num_unscored}",
        ]
        return f"Summary({'; '.join(parts)})"

    def pass_warning(self) -> str | None:
        """Why pass@k may not mean what it seems (see the module docstring).

        Returns:
            With the default criterion, a sentence when no rollout reached reward 1 though
            some earned reward (pointing to `success=`); otherwise None.
        """
        best = self.best_reward
        if self.pass_criterion != DEFAULT_PASS_CRITERION or not self.pass_at_k or best is None:
            return None
        if not 0 < best < PASS_THRESHOLD:
            return None
        return (
            f"no rollout reached reward 1 (the best: {fmt(best)}), which pass@k counts as a pass; if this "
            f"rubric's top reward is below 1, say what passes with success=(node, threshold)"
        )

    def too_many_errors(self, fail_on_error: float | None, spelled: str = "fail_on_error") -> str | None:
        """Why the run fails by its errors, as Inspect's `fail_on_error` decides.

        Args:
            fail_on_error: The most errored rollouts allowed: a share when below 1 (0: any
                error fails), a count from 1 up; None: the run fails only when every rollout
                errored.
            spelled: The setting's name in the sentence (`--fail-on-error` on the command line).

        Returns:
            A sentence saying how many rollouts errored of how many and what was allowed, or
            None when the run does not fail.
        """
        errors, rollouts = self.num_errors, self.num_rollouts
        if fail_on_error is None:
            too_many, allowed = rollouts > 0 and errors == rollouts, "every rollout"
        elif fail_on_error == 0:
            too_many, allowed = errors > 0, f"{spelled}: any error"
        else:
            limit = fail_on_error * rollouts if fail_on_error < 1 else fail_on_error
            too_many, allowed = errors > limit, f"more than {spelled} {fail_on_error:g}"
        return f"{errors} of {rollouts} rollouts errored ({allowed})" if too_many else None

    __str__ = __repr__


def node_note(summary: Summary, path: str) -> str:
    """What a node's mean leaves out, for views: "3 failed · 2 of 6 groups flat" ("" when none).
    `path` "" is the reward."""
    parts = []
    failed = summary.node_failed.get(path, 0) if path else 0
    if failed:
        parts.append(f"{failed:,} failed")
    groups = summary.num_groups.get(path, 0)
    if groups:
        parts.append(f"{summary.zero_variance_groups.get(path, 0):,} of {groups:,} groups flat")
    return " · ".join(parts)


def wall_time(summary: Summary) -> str | None:
    """The wall-time row for views: this session's time and rate, then a resumed run's time
    over all its sessions; None when the run was not timed."""
    wall, total, rate = summary.wall_seconds, summary.total_wall_seconds, summary.rollouts_per_second
    if wall is None or not math.isfinite(wall):
        return None
    per_second = f" · {rate:.1f} rollouts/s" if rate and math.isfinite(rate) else ""
    if total is not None and math.isfinite(total) and total > wall:
        return f"{wall:.1f}s this session{per_second} · {total:.1f}s over all sessions"
    return f"{wall:.1f}s{per_second}"


def over_scored(summary: Summary) -> str:
    """What the mean reward is over, errored rollouts named: "over 26 scored, 4 errored"."""
    errored = f", {summary.num_errors:,} errored" if summary.num_errors else ""
    return f"over {summary.num_scored:,} scored{errored}"


def skip_reason(scores: Mapping[str, float], path: str, paths: Sequence[str]) -> str:
    """Why node `path` has no score on a rollout whose nodes in tree order are `paths`: a
    chain (Sequential) stops at a sibling scoring 0 or NaN, and the nodes after it never run."""
    parent = path.rpartition(".")[0]
    siblings = [p for p in paths if p.rpartition(".")[0] == parent and p in scores]
    earlier = [p for p in siblings if paths.index(p) < paths.index(path)] if path in paths else siblings
    for sibling in reversed(earlier):
        value = scores[sibling]
        if value != value or value == 0.0:
            return f"skipped: after {sibling.rsplit('.', 1)[-1]} scored {fmt(value)}"
    return "not run"


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased probability that at least one of k draws (without replacement) of n passes."""
    if k > n or k < 1:
        raise ValueError(f"pass@k needs 1 <= k <= n, got k={k}, n={n}")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def mean_and_stderr(values: Sequence[float]) -> tuple[float | None, float | None]:
    """Mean and standard error of the mean, for any floats a tree can produce.

    None where undefined: no values, one value, or an infinite value (for the error). An
    error beyond the float range is inf (a mean of finite values never is); +inf and -inf
    together have a NaN mean. Never raises: where finite values' sum or squares overflow, the
    mean is computed exactly and the error scaled (`_scaled`).
    """
    n = len(values)
    if n == 0:
        return None, None
    if not all(map(math.isfinite, values)):  # the mean is inf (one sign) or NaN, the error undefined
        infinite = {v for v in values if math.isinf(v)}
        return (infinite.pop() if len(infinite) == 1 and not any(map(math.isnan, values)) else math.nan), None
    try:
        mean = math.fsum(values) / n
    except OverflowError:  # finite values whose sum leaves the float range: "intermediate overflow"
        return _scaled(values)
    if n < 2:
        return mean, None
    try:
        variance = math.fsum((v - mean) ** 2 for v in values) / (n - 1)
    except OverflowError:  # a square out of range: only the error needs scaling, the mean stands
        variance = math.inf
    return mean, math.sqrt(variance / n) if math.isfinite(variance) else _scaled(values)[1]


def _scaled(values: Sequence[float]) -> tuple[float, float | None]:
    """`mean_and_stderr` of finite values whose sum or squares overflow: the mean exactly (in
    fractions: the mean of finite floats is within their range), the error on the values divided
    by a power of two (exact but for digits far below the largest value)."""
    n = len(values)
    mean = float(sum(map(Fraction, values)) / n)
    stderr = None
    if n > 1:
        shift = math.frexp(max(abs(v) for v in values))[1]  # every |v| / 2**shift is below 1
        small = [math.ldexp(v, -shift) for v in values]
        centre = math.fsum(small) / n
        spread = math.sqrt(math.fsum((v - centre) ** 2 for v in small) / (n - 1) / n)
        stderr = _unscale(spread, shift)
    return mean, stderr


def _unscale(value: float, shift: int) -> float:
    """value * 2**shift; inf (with value's sign) where that is beyond the float range."""
    try:
        return math.ldexp(value, shift)
    except OverflowError:
        return math.copysign(math.inf, value)


def _unscored_reasons(rollout: Rollout) -> set[str]:
    if rollout.error:
        return {f"rollout error ({rollout.error.split(':', 1)[0]})"}
    # Root causes: errors on nodes none of whose descendants also failed.
    paths = list(rollout.score_errors)
    leaves = [p for p in paths if not any(q != p and (p == "" or q.startswith(p + ".")) for q in paths)]
    return {rollout.score_errors[p] for p in leaves} or {"no reason recorded"}


def _tree_order(node_values: Mapping[str, object], node_order: Iterable[str] | None) -> list[str]:
    """Known tree order, with the paths it lacks (a Harbor verifier's reward.json components)
    under their parent; otherwise parents before children, siblings as first scored."""
    known = [p for p in node_order or () if p in node_values]
    rest = [p for p in node_values if p not in set(known)]
    position = {p: i for i, p in enumerate(rest)}

    def key(path: str) -> tuple[int, ...]:
        # Each prefix sorts by where that prefix (or its first descendant) was first seen.
        parts = path.split(".")
        return tuple(
            min(
                (
                    i
                    for q, i in position.items()
                    if q == ".".join(parts[: d + 1]) or q.startswith(".".join(parts[: d + 1]) + ".")
                ),
                default=0,
            )
            for d in range(len(parts))
        )

    return place_paths(known, sorted(rest, key=key))


class RunningSummary:
    """A summary built one rollout at a time (`add`), so a run need not keep its rollouts:
    per rollout it keeps only its reward and node scores, as 8-byte floats."""

    def __init__(self, success: tuple[str, float] | None = None) -> None:
        self.success_path, self.success_threshold = success or ("", 1.0)
        self.num_rollouts = 0
        self.rewards = array("d")
        self.node_failed: Counter[str] = Counter()
        # Per node path ("" for the reward), per example index: the first scored value, and the
        # group's state: 0 no score yet, 1 one score, 2 all alike so far, 3 differing.
        self.example_index: dict[str, int] = {}
        self.group_first: dict[str, array[float]] = {}
        self.group_state: dict[str, array[int]] = {}
        self.node_values: dict[str, array[float]] = {}
        self.per_example: dict[str, list[int]] = {}  # example -> [n scored, c passing]
        self.counts: dict[str, int] = {}  # example -> rollouts
        self.stop_reasons: Counter[str] = Counter()
        self.reasons: Counter[str] = Counter()
        self.num_errors = self.num_unscored = self.prompt_tokens = self.completion_tokens = 0
        self.judge_prompt_tokens = self.judge_completion_tokens = 0

    def add(self, r: Rollout) -> None:
        self.num_rollouts += 1
        self.stop_reasons[r.stop_reason or "unknown"] += 1
        example = str(r.example_id)
        self.counts[example] = self.counts.get(example, 0) + 1
        self.prompt_tokens += r.usage.prompt_tokens
        self.completion_tokens += r.usage.completion_tokens
        self.judge_prompt_tokens += r.judge_usage.prompt_tokens
        self.judge_completion_tokens += r.judge_usage.completion_tokens
        if r.error:
            self.num_errors += 1
        index = self.example_index.setdefault(example, len(self.example_index))
        for path, value in r.scores.items():
            if value is not None and not math.isnan(value):
                values = self.node_values.get(path)
                if values is None:
                    values = self.node_values[path] = array("d")
                values.append(value)
                self._group(path, index, value)
            else:
                self.node_failed[path] += 1
        reward = r.reward
        if reward is not None and not math.isnan(reward):
            self._group("", index, reward)
        if reward is None or math.isnan(reward):
            self.num_unscored += 1
            self.reasons.update(_unscored_reasons(r))
            return
        self.rewards.append(reward)
        tally = self.per_example.setdefault(example, [0, 0])
        tally[0] += 1
        value = reward if not self.success_path else r.scores.get(self.success_path, math.nan)
        tally[1] += value >= self.success_threshold - 1e-9  # NaN never passes

    def _group(self, path: str, index: int, value: float) -> None:
        """Note `value` in the group of example `index` for node `path` (flat arrays: 9 bytes
        per example and node)."""
        first, state = self.group_first.get(path), self.group_state.get(path)
        if first is None or state is None:
            first = self.group_first[path] = array("d")
            state = self.group_state[path] = array("b")
        if index >= len(state):
            missing = index + 1 - len(state)
            first.extend([0.0] * missing)
            state.extend([0] * missing)
        now = state[index]
        if now == 0:
            first[index], state[index] = value, 1
        elif now in (1, 2):
            state[index] = 2 if value == first[index] else 3

    def groups(self) -> tuple[dict[str, int], dict[str, int]]:
        """Per node ("" the reward): how many examples have >= 2 scored rollouts, and how many
        of those scored all alike."""
        counted = {p: sum(1 for v in s if v >= 2) for p, s in self.group_state.items()}
        flat = {p: sum(1 for v in s if v == 2) for p, s in self.group_state.items()}
        return {p: n for p, n in counted.items() if n}, {p: flat[p] for p, n in counted.items() if n}

    def node_means(self, paths: list[str]) -> dict[str, float]:
        return {p: mean for p in paths if (mean := mean_and_stderr(self.node_values[p])[0]) is not None}

    def node_stderrs(self, paths: list[str]) -> dict[str, float]:
        return {p: e for p in paths if (e := mean_and_stderr(self.node_values[p])[1]) is not None}

    def pass_at(self, max_k: int | None) -> tuple[dict[int, float], dict[int, int]]:
        """pass@k for each k, and how many examples each is over (those with >= k scored rollouts)."""
        k_limit = max_k if max_k is not None else max(self.counts.values(), default=0)
        passes: dict[int, float] = {}
        over: dict[int, int] = {}
        for k in range(1, k_limit + 1):
            eligible = [pass_at_k(n, c, k) for n, c in self.per_example.values() if n >= k]
            if eligible:
                passes[k] = math.fsum(eligible) / len(eligible)
                over[k] = len(eligible)
        return passes, over

    def summary(
        self,
        *,
        wall_seconds: float | None = None,
        timed_rollouts: int | None = None,
        max_k: int | None = None,
        top_reasons: int = 3,
        node_order: Iterable[str] | None = None,
        planned: int | None = None,
    ) -> Summary:
        """The Summary of what was added so far (the arguments as `summarize` takes them)."""
        mean, stderr = mean_and_stderr(self.rewards)
        paths = _tree_order(self.node_values, node_order)
        timed = self.num_rollouts if timed_rollouts is None else timed_rollouts
        passes, over = self.pass_at(max_k)
        rate = timed / wall_seconds if wall_seconds and wall_seconds > 0 else None
        num_groups, flat = self.groups()
        return Summary(
            num_rollouts=self.num_rollouts,
            num_examples=len(self.counts),
            num_scored=len(self.rewards),
            mean_reward=mean,
            reward_stderr=stderr,
            node_means=self.node_means(paths),
            node_stderrs=self.node_stderrs(paths),
            pass_at_k=passes,
            pass_at_k_examples=over,
            stop_reasons=dict(self.stop_reasons.most_common()),
            num_errors=self.num_errors,
            num_unscored=self.num_unscored,
            unscored_reasons=self.reasons.most_common(top_reasons),
            prompt_tokens=self.prompt_tokens,
            completion_tokens=self.completion_tokens,
            judge_prompt_tokens=self.judge_prompt_tokens,
            judge_completion_tokens=self.judge_completion_tokens,
            wall_seconds=wall_seconds,
            rollouts_per_second=rate,
            planned=planned,
            pass_criterion=f"{self.success_path or 'reward'} >= {self.success_threshold:g}",
            best_reward=max(self.rewards) if self.rewards else None,
            node_failed={p: self.node_failed[p] for p in _tree_order(self.node_failed, node_order)},
            num_groups=num_groups,
            zero_variance_groups=flat,
        )


def summarize(
    rollouts: Iterable[Rollout],
    *,
    wall_seconds: float | None = None,
    timed_rollouts: int | None = None,
    max_k: int | None = None,
    top_reasons: int = 3,
    node_order: Iterable[str] | None = None,
    planned: int | None = None,
    success: tuple[str, float] | None = None,
) -> Summary:
    """Summarise `rollouts`. `timed_rollouts` is how many of them ran within `wall_seconds`
    (all by default; fewer when a resumed run only ran the missing ones). `max_k` bounds
    pass@k (default: the most rollouts any example has). `node_order` lists node paths in
    tree order (e.g. from the rubric), which the node means follow; paths it lacks come
    after, in the order they were first scored. `planned` is how many rollouts the run
    meant to make. `success` is (node path, threshold): a rollout passes when that node's
    score reaches the threshold (default: the reward reaches 1)."""
    running = RunningSummary(success)
    for r in rollouts:
        running.add(r)
    return running.summary(
        wall_seconds=wall_seconds,
        timed_rollouts=timed_rollouts,
        max_k=max_k,
        top_reasons=top_reasons,
        node_order=node_order,
        planned=planned,
    )


__all__ = [
    "PASS_THRESHOLD",
    "RunningSummary",
    "Summary",
    "mean_and_stderr",
    "node_note",
    "over_scored",
    "pass_at_k",
    "skip_reason",
    "summarize",
    "wall_time",
]
