"""Tool schemas that contradict themselves, made satisfiable: an ``enum`` outranks a ``type`` none of its values has.

Schemas written by hand or converted between dialects say ``{"type": "boolean", "enum": ["True", "False",
"dontcare"]}`` (BFCL's live tools, from a Python signature) or ``{"type": "integer", "enum": ["1", "2"]}``. No
value satisfies both keywords, so a validator rejects every call the model can write, the re-ask cannot
help, and a grammar built from such a schema has no sentence at all. The enum is the author's list of
meant values; the type is the dialect's guess. Where they contradict, the enum stands and the type goes.

Only that contradiction is changed: a schema whose enum has at least one value of its type is left as the
client wrote it (the validator then keeps to both). Unchanged parts are the client's own objects; the walk
is bounded in depth.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

_MAX_DEPTH = 32
# keywords whose value is one subschema, or a list of them, or a name -> subschema mapping
_ONE = frozenset(("items", "additionalProperties", "not", "if", "then", "else", "contains", "propertyNames"))
_MANY = frozenset(("anyOf", "oneOf", "allOf", "prefixItems"))
_NAMED = frozenset(("properties", "patternProperties", "$defs", "definitions", "dependentSchemas"))


def reconciled_schema(schema: Any) -> Any:
    """``schema`` with every ``type`` that none of its ``enum`` values has left out (the same object when
    nothing contradicts)."""
    return _walk(schema, 0)


def _walk(schema: Any, depth: int) -> Any:
    if not isinstance(schema, Mapping) or depth > _MAX_DEPTH:
        return schema
    changed: dict[str, Any] = {}
    for key, value in schema.items():  # only the keywords present: most schemas have few
        if key in _ONE:
            walked = _walk(value, depth + 1)
        elif key in _MANY and isinstance(value, list):
            walked = _walked_items(value, depth)
        elif key in _NAMED and isinstance(value, Mapping):
            walked = _walked_values(value, depth)
        else:
            continue
        if walked is not value:
            changed[key] = walked
    drop_type = _type_contradicts_enum(schema)
    if not changed and not drop_type:
        return schema
    result = {**schema, **changed}
    if drop_type:
        del result["type"]
    return result


def _walked_items(items: list[Any], depth: int) -> list[Any]:
    """The list itself when no subschema in it changed."""
    walked = [_walk(item, depth + 1) for item in items]
    return walked if any(new is not old for new, old in zip(walked, items, strict=True)) else items


def _walked_values(named: Mapping[str, Any], depth: int) -> Mapping[str, Any]:
    """The mapping itself when no subschema in it changed (a new dict is built only on the first change)."""
    out: dict[str, Any] | None = None
    for name, sub in named.items():
        new = _walk(sub, depth + 1)
        if new is not sub and out is None:
            out = dict(named)
        if out is not None:
            out[name] = new
    return named if out is None else out


def _type_contradicts_enum(schema: Mapping[str, Any]) -> bool:
    """A non-empty ``enum`` none of whose values has (one of) the schema's ``type``."""
    enum, kind = schema.get("enum"), schema.get("type")
    if not isinstance(enum, list) or not enum:
        return False
    kinds = [kind] if isinstance(kind, str) else kind if isinstance(kind, list) else None
    if not kinds or not all(isinstance(k, str) for k in kinds):
        return False
    return not any(_has_type(value, k) for value in enum for k in kinds)


def _has_type(value: Any, kind: str) -> bool:
    """JSON Schema's type check for one value (an unknown type name: assumed to fit, nothing is dropped)."""
    if kind == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (
            isinstance(value, float) and value.is_integer()
        )
    checks: dict[str, Any] = {
        "string": str,
        "boolean": bool,
        "array": list,
        "object": Mapping,
        "null": type(None),
    }
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    check = checks.get(kind)
    return True if check is None else isinstance(value, check)
