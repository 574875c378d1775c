"""HTML for people: the one renderer behind the notebook reprs and the static report.

Every function returns a fragment of escaped HTML (text from a model, tool, judge or dataset
only ever enters through `esc`), styled by `STYLE`, which is scoped under `.rv` so it
neither leaks into a notebook's page nor needs a network. `rubric view --html`
(harness._views.report) embeds the same fragments, so a rollout looks the same in both places.

A rubric tree is drawn from its one description, a list of `harness.TreeNode`: from a live
Rubric (`Rubric.tree()`), from a run's metadata, or, failing both, from the dotted score paths.

Just over 500 lines: the renderers share `esc`, `fmt` and `STYLE`, and every piece of text
that reaches a page goes through this one file, which is what a security review reads.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from harness._core.content import block_text, tool_content
from harness._core.display import STYLE, esc, fmt, register_html_view, unscored, unscored_count
from harness._core.run.storage import run_title, section
from harness._core.run.summary import node_note, over_scored, skip_reason, wall_time
from harness._core.tree import TreeNode, place_paths, read_tree, tree_from_paths, tree_paths
from harness._core.types import Message, ModelCall, Rollout
from harness._views.evidence import agent_parts, detail_parts, facts_line
from harness.proxy._provenance import FORGED, FORGED_NOTE

if TYPE_CHECKING:  # pragma: no cover
    from harness._core.run.summary import Summary
    from harness._results.eval_results import EvalResults


def json_script(element_id: str, data: Any) -> str:
    """`data` as a `<script type="application/json">` block; `<`, `>` and `&` are written as
    JSON escapes, so no text inside can end the script element or start markup."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    text = text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    return f'<script type="application/json" id="{esc(element_id)}">{text}</script>'


# ------------------------------------------------------------------------------- histogram


def histogram_svg(values: Iterable[float], *, bins: int = 10, width: int = 300, height: int = 110) -> str:
    """A bar chart of `values` over [0, 1] (widened to their range) as inline SVG; NaN is skipped."""
    data = [v for v in values if v is not None and not math.isnan(v)]
    if not data:
        return '<p class="muted">no scored rollouts</p>'
    low, high = min(0.0, min(data)), max(1.0, max(data))
    span = (high - low) or 1.0
    counts = [0] * bins
    for v in data:
        counts[min(bins - 1, int((v - low) / span * bins))] += 1
    top = max(counts)
    plot_h, bar_w = height - 28, width / bins
    bars = []
    for i, n in enumerate(counts):
        h = 0 if not n else max(1.0, plot_h * n / top)
        lo = low + span * i / bins
        bars.append(
            f'<rect x="{i * bar_w + 1:.1f}" y="{4 + plot_h - h:.1f}" width="{bar_w - 2:.1f}" '
            f'height="{h:.1f}"><title>{fmt(lo, 3)} – {fmt(lo + span / bins, 3)}: {n}</title></rect>'
        )
    return (
        f'<svg class="hist" width="{width}" height="{height}" viewBox="0 0 {width} {height}" role="img" '
        f'aria-label="reward histogram">{"".join(bars)}'
        f'<text x="0" y="{height - 10}">{fmt(low, 3)}</text>'
        f'<text x="{width}" y="{height - 10}" text-anchor="end">{fmt(high, 3)}</text>'
        f'<text x="{width / 2}" y="{height - 10}" text-anchor="middle">reward ({len(data)} scored, '
        f"highest bar {top})</text></svg>"
    )


# ------------------------------------------------------------------------------- summary


def _indent(pixels: int) -> str:
    """The inline style of a tree's name cell: indented by depth and left-aligned in the cell
    itself, since a notebook front end right-aligns table cells with rules that outrank `STYLE`
    (or strips `STYLE` from an untrusted notebook), and right-aligned indents read backwards."""
    return f"padding-left:{pixels}px;text-align:left"


