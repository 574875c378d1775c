"""Coerce what a user passes as `rubric=` and `tools=` into the objects an environment runs.

Kept apart from `Environment` so the forgiving input rules (a bare function is a rubric, a
function is a tool) live in one place with their error messages.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

import rubrics
from envs._tools.functions import Tool, ToolLike
from envs._tools.mcp import MCPServer, MCPTool
from harness._core.errors import ConfigError, ConfigTypeError

if TYPE_CHECKING:  # pragma: no cover
    from os import PathLike

    from datasets import Dataset, DatasetDict

DatasetSource: TypeAlias = "Dataset | DatasetDict | Sequence[Mapping[str, Any]] | str | PathLike[str]"
"""What `Environment(dataset=...)` takes: a Dataset, a DatasetDict (with `split=`), row dicts, or a file."""

RubricSource: TypeAlias = (
    "rubrics.Rubric | Callable[..., Any] | Sequence[Callable[..., Any]] | Mapping[str, Callable[..., Any]]"
)
"""What `Environment(rubric=...)` takes: a Rubric, a reward function, or a list/dict of them."""

ToolSource: TypeAlias = "Callable[..., Any] | Tool | MCPTool | MCPServer"
"""One entry of `Environment(tools=[...])`: a plain function, an `envs.Tool`, or the tools of an
MCP server (`envs.mcp_server(...)`)."""


@runtime_checkable
class AnswerParser(Protocol):
    """An object that pulls the answer out of a final response (e.g. `rubrics.XMLParser`)."""

    def parse_answer(self, text: str | None) -> str | None: ...


ParserSource: TypeAlias = "Callable[[str], str | None] | AnswerParser"
"""What `Environment(parser=...)` takes."""


def as_rubric(value: RubricSource) -> rubrics.Rubric:
    """A `Rubric` as is; a function -> `reward(fn)`; a list/dict of them -> `WeightedSum` (equal weights)."""
    if isinstance(value, rubrics.Rubric):
        return value
    if isinstance(value, Mapping) or (isinstance(value, Sequence) and not isinstance(value, (str, bytes))):
        if not value:
            raise ConfigError("rubric is an empty list/dict; give at least one reward function or Rubric")
        items = value.values() if isinstance(value, Mapping) else value
        for item in items:
            if not callable(item):
                raise ConfigTypeError(
                    f"every rubric entry must be a function or a Rubric, got {type(item).__name__}"
                )
        return rubrics.WeightedSum(value if isinstance(value, Mapping) else list(value))
    if callable(value):
        leaf: rubrics.Rubric = rubrics.reward(value)
        return leaf
    raise ConfigTypeError(
        "rubric must be a rubrics.Rubric, a reward function (e.g. def correct(response, answer) -> float) "
        f"or a list/dict of them; got {type(value).__name__}"
    )


def build_tools(tools: Sequence[ToolSource | ToolLike] | None) -> list[ToolLike]:
    """`Tool`s as given, functions through `Tool.from_function`, an MCP server's tools from its
    listing; names must be unique."""
    if tools is None:
        return []
    if isinstance(tools, (str, bytes)) or not isinstance(tools, Sequence):
        raise ConfigTypeError(
            f"tools must be a list of functions, envs.Tool objects or envs.mcp_server(...), got {type(tools).__name__}"
        )
    built: list[ToolLike] = []
    for index, item in enumerate(tools):
        if isinstance(item, (Tool, MCPTool)):
            built.append(item)
        elif isinstance(item, MCPServer):
            built.extend(item.tools())
        elif callable(item):
            built.append(Tool.from_function(item))
        else:
            raise ConfigTypeError(
                f"tools[{index}] is a {type(item).__name__}, not a function, envs.Tool or envs.mcp_server(...)"
            )
    names = [t.name for t in built]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        from_mcp = {isinstance(t, MCPTool) for t in built if t.name in duplicates}
        fixes = {
            False: "rename a Python tool with envs.tool(name=...)",
            True: "give an MCP server's tools a prefix with envs.mcp_server(..., prefix=...)",
        }
        raise DuplicateToolError(
            f"duplicate tool name(s) {', '.join(map(repr, duplicates))}; tool names must be unique "
            f"(tools: {', '.join(names)})",
            " or ".join(fixes[kind] for kind in sorted(from_mcp)),
            duplicates,
        )
    return built


class DuplicateToolError(ConfigError):
    """Two tools share a name: `what` says which, `fix` how to rename one (Python or the CLI)."""

    def __init__(self, what: str, fix: str, names: list[str]) -> None:
        super().__init__(f"{what}; {fix}")
        self.what = what
        self.names = names


__all__ = [
    "AnswerParser",
    "DatasetSource",
    "DuplicateToolError",
    "ParserSource",
    "RubricSource",
    "ToolSource",
    "as_rubric",
    "build_tools",
]
