"""Param values of the ``xml`` format as text, both ways: reading ``<param:...>`` text into arguments,
and writing calls and the prompt's syntax section so that the parser reads them back unchanged.

Reading: typed params stay text and ``finalize_call`` converts them by the schema; untyped ones are read
as JSON when they look like a number/boolean/object/array. Writing: strings raw, arrays of scalars as
repeated params, everything else as JSON.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from ._args import parse_json_lenient

_JSONISH = frozenset("-0123456789tf[{")
_TYPE_KEYS = frozenset(("type", "enum", "const", "anyOf", "oneOf", "allOf", "$ref", "properties", "items"))


def trim_value(value: str) -> str:
    """Drop one leading and one trailing newline (CRLF only when the value did not open with a bare LF)."""
    if value.startswith("\n"):
        value = value[1:]
        return value[:-1] if value.endswith("\n") else value
    if value.startswith("\r\n"):
        value = value[2:]
    for nl in ("\r\n", "\n"):
        if value.endswith(nl):
            return value[: -len(nl)]
    return value


def _reject_constant(name: str) -> Any:
    raise ValueError(f"non-finite number {name}")


def _untyped(raw: str, options: list[Any] | None = None) -> Any:
    """A value the schema gives no type: JSON when it reads as a number/boolean/object/array (and is one of
    ``options`` for an enum-only schema), else the text itself."""
    text = raw.strip()
    if text[:1] not in _JSONISH:
        return raw
    try:
        value = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError):
        return raw
    if value is None or isinstance(value, str) or (options is not None and value not in options):
        return raw
    return value


def _value(raw: str, schema: Any) -> Any:
    """One param text as handed to ``finalize_call``: typed params stay text, which finalize_call converts
    by the schema (``"5"`` -> 5, JSON text -> object/array, with json repairs); untyped ones are read here."""
    if not isinstance(schema, Mapping) or _TYPE_KEYS.isdisjoint(schema):
        return _untyped(raw)
    enum = schema.get("enum")
    if "type" not in schema and isinstance(enum, list):
        return _untyped(raw, enum)
    return raw


def read_arguments(params: list[tuple[str, str]], schema: Mapping[str, Any]) -> dict[str, Any]:
    """Params by name; a name given more than once makes an array."""
    props = schema.get("properties")
    props = props if isinstance(props, Mapping) else {}
    grouped: dict[str, list[str]] = {}
    for name, value in params:
        grouped.setdefault(name, []).append(value)
    return {
        name: [_value(v, props.get(name)) for v in values] if len(values) > 1 else _value(values[0], props.get(name))
        for name, values in grouped.items()
    }


# ---- rendering ----------------------------------------------------------------------------

SYNTAX = """\
To call a tool, write a tool block:
<tool:TOOL_NAME>
<param:PARAM_NAME>value</param:PARAM_NAME>
</tool:TOOL_NAME>
Rules:
- One <param:...> element per parameter; leave out optional parameters you do not need.
- Write tool blocks as plain text, never inside a ``` code fence.
- Values are raw text: write code, quotes, backslashes and < > exactly as they are, never escaped. Only the \
exact closing tag </param:PARAM_NAME> ends a value. Put a multi-line value on its own lines between the tags.
- Write numbers, true/false, objects and arrays as JSON (5, true, {"key": "value"}, ["a", "b"]); for an array \
you may instead repeat the parameter once per item.
- After your last tool block, stop. Each result comes back to you as \
<tool_result:TOOL_NAME>...</tool_result:TOOL_NAME>; never write a tool_result yourself."""

EXAMPLE = """\
<tool:save_note>
<param:title>Groceries</param:title>
<param:body>
Buy "oat milk" & eggs
if price < 3: buy 2 \\ maybe
</param:body>
<param:priority>2</param:priority>
<param:tags>home</param:tags>
<param:tags>weekly</param:tags>
</tool:save_note>"""


def _param_texts(value: Any) -> list[str]:
    """The text of each ``<param:...>`` occurrence for one argument (several for a repeated-param array)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and len(value) > 1 and all(isinstance(v, str | int | float) for v in value):
        return [v if isinstance(v, str) else json.dumps(v) for v in value]
    return [json.dumps(value, ensure_ascii=False)]


def _render_param(name: str, text: str) -> str:
    if "\n" in text:
        return f"<param:{name}>\n{text}\n</param:{name}>"
    return f"<param:{name}>{text}</param:{name}>"


def call_arguments(raw: str) -> Mapping[str, Any]:
    """The client's JSON arguments as a dict; unparseable or non-object arguments render as no params."""
    parsed = parse_json_lenient(raw)
    return parsed[0] if parsed is not None and isinstance(parsed[0], dict) else {}


def render_call(name: str, arguments: Mapping[str, Any]) -> str:
    """One call in the parser's syntax: one param per line, arrays as repeated params, non-strings as JSON."""
    lines = [f"<tool:{name}>"]
    for key, value in arguments.items():
        lines.extend(_render_param(key, text) for text in _param_texts(value))
    lines.append(f"</tool:{name}>")
    return "\n".join(lines)
