"""Tool ``parameters`` schemas, checked once when the request arrives.

A function tool's ``parameters`` must be a JSON Schema (the dialect its ``$schema`` names, else
Draft 2020-12, as the argument validator reads it) that describes an object. The metaschema check
is what makes every later reader safe: prompt rendering and argument validation then only meet
``properties`` that are objects of schemas, ``required`` lists of strings, ``type`` names and
valid ``pattern`` regexes. A bad schema is a 400 whose ``param`` points into it, as
``tools[0].function.parameters.properties``. Nesting is bounded before this (``limits``); a
schema nested past what the checker's recursion can take is a 400 too. No I/O here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for

from .errors import InvalidRequest

_MAX_MESSAGE = 200


def check_parameters(schema: Any, param: str) -> None:
    """Raise ``InvalidRequest`` naming the field unless ``schema`` is a usable object schema."""
    if not isinstance(schema, Mapping):
        raise _bad(param, "expected a JSON Schema object")
    kind = schema.get("type")
    if kind is not None and kind != "object" and not (isinstance(kind, list) and "object" in kind):
        raise _bad(f"{param}.type", "function parameters must be a JSON Schema of type 'object'")
    if "$schema" in schema and not isinstance(schema["$schema"], str):
        raise _bad(f"{param}.$schema", "expected a string (a JSON Schema dialect URI)")
    try:
        validator_for(schema, default=Draft202012Validator).check_schema(dict(schema))
    except SchemaError as exc:
        raise _bad(_join(param, exc.absolute_path), _clip(exc.message)) from None
    except RecursionError:
        raise _bad(param, "the schema is nested too deeply") from None


def _join(param: str, path: Iterable[Any]) -> str:
    for part in path:
        param += f"[{part}]" if isinstance(part, int) else f".{part}"
    return param


def _clip(text: str) -> str:
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 1] + "…"


def _bad(param: str, detail: str) -> InvalidRequest:
    return InvalidRequest(f"Invalid schema for '{param}': {detail}", param=param, code="invalid_tool_schema")