def _row(label: str, value: str, cls: str = "") -> str:
    """One summary row; `value` is HTML the caller built from escaped parts."""
    return f'<tr><th>{esc(label)}</th><td class="num {esc(cls)}">{value}</td></tr>'


def _node_rows(summary: Summary, nodes: Sequence[TreeNode] | None) -> list[str]:
    order = [p for p in tree_paths(nodes or []) if p in summary.node_means]
    paths = place_paths(order, summary.node_means)
    stderrs = summary.node_stderrs
    rows = []
    for path in paths:
        depth = path.count(".") + 1
        err = stderrs.get(path)
        note = node_note(summary, path)
        value = esc(fmt(summary.node_means[path], stderr=err))
        value += f" <span class='muted'>{esc(note)}</span>" if note else ""
        name = esc(path.rsplit(".", 1)[-1])
        rows.append(
            f'<tr><td style="{_indent(depth * 14)}" title="{esc(path)}">{name}</td>'
            f'<td class="num">{value}</td></tr>'
        )
    return rows


def _pass_rows(s: Summary) -> list[str]:
    """pass@k rows, each saying what it is over when not every rollout or example counts, and
    what a pass means."""
    rows = []
    partial = (
        f" <span class='muted'>over the {s.num_scored:,} scored of {s.num_rollouts:,}</span>"
        if s.num_scored != s.num_rollouts
        else ""
    )
    for k, v in s.pass_at_k.items():
        over = s.pass_at_k_examples.get(k, s.num_examples)
        fewer = (
            f" <span class='muted'>over {over:,} of {s.num_examples:,} examples (the rest have &lt; {k} rollouts)</span>"
            if over < s.num_examples and not partial
            else partial
        )
        rows.append(_row(f"pass@{k}", esc(fmt(v)) + fewer))
    if s.pass_at_k:  # always: "reward >= 1" reads as 0 for a rubric that tops out below 1
        doubt = s.pass_warning()
        note = f" <span class='bad'>{esc(doubt)}</span>" if doubt else ""
        rows.append(_row("pass means", esc(s.pass_criterion) + note))
    return rows


def summary_html(summary: Summary, nodes: Sequence[TreeNode] | None = None, status: str | None = None) -> str:
    """The summary as a table: reward ± stderr, node means in tree order, pass@k, stop
    reasons, errors, unscored reasons, policy and judge tokens, wall time."""
    s = summary
    reward = esc(fmt(s.mean_reward, stderr=s.reward_stderr))
    total, planned = s.num_rollouts, s.planned
    count = f"{total:,}" + (
        f" of {planned:,} planned" if isinstance(planned, int) and planned != total else ""
    )
    rows = [
        _row("rollouts", f"{count} ({s.num_examples:,} examples)"),
        _row("mean reward", f"{reward} <span class='muted'>{esc(over_scored(s))}</span>"),
    ]
    if s.num_groups.get(""):
        rows.append(
            _row(
                "flat groups",
                esc(node_note(s, "")) + " <span class='muted'>every rollout scored alike</span>",
            )
        )
    nodes_rows = _node_rows(s, nodes)
    if nodes_rows:
        rows.append('<tr><th colspan="2">rubric nodes (mean ± stderr)</th></tr>')
        rows += nodes_rows
    rows += _pass_rows(s)
    stops = ", ".join(f"{esc(name)} {n:,}" for name, n in s.stop_reasons.items()) or "-"
    rows.append(_row("stop reasons", stops))
    rows.append(_row("errors", f"{s.num_errors:,}", "bad" if s.num_errors else ""))
    unscored = esc(unscored_count(s.num_unscored, s.unscored_reasons))
    rows.append(_row("unscored", unscored, "warn" if s.num_unscored else ""))
    rows.append(_row("policy tokens", f"prompt {s.prompt_tokens:,} · completion {s.completion_tokens:,}"))
    judge_p, judge_c = s.judge_prompt_tokens, s.judge_completion_tokens
    if judge_p or judge_c:
        rows.append(_row("judge tokens", f"prompt {judge_p:,} · completion {judge_c:,}"))
    wall = wall_time(s)
    if wall is not None:
        rows.append(_row("wall time", esc(wall)))
    if status and status != "completed":
        rows.append(_row("status", esc(status), "warn"))
    return f'<table class="summary">{"".join(rows)}</table>'


