"""What `evaluate` returns and `load_results` reads back: rollouts + summary + metadata.

Printing one (terminal, `print`, Jupyter) shows the summary as a table, with each rubric
node's mean indented under its parent, so the numbers a run is judged by are one glance away.
"""

from __future__ import annotations

import io
import json
import math
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, overload

from harness._core.display import HtmlRepr, fmt, unscored_count
from harness._core.errors import ResultsNotFoundError
from harness._core.hf_import import hf_import
from harness._core.run.calls import incomplete_rollouts
from harness._core.run.storage import (
    METADATA_FILE,
    RESULTS_FILE,
    iter_rollouts,
    read_metadata,
    run_title,
    section,
    write_atomic,
)
from harness._core.run.summary import Summary, node_note, over_scored, summarize, wall_time
from harness._core.text import safe_text
from harness._core.tree import read_tree, tree_paths
from harness._core.types import CONVERSATION_COLUMNS, Rollout, conversation_columns
from harness._results.exports import export_rows

if TYPE_CHECKING:  # pragma: no cover
    import pandas as pd
    from rich.table import Table

    from datasets import Dataset


def node_paths(metadata: Mapping[str, Any]) -> list[str] | None:
    """The rubric's node paths in tree order, as the run recorded them (None if it did not)."""
    nodes = read_tree(section(metadata, "env").get("rubric"))
    return None if nodes is None else tree_paths(nodes)


def success_of(metadata: Mapping[str, Any]) -> tuple[str, float] | None:
    """The pass criterion a run's environment declared (node path, threshold), or None (reward >= 1)."""
    declared = section(metadata, "env").get("success")
    if not isinstance(declared, Mapping) or not isinstance(declared.get("node"), str):
        return None
    threshold = declared.get("threshold", 1.0)
    if isinstance(threshold, bool) or not isinstance(threshold, (int, float)):
        return None
    return declared["node"], float(threshold)


