"""Schema-directed coercion of parsed tool-call arguments: what converts without loss.

``"5"`` -> 5 for an integer, ``"true"`` -> true, 5.0 -> 5, 12 -> ``"12"`` for a string, a JSON
string for an object or array parameter, one value -> a one-item array, a case-insensitive enum
match. ``$ref`` (local pointers), ``anyOf``/``oneOf`` type unions and ``allOf`` are followed.
Each change is recorded as a repair name (coerce_types, embedded_json, wrap_array, enum_case);
validation is ``_args``' job, after this.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from typing import Any

from ._jsonrepair import parse_json_lenient

__all__ = ["Coercer"]

_MAX_DEPTH = 64
_INT = re.compile(r"-?\d{1,300}")
_NUMBER = re.compile(r"-?(?:0|[1-9]\d{0,300})(?:\.\d{1,300})?(?:[eE][+-]?\d{1,4})?")
_NO = object()  # "this conversion does not apply"


def _matches(value: Any, kind: str) -> bool:
    """Whether ``value`` is of JSON Schema type ``kind`` (unknown kinds: let the validator judge)."""
    if kind == "string":
        return isinstance(value, str)
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if kind == "object":
        return isinstance(value, dict)
    if kind == "array":
        return isinstance(value, list)
    return True


def _pointer(root: Any, pointer: str) -> Any:
    """Resolve a local JSON pointer (``/$defs/x``) in ``root``; ``None`` if it goes nowhere."""
    node = root
    for raw in pointer.split("/")[1:] if pointer else ():
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


class Coercer:
    """Walks a value along its schema and converts what converts without loss.

    Never mutates the input: containers are rebuilt. Records every change in ``repairs``.
    """

    def __init__(self, root: Any) -> None:
        self.root = root
        self.repairs: list[str] = []

    def _deref(self, schema: Any) -> Mapping[str, Any] | None:
        for _ in range(16):
            if not isinstance(schema, Mapping):
                return None
            ref = schema.get("$ref")
            target = _pointer(self.root, ref[1:]) if isinstance(ref, str) and ref.startswith("#") else None
            if not isinstance(target, Mapping):
                return schema
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **rest} if rest else target
        return schema if isinstance(schema, Mapping) else None

    def _types(self, schema: Mapping[str, Any], depth: int) -> tuple[str, ...]:
        kind = schema.get("type")
        if isinstance(kind, str):
            return (kind,)
        if isinstance(kind, list):
            return tuple(k for k in kind if isinstance(k, str))
        branches = schema.get("anyOf") or schema.get("oneOf")
        if isinstance(branches, list) and depth < _MAX_DEPTH:
            found: list[str] = []
            for branch in branches:
                resolved = self._deref(branch)
                kinds = self._types(resolved, depth + 1) if resolved is not None else ()
                if not kinds:
                    return ()
                found.extend(kinds)
            return tuple(dict.fromkeys(found))
        if "properties" in schema:
            return ("object",)
        return ("array",) if "items" in schema or "prefixItems" in schema else ()

    def coerce(self, value: Any, schema: Any, depth: int = 0) -> Any:
        resolved = self._deref(schema)
        if resolved is None or depth > _MAX_DEPTH:
            return value
        types = self._types(resolved, depth)
        if types and not any(_matches(value, t) for t in types):
            value = self._convert(value, types, resolved, depth)
        elif isinstance(value, float) and value.is_integer() and "integer" in types and "number" not in types:
            value = self._note(int(value), "coerce_types")
        value = self._fix_enum(value, resolved)
        branches = resolved.get("allOf")
        for branch in branches if isinstance(branches, list) else ():
            value = self.coerce(value, branch, depth + 1)
        if isinstance(value, dict):
            return self._object(value, resolved, depth)
        if isinstance(value, list):
            return self._array(value, resolved, depth)
        return value

    def _note(self, value: Any, repair: str) -> Any:
        self.repairs.append(repair)
        return value

    def _convert(self, value: Any, types: tuple[str, ...], schema: Mapping[str, Any], depth: int) -> Any:
        for kind in types:
            mark = len(self.repairs)
            converted = self._convert_to(value, kind, schema, depth)
            if converted is not _NO:
                return converted
            del self.repairs[mark:]
        return value

    def _convert_to(self, value: Any, kind: str, schema: Mapping[str, Any], depth: int) -> Any:
        if isinstance(value, str):
            converted = self._from_string(value.strip(), kind)
            if converted is not _NO:
                return converted
        elif kind == "string" and isinstance(value, int | float) and not isinstance(value, bool):
            return self._note(json.dumps(value), "coerce_types")
        if kind == "array" and value is not None and not isinstance(value, list):
            if isinstance(value, str) and value.lstrip().startswith("["):
                return _NO  # a broken array, not a single item
            items = self._deref(schema.get("items"))
            item = self.coerce(value, items, depth + 1) if items is not None else value
            item_types = self._types(items, depth) if items is not None else ()
            if not item_types or any(_matches(item, t) for t in item_types):
                return self._note([item], "wrap_array")
        return _NO

    def _from_string(self, text: str, kind: str) -> Any:
        if kind == "integer" and _INT.fullmatch(text):
            return self._note(int(text), "coerce_types")
        if kind == "number" and _NUMBER.fullmatch(text):
            number = json.loads(text)
            return self._note(number, "coerce_types") if math.isfinite(number) else _NO
        if kind == "boolean" and text.lower() in ("true", "false"):
            return self._note(text.lower() == "true", "coerce_types")
        if kind == "null" and text == "null":
            return self._note(None, "coerce_types")
        if kind in ("array", "object") and text[:1] in ("[", "{"):
            parsed = parse_json_lenient(text)
            if parsed is not None and _matches(parsed[0], kind):
                self.repairs.extend(("embedded_json", *parsed[1]))
                return parsed[0]
        return _NO

    def _fix_enum(self, value: Any, schema: Mapping[str, Any]) -> Any:
        """An enum's string written in another case, or as the JSON value it spells (``true`` for ``"True"``,
        ``2`` for ``"2"``): the one option it matches."""
        options = schema.get("enum")
        if not isinstance(options, list) or not isinstance(value, str | int | float) or value in options:
            return value
        if isinstance(value, str):
            folded, repair = value.strip().casefold(), "enum_case"
        else:
            folded, repair = json.dumps(value).casefold(), "coerce_types"
        found = [o for o in options if isinstance(o, str) and o.casefold() == folded]
        return self._note(found[0], repair) if len(found) == 1 else value

    def _object(self, value: dict[str, Any], schema: Mapping[str, Any], depth: int) -> dict[str, Any]:
        props = schema.get("properties")
        props = props if isinstance(props, Mapping) else {}
        extra = schema.get("additionalProperties")
        if not props and not isinstance(extra, Mapping):
            return value
        return {k: self.coerce(v, props.get(k, extra), depth + 1) for k, v in value.items()}

    def _array(self, value: list[Any], schema: Mapping[str, Any], depth: int) -> list[Any]:
        prefix = schema.get("prefixItems")
        prefix = prefix if isinstance(prefix, list) else []
        items = schema.get("items")
        if not prefix and not isinstance(items, Mapping):
            return value
        return [self.coerce(v, prefix[i] if i < len(prefix) else items, depth + 1) for i, v in enumerate(value)]