def results_html(results: EvalResults) -> str:
    """`EvalResults._repr_html_`: title, summary table and reward histogram side by side."""
    meta = results.metadata
    nodes = tree_from_metadata(meta)
    title = run_title(meta)
    body = (
        f'<div class="grid"><div>{summary_html(results.summary, nodes, meta.get("status"))}</div>'
        f"<div>{histogram_svg(r.reward for r in results.rollouts)}</div></div>"
        + groups_html(results.rollouts, nodes)
    )
    return f'{STYLE}<div class="rv"><div class="head">{esc(title)}</div>{body}</div>'


def scores_table_html(rollouts: Sequence[Rollout], paths: Sequence[str], *, limit: int = 20) -> str:
    """Per item: the reward, each node's score (columns in `paths` order, NaN cells highlighted
    with their reason as a tooltip) and the NaN reasons; the first `limit` items."""
    head = "".join(f'<th class="num" title="{esc(p)}">{esc(p)}</th>' for p in paths)
    rows = []
    for i, r in enumerate(rollouts[:limit]):
        # A parent's NaN comes from a child's: its tooltip falls back to the item's reasons.
        reasons = "; ".join(f"{p or 'reward'}: {why}" for p, why in r.score_errors.items())
        cells = [f'<td class="num">{i}</td>', _score_cell(r.reward, r.score_errors.get("", reasons))]
        for p in paths:
            if p not in r.scores and p not in r.score_errors:  # never run: a chain stopped before it
                cells.append(
                    f'<td class="num muted" title="{esc(skip_reason(r.scores, p, paths))}">skipped</td>'
                )
            else:
                cells.append(_score_cell(r.scores.get(p, math.nan), r.score_errors.get(p, reasons)))
        cells.append(f'<td class="warn">{esc(reasons)}</td>')
        rows.append(f"<tr>{''.join(cells)}</tr>")
    more = len(rollouts) - limit
    tail = f'<p class="muted">{more:,} more (all in .to_pandas())</p>' if more > 0 else ""
    return (
        f'<table class="items"><tr><th class="num">#</th><th class="num">reward</th>{head}'
        f"<th>NaN reasons</th></tr>{''.join(rows)}</table>{tail}"
    )


