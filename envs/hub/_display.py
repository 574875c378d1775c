"""What the hub commands print: `rubric list`, `init`, `check`, `build`, `push`, `install`,
`hub search` and `hub info`.

Every string here came from a package or an index, so the callers print it through
`harness._core.text` (control, bidi and invisible characters shown as escapes, never rich markup).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from rich.markdown import Markdown
from rich.table import Table

from envs.hub._build import BuildResult
from envs.hub._card import split_front_matter
from envs.hub._checks import CheckReport
from envs.hub._index import HubEntry
from envs.hub._install import InstalledEnvironment
from envs.hub._publish import PushResult
from harness._core.text import escape_control, safe_text
from harness._core.tree import TreeNode, read_tree


def installed_table(found: Sequence[InstalledEnvironment]) -> Table | str:
    """`rubric list`: the installed environments as a table (name, version, distribution, description).

    Args:
        found: The environments, from `installed_environments()`.

    Returns:
        A rich table, or a line saying none are installed.
    """
    if not found:
        return "no environments installed (group rubric.environments)"
    table = Table(title="installed environments")
    for column in ("name", "version", "distribution", "description"):
        table.add_column(column)
    for env in found:
        # Descriptions are Markdown (`code`, **bold**): rendered, without hyperlinks (no OSC 8).
        description = Markdown(escape_control(env.description), hyperlinks=False)
        table.add_row(*(safe_text(v) for v in (env.name, env.version, env.distribution)), description)
    return table


def entry_lines(entry: HubEntry, full: bool) -> list[str]:
    """An index entry: name, versions, description, tags, what it was checked on.

    Args:
        entry: The entry, from `search` or `info`.
        full: Add its card, rubric tree and README (`rubric hub info`).

    Returns:
        The lines, unescaped (print them through `escape_control`).
    """
    compat = "; ".join(f"{k} {', '.join(v)}" for k, v in entry.compatibility.items())
    lines = [
        f"{entry.name} {entry.version}  (versions: {', '.join(entry.versions)})",
        f"  {entry.description}",
        f"  tags: {', '.join(entry.tags) or '-'}",
        f"  checked on: {compat or 'unknown (no valid rubric_card.json)'}",
    ]
    if not full:
        return lines
    card = (entry.record or {}).get("card") or {}
    needs = card.get("needs") or {}
    wanted = [*needs.get("api_keys", []), *(k for k in ("sandbox", "network") if needs.get(k))]
    lines.append(
        f"  kind: {card.get('kind', '?')}; reward range {card.get('reward_range', '?')}; "
        f"license {card.get('license', '?')}; needs {', '.join(wanted) or 'nothing else'}"
    )
    for node in read_tree((entry.record or {}).get("rubric")) or []:
        lines.append(f"  rubric {node['path'] or '(root)'}: {node_line(node)}")
    return [*lines, "", split_front_matter(entry.readme)[1].strip()]


def node_line(node: TreeNode) -> str:
    """A card's rubric node as `repr()` heads it, with its parent's note (`weight=0.9`); a
    card without heads shows the node's type and settings instead."""
    facts = [node["note"]] if node.get("note") else []
    if "head" in node:
        return node["head"] + (f" ({facts[0]})" if facts else "")
    if "weight" in node and not facts:
        facts.append(f"weight={node['weight']:g}")
    if "threshold" in node:
        facts.append(f"threshold={node['threshold']:g}")
    facts += [f"{key}={value}" for key, value in node.get("settings", {}).items()]
    return node.get("type", "?") + (f" ({', '.join(facts)})" if facts else "")


def show_entries(entries: Sequence[HubEntry], full: bool, note: Callable[[str], None]) -> list[str]:
    """`rubric hub search` / `info`: the lines of several entries.

    Args:
        entries: The entries, from `search` or `info`.
        full: Add each one's card, rubric tree and README.
        note: Told of a card that was skipped, one line each (the listing goes on).

    Returns:
        The lines, unescaped (print them through `escape_control`).
    """
    lines: list[str] = []
    for entry in entries:
        if entry.problem:
            note(f"note: {entry.name}: card skipped: {entry.problem}")
        lines += entry_lines(entry, full)
    return lines


def created_lines(root: Path, kind: str) -> list[str]:
    """`rubric init`: where the package is and what to run next.

    Args:
        root: The package's folder, from `init_package`.
        kind: The kind it was made as.

    Returns:
        The lines.
    """
    where = str(root) if root.is_absolute() else f"./{root}"  # a path, not an installed name
    return [
        f"Created {where} ({kind}). Try it: rubric eval {where} -m scripted:demo -n 3",
        f"Then: rubric check {where}; rubric build {where}; rubric push {where} --hub URL",
    ]


def check_lines(report: CheckReport) -> list[str]:
    """`rubric check`: every check, then the count of passed and failed.

    Args:
        report: The checks, from `check_package`.

    Returns:
        The lines.
    """
    failed = sum(not r.ok for r in report.results)
    return [report.text(), f"{len(report.results) - failed} passed, {failed} failed"]


def built_lines(result: BuildResult) -> list[str]:
    """`rubric build`: the files built and the rubric-rl versions it was checked on.

    Args:
        result: What `build_package` made.

    Returns:
        The lines.
    """
    checked = ", ".join(result.record.compatibility.get("rubric-rl", []))
    return [*(f"built {path}" for path in result.files), f"checked on rubric-rl {checked}; next: rubric push"]


def pushed_lines(result: PushResult) -> list[str]:
    """`rubric push`: what was uploaded where, and how to install it.

    Args:
        result: What `push_package` uploaded.

    Returns:
        The lines.
    """
    return [
        f"pushed {result.name} {result.version} to {result.hub.url} ({len(result.files)} files)",
        f"install it with: rubric install {result.name}=={result.version} --hub {result.hub.url}",
    ]


def installed_lines(env: InstalledEnvironment) -> list[str]:
    """`rubric install`: what was installed, and how to run it.

    Args:
        env: What `install` installed.

    Returns:
        The lines.
    """
    return [
        f"installed {env.distribution} {env.version}: environment {env.name!r} ({env.entry_point})",
        f"run it: rubric eval {env.name} -m MODEL -n 5",
    ]


__all__ = [
    "built_lines",
    "check_lines",
    "created_lines",
    "entry_lines",
    "installed_lines",
    "installed_table",
    "pushed_lines",
    "show_entries",
]
