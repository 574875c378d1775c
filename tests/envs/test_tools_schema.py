"""Schemas derived from type hints: one test per type family, compared to the whole dict."""

from __future__ import annotations

import dataclasses
import enum
import socket
import typing
from collections.abc import Callable
from typing import Annotated, Literal

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from envs import Tool, tool


def params(fn: Callable[..., object], **kw: object) -> dict:
    return Tool.from_function(fn, **kw).parameters


def obj(properties: dict, required: list[str]) -> dict:
    return {"additionalProperties": False, "properties": properties, "required": required, "type": "object"}


class Color(enum.Enum):
    """A paint colour."""

    RED = "red"
    BLUE = "blue"


class Priority(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Point(BaseModel):
    """A point on the plane."""

    x: float
    y: float = 0.0


class Movie(TypedDict):
    title: str
    year: int


class LegacyMovie(typing.TypedDict):
    title: str


@dataclasses.dataclass
class Box:
    width: int
    label: str = "box"


class Tree(BaseModel):
    value: int
    children: list[Tree] = []


def test_scalars() -> None:
    def f(s: str, i: int, x: float, b: bool) -> None: ...

    assert params(f) == obj(
        {
            "s": {"type": "string"},
            "i": {"type": "integer"},
            "x": {"type": "number"},
            "b": {"type": "boolean"},
        },
        ["s", "i", "x", "b"],
    )


def test_defaults_are_not_required_and_shown() -> None:
    def f(a: int, b: str = "hi", c: float = 1.5) -> None: ...

    assert params(f) == obj(
        {
            "a": {"type": "integer"},
            "b": {"default": "hi", "type": "string"},
            "c": {"default": 1.5, "type": "number"},
        },
        ["a"],
    )


def test_optional_none_and_unions() -> None:
    def f(a: int | None, b: int | str, c: str | None = None, d: None = None) -> None: ...

    assert params(f) == obj(
        {
            "a": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
            "b": {"anyOf": [{"type": "integer"}, {"type": "string"}]},
            "c": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "d": {"default": None, "type": "null"},
        },
        ["a", "b"],
    )


def test_collections() -> None:
    def f(a: list[int], b: tuple[str, ...], c: set[str], d: tuple[int, str], e: dict[str, float]) -> None: ...

    assert params(f) == obj(
        {
            "a": {"items": {"type": "integer"}, "type": "array"},
            "b": {"items": {"type": "string"}, "type": "array"},
            "c": {"items": {"type": "string"}, "type": "array", "uniqueItems": True},
            "d": {
                "maxItems": 2,
                "minItems": 2,
                "prefixItems": [{"type": "integer"}, {"type": "string"}],
                "type": "array",
            },
            "e": {"additionalProperties": {"type": "number"}, "type": "object"},
        },
        ["a", "b", "c", "d", "e"],
    )


def test_literal_and_enums() -> None:
    def f(
        mode: Literal["fast", "slow"], color: Color, level: Priority = Priority.LOW, one: Literal[3] = 3
    ) -> None: ...

    assert params(f) == obj(
        {
            "mode": {"enum": ["fast", "slow"], "type": "string"},
            "color": {"description": "A paint colour.", "enum": ["red", "blue"], "type": "string"},
            "level": {"default": 1, "enum": [1, 2], "type": "integer"},
            "one": {"const": 3, "default": 3, "type": "integer"},
        },
        ["mode", "color"],
    )


def test_pydantic_model_is_inlined_without_titles() -> None:
    def f(origin: Point, points: list[Point]) -> None: ...

    point = {
        "description": "A point on the plane.",
        "properties": {"x": {"type": "number"}, "y": {"default": 0.0, "type": "number"}},
        "required": ["x"],
        "type": "object",
    }
    assert params(f) == obj(
        {"origin": point, "points": {"items": point, "type": "array"}}, ["origin", "points"]
    )


def test_typeddict_and_dataclass() -> None:
    def f(movie: Movie, box: Box) -> None: ...

    assert params(f) == obj(
        {
            "movie": {
                "additionalProperties": False,
                "properties": {"title": {"type": "string"}, "year": {"type": "integer"}},
                "required": ["title", "year"],
                "type": "object",
            },
            "box": {  # unknown keys are rejected, and the schema says so
                "additionalProperties": False,
                "properties": {"width": {"type": "integer"}, "label": {"default": "box", "type": "string"}},
                "required": ["width"],
                "type": "object",
            },
        },
        ["movie", "box"],
    )


def test_recursive_model_keeps_defs() -> None:
    def f(root: Tree) -> None: ...

    assert params(f) == {
        **obj({"root": {"$ref": "#/$defs/Tree"}}, ["root"]),
        "$defs": {
            "Tree": {
                "properties": {
                    "value": {"type": "integer"},
                    "children": {"default": [], "items": {"$ref": "#/$defs/Tree"}, "type": "array"},
                },
                "required": ["value"],
                "type": "object",
            }
        },
    }


def test_annotated_field_description_and_constraints() -> None:
    def f(
        n: Annotated[int, Field(description="How many.", ge=1, le=10)] = 1,
        tag: str = Field("x", description="A tag.", max_length=5),
    ) -> None:
        """F.

        Args:
            n: loses to the Field description.
            tag: also loses.
        """

    assert params(f) == {
        "additionalProperties": False,
        "properties": {
            "n": {"default": 1, "description": "How many.", "maximum": 10, "minimum": 1, "type": "integer"},
            "tag": {"default": "x", "description": "A tag.", "maxLength": 5, "type": "string"},
        },
        "type": "object",
    }


def test_injected_parameters_are_hidden() -> None:
    def f(query: str, state: dict, rollout: object = None) -> None: ...

    assert params(f) == obj({"query": {"type": "string"}}, ["query"])


def test_awkward_parameter_names_do_not_clash_with_basemodel() -> None:
    def f(json: str, schema: int, model_config: bool, _private: str = "") -> None: ...

    assert params(f) == obj(
        {
            "json": {"type": "string"},
            "schema": {"type": "integer"},
            "model_config": {"type": "boolean"},
            "_private": {"default": "", "type": "string"},
        },
        ["json", "schema", "model_config"],
    )


def test_no_parameters() -> None:
    def ping() -> str:
        return "pong"

    assert params(ping) == {"additionalProperties": False, "properties": {}, "type": "object"}


def test_full_openai_tool_dict() -> None:
    @tool(name="lookup", timeout=5)
    def find(key: str) -> str:
        """Look a key up."""
        return key

    assert find.schema == {
        "type": "function",
        "function": {
            "name": "lookup",
            "description": "Look a key up.",
            "parameters": obj({"key": {"type": "string"}}, ["key"]),
        },
    }
    assert find.timeout == 5.0 and find.name == "lookup"


def _h_untyped(a, b: int) -> None: ...  # type: ignore[no-untyped-def]
def _h_args(a: int, *rest: int) -> None: ...
def _h_kwargs(a: int, **options: int) -> None: ...
def _h_socket(conn: socket.socket) -> None: ...
def _h_callable(fn: Callable[[int], int]) -> None: ...
def _h_legacy(movie: LegacyMovie) -> None: ...


@pytest.mark.parametrize(
    ("fn", "fragment"),
    [
        (_h_untyped, "parameter 'a' has no type hint"),
        (_h_args, "parameter *rest is not supported"),
        (_h_kwargs, "parameter **options is not supported"),
        (_h_socket, "parameter 'conn' has type"),
        (_h_callable, "parameter 'fn' has type"),
        (_h_legacy, "typing_extensions.TypedDict"),
    ],
)
def test_unusable_signatures_fail_at_construction(fn: Callable[..., object], fragment: str) -> None:
    with pytest.raises(TypeError) as info:
        Tool.from_function(fn)
    assert fn.__name__ in str(info.value)
    assert fragment in str(info.value)


def test_unresolvable_local_type_names_the_parameter() -> None:
    class Local(BaseModel):
        a: int

    def f(item: Local) -> None: ...

    with pytest.raises(TypeError, match=r"parameter 'item' \('Local'\) cannot be resolved"):
        Tool.from_function(f)


def test_method_needs_binding_hint() -> None:
    class Service:
        def run(self, q: str) -> str:
            return q

    with pytest.raises(TypeError, match="bound method"):
        Tool.from_function(Service.run)
    assert Tool.from_function(Service().run).parameters == obj({"q": {"type": "string"}}, ["q"])


@pytest.mark.parametrize("bad", ["<lambda>", "", "has space", "x" * 65])
def test_invalid_names_are_rejected(bad: str) -> None:
    def f() -> None: ...

    with pytest.raises(ValueError, match="pass name="):
        Tool.from_function(f, name=bad)


@pytest.mark.parametrize("timeout", [0, -1, "5"])
def test_invalid_timeout_is_rejected(timeout: object) -> None:
    def f() -> None: ...

    with pytest.raises(ValueError, match="timeout"):
        Tool.from_function(f, timeout=timeout)  # type: ignore[arg-type]
