"""`RankJudge` and `PairwiseJudge`: LLM judges that compare the rollouts of one example.

A judge asked "how good is this answer, 0-10?" drifts; asked "which of these is better?" it is
steadier, and a comparison is what GRPO learns from anyway. Both judges are group nodes
(`rubrics._group.GroupRubric`): they see the group's members (rollouts whose episode errored are
left out before), label them A, B, C, ... in a shuffled order (position bias), and turn the
judge's verdicts into one score in [0, 1] per member:

- `RankJudge` shows the whole group in one request and parses a ranking ("RANKING: B > A = C")
  or per-member scores ("SCORES: A=7, B=3"); `orders=2` asks again in the reverse order and
  averages. A reply that cannot be parsed makes the group NaN with the reason: never zeros.
- `PairwiseJudge` compares members two at a time (all pairs, or a bounded round-robin for large
  groups), optionally in both orders; a member's score is its share of wins, ties counting half.

A group of one has nothing to compare: it scores the neutral 0.5 without a judge call. The
judge's tokens are shared out over the members' `judge_usage`; the group's own count is in
each member's `score_details[path]["group_usage"]`.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import Awaitable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, Literal, TypeVar

from harness._core.aio import unreachable
from harness._core.defaults import DEFAULT_BASE_URL
from harness._core.errors import ConfigError, EndpointError, ScoringError
from harness._core.tree import TreeNode
from harness._core.types import Rollout, Usage
from rubrics._group import GroupRubric
from rubrics._judge.cache import JudgeCache, ask
from rubrics._judge.llm import DEFAULT_SYSTEM_PROMPT
from rubrics._judge.prompt import JudgeTemplate, rollout_fields
from rubrics._judge.verdicts import parse_label_scores, parse_ranking, parse_winner
from rubrics._tree.module import NAN

if TYPE_CHECKING:  # pragma: no cover
    from harness._endpoint.client import Client

T = TypeVar("T")
LABELS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
DEFAULT_INSTRUCTIONS = (
    "Several candidates answered the same task. Judge which answers it best: correctness first, "
    "then completeness and clarity."
)
RANK_PROMPT = (
    "{{ instructions }}\n\n<task>\n{{ prompt }}\n</task>\n"
    "{% if answer %}<reference>\n{{ answer }}\n</reference>\n{% endif %}"
    "{% for c in candidates %}\nCandidate {{ c.label }}:\n<candidate>\n{{ c.response }}\n</candidate>\n{% endfor %}"
)
#: How a RankJudge reads its reply: an ordering of the labels, or a score per label.
RankParse = Literal["ranking", "scores"]
RANK_FORMATS = {
    "ranking": (
        "\nRank every candidate from best to worst. End your reply with one line naming each label "
        "once, best first, '>' between places and '=' for a tie, e.g.\nRANKING: {example}"
    ),
    "scores": (
        "\nScore every candidate from {low:g} (worst) to {high:g} (best). End your reply with one "
        "line giving each label its score, e.g.\nSCORES: {example}"
    ),
}
PAIR_FORMAT = (
    "\nWhich candidate is better? End your reply with one line: WINNER: A, WINNER: B, or WINNER: TIE"
)


class GroupJudge(GroupRubric):
    """What `RankJudge` and `PairwiseJudge` share: the judge's client, prompt and accounting."""

    config_fields: ClassVar[tuple[str, ...]] = (
        "prompt",
        "instructions",
        "model",
        "base_url",
        "sampling",
        "seed",
    )

    def __init__(
        self,
        *,
        prompt: str,
        instructions: str,
        model: str | None,
        client: Client | None,
        base_url: str | None,
        api_key: str | None,
        sampling: Mapping[str, Any] | None,
        seed: int,
        name: str | None,
        on_error: float | None,
    ) -> None:
        super().__init__(name=name, on_error=on_error)
        if client is None and not model:
            raise ConfigError(
                f"{type(self).__name__} needs a judge: model='name' (endpoint from base_url= or "
                "OPENAI_BASE_URL) or client=harness.Client(...)"
            )
        d = self.__dict__
        d["_client"], d["_owns_client"], d["_api_key"] = client, client is None, api_key
        self.prompt = prompt
        JudgeTemplate(prompt, what="prompt")  # a syntax error fails here, not at the first group
        self.instructions = instructions
        self.model = client.model if client is not None else model
        self.base_url = client.base_url if client is not None else base_url
        self.sampling = dict(sampling or {})
        self.seed = seed
        self.calls = 0  # judge requests made by this node (for measuring cost)

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if state.get("_owns_client"):
            state["_client"] = None  # rebuilt lazily after unpickling (TRL workers)
        return state

    def describe(self) -> TreeNode:
        entry = super().describe()
        if self.model:
            entry["settings"] = {"model": self.model}
        return entry

    async def _close_own(self) -> None:
        """Close the HTTP pool of a Client this judge built itself (one given to it is the giver's)."""
        client = self.__dict__["_client"]
        if client is not None and self.__dict__["_owns_client"]:
            await client.aclose()

    @property
    def client(self) -> Client:
        """The judge's Client (built on first use from `model`, `base_url` and env vars)."""
        client: Client | None = self.__dict__["_client"]
        if client is None:
            from harness._endpoint.client import Client  # the HTTP stack, only once a judge asks

            client = Client(str(self.model), self.base_url, self.__dict__["_api_key"])
            self.__dict__["_client"] = client
        return client

    async def _check_ready(self, path: str) -> None:
        """A judge that cannot answer at all fails once, before any group, naming the fix."""
        client = self.client
        key = (id(client), client.model, client.base_url)
        if self.__dict__.get("_ready_for") == key:  # checked once per client, not per group
            return
        name = repr(path) if path else self.label
        where = f"judge {name} (model {client.model!r} at {client.base_url})"
        try:
            client.check_credentials()
        except ConfigError:
            raise ConfigError(
                f"{where} has no API key: set OPENAI_API_KEY, or give the judge api_key=, "
                "base_url='http://127.0.0.1:8000/v1' for a local server, or client=harness.Client(...)"
            ) from None
        if client.base_url != DEFAULT_BASE_URL:
            problem = await unreachable(client.base_url)
            if problem:
                raise ConfigError(f"{where} cannot reach its endpoint ({problem}): start it or fix base_url=")
        self.__dict__["_ready_for"] = key

    def _fields(self, group: Sequence[Rollout]) -> dict[str, Any]:
        first = rollout_fields(group[0])
        return {"instructions": self.instructions, "prompt": first["prompt"], "answer": first["answer"]}

    def _messages(self, fields: Mapping[str, Any], reply_format: str) -> list[dict[str, str]]:
        text = JudgeTemplate(self.prompt, what="prompt").render(fields) + reply_format
        return [{"role": "system", "content": DEFAULT_SYSTEM_PROMPT}, {"role": "user", "content": text}]

    async def _ask(self, messages: list[dict[str, str]]) -> tuple[str, Usage]:
        """One judge reply and its tokens; an endpoint failure is a ScoringError with the reason."""
        params = {"temperature": 0.0, **self.sampling}
        self.calls += 1
        try:
            answer = await ask(self.client, messages, params, 1, JudgeCache.shared)
        except EndpointError as exc:
            raise ScoringError(f"judge call failed: {exc}") from exc
        return answer.replies[0] or "", answer.usage

    def _account(self, group: Sequence[Rollout], usage: Usage, calls: int, detail: dict[str, Any]) -> None:
        """Share the group's judge tokens out over its members and record what explains them."""
        n = len(group)
        for i, r in enumerate(group):
            share = Usage(
                prompt_tokens=usage.prompt_tokens // n + (1 if i < usage.prompt_tokens % n else 0),
                completion_tokens=usage.completion_tokens // n
                + (1 if i < usage.completion_tokens % n else 0),
            )
            r.judge_usage = r.judge_usage + share
            self.record_detail(
                r, {**detail, "calls": calls, "group_size": n, "group_usage": usage.model_dump()}
            )

    def _alone(self, member: Rollout) -> list[float]:
        """A group of one has nothing to compare: the neutral 0.5, no judge call."""
        self.record_detail(
            member, {"calls": 0, "group_size": 1, "note": "a group of one: nothing to compare"}
        )
        return [0.5]

    async def _ask_each(
        self, calls: Sequence[Awaitable[tuple[T, Usage]]]
    ) -> tuple[list[T | None], Usage, list[str]]:
        """Judge calls run concurrently: each one's value (None where it failed), their tokens
        (a failed call's too), and the failures' reasons."""
        results = await asyncio.gather(*calls, return_exceptions=True)
        values: list[T | None] = []
        usage, dropped = Usage(), []
        for result in results:
            if isinstance(result, BaseException):
                if not isinstance(result, Exception):
                    raise result
                dropped.append(str(result))
                usage = usage + getattr(result, "usage", Usage())
                values.append(None)
            else:
                value, used = result
                usage = usage + used
                values.append(value)
        return values, usage, dropped

    def _rng(self, group: Sequence[Rollout]) -> random.Random:
        return random.Random(f"{self.seed}:{group[0].example_id}:{len(group)}")


