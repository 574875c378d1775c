"""strict=True schemas obey OpenAI's strict function-calling rules, and null means "default"."""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Iterator
from typing import Annotated, Any, Literal, NotRequired

import pytest
from pydantic import BaseModel, Field
from typing_extensions import TypedDict

from envs import Tool

ALLOWED = {
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "$ref",
    "$defs",
    "description",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
}


def nodes(schema: Any, path: str = "$") -> Iterator[tuple[str, dict]]:
    """Every schema node with a readable path (independent of the code under test)."""
    if not isinstance(schema, dict):
        return
    yield path, schema
    for name, sub in (schema.get("properties") or {}).items():
        yield from nodes(sub, f"{path}.{name}")
    for name, sub in (schema.get("$defs") or {}).items():
        yield from nodes(sub, f"{path}/$defs/{name}")
    for i, sub in enumerate(schema.get("anyOf") or []):
        yield from nodes(sub, f"{path}|{i}")
    if isinstance(schema.get("items"), dict):
        yield from nodes(schema["items"], f"{path}[]")


def assert_strict(schema: dict) -> None:
    assert schema["type"] == "object" and "anyOf" not in schema, "root must be a plain object"
    for path, node in nodes(schema):
        unknown = set(node) - ALLOWED
        assert not unknown, f"{path}: unsupported keywords {unknown}"
        assert {"type", "anyOf", "$ref", "enum", "const"} & set(node), f"{path}: no type"
        if node.get("type") == "object" or "properties" in node:
            assert node.get("additionalProperties") is False, f"{path}: additionalProperties must be false"
            assert sorted(node.get("required", [])) == sorted(node.get("properties", {})), (
                f"{path}: all required"
            )
        if "$ref" in node:
            name = node["$ref"].removeprefix("#/$defs/")
            assert name in schema.get("$defs", {}), f"{path}: dangling $ref"


class Level(enum.Enum):
    LOW = "low"
    HIGH = "high"


class Address(BaseModel):
    street: str
    zip_code: str | None = None
    tags: list[str] = []


class Options(TypedDict):
    verbose: bool
    depth: NotRequired[int]


@dataclasses.dataclass
class Window:
    start: int
    end: int = 10


class Category(BaseModel):
    name: str
    parent: Category | None = None


def everything(
    name: str,
    address: Address,
    options: Options,
    window: Window,
    level: Level = Level.LOW,
    mode: Literal["a", "b"] = "a",
    count: Annotated[int, Field(ge=0, description="How many.")] = 1,
    unique: set[str] = frozenset(),
    maybe: int | None = 5,
    items: list[Address] | None = None,
    category: Category | None = None,
) -> dict:
    """Exercise every shape at once."""
    return {
        "name": name,
        "zip": address.zip_code,
        "tags": address.tags,
        "options": options,
        "window": dataclasses.asdict(window),
        "level": level.value,
        "mode": mode,
        "count": count,
        "unique": sorted(unique),
        "maybe": maybe,
        "items": items,
        "category": category.model_dump() if category else None,
    }


def test_strict_schema_obeys_every_rule() -> None:
    t = Tool.from_function(everything, strict=True)
    assert t.schema["function"]["strict"] is True
    assert_strict(t.parameters)


def test_strict_optional_parameters_become_nullable() -> None:
    t = Tool.from_function(everything, strict=True)
    props = t.parameters["properties"]
    assert props["mode"] == {"anyOf": [{"enum": ["a", "b"], "type": "string"}, {"type": "null"}]}
    assert props["count"] == {
        "anyOf": [{"minimum": 0, "type": "integer"}, {"type": "null"}],
        "description": "How many.",
    }
    assert props["maybe"] == {"anyOf": [{"type": "integer"}, {"type": "null"}]}  # already nullable
    assert props["name"] == {"type": "string"}  # required stays non-null
    assert props["address"]["properties"]["tags"] == {
        "anyOf": [{"items": {"type": "string"}, "type": "array"}, {"type": "null"}]
    }


def test_non_strict_schema_is_not_marked_strict() -> None:
    assert "strict" not in Tool.from_function(everything).schema["function"]


async def test_null_means_default_in_strict_mode() -> None:
    t = Tool.from_function(everything, strict=True)
    args = {
        "name": "n",
        "address": {"street": "s", "zip_code": None, "tags": None},
        "options": {"verbose": True, "depth": None},
        "window": {"start": 1, "end": None},
        "level": None,
        "mode": None,
        "count": None,
        "unique": None,
        "maybe": None,
        "items": [{"street": "t", "zip_code": "z", "tags": None}],
        "category": {"name": "c", "parent": {"name": "root", "parent": None}},
    }
    kwargs = t.validate(args)
    assert kwargs["address"] == Address(street="s", zip_code=None, tags=[])
    assert kwargs["options"] == {"verbose": True}
    assert kwargs["window"] == Window(1, 10)
    assert (kwargs["level"], kwargs["mode"], kwargs["count"], kwargs["unique"]) == (
        Level.LOW,
        "a",
        1,
        frozenset(),
    )
    assert kwargs["maybe"] is None  # the type accepts null, so null is a real value here
    assert kwargs["items"] == [Address(street="t", zip_code="z", tags=[])]
    result = await t.call(args)
    assert result.error is None, result.content


def test_null_for_required_argument_is_still_an_error() -> None:
    t = Tool.from_function(everything, strict=True)
    with pytest.raises(ValueError, match="name"):
        t.validate(
            {"name": None, "address": {"street": "s"}, "options": {"verbose": True}, "window": {"start": 1}}
        )


def test_recursive_model_strict() -> None:
    def f(root: Category) -> None: ...

    schema = Tool.from_function(f, strict=True).parameters
    assert_strict(schema)
    assert schema["$defs"]["Category"]["properties"]["parent"] == {
        "anyOf": [{"$ref": "#/$defs/Category"}, {"type": "null"}]
    }


def _free_dict(d: dict[str, int]) -> None: ...
def _pair(p: tuple[int, str]) -> None: ...
def _anything(x: Any) -> None: ...
def _nested_free(a: list[dict[str, str]]) -> None: ...


@pytest.mark.parametrize(
    ("fn", "fragment"),
    [
        (_free_dict, "parameter d: a dict with free-form keys"),
        (_pair, "parameter p: a fixed-length tuple"),
        (_anything, "parameter x: has no JSON type"),
        (_nested_free, "parameter a[]: a dict with free-form keys"),
    ],
)
def test_shapes_strict_mode_cannot_express_fail_at_construction(fn: Any, fragment: str) -> None:
    Tool.from_function(fn)  # fine without strict
    with pytest.raises(TypeError) as info:
        Tool.from_function(fn, strict=True)
    assert fn.__name__ in str(info.value) and fragment in str(info.value)