def groups_html(
    rollouts: Sequence[Rollout],
    nodes: Sequence[TreeNode] | None,
    *,
    limit: int = 5,
    answers: bool = True,
    folded: bool = False,
) -> str:
    """Each example's rollouts side by side (the first `limit` examples with more than one):
    the model's response (unless `answers=False`: the static report keeps model text in its
    compressed panels), the reward and every node's score, group nodes marked; "" when no
    example has two rollouts. `folded` puts the tables in a closed `<details>` under their
    heading (the static report, where the rollout table comes first)."""
    groups: dict[str, list[Rollout]] = {}
    for r in rollouts:
        groups.setdefault(str(r.example_id), []).append(r)
    shown = [g for g in groups.values() if len(g) > 1][:limit]
    if not shown:
        return ""
    marks = {n.get("path", ""): bool(n.get("group")) for n in nodes or []}
    paths = place_paths(tree_paths(nodes or []), sorted({p for g in shown for r in g for p in r.scores}))
    tables = []
    for group in shown:
        group = sorted(group, key=lambda r: r.rollout_index)
        head = "".join(f'<th class="num">#{r.rollout_index}</th>' for r in group)
        response = "".join(f"<td><pre>{esc((r.response or r.error or '')[:300])}</pre></td>" for r in group)
        rows = [f"<tr><th>response</th>{response}</tr>"] if answers else []
        label = "reward (group)" if marks.get("") else "reward"
        rows.append(
            f"<tr><th>{label}</th>{''.join(_score_cell(r.reward, r.score_errors.get('', r.error or '')) for r in group)}</tr>"
        )
        for p in paths:
            cells = "".join(
                _score_cell(r.scores[p], r.score_errors.get(p, ""))
                if p in r.scores
                else _score_cell(math.nan, r.score_errors[p])
                if p in r.score_errors
                else '<td class="num muted">not run</td>'
                for r in group
            )
            rows.append(
                f'<tr><th title="{esc(p)}">{esc(p)}{" (group)" if marks.get(p) else ""}</th>{cells}</tr>'
            )
        tables.append(
            f'<table class="items"><caption class="head">example {esc(group[0].example_id)}</caption>'
            f"<tr><th></th>{head}</tr>{''.join(rows)}</table>"
        )
    more = sum(1 for g in groups.values() if len(g) > 1) - len(shown)
    tail = f'<p class="muted">{more:,} more groups</p>' if more > 0 else ""
    heading = "groups: each example's rollouts side by side"
    if folded:
        return f'<details class="groups"><summary class="head">{heading}</summary>{"".join(tables)}{tail}</details>'
    return f'<div class="head">{heading}</div>{"".join(tables)}{tail}'


def _score_cell(value: float, reason: str) -> str:
    if math.isnan(value):
        return f'<td class="num nan" title="{esc(reason)}">{fmt(value)}</td>'
    return f'<td class="num">{esc(fmt(value))}</td>'


def tree_from_metadata(metadata: Mapping[str, Any]) -> list[TreeNode] | None:
    """The rubric tree a run recorded (env config "rubric"), or None for older runs; a file
    is data, read by `harness._core.tree.read_tree`."""
    return read_tree(section(metadata, "env").get("rubric"))


# ------------------------------------------------------------------------------- rubric tree


def _gate_note(node: TreeNode, scores: Mapping[str, float]) -> str:
    threshold = node.get("threshold")
    if threshold is None:
        return ""
    prefix = node["path"] + "." if node["path"] else ""
    child = next((v for p, v in scores.items() if p.startswith(prefix) and "." not in p[len(prefix) :]), None)
    if child is None or math.isnan(child):
        return ""
    if child >= threshold:
        return f'<span class="good">gate open ({esc(fmt(child))} ≥ {esc(fmt(threshold))})</span>'
    return f'<span class="bad">gate closed ({esc(fmt(child))} &lt; {esc(fmt(threshold))})</span>'


def _detail_html(detail: Mapping[str, Any]) -> str:
    parts = []
    prompt = detail.get("prompt")
    if prompt:
        text = prompt if isinstance(prompt, str) else json.dumps(prompt, ensure_ascii=False, indent=1)
        parts.append(f"<details><summary>judge prompt</summary><pre>{esc(text)}</pre></details>")
    replies = detail.get("replies") or ([detail["reply"]] if detail.get("reply") else [])
    for i, reply in enumerate(replies if isinstance(replies, list) else [replies]):
        label = "judge reply" if len(replies) == 1 else f"judge reply {i + 1}"
        parts.append(f"<details><summary>{label}</summary><pre>{esc(reply)}</pre></details>")
    usage = detail.get("usage")
    usage = usage if isinstance(usage, Mapping) else {}
    if usage.get("prompt_tokens") or usage.get("completion_tokens"):
        tokens = f"{usage.get('prompt_tokens', 0)}+{usage.get('completion_tokens', 0)}"
        parts.append(
            f'<span class="muted">judge tokens {esc(tokens)}{" (cached)" if detail.get("cached") else ""}</span>'
        )
    facts, blocks = detail_parts(detail)
    if facts:
        parts.append(f'<div class="muted">{esc(facts_line(facts))}</div>')
    parts.extend(_block_details(name, text) for name, text in blocks)
    return "".join(parts)