def _count(value: object) -> int | None:
    """`value` if it is a whole number >= 1 (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 1 else None


def _in_run_order(rollouts: Iterable[Rollout], metadata: Mapping[str, Any] | None) -> list[Rollout]:
    """Rollouts as `evaluate` returned them: dataset order (recorded in the metadata), then
    rollout index; finishing order (what results.jsonl holds) says nothing to a reader."""
    items = list(rollouts)
    order = (metadata or {}).get("example_ids")
    position = {str(e): i for i, e in enumerate(order)} if isinstance(order, list) else {}
    fallback = len(position)
    first_seen: dict[str, int] = {}
    for r in items:
        first_seen.setdefault(str(r.example_id), len(first_seen))
    items.sort(
        key=lambda r: (
            position.get(str(r.example_id), fallback),
            first_seen[str(r.example_id)],
            r.rollout_index,
        )
    )
    return items


class EvalResults(HtmlRepr):
    """The rollouts of a run, its `summary` (harness._core.run.summary.Summary) and its `metadata`.

    In Jupyter it draws as the summary table (node means in tree order, with standard errors)
    beside a reward histogram (`harness._views.html.results_html`).

    Args:
        rollouts: The run's rollouts (`Rollout` objects or their dicts, validated).
        metadata: The run's metadata (model, environment, settings, ...).
        summary: A summary computed already; None computes it from the rollouts when asked.
    """

    html_kind: ClassVar[str] = "results"

    def __init__(
        self,
        rollouts: Iterable[Rollout | Mapping[str, Any]],
        *,
        metadata: Mapping[str, Any] | None = None,
        summary: Summary | None = None,
    ) -> None:
        self._rollouts: list[Rollout] | None = [
            r if isinstance(r, Rollout) else Rollout.model_validate(r) for r in rollouts
        ]
        self._source: Path | None = None
        self.metadata: dict[str, Any] = dict(metadata or {})
        self._summary = summary
        #: Episodes in flight when the run stopped (SIGKILL, a preempted node): each a rollout
        #: holding the model calls `calls.jsonl` kept, its `error` saying it is incomplete.
        #: Never scored, never in `rollouts` or the summary; `--resume` plays them again.
        self.incomplete: list[Rollout] = []

    @classmethod
    def read_back(
        cls, directory: str | Path, *, metadata: Mapping[str, Any], summary: Summary
    ) -> EvalResults:
        """The results of a finished run whose rollouts stay in `directory`'s results.jsonl
        until first asked for (then read once, in run order): a long run hands back its
        summary without holding every rollout in memory."""
        results = cls([], metadata=metadata, summary=summary)
        results._rollouts, results._source = None, Path(directory)
        return results

    @property
    def num_incomplete_calls(self) -> int:
        """The model calls of the `incomplete` episodes."""
        return sum(len(r.model_calls or []) for r in self.incomplete)

    @property
    def rollouts(self) -> list[Rollout]:
        """Every rollout, in dataset order (read from the run's results.jsonl on first use
        when the run handed back only its summary)."""
        if self._rollouts is None:
            assert self._source is not None
            self._rollouts = load_results(self._source).rollouts
        return self._rollouts

    @rollouts.setter
    def rollouts(self, value: list[Rollout]) -> None:
        self._rollouts = value

    @property
    def summary(self) -> Summary:
        """Computed from the rollouts on first use (wall time taken from the metadata)."""
        if self._summary is None:
            # Numbers read from metadata.json are used only when they are numbers: the file is data.
            recorded = section(self.metadata, "summary")
            arguments = section(self.metadata, "arguments")
            summary = summarize(
                self.rollouts,
                max_k=_count(arguments.get("rollouts_per_example")),
                node_order=node_paths(self.metadata),
                planned=_count(recorded.get("planned")),
                success=success_of(self.metadata),
            )
            wall = recorded.get("wall_seconds")
            if isinstance(wall, (int, float)) and not isinstance(wall, bool) and wall > 0:
                # the run's own timing; a loaded or re-scored copy has none of its own
                rate = recorded.get("rollouts_per_second")
                if isinstance(rate, bool) or not isinstance(rate, (int, float)) or rate <= 0:
                    rate = summary.num_rollouts / wall
                total = recorded.get("total_wall_seconds")
                total = total if isinstance(total, (int, float)) and not isinstance(total, bool) else None
                summary = summary.model_copy(
                    update={"wall_seconds": wall, "rollouts_per_second": rate, "total_wall_seconds": total}
                )
            self._summary = summary
        return self._summary

    def __len__(self) -> int:
        return len(self.rollouts)

    def __iter__(self) -> Iterator[Rollout]:
        return iter(self.rollouts)

    @overload
    def __getitem__(self, index: int) -> Rollout: ...
    @overload
    def __getitem__(self, index: slice) -> EvalResults: ...
    def __getitem__(self, index: int | slice) -> Rollout | EvalResults:
        """One rollout, or for a slice a new EvalResults over those rollouts (its summary is
        computed from them; the run's metadata is kept, less the whole run's summary)."""
        if isinstance(index, slice):
            metadata = {k: v for k, v in self.metadata.items() if k != "summary"}
            return EvalResults(self.rollouts[index], metadata=metadata)
        return self.rollouts[index]

    # -- export -----------------------------------------------------------------------------

    def to_jsonl(self, path: str | Path) -> Path:
        """Write one rollout per line (the `results.jsonl` format); returns the path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, b"".join(r.model_dump_json().encode() + b"\n" for r in self.rollouts))
        return path

    def to_records(self) -> list[dict[str, Any]]:
        """Flat, Arrow-friendly rows: messages and free-form fields as JSON strings, usage as
        two integer columns, `scores` with the same keys (NaN where missing) in every row."""
        paths = sorted({p for r in self.rollouts for p in r.scores}, key=lambda p: tuple(p.split(".")))
        timing_keys = sorted({k for r in self.rollouts for k in r.timing})
        id_types = {type(r.example_id) for r in self.rollouts}
        rows = []
        for r in self.rollouts:
            rows.append(
                {
                    "example_id": r.example_id if len(id_types) == 1 else str(r.example_id),
                    "rollout_index": r.rollout_index,
                    "prompt": json.dumps([m.model_dump(exclude_none=True) for m in r.prompt]),
                    "completion": json.dumps([m.model_dump(exclude_none=True) for m in r.completion]),
                    "answer": json.dumps(r.answer, default=str),
                    "info": json.dumps(r.info, default=str),
                    "task": r.task,
                    "state": json.dumps(r.state, default=str),
                    "turns": r.turns,
                    "stop_reason": r.stop_reason,
                    "error": r.error,
                    "prompt_tokens": r.usage.prompt_tokens,
                    "completion_tokens": r.usage.completion_tokens,
                    "judge_prompt_tokens": r.judge_usage.prompt_tokens,
                    "judge_completion_tokens": r.judge_usage.completion_tokens,
                    "timing": {k: float(r.timing.get(k, math.nan)) for k in timing_keys},
                    "reward": r.reward,
                    "scores": {p: float(r.scores.get(p, math.nan)) for p in paths},
                    "score_errors": json.dumps(r.score_errors),
                    "score_details": json.dumps(r.score_details, default=str),
                }
            )
        return rows

    def to_pandas(self) -> pd.DataFrame:
        """A pandas DataFrame, one row per rollout.

        Columns: `example_id`, `rollout_index`, `reward`, one column per rubric node path
        (tree order; NaN where a node did not score), `stop_reason`, `error`, `turns`,
        `turn_rewards` (one per assistant turn when credit was assigned, see `rubrics.credit`),
        `prompt_tokens`, `completion_tokens`, `judge_prompt_tokens`, `judge_completion_tokens`,
        `response` (the final assistant text), `answer` as it was, `task`, `info`, and
        `prompt`/`completion` as lists of message dicts.
        """
        import pandas as pd  # comes with `datasets`; imported here so `rubric --help` stays fast

        paths = list(self.summary.node_means)
        paths += sorted({p for r in self.rollouts for p in r.scores} - set(paths))
        rows = []
        for r in self.rollouts:
            row: dict[str, Any] = {
                "example_id": r.example_id,
                "rollout_index": r.rollout_index,
                "reward": r.reward,
            }
            row.update({p: r.scores.get(p, math.nan) for p in paths})
            row.update(
                stop_reason=r.stop_reason,
                error=r.error,
                turns=r.turns,
                turn_rewards=list(r.turn_rewards),
                prompt_tokens=r.usage.prompt_tokens,
                completion_tokens=r.usage.completion_tokens,
                judge_prompt_tokens=r.judge_usage.prompt_tokens,
                judge_completion_tokens=r.judge_usage.completion_tokens,
            )
            row.update(conversation_columns(r))
            rows.append(row)
        columns = [
            "example_id", "rollout_index", "reward", *paths, "stop_reason", "error", "turns", "turn_rewards",
            "prompt_tokens", "completion_tokens", "judge_prompt_tokens", "judge_completion_tokens",
            *CONVERSATION_COLUMNS,
        ]  # fmt: skip
        return pd.DataFrame(rows, columns=columns)

    def to_dataset(
        self, format: str = "records", *, best_of: int = 1, min_reward: float | None = None
    ) -> Dataset:
        """A Hugging Face `datasets.Dataset` of these results, shaped for `format`.

        Args:
            format: "records" (one row per rollout, see `to_records`), "messages" (SFT rows),
                "preference" (chosen/rejected pairs), "tokens" (token ids, logprobs and
                env_mask for multi-turn RL), "trl" (GRPO prompts), or "nemo-rl" / "prime-rl"
                (token rows of every rollout, an unscored one flagged `mask_sample` /
                `is_filtered`); see `harness._results.exports`.
            best_of: for "messages", how many top-reward rollouts of each example to keep.
            min_reward: for "messages", drop rollouts scoring below it.
        """
        with hf_import():
            from datasets import Dataset
        rows = (
            self.to_records()
            if format == "records"
            else export_rows(list(self.rollouts), format, best_of=best_of, min_reward=min_reward)
        )
        if not rows:
            return Dataset.from_dict({})
        return Dataset.from_list(rows)

    # -- display ----------------------------------------------------------------------------

    @property
    def title(self) -> str:
        """ "env · model" from the metadata ("evaluation" when it names neither)."""
        return run_title(self.metadata)

    def table(self) -> Table:
        """The summary as a rich table."""
        from rich.table import Table
        from rich.text import Text

        s = self.summary
        table = Table(title=safe_text(self.title), show_header=False, title_justify="left")
        table.add_column("metric", style="bold")
        table.add_column("value", justify="right")
        planned = f" of {s.planned} planned" if s.planned is not None and s.planned != s.num_rollouts else ""
        table.add_row("rollouts", f"{s.num_rollouts}{planned} ({s.num_examples} examples)")
        table.add_row("mean reward", fmt(s.mean_reward, stderr=s.reward_stderr) + f"  ({over_scored(s)})")
        if s.num_groups.get(""):  # rollouts_per_example > 1: say how many groups teach nothing
            table.add_row("flat groups", node_note(s, "") + " (every rollout of the example scored alike)")
        for path, mean in s.node_means.items():
            depth = path.count(".") + 1
            note = node_note(s, path)
            table.add_row(
                safe_text("  " * depth + path.rsplit(".", 1)[-1], style="not bold"),
                fmt(mean) + (f"  ({note})" if note else ""),
            )
        partial = (
            f"  (over the {s.num_scored} scored of {s.num_rollouts})"
            if s.num_scored != s.num_rollouts
            else ""
        )
        for k, value in s.pass_at_k.items():  # errored and unscored rollouts are not in pass@k
            over = s.pass_at_k_examples.get(k, s.num_examples)
            fewer = (
                f"  (over {over} of {s.num_examples} examples: the rest have < {k} rollouts)"
                if over < s.num_examples
                else ""
            )
            table.add_row(f"pass@{k}", fmt(value) + (partial or fewer))
        if s.pass_at_k:  # always: "reward >= 1" reads as 0 for a rubric that tops out below 1
            doubt = s.pass_warning()
            table.add_row("pass means", safe_text(s.pass_criterion + (f"  ({doubt})" if doubt else "")))
        stops = ", ".join(f"{name} {n}" for name, n in s.stop_reasons.items()) or "-"
        table.add_row("stop reasons", safe_text(stops))
        table.add_row("errors", Text(str(s.num_errors), style="red" if s.num_errors else ""))
        unscored = unscored_count(s.num_unscored, s.unscored_reasons)
        table.add_row("unscored", safe_text(unscored, style="yellow" if s.num_unscored else ""))
        table.add_row("tokens", f"prompt {s.prompt_tokens:,} · completion {s.completion_tokens:,}")
        if s.judge_prompt_tokens or s.judge_completion_tokens:
            table.add_row(
                "judge tokens", f"prompt {s.judge_prompt_tokens:,} · completion {s.judge_completion_tokens:,}"
            )
        wall = wall_time(s)
        if wall is not None:
            table.add_row("wall time", wall)
        status = self.metadata.get("status")
        if status and status != "completed":
            table.add_row("status", safe_text(status, style="yellow"))
        return table

    def __rich__(self) -> Table:
        return self.table()

    def _render(self, **console_args: Any) -> Any:
        from rich.console import Console

        console = Console(
            file=io.StringIO(),
            width=100,
            record=True,
            force_terminal=False,
            force_jupyter=False,  # printing to a string must never display anything in a notebook
            color_system=None,
            **console_args,
        )
        console.print(self.table())
        return console

    def __str__(self) -> str:
        return str(self._render().export_text()).rstrip()

    def __repr__(self) -> str:
        s = self.summary
        return (
            f"EvalResults(rollouts={s.num_rollouts}, mean_reward={fmt(s.mean_reward)}, errors={s.num_errors})"
        )


