"""Raw-text argument values typed by the tool's schema: the reading the raw-text formats share.

``qwen3_xml`` and ``morph_xml`` write values as plain text (``<parameter=limit>\\n5\\n</parameter>``,
``<limit>5</limit>``). Typed values mostly stay text here and ``finalize_call`` converts them by the
schema (``"5"`` -> 5, JSON or Python-literal text -> object/array); this module adds what
``finalize_call`` cannot know: the type names models' own parsers accept besides JSON Schema's
(``int``, ``float``, ``bool``, ``dict``, ``list``: vLLM's qwen3coder parser reads them), ``null`` for a
non-string parameter, and untyped values read as JSON when they look like it. No I/O, never raises.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from ._xml_render import read_arguments

__all__ = ["entity_decode", "param_schema", "typed_arguments"]

# Type names outside JSON Schema that tool schemas in the wild use, by the JSON Schema type they mean.
_ALIASES = {
    "int": "integer",
    "uint": "integer",
    "long": "integer",
    "short": "integer",
    "float": "number",
    "double": "number",
    "decimal": "number",
    "bool": "boolean",
    "binary": "boolean",
    "dict": "object",
    "map": "object",
    "list": "array",
    "arr": "array",
    "str": "string",
    "text": "string",
    "varchar": "string",
    "char": "string",
}
_INT = re.compile(r"[-+]?\d{1,300}")
_FLOAT = re.compile(r"[-+]?(?:\d{1,300}(?:\.\d{0,300})?|\.\d{1,300})(?:[eE][-+]?\d{1,4})?")
_ENTITY = re.compile(r"&(?:(lt|gt|amp|quot|apos)|#(\d{1,7})|#[xX]([0-9a-fA-F]{1,6}));")
_NAMED = {"lt": "<", "gt": ">", "amp": "&", "quot": '"', "apos": "'"}


def _char(match: re.Match[str]) -> str:
    name, dec, hexa = match.groups()
    if name:
        return _NAMED[name]
    code = int(dec) if dec else int(hexa, 16)
    return chr(code) if 0 < code <= 0x10FFFF and not 0xD800 <= code <= 0xDFFF else match.group()


def entity_decode(text: str) -> str:
    """XML's five named entities and numeric character references; anything else (``&&``, ``&nbsp;``) stays."""
    return _ENTITY.sub(_char, text) if "&" in text else text


def param_schema(schema: Mapping[str, Any], name: str) -> Any:
    """The schema of parameter ``name`` of an object schema (None when it has none)."""
    props = schema.get("properties")
    return props.get(name) if isinstance(props, Mapping) else None


def _alias(schema: Any) -> str | None:
    """The JSON Schema type an alias type name stands for (``float`` -> ``number``), or None."""
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    return _ALIASES.get(kind.strip().lower()) if isinstance(kind, str) else None


def _is_string(schema: Any) -> bool:
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    return kind == "string" or _alias(schema) == "string"


def _convert_alias(text: str, kind: str) -> Any:
    """A value whose schema type is an alias: converted here, since finalize_call's schema does not name it."""
    value = text.strip()
    if kind == "integer" and _INT.fullmatch(value):
        return int(value)
    if kind == "number" and _FLOAT.fullmatch(value):
        number = float(value)
        return int(number) if number.is_integer() and abs(number) < 2**53 else number
    if kind == "boolean" and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return text


def typed_arguments(params: list[tuple[str, str]], schema: Mapping[str, Any]) -> dict[str, Any]:
    """Params by name, as handed to ``finalize_call`` (a name given more than once makes an array).

    ``null`` is None for any non-string parameter that may be null or is required (an optional one that may
    not be null is left out: the model means "not given"); so is Python's ``None`` (GLM writes Python
    literals) where no string is allowed; alias-typed values are converted; the rest follows
    ``_xml_render.read_arguments`` (typed values stay text, untyped ones are read as JSON when they look
    like a number/boolean/object/array).
    """
    arguments = read_arguments(params, schema)
    required = schema.get("required")
    required = required if isinstance(required, list) else []
    for name, value in list(arguments.items()):
        prop = param_schema(schema, name)
        if isinstance(value, str) and _null_text(value, prop) and not _is_string(prop):
            if _allows_null(prop) or name in required:
                arguments[name] = None
            else:  # an optional parameter that cannot be null: the model means "not given"
                del arguments[name]
        elif isinstance(value, str) and (kind := _alias(prop)) is not None:
            arguments[name] = _convert_alias(value, kind)
    return arguments


def _null_text(value: str, schema: Any) -> bool:
    """Whether a raw value means null: ``null`` in any case, or ``None`` where the schema allows no string
    and lists no ``"None"``."""
    text = value.strip()
    if text.lower() == "null":
        return True
    if text != "None" or not isinstance(schema, Mapping):
        return False
    kind = schema.get("type")
    kinds = kind if isinstance(kind, list) else [kind]
    enum = schema.get("enum")
    return "type" in schema and "string" not in kinds and not (isinstance(enum, list) and text in enum)


def _allows_null(schema: Any) -> bool:
    """Whether a parameter's schema lets it be null (or says nothing about its type)."""
    if not isinstance(schema, Mapping) or "type" not in schema:
        return True
    kind = schema["type"]
    return kind == "null" or (isinstance(kind, list) and "null" in kind)