def _block_details(name: str, text: str) -> str:
    """A long text (an output, a file's content) folded under its name."""
    return f"<details><summary>{esc(name)}</summary><pre>{esc(text)}</pre></details>"


def agent_html(state: Mapping[str, Any]) -> str:
    """What the agent program did (its command, exit code, time, stdout and stderr), or ""."""
    found = agent_parts(state)
    if found is None:
        return ""
    head, facts, blocks = found
    line = f'<div class="muted">{esc(facts)}</div>' if facts else ""
    return f'<div class="head">{esc(head)}</div>{line}' + "".join(_block_details(n, t) for n, t in blocks)


def with_scored_paths(nodes: Sequence[TreeNode], paths: Sequence[str]) -> list[TreeNode]:
    """The tree's nodes, with a node for each scored path the tree lacks (a Harbor verifier's
    reward.json components) under its parent; drawn from the paths alone when there is no tree."""
    if not nodes:
        return tree_from_paths(paths)
    by_path = {node.get("path", ""): node for node in nodes}
    order = place_paths(tree_paths(nodes), paths)
    root = [by_path[""]] if "" in by_path else []
    return root + [by_path.get(p) or {"path": p, "head": "", "note": ""} for p in order]


def tree_html(
    nodes: Sequence[TreeNode] | None,
    scores: Mapping[str, float],
    *,
    reward: float | None = None,
    errors: Mapping[str, str] | None = None,
    details: Mapping[str, Mapping[str, Any]] | None = None,
) -> str:
    """The rubric tree with each node's score, weight, gate decision and NaN reason;
    judge prompts and raw replies fold out. `scores` maps dotted paths to scores."""
    errors, details = errors or {}, details or {}
    nodes = with_scored_paths(nodes or [], [*scores, *errors])
    never_scored = reward is None and not scores
    rows = []
    for node in nodes:
        path = node.get("path", "")
        depth = path.count(".") + 1 if path else 0
        score = reward if not path else scores.get(path)
        name = "reward" if not path else path.rsplit(".", 1)[-1]
        missing = score is None
        is_nan = not missing and math.isnan(score)  # type: ignore[arg-type]
        head = esc(node.get("head") or "")
        note = esc(node.get("note") or "")
        why = errors.get(path)
        extra = _gate_note(node, scores)
        if why or is_nan:
            extra += f'<div class="{"bad" if why else "warn"}">{esc(unscored(why))}</div>'
        if path in details:
            extra += _detail_html(details[path])
        skipped = (
            skip_reason(scores, path, [n.get("path", "") for n in nodes]) if missing and path else "not run"
        )
        shown = (
            ""
            if never_scored
            else f'<span class="muted">{esc(skipped)}</span>'
            if missing
            else esc(fmt(score))
        )
        rows.append(
            f'<tr class="{"nan" if is_nan else ""}" data-path="{esc(path)}">'
            f'<td style="{_indent(4 + depth * 16)}"><b>{esc(name)}</b> <span class="muted">{head}</span></td>'
            f'<td class="muted">{note}</td><td class="num score">{shown}</td><td>{extra}</td></tr>'
        )
    header = f'<tr><th style="{_indent(4)}">node</th><th>weight</th><th class="num">score</th><th>why / detail</th></tr>'
    return f'<table class="tree">{header}{"".join(rows)}</table>'


# ------------------------------------------------------------------------------- rollouts


def _arguments(text: str) -> str:
    try:
        return json.dumps(json.loads(text), ensure_ascii=False)
    except (json.JSONDecodeError, TypeError):
        return f"{text}  [invalid JSON]"


