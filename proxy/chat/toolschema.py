"""Tool ``parameters`` schemas, checked once when the request arrives.

A function tool's ``parameters`` must be a JSON Schema object that describes an object. This
module checks the shape of every keyword that holds schemas or that the proxy reads (``type``,
``properties``, ``required``, ``items``, ``anyOf``, ``enum``, ``pattern``, ...) in every nested
schema, so prompt rendering and argument validation never meet ``properties`` that is a list or
``required`` that is a number. A bad schema is a 400 whose ``param`` points into it, as
``tools[0].function.parameters.properties``. Keywords it does not know are left alone (the
argument validator notes a schema it cannot use and falls back to ``required``).

Why not jsonschema's metaschema check: validating against the 2020-12 metaschema costs about
3 ms per tool schema, so a request with a thousand unique tools would hold the event loop for
seconds. This walk is linear in the schema's size, without recursion; nesting is bounded before
it runs (``limits``). No I/O here.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ..wire.errors import InvalidRequest

TYPES = frozenset({"object", "array", "string", "number", "integer", "boolean", "null"})
_SCHEMA = frozenset({"additionalProperties", "additionalItems", "not", "contains", "propertyNames", "if", "then"})
_SCHEMA |= {"else", "unevaluatedProperties", "unevaluatedItems"}
_SCHEMA_LISTS = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SCHEMA_MAPS = frozenset({"properties", "patternProperties", "$defs", "definitions", "dependentSchemas"})
_STRINGS = frozenset({"$ref", "$schema", "$id", "$anchor", "$dynamicRef", "$comment", "title", "description"})
_STRINGS |= {"format", "contentEncoding", "contentMediaType"}
_COUNTS = frozenset({"minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"})
_COUNTS |= {"minContains", "maxContains"}
_NUMBERS = frozenset({"minimum", "maximum", "multipleOf"})


def check_parameters(schema: Any, param: str) -> None:
    """Raise ``InvalidRequest`` naming the field unless ``schema`` is a usable object schema."""
    if not isinstance(schema, Mapping):
        raise _bad(param, "expected a JSON Schema object")
    kind = schema.get("type")
    if kind is not None and kind != "object" and not (isinstance(kind, list) and "object" in kind):
        raise _bad(f"{param}.type", "function parameters must be a JSON Schema of type 'object'")
    stack: list[tuple[Any, str]] = [(schema, param)]
    while stack:
        node, path = stack.pop()
        if isinstance(node, bool):
            continue
        if not isinstance(node, Mapping):
            raise _bad(path, "expected a JSON Schema (an object or a boolean)")
        children = list(_children(node, path))
        stack.extend(reversed(children))  # depth-first in document order: the first problem is reported


def _children(node: Mapping[str, Any], path: str) -> list[tuple[Any, str]]:
    """Check one schema's own keywords; return the schemas nested in it, with their paths."""
    children: list[tuple[Any, str]] = []
    for key, value in node.items():
        where = f"{path}.{key}"
        if key in _SCHEMA:
            children.append((value, where))
        elif key in _SCHEMA_LISTS:
            children += _schema_list(value, where)
        elif key in _SCHEMA_MAPS:
            children += _schema_map(value, where, patterns=key == "patternProperties")
        elif key == "items":
            children += _schema_list(value, where) if isinstance(value, list) else [(value, where)]
        else:
            _check_keyword(key, value, where)
    return children


def _check_keyword(key: str, value: Any, where: str) -> None:
    """The keywords that hold no schema but have a fixed shape."""
    if key == "type":
        _check_type(value, where)
    elif key == "required":
        if not isinstance(value, list):
            raise _bad(where, "expected an array of property names")
        for i, name in enumerate(value):
            if not isinstance(name, str):
                raise _bad(f"{where}[{i}]", "expected a property name (a string)")
    elif key in ("enum", "examples") and not isinstance(value, list):
        raise _bad(where, "expected an array")
    elif key == "pattern":
        _check_regex(value, where)
    elif key in _STRINGS and not isinstance(value, str):
        raise _bad(where, "expected a string")
    elif key in _COUNTS and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise _bad(where, "expected a non-negative integer")
    elif key in _NUMBERS and (isinstance(value, bool) or not isinstance(value, int | float)):
        raise _bad(where, "expected a number")
    elif key == "uniqueItems" and not isinstance(value, bool):
        raise _bad(where, "expected a boolean")


def _check_type(value: Any, where: str) -> None:
    names = value if isinstance(value, list) else [value]
    if not names:
        raise _bad(where, "expected a type name or a non-empty array of type names")
    for name in names:
        if not isinstance(name, str) or name not in TYPES:
            shown = repr(name)[:40]
            raise _bad(where, f"{shown} is not a JSON Schema type; expected one of {', '.join(sorted(TYPES))}")


def _check_regex(value: Any, where: str) -> None:
    if not isinstance(value, str):
        raise _bad(where, "expected a regular expression (a string)")
    try:
        re.compile(value)
    except (re.error, RecursionError, OverflowError):
        raise _bad(where, "not a valid regular expression") from None


def _schema_list(value: Any, where: str) -> list[tuple[Any, str]]:
    if not isinstance(value, list) or not value:
        raise _bad(where, "expected a non-empty array of JSON Schemas")
    return [(item, f"{where}[{i}]") for i, item in enumerate(value)]


def _schema_map(value: Any, where: str, *, patterns: bool) -> list[tuple[Any, str]]:
    if not isinstance(value, Mapping):
        raise _bad(where, "expected an object whose values are JSON Schemas")
    if patterns:
        for key in value:
            _check_regex(key, f"{where}.{key}")
    return [(item, f"{where}.{key}") for key, item in value.items()]


def _bad(param: str, detail: str) -> InvalidRequest:
    param = param if len(param) <= 300 else param[:299] + "…"
    return InvalidRequest(f"Invalid schema for '{param}': {detail}", param=param, code="invalid_tool_schema")