class RankJudge(GroupJudge):
    """An LLM judge that ranks the members of a group in one request.

    Args:
        instructions: what "better" means here (inserted into `prompt`).
        model: the judge model's name, as for `LLMJudge`.
        client: a ready `harness.Client` instead of `model`, as for `LLMJudge`.
        base_url: the judge endpoint's base URL (default: OPENAI_BASE_URL).
        api_key: the judge endpoint's key (default: OPENAI_API_KEY).
        parse: "ranking" (the judge orders the labels; a member's score is the fraction of the
            others ranked below it, ties counting half) or "scores" (the judge scores each label
            on `score_range`, rescaled to [0, 1]).
        orders: how many orderings to ask about: 1 (one shuffled order), 2 (that order and its
            reverse, cancelling position bias), or more (further shuffles); scores are averaged
            over the replies that parsed.
        score_range: the judge's scale for parse="scores".
        prompt: a jinja2 template over `instructions`, `prompt` (the task's text), `answer` and
            `candidates` (each with `label` and `response`); the reply format is appended.
        sampling: request arguments (temperature defaults to 0).
        seed: seeds the shuffles (per example), so a re-run asks the same questions.
        name: the node's name among its parent's children (default: from the class).
        on_error: the score given when this node fails (default NaN, "unscored", with the reason
            kept).
    """

    config_fields = ("parse", "orders", "score_range")

    def __init__(
        self,
        instructions: str = DEFAULT_INSTRUCTIONS,
        *,
        model: str | None = None,
        client: Client | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        parse: RankParse = "ranking",
        orders: int = 1,
        score_range: tuple[float, float] = (0.0, 10.0),
        prompt: str = RANK_PROMPT,
        sampling: Mapping[str, Any] | None = None,
        seed: int = 0,
        name: str | None = None,
        on_error: float | None = None,
    ) -> None:
        if parse not in RANK_FORMATS:
            raise ConfigError(f"RankJudge parse must be 'ranking' or 'scores', got {parse!r}")
        if isinstance(orders, bool) or not isinstance(orders, int) or orders < 1:
            raise ConfigError(f"RankJudge orders must be an int >= 1, got {orders!r}")
        low, high = (float(v) for v in score_range)
        if not low < high:
            raise ConfigError(
                f"RankJudge score_range must be (low, high) with low < high, got {score_range!r}"
            )
        super().__init__(
            prompt=prompt,
            instructions=instructions,
            model=model,
            client=client,
            base_url=base_url,
            api_key=api_key,
            sampling=sampling,
            seed=seed,
            name=name if name is not None else "rank_judge",
            on_error=on_error,
        )
        self.parse, self.orders, self.score_range = parse, orders, (low, high)

    def orderings(self, group: Sequence[Rollout]) -> list[list[int]]:
        """The member orders shown to the judge: a seeded shuffle, its reverse, then more shuffles."""
        rng = self._rng(group)
        first = list(range(len(group)))
        rng.shuffle(first)
        found = [first, first[::-1]][: self.orders]
        while len(found) < self.orders:
            order = list(range(len(group)))
            rng.shuffle(order)
            found.append(order)
        return found

    async def forward(self, group: list[Rollout]) -> list[float]:  # type: ignore[override]
        if len(group) == 1:
            return self._alone(group[0])
        if len(group) > len(LABELS):
            raise ScoringError(f"RankJudge labels at most {len(LABELS)} members; this group has {len(group)}")
        orders = self.orderings(group)
        results, usage, dropped = await self._ask_each([self._one_order(group, order) for order in orders])
        totals, counts, replies = [0.0] * len(group), 0, []
        for order, result in zip(orders, results):
            if result is None:
                continue
            scores, reply = result
            replies.append(
                {"order": "".join(LABELS[order.index(i)] for i in range(len(group))), "reply": reply}
            )
            for i, score in enumerate(scores):
                totals[i] += score
            counts += 1
        detail: dict[str, Any] = {"replies": replies, **({"dropped": dropped} if dropped else {})}
        self._account(group, usage, len(orders), detail)
        if not counts:
            raise ScoringError("; ".join(dict.fromkeys(dropped)))
        return [total / counts for total in totals]

    async def _one_order(
        self, group: list[Rollout], order: list[int]
    ) -> tuple[tuple[list[float], str], Usage]:
        """Ask about the members in `order` (position p gets label LABELS[p]); scores by member."""
        labels = LABELS[: len(group)]
        fields = self._fields(group)
        fields["candidates"] = [
            {"label": labels[p], "response": rollout_fields(group[i])["response"]}
            for p, i in enumerate(order)
        ]
        reply, usage = await self._ask(self._messages(fields, self._format(labels)))
        try:
            by_label = (
                parse_ranking(reply, labels) if self.parse == "ranking" else self._scores(reply, labels)
            )
        except ScoringError as exc:
            exc.usage = usage  # type: ignore[attr-defined]  # the failed call still cost tokens
            raise
        return ([by_label[labels[order.index(i)]] for i in range(len(group))], reply), usage

    def describe(self) -> TreeNode:
        entry = super().describe()
        entry["settings"] = {**entry.get("settings", {}), "parse": self.parse}
        return entry

    def _format(self, labels: str) -> str:
        if self.parse == "ranking":
            return RANK_FORMATS["ranking"].format(example=" > ".join(labels[::-1]))
        low, high = self.score_range
        example = ", ".join(f"{label}={(low + high) / 2:g}" for label in labels)
        return RANK_FORMATS["scores"].format(low=low, high=high, example=example)

    def _scores(self, reply: str, labels: str) -> dict[str, float]:
        raw = parse_label_scores(reply, labels)
        low, high = self.score_range
        outside = {k: v for k, v in raw.items() if not low <= v <= high}
        if outside:
            raise ScoringError(f"judge scores {outside} are outside the range {low:g}-{high:g}")
        return {label: (value - low) / (high - low) for label, value in raw.items()}

    def extra_repr(self) -> str:
        return f"model={self.model!r}, parse={self.parse!r}, orders={self.orders}"