def message_html(message: Message) -> str:
    """One chat message: role, text, tool calls (name and arguments) and tool-result ids."""
    role = message.role
    label = role if not message.tool_call_id else f"tool result · {message.tool_call_id}"
    if message.name:
        label += f" · {message.name}"
    if message.get(FORGED) is True:  # the capture proxy never gave this assistant turn
        label += f" · {FORGED_NOTE}"
    body = f"<pre>{esc(message.text)}</pre>" if message.text else ""
    for call in message.tool_calls or []:
        body += (
            f'<pre class="call">→ {esc(call.name)}({esc(_arguments(call.arguments))}) [{esc(call.id)}]</pre>'
        )
    if not body:
        body = '<span class="muted">(empty)</span>'
    return f'<div class="msg msg-{esc(role)}"><div class="role">{esc(label)}</div>{body}</div>'


def conversation_html(messages: Iterable[Message]) -> str:
    """Every message of a conversation, in order."""
    return "".join(message_html(m) for m in messages)


def rollout_facts_html(rollout: Rollout) -> str:
    """The one-line facts of a rollout: ids, reward, stop reason, turns, tokens, answer, error."""
    r = rollout
    facts = [
        f"example <b>{esc(r.example_id)}</b>",
        f"rollout <b>{r.rollout_index}</b>",
        f"reward <b class='{'warn' if math.isnan(r.reward) else ''}'>{esc(fmt(r.reward))}</b>",
        f"stop <b>{esc(r.stop_reason)}</b>",
        f"turns <b>{r.turns}</b>",
        f"tokens <b>{r.usage.prompt_tokens}+{r.usage.completion_tokens}</b>",
    ]
    judge = r.judge_usage
    if judge.prompt_tokens or judge.completion_tokens:
        facts.append(f"judge tokens <b>{judge.prompt_tokens}+{judge.completion_tokens}</b>")
    out = f"<div>{' · '.join(facts)}</div>"
    if r.turn_rewards:  # credit-assigned reward per assistant turn (rubrics.credit)
        out += f"<div>turn rewards: <code>{esc(', '.join(fmt(v) for v in r.turn_rewards))}</code></div>"
    for path, values in r.turn_scores.items():
        out += f"<div>turn scores {esc(path or 'reward')}: <code>{esc(', '.join(fmt(v) for v in values))}</code></div>"
    if r.answer is not None:
        answer = (
            r.answer if isinstance(r.answer, str) else json.dumps(r.answer, ensure_ascii=False, default=str)
        )
        out += f"<div>answer: <code>{esc(answer)}</code></div>"
    if r.error:
        out += f'<div class="bad">error: {esc(r.error)}</div>'
    return out


_IMAGE_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")


def _block_html(block: Mapping[str, Any]) -> str:
    """One content block: an image shown (a known image type, valid base64), anything else as text."""
    mime, data = block.get("mimeType"), block.get("data")
    if (
        block.get("type") == "image"
        and mime in _IMAGE_TYPES
        and isinstance(data, str)
        and len(data) <= 8_000_000
        and _BASE64.fullmatch(data)
    ):
        return (
            f'<img alt="{esc(mime)} from the tool" src="data:{mime};base64,{data}" style="max-width:480px">'
        )
    return f"<pre>{esc(block_text(block))}</pre>"


def tool_content_html(state: Mapping[str, Any]) -> str:
    """What tools returned beyond text (MCP images, resources), as they returned it."""
    kept = tool_content(state)
    if not kept:
        return ""
    items = "".join(
        f'<div class="msg msg-tool"><div class="role">{esc(head)}</div>{"".join(map(_block_html, blocks))}</div>'
        for head, blocks in kept
    )
    return f'<div class="head">tool content</div>{items}'


