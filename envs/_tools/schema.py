"""Turn a Python function's signature into a pydantic argument model and its JSON Schema.

One pydantic model per tool is both the validator for the model's arguments and the source
of the schema the model is shown, so the two can never disagree. This module also tidies
pydantic's schema (no `title` on every node, `$defs` inlined unless a type is recursive)
and, on request, rewrites it to satisfy OpenAI's strict function-calling rules.
"""

from __future__ import annotations

import functools
import inspect
import typing
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, create_model
from pydantic.fields import FieldInfo
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaValue

from harness._core.errors import ConfigTypeError
from harness._core.types import INJECTED

# The rollout fields a tool may ask for by parameter name (a subset of what reward functions
# get: a tool runs mid-episode, before there is a final response or score).
TOOL_INJECTED: frozenset[str] = frozenset(name for name in INJECTED if name in ("state", "rollout"))
"""Parameter names the harness fills in for a tool; they never appear in its schema."""

# Keywords OpenAI accepts in strict mode; everything else (default, uniqueItems, minLength,
# discriminator, ...) is dropped from a strict schema. Pydantic still enforces it on input.
_STRICT_KEYWORDS = frozenset(
    {
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
)
_STRICT_FORMATS = frozenset(
    {
        "date-time",
        "time",
        "date",
        "duration",
        "email",
        "hostname",
        "ipv4",
        "ipv6",
        "uuid",
    }
)
_SCHEMA_MAPS = ("properties", "$defs", "patternProperties")
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf", "prefixItems")
_SCHEMA_ONES = ("items", "additionalProperties", "not", "contains")
_REF_PREFIX = "#/$defs/"


@dataclass(frozen=True)
class ArgumentSpec:
    """Everything `Tool` needs to validate arguments and call the function.

    `fields` pairs each model field with the parameter it fills (fields are named `f0, f1, ...`
    and aliased to the parameter name, so a parameter may be called `json` or `schema`
    without clashing with BaseModel's own attributes).
    """

    model: type[BaseModel]
    fields: tuple[tuple[str, str], ...]
    positional_only: tuple[str, ...]
    injected: tuple[str, ...]
    injected_defaults: frozenset[str]
    parameters: dict[str, Any]
    loose_parameters: dict[str, Any]


class _ArgumentsJsonSchema(GenerateJsonSchema):
    """Makes the schema say what validation does, on every pydantic version.

    A stdlib dataclass inside the arguments model inherits its `extra="forbid"`, so unknown
    keys are rejected; pydantic before 2.14 left `additionalProperties: false` out of the
    schema, which would tell the model that extra keys are fine.
    """

    def dataclass_schema(self, schema: Any) -> JsonSchemaValue:
        json_schema = super().dataclass_schema(schema)
        if (schema.get("config") or {}).get(
            "extra_fields_behavior"
        ) == "forbid" and "properties" in json_schema:
            json_schema.setdefault("additionalProperties", False)
        return json_schema


def callable_name(fn: Callable[..., Any]) -> str:
    """A readable name for error messages (qualified name of the underlying function)."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    return getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)


def _hint_target(fn: Callable[..., Any]) -> Any:
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.isroutine(fn) or inspect.isclass(fn):
        return fn
    return getattr(fn, "__call__", fn)


def _resolve_hints(fn: Callable[..., Any], sig: inspect.Signature, owner: str) -> dict[str, Any]:
    """Type hints with string annotations evaluated; a name that cannot be found is a TypeError
    naming the parameter (usually a type defined inside a function body)."""
    target = _hint_target(fn)
    try:
        return typing.get_type_hints(target, include_extras=True)
    except Exception as exc:
        globalns = getattr(inspect.unwrap(target), "__globals__", {})
        for name, param in sig.parameters.items():
            if isinstance(param.annotation, str):
                try:
                    eval(param.annotation, globalns)
                except Exception as inner:
                    raise ConfigTypeError(
                        f"tool function {owner!r}: the type hint of parameter {name!r} "
                        f"({param.annotation!r}) cannot be resolved ({inner}); define the type at "
                        "module level so it can be found by name"
                    ) from inner
        raise ConfigTypeError(f"tool function {owner!r}: its type hints cannot be resolved ({exc})") from exc


def _has_description(annotation: Any) -> bool:
    if typing.get_origin(annotation) is not Annotated:
        return False
    return any(isinstance(m, FieldInfo) and m.description for m in annotation.__metadata__)


def _field(param: inspect.Parameter, annotation: Any, doc: str | None) -> FieldInfo:
    description = None if _has_description(annotation) else doc
    default = param.default
    extra: dict[str, Any] = {"description": description} if description else {}
    if isinstance(default, FieldInfo):  # `x: int = Field(3, description=...)`: its words win
        if default.description:
            extra = {}
        return FieldInfo.merge_field_infos(default, Field(alias=param.name, **extra))
    # `Field()` is typed as returning Any (so it can stand as a default); it is a FieldInfo.
    field: FieldInfo = (
        Field(alias=param.name, **extra)
        if default is inspect.Parameter.empty
        else Field(default, alias=param.name, **extra)
    )
    return field


def _diagnose(owner: str, annotations: dict[str, Any], exc: Exception) -> TypeError:
    """Find which parameter's type pydantic cannot handle, so the error can name it."""
    for name, annotation in annotations.items():
        try:
            TypeAdapter(annotation).json_schema()
        except Exception as inner:
            return ConfigTypeError(
                f"tool function {owner!r}: parameter {name!r} has type {annotation!r}, which has "
                f"no JSON Schema ({str(inner).splitlines()[0]}). Use JSON-friendly types: str, int, float, bool, None, "
                "list/tuple/set, dict[str, T], Literal, Enum, pydantic models, TypedDict "
                "(typing_extensions.TypedDict on Python < 3.12) or dataclasses"
            )
    return ConfigTypeError(f"tool function {owner!r}: cannot build an argument schema ({exc})")


class _Parameters:
    """A tool function's parameters sorted into model fields and injected names."""

    def __init__(self) -> None:
        self.definitions: dict[str, Any] = {}  # field name -> (annotation, FieldInfo)
        self.fields: list[tuple[str, str]] = []  # (field name, parameter name)
        self.annotations: dict[str, Any] = {}
        self.positional_only: list[str] = []
        self.injected: list[str] = []
        self.injected_defaults: set[str] = set()

    def add(self, param: inspect.Parameter, hints: dict[str, Any], owner: str, doc: str | None) -> None:
        if param.kind is param.VAR_POSITIONAL or param.kind is param.VAR_KEYWORD:
            star = "*" if param.kind is param.VAR_POSITIONAL else "**"
            raise ConfigTypeError(
                f"tool function {owner!r}: parameter {star}{param.name} is not supported; a tool "
                "needs a fixed set of named, typed parameters the model can fill in"
            )
        if param.name in TOOL_INJECTED:
            self.injected.append(param.name)
            if param.default is not param.empty:
                self.injected_defaults.add(param.name)
            return
        if param.kind is param.POSITIONAL_ONLY:
            self.positional_only.append(param.name)
        if param.name not in hints:
            hint = (
                " (for a method, pass the bound method obj.method)" if param.name in {"self", "cls"} else ""
            )
            raise ConfigTypeError(
                f"tool function {owner!r}: parameter {param.name!r} has no type hint; add one "
                f"(e.g. `{param.name}: str`) so its JSON Schema can be derived{hint}"
            )
        annotation = hints[param.name]
        self.annotations[param.name] = annotation
        field_name = f"f{len(self.fields)}"
        self.fields.append((field_name, param.name))
        self.definitions[field_name] = (annotation, _field(param, annotation, doc))


def _arguments_model(owner: str, params: _Parameters) -> tuple[type[BaseModel], dict[str, Any]]:
    """The pydantic model validating a call's arguments, and its raw JSON Schema."""
    try:
        model = create_model(
            f"{owner.replace('.', '_').replace('<', '').replace('>', '')}_arguments",
            __config__=ConfigDict(extra="forbid", populate_by_name=False),
            **params.definitions,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # non-JSON defaults are simply left out of the schema
            raw = model.model_json_schema(by_alias=True, schema_generator=_ArgumentsJsonSchema)
    except Exception as exc:
        raise _diagnose(owner, params.annotations, exc) from exc
    return model, raw


def build_arguments(
    fn: Callable[..., Any], *, param_docs: dict[str, str] | None = None, strict: bool = False
) -> ArgumentSpec:
    """Inspect `fn` and build its argument model and JSON Schema.

    Raises TypeError (naming the function and the parameter) for `*args`/`**kwargs`, a
    parameter without a type hint, or a type with no JSON Schema; in strict mode also for a
    type OpenAI's strict mode cannot express (free-form dicts, fixed-length tuples, Any).
    """
    owner = callable_name(fn)
    param_docs = param_docs or {}
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError) as exc:
        raise ConfigTypeError(f"tool function {owner!r}: cannot read its signature ({exc})") from exc
    hints = _resolve_hints(fn, sig, owner)
    params = _Parameters()
    for param in sig.parameters.values():
        params.add(param, hints, owner, param_docs.get(param.name))
    model, raw = _arguments_model(owner, params)
    loose = clean_schema(raw)
    return ArgumentSpec(
        model=model,
        fields=tuple(params.fields),
        positional_only=tuple(params.positional_only),
        injected=tuple(params.injected),
        injected_defaults=frozenset(params.injected_defaults),
        parameters=to_strict(loose, owner) if strict else loose,
        loose_parameters=loose,
    )


def _map_children(node: dict[str, Any], fn: Callable[[Any], Any]) -> dict[str, Any]:
    """A copy of schema `node` with `fn` applied to each direct sub-schema."""
    out = dict(node)
    for key in _SCHEMA_MAPS:
        if isinstance(node.get(key), dict):
            out[key] = {name: fn(sub) for name, sub in node[key].items()}
    for key in _SCHEMA_LISTS:
        if isinstance(node.get(key), list):
            out[key] = [fn(sub) for sub in node[key]]
    for key in _SCHEMA_ONES:
        if isinstance(node.get(key), dict):
            out[key] = fn(node[key])
    return out


def _strip_titles(node: Any) -> Any:
    if not isinstance(node, dict):
        return node
    node = _map_children(node, _strip_titles)
    node.pop("title", None)
    return node


def _refs(node: Any) -> set[str]:
    if isinstance(node, dict):
        found = {node["$ref"][len(_REF_PREFIX) :]} if isinstance(node.get("$ref"), str) else set()
        for value in node.values():
            found |= _refs(value)
        return found
    if isinstance(node, list):
        return set().union(*(_refs(v) for v in node)) if node else set()
    return set()


def _cyclic(defs: dict[str, Any]) -> set[str]:
    """Names of the definitions that (indirectly) refer to themselves: those cannot be inlined."""
    graph = {name: _refs(body) for name, body in defs.items()}

    def reaches(start: str, target: str, seen: set[str]) -> bool:
        for nxt in graph.get(start, ()):
            if nxt == target or (nxt not in seen and reaches(nxt, target, seen | {nxt})):
                return True
        return False

    return {name for name in graph if reaches(name, name, {name})}


def _inline(node: Any, defs: dict[str, Any], keep: set[str]) -> Any:
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.startswith(_REF_PREFIX) and ref[len(_REF_PREFIX) :] not in keep:
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        return {**_inline(defs[ref[len(_REF_PREFIX) :]], defs, keep), **siblings}
    return _map_children(node, lambda sub: _inline(sub, defs, keep))


def clean_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """Pydantic's schema without `title` noise, with `$defs` inlined except recursive types."""
    schema = _strip_titles(schema)
    defs = schema.pop("$defs", None)
    if not defs:
        return schema
    keep = _cyclic(defs)
    schema = _inline(schema, defs, keep)
    if keep:
        schema["$defs"] = {name: _inline(defs[name], defs, keep) for name in sorted(keep)}
    return schema


def admits_null(node: Any) -> bool:
    """Whether a schema node already accepts JSON null."""
    if not isinstance(node, dict):
        return False
    kind = node.get("type")
    if kind == "null" or (isinstance(kind, list) and "null" in kind):
        return True
    if "const" in node and node["const"] is None:
        return True
    if None in (node.get("enum") or ()):
        return True
    return any(admits_null(sub) for sub in node.get("anyOf", ()) or node.get("oneOf", ()))


def _nullable(node: dict[str, Any]) -> dict[str, Any]:
    if admits_null(node):
        return node
    if "anyOf" in node:
        return {**node, "anyOf": [*node["anyOf"], {"type": "null"}]}
    inner = dict(node)
    description = inner.pop("description", None)
    wrapped: dict[str, Any] = {"anyOf": [inner, {"type": "null"}]}
    if description:
        wrapped["description"] = description
    return wrapped


def _strict_node(node: Any, where: str) -> dict[str, Any]:
    if not isinstance(node, dict):
        raise ConfigTypeError(f"{where}: not a JSON Schema object ({node!r})")
    if "prefixItems" in node:
        raise ConfigTypeError(
            f"{where}: a fixed-length tuple cannot be expressed in OpenAI strict mode; "
            "use list[T] / tuple[T, ...], a pydantic model, or strict=False"
        )
    extra = node.get("additionalProperties")
    if extra is True or isinstance(extra, dict) or "patternProperties" in node:
        raise ConfigTypeError(
            f"{where}: a dict with free-form keys cannot be expressed in OpenAI strict mode "
            "(objects need fixed properties); use a pydantic model / TypedDict, or strict=False"
        )
    if node.get("type") == "object" and "properties" not in node:
        raise ConfigTypeError(
            f"{where}: an object with no declared properties cannot be expressed in OpenAI strict "
            "mode; use a pydantic model / TypedDict, or strict=False"
        )
    if "allOf" in node and len(node["allOf"]) == 1:
        rest = {k: v for k, v in node.items() if k != "allOf"}
        node = {**node["allOf"][0], **rest}
    if "allOf" in node:
        raise ConfigTypeError(f"{where}: 'allOf' is not supported in OpenAI strict mode; use strict=False")
    out = {k: v for k, v in node.items() if k in _STRICT_KEYWORDS}
    if "oneOf" in node:  # strict mode knows only anyOf; pydantic still checks exclusivity
        out["anyOf"] = [*out.get("anyOf", ()), *node["oneOf"]]
    if out.get("format") not in _STRICT_FORMATS:
        out.pop("format", None)
    if not any(key in out for key in ("type", "anyOf", "$ref", "enum", "const")):
        raise ConfigTypeError(
            f"{where}: has no JSON type (e.g. `Any` or `object`), which OpenAI strict mode "
            "rejects; give it a concrete type, or use strict=False"
        )
    if "anyOf" in out:
        out["anyOf"] = [_strict_node(sub, where) for sub in out["anyOf"]]
    if isinstance(out.get("items"), dict):
        out["items"] = _strict_node(out["items"], f"{where}[]")
    if isinstance(out.get("$defs"), dict):
        out["$defs"] = {
            name: _strict_node(sub, f"{where} ($defs/{name})") for name, sub in out["$defs"].items()
        }
    if isinstance(out.get("properties"), dict):
        required = set(node.get("required", ()))
        properties = {}
        for name, sub in out["properties"].items():
            sub = _strict_node(sub, f"{where}.{name}" if where else name)
            properties[name] = sub if name in required else _nullable(sub)
        out["properties"] = properties
        out["required"] = list(properties)
        out["additionalProperties"] = False
    return out


def to_strict(schema: dict[str, Any], owner: str = "") -> dict[str, Any]:
    """Rewrite a cleaned parameters schema to pass OpenAI's strict-mode rules.

    Every property becomes required; a parameter that had a default becomes nullable (the
    model sends null to mean "use the default", see `drop_null_defaults`); every object gets
    `additionalProperties: false`; unsupported keywords are dropped. Shapes strict mode
    cannot express are a TypeError naming the parameter.
    """
    try:
        return _strict_node(schema, "")
    except TypeError as exc:
        raise ConfigTypeError(f"tool function {owner!r} (strict=True): parameter {exc}") from None


def _resolve(node: Any, defs: dict[str, Any]) -> Any:
    while isinstance(node, dict) and isinstance(node.get("$ref"), str):
        node = defs.get(node["$ref"][len(_REF_PREFIX) :], {})
    return node


def drop_null_defaults(data: Any, schema: Any, defs: dict[str, Any] | None = None) -> Any:
    """Remove `key: null` where the key is optional and its type does not accept null.

    In strict mode the model cannot omit an argument; it sends null for "the default". This
    walks the loose (non-strict) schema next to the data so pydantic then fills the default.
    """
    if defs is None:
        defs = schema.get("$defs", {}) if isinstance(schema, dict) else {}
    schema = _resolve(schema, defs)
    if not isinstance(schema, dict):
        return data
    if isinstance(data, dict) and isinstance(schema.get("properties"), dict):
        props, required = schema["properties"], set(schema.get("required", ()))
        out = {}
        for key, value in data.items():
            sub = props.get(key)
            if (
                value is None
                and sub is not None
                and key not in required
                and not admits_null(_resolve(sub, defs))
            ):
                continue
            out[key] = drop_null_defaults(value, sub, defs) if sub is not None else value
        return out
    if isinstance(data, list) and isinstance(schema.get("items"), dict):
        return [drop_null_defaults(item, schema["items"], defs) for item in data]
    if data is not None and "anyOf" in schema:
        branches = [b for b in schema["anyOf"] if not admits_null(_resolve(b, defs))]
        if len(branches) == 1:
            return drop_null_defaults(data, branches[0], defs)
    return data


__all__ = [
    "TOOL_INJECTED",
    "ArgumentSpec",
    "admits_null",
    "build_arguments",
    "callable_name",
    "clean_schema",
    "drop_null_defaults",
    "to_strict",
]