def load_results(path: str | Path) -> EvalResults:
    """Read a run directory written by `evaluate` (or a bare results .jsonl file) back.

    A torn last line (the run was killed mid-write) is skipped, not repaired: reading never
    changes the files.

    Args:
        path: A run directory or a results .jsonl file.

    Returns:
        The run's rollouts with its metadata.
    """
    path = Path(path)
    if path.is_file():
        # A file in a run folder (a re-scored copy): the folder's metadata, and which scores these are.
        metadata = read_metadata(path.parent) if (path.parent / METADATA_FILE).exists() else None
        if metadata is not None and path.name != RESULTS_FILE:
            metadata = {k: v for k, v in metadata.items() if k != "summary"} | {"scores_from": path.name}
        return EvalResults(_in_run_order(iter_rollouts(path), metadata), metadata=metadata or {})
    if not path.is_dir():
        raise ResultsNotFoundError(
            f"no results at {path} (no results directory there): pass the directory `rubric eval` or "
            "evaluate(output_dir=...) wrote"
        )
    results = path / RESULTS_FILE
    metadata = read_metadata(path)
    if not results.exists():
        if metadata is None:
            raise ResultsNotFoundError(
                f"{path} has neither {RESULTS_FILE} nor {METADATA_FILE}; "
                f"pass a directory written by evaluate(output_dir=...)"
            )
        loaded = EvalResults([], metadata=metadata)
    else:
        loaded = EvalResults(_in_run_order(iter_rollouts(results), metadata), metadata=metadata)
    loaded.incomplete = incomplete_rollouts(path, loaded.rollouts)
    return loaded


__all__ = ["EvalResults", "load_results", "success_of"]