def model_calls_html(calls: Sequence[ModelCall]) -> str:
    """An agent's model calls through the capture proxy: one row each, in order, failed ones
    with their reason ("" when the rollout has none)."""
    if not calls:
        return ""
    rows = []
    for c in calls:
        seconds = c.timing.get("total")
        state = f"{c.status}" + (f": {c.error}" if c.error else "")
        rows.append(
            f'<tr><td class="num">{c.index}</td><td>{esc(c.dialect)}</td><td>{esc(c.model or "")}</td>'
            f'<td class="{"bad" if c.error else ""}">{esc(state)}</td><td>{esc(c.finish_reason or "")}</td>'
            f'<td class="num">{c.usage.prompt_tokens:,}</td><td class="num">{c.usage.completion_tokens:,}</td>'
            f'<td class="num">{"" if seconds is None else f"{seconds:.3f}"}</td></tr>'
        )
    return (
        '<div class="head">model calls</div><table class="items"><tr><th class="num">#</th><th>dialect</th>'
        '<th>model</th><th>status</th><th>finish</th><th class="num">prompt</th><th class="num">completion</th>'
        f'<th class="num">seconds</th></tr>{"".join(rows)}</table>'
    )


def rollout_body_html(rollout: Rollout, nodes: Sequence[TreeNode] | None = None) -> str:
    """Facts, conversation and reward tree of one rollout, without the stylesheet."""
    tree = tree_html(
        nodes,
        rollout.scores,
        reward=rollout.reward,
        errors=rollout.score_errors,
        details=rollout.score_details,
    )
    return (
        f'{rollout_facts_html(rollout)}<div class="head">conversation</div>'
        f"{conversation_html(rollout.messages)}{tool_content_html(rollout.state)}"
        f"{model_calls_html(rollout.model_calls)}{agent_html(rollout.state)}"
        f'<div class="head">reward tree</div>{tree}'
    )


def rollout_html(rollout: Rollout, nodes: Sequence[TreeNode] | None = None) -> str:
    """`Rollout._repr_html_`: a self-styled fragment of `rollout_body_html`."""
    return f'{STYLE}<div class="rv">{rollout_body_html(rollout, nodes)}</div>'


def _summary_page(summary: Summary) -> str:
    return f'{STYLE}<div class="rv">{summary_html(summary)}</div>'


# Fill the data model's notebook hooks (harness._core.types.HtmlRepr); `import harness` loads this.
def _rubric_tree_page(
    nodes: Sequence[TreeNode], scores: Mapping[str, float], *, reward: float | None, errors: Mapping[str, str]
) -> str:
    table = tree_html(nodes, scores, reward=reward, errors=errors)
    return f'{STYLE}<div class="rv rubric-tree">{table}</div>'


def _scored_batch_page(
    rewards: Sequence[float],
    rollouts: Sequence[Rollout],
    summary: Summary,
    nodes: Sequence[TreeNode],
    paths: Sequence[str],
) -> str:
    body = (
        f'<div class="grid"><div>{summary_html(summary, nodes)}</div>'
        f"<div>{histogram_svg(rewards)}</div></div>"
        f'<div class="head">items</div>{scores_table_html(rollouts, paths)}'
        + (groups_html(rollouts, nodes) if any(n.get("group") for n in nodes) else "")
    )
    title = f"scored batch of {len(rewards):,}"
    return f'{STYLE}<div class="rv"><div class="head">{esc(title)}</div>{body}</div>'


register_html_view("rubric_tree", _rubric_tree_page)
register_html_view("scored_batch", _scored_batch_page)
register_html_view("rollout", rollout_html)
register_html_view("summary", _summary_page)
register_html_view("results", results_html)

__all__ = [
    "STYLE",
    "agent_html",
    "conversation_html",
    "esc",
    "fmt",
    "groups_html",
    "histogram_svg",
    "json_script",
    "message_html",
    "results_html",
    "rollout_body_html",
    "rollout_html",
    "run_title",
    "scores_table_html",
    "summary_html",
    "tree_from_metadata",
    "tree_html",
    "with_scored_paths",
]