class PairwiseJudge(GroupJudge):
    """An LLM judge that compares the members of a group two at a time.

    Args:
        instructions: what "better" means here.
        model: the judge model's name, as for `LLMJudge`.
        client: a ready `harness.Client` instead of `model`, as for `LLMJudge`.
        base_url: the judge endpoint's base URL (default: OPENAI_BASE_URL).
        api_key: the judge endpoint's key (default: OPENAI_API_KEY).
        max_pairs: the most comparisons per group (default: all pairs, n(n-1)/2). Above it,
            a round-robin: in round r each member meets the one r places further, for as many
            rounds as fit, so every member plays the same number of games.
        both_orders: ask each pair twice, A/B and B/A, and count each verdict as half a game
            (cancels position bias at twice the calls); otherwise each pair is shown in a
            seeded random order.
        prompt: as for `RankJudge` (`candidates` holds the two members).
        sampling: as for `RankJudge`.
        seed: as for `RankJudge`.
        name: the node's name among its parent's children (default: from the class).
        on_error: the score given when this node fails (default NaN, "unscored", with the reason
            kept).

    A member's score is (wins + ties / 2) / games over the comparisons that parsed; one that
    failed (malformed reply, endpoint error) is dropped and counted in the detail; a member
    left with no game is NaN with the reason.
    """

    config_fields = ("max_pairs", "both_orders")

    def __init__(
        self,
        instructions: str = DEFAULT_INSTRUCTIONS,
        *,
        model: str | None = None,
        client: Client | None = None,
        base_url: str | None = None,
        api_key: str | None = None,
        max_pairs: int | None = None,
        both_orders: bool = False,
        prompt: str = RANK_PROMPT,
        sampling: Mapping[str, Any] | None = None,
        seed: int = 0,
        name: str | None = None,
        on_error: float | None = None,
    ) -> None:
        if max_pairs is not None and (
            isinstance(max_pairs, bool) or not isinstance(max_pairs, int) or max_pairs < 1
        ):
            raise ConfigError(
                f"PairwiseJudge max_pairs must be None (all pairs) or an int >= 1, got {max_pairs!r}"
            )
        super().__init__(
            prompt=prompt,
            instructions=instructions,
            model=model,
            client=client,
            base_url=base_url,
            api_key=api_key,
            sampling=sampling,
            seed=seed,
            name=name if name is not None else "pairwise_judge",
            on_error=on_error,
        )
        self.max_pairs, self.both_orders = max_pairs, bool(both_orders)

    def pairs(self, size: int) -> list[tuple[int, int]]:
        """The member pairs compared in a group of `size` (see `max_pairs`)."""
        every = [(i, j) for i in range(size) for j in range(i + 1, size)]
        if self.max_pairs is None or len(every) <= self.max_pairs:
            return every
        found: list[tuple[int, int]] = []
        for step in range(1, size // 2 + 1):
            round_pairs = {tuple(sorted((i, (i + step) % size))) for i in range(size)}
            if len(found) + len(round_pairs) > self.max_pairs and found:
                break
            found.extend(sorted(round_pairs))  # type: ignore[arg-type]
        return found

    async def forward(self, group: list[Rollout]) -> list[float]:  # type: ignore[override]
        n = len(group)
        if n == 1:
            return self._alone(group[0])
        rng = self._rng(group)
        games: list[tuple[int, int]] = []
        for i, j in self.pairs(n):
            if self.both_orders:
                games += [(i, j), (j, i)]
            else:
                games.append((i, j) if rng.random() < 0.5 else (j, i))
        verdicts, usage, dropped = await self._ask_each([self._game(group, a, b) for a, b in games])
        points, played = [0.0] * n, [0.0] * n
        weight = 0.5 if self.both_orders else 1.0
        for (a, b), verdict in zip(games, verdicts):
            if verdict is None:
                continue
            played[a] += weight
            played[b] += weight
            points[a] += weight * (1.0 if verdict == "A" else 0.5 if verdict == "TIE" else 0.0)
            points[b] += weight * (1.0 if verdict == "B" else 0.5 if verdict == "TIE" else 0.0)
        detail: dict[str, Any] = {"games": len(games), **({"dropped": dropped} if dropped else {})}
        self._account(group, usage, len(games), detail)
        if not any(played):
            raise ScoringError("; ".join(dict.fromkeys(dropped)))
        scores = []
        for r, won, total in zip(group, points, played):
            if total == 0:
                self.record_error(
                    r, "every comparison of this member failed: " + "; ".join(dict.fromkeys(dropped))
                )
            scores.append(won / total if total else NAN)
        return scores

    async def _game(self, group: list[Rollout], a: int, b: int) -> tuple[str, Usage]:
        """Member `a` shown as candidate A, `b` as B; the verdict ("A", "B", "TIE") and tokens."""
        fields = self._fields(group)
        fields["candidates"] = [
            {"label": "A", "response": rollout_fields(group[a])["response"]},
            {"label": "B", "response": rollout_fields(group[b])["response"]},
        ]
        reply, usage = await self._ask(self._messages(fields, PAIR_FORMAT))
        try:
            return parse_winner(reply), usage
        except ScoringError as exc:
            exc.usage = usage  # type: ignore[attr-defined]
            raise

    def extra_repr(self) -> str:
        bound = "all pairs" if self.max_pairs is None else f"max_pairs={self.max_pairs}"
        return f"model={self.model!r}, {bound}, both_orders={self.both_orders}"


__all__ = ["GroupJudge", "PairwiseJudge", "RankJudge", "parse_label_scores", "parse_ranking", "parse_winner"]  # fmt: skip
