"""Tool content blocks (MCP's text, image, audio and resource blocks, kept as JSON): how a
model and the views read them.

`envs._tools.mcp` gives the model `block_text` of each block and keeps the blocks in the rollout's
`state["tool_content"]`; the terminal and HTML views show them from there.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def tool_content(state: Mapping[str, Any]) -> list[tuple[str, list[Mapping[str, Any]]]]:
    """(heading, blocks) per tool result a rollout kept, from `state["tool_content"]`; a
    results file is data, so anything malformed is left out."""
    entries = state.get("tool_content")
    found: list[tuple[str, list[Mapping[str, Any]]]] = []
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, Mapping) or not isinstance(entry.get("content"), list):
            continue
        blocks = [b for b in entry["content"] if isinstance(b, Mapping)]
        found.append(
            (f"turn {entry.get('turn')} · {entry.get('tool')} · {entry.get('tool_call_id')}", blocks)
        )
    return found


def block_text(block: Mapping[str, Any]) -> str:
    """What the model reads for one content block: text as is, anything else summarised."""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    if kind in ("image", "audio"):
        size = len(str(block.get("data", ""))) * 3 // 4
        return f"[{kind}: {block.get('mimeType', '?')}, {size:,} bytes]"
    if kind == "resource_link":
        return (
            f"[resource: {block.get('uri', '?')}" + (f" ({block['name']})" if block.get("name") else "") + "]"
        )
    if kind == "resource":
        resource = block.get("resource")
        resource = resource if isinstance(resource, Mapping) else {}
        if "text" in resource:
            return f"[resource: {resource.get('uri', '?')}]\n{resource['text']}"
        size = len(str(resource.get("blob", ""))) * 3 // 4
        return f"[resource: {resource.get('uri', '?')}, {resource.get('mimeType', '?')}, {size:,} bytes]"
    return f"[{kind or 'unknown'} content]"


__all__ = ["block_text", "tool_content"]
