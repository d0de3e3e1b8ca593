"""Header lines of a ``caret`` block (``key: value``, YAML-ish lists and block scalars) and their typing.

``Header`` collects the lines between ``^^^name`` and ``---``/``^^^`` one at a time; ``arguments`` then
types every value by the tool's JSON Schema: strings stay strings, ``"..."`` is unquoted, other types
parse as JSON/json5, and a value the schema does not type is a JSON literal or else a string.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ._args import parse_json_lenient

_KEY_LINE = re.compile(r"([ \t]*)([A-Za-z_][\w.\-]*)[ \t]*:[ \t]*(.*)")
_ITEM_LINE = re.compile(r"[ \t]*-(?:[ \t]+(.*))?")
BLOCK_SCALARS = frozenset({"|", "|-", "|+", ">", ">-", ">+"})


def _schema_types(schema: Mapping[str, Any], depth: int = 0) -> frozenset[str]:
    """The JSON types a property accepts (empty when the schema does not say)."""
    kind = schema.get("type")
    if isinstance(kind, str):
        return frozenset({kind})
    if isinstance(kind, list):
        return frozenset(k for k in kind if isinstance(k, str))
    if isinstance(schema.get("enum"), list):
        return frozenset(_json_type(v) for v in schema["enum"])
    subs = schema.get("anyOf") or schema.get("oneOf")
    if isinstance(subs, list) and depth < 8:  # bounded: the schema comes from the client
        return frozenset().union(*(_schema_types(s, depth + 1) for s in subs if isinstance(s, Mapping)))
    return frozenset()


_JSON_TYPES = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "object"}


def _json_type(value: Any) -> str:
    return _JSON_TYPES.get(type(value), "null")


def _scalar(text: str, schema: Mapping[str, Any], block: bool) -> tuple[Any, tuple[str, ...]]:
    """Type one header value by its schema: strings stay strings, other types parse as JSON."""
    types = _schema_types(schema)
    if block:  # a YAML block scalar is raw text unless the schema wants something else
        if not types or "string" in types:
            return text, ()
    else:
        text = text.strip()
        if len(text) >= 2 and text[0] == text[-1] == '"':
            try:
                quoted = json.loads(text)
            except ValueError:
                quoted = None
            if isinstance(quoted, str):
                return quoted, ()
        if types and types <= {"string"}:
            return text, ()
    if not types:  # untyped: plain JSON literals are values, everything else is a string
        try:
            return json.loads(text), ()
        except ValueError:
            return text, ()
    if "boolean" in types and text.lower() in ("true", "false"):
        return text.lower() == "true", ()
    parsed = parse_json_lenient(text)
    if parsed is None:
        return text, ()
    kind = _json_type(parsed[0])
    fits = kind in types or (kind == "integer" and "number" in types)
    return parsed if fits or "string" not in types else (text, ())


@dataclass(slots=True)
class _Field:
    values: list[str] = field(default_factory=list)
    listy: bool = False  # written as a YAML list or a repeated key
    block: bool = False  # written as a YAML block scalar


@dataclass(slots=True)
class _Scalar:
    """An open YAML block scalar (``key: |``): its key, indentation and collected lines."""

    key: str
    indent: int
    style: str
    lines: list[str] = field(default_factory=list)

    def text(self) -> str:
        """De-indent and join like YAML: ``|`` keeps lines, ``>`` folds them; ``-``/``+`` chomp."""
        indents = [len(ln) - len(ln.lstrip(" \t")) for ln in self.lines if ln.strip()]
        cut = min(indents, default=0)
        body = [ln[cut:] for ln in self.lines]
        joined = " ".join(ln for ln in body if ln) if self.style[0] == ">" else "\n".join(body)
        if self.style.endswith("+"):
            return joined + "\n"
        stripped = joined.rstrip("\n")
        return stripped if self.style.endswith("-") or not stripped else stripped + "\n"


@dataclass(slots=True)
class Header:
    """The header lines of one block, parsed line by line."""

    fields: dict[str, _Field] = field(default_factory=dict)
    last: str | None = None
    error: str | None = None
    json_lines: list[str] | None = None
    scalar: _Scalar | None = None

    def add(self, line: str) -> None:
        """One header line (``^^^`` and ``---`` lines are handled by the parser)."""
        if self.json_lines is not None:
            self.json_lines.append(line)
            return
        if self.scalar is not None:
            if not line.strip() or len(line) - len(line.lstrip(" \t")) > self.scalar.indent:
                self.scalar.lines.append(line)
                return
            self.end_scalar()
        self._add_plain(line)

    def _add_plain(self, line: str) -> None:
        item = _ITEM_LINE.fullmatch(line)
        key = _KEY_LINE.fullmatch(line)
        if item is not None and not key:
            if self.last is None:
                self.error = self.error or "list item before any key"
                return
            last = self.fields[self.last]
            last.listy = True
            last.values.append(item.group(1) or "")
        elif key is not None:
            indent, name, value = key.group(1), key.group(2), key.group(3).rstrip()
            fld = self.fields.get(name)
            if fld is None:
                fld = self.fields[name] = _Field()
            else:  # a repeated key makes an array
                fld.listy = True
            self.last = name
            if value in BLOCK_SCALARS:
                fld.block = True
                self.scalar = _Scalar(name, len(indent), value)
            elif value:
                fld.values.append(value)
        elif line.strip() and not self.fields and line.lstrip().startswith("{"):
            self.json_lines = [line]
        elif line.strip():
            self.error = self.error or f"unexpected header line {line[:40]!r}"

    def end_scalar(self) -> None:
        if self.scalar is not None:
            self.fields[self.scalar.key].values.append(self.scalar.text())
            self.scalar = None

    def arguments(self, schema: Mapping[str, Any]) -> tuple[dict[str, Any] | str, tuple[str, ...]]:
        """The typed arguments (or the raw JSON header text) and the repairs applied."""
        self.end_scalar()
        if self.json_lines is not None:
            return "\n".join(self.json_lines), ()
        props = schema.get("properties")
        props = props if isinstance(props, Mapping) else {}
        args: dict[str, Any] = {}
        repairs: list[str] = []
        for key, fld in self.fields.items():
            prop = props.get(key)
            prop = prop if isinstance(prop, Mapping) else {}
            if fld.listy:
                items = prop.get("items")
                typed = [_scalar(v, items if isinstance(items, Mapping) else {}, fld.block) for v in fld.values]
                args[key] = [value for value, _ in typed]
                repairs.extend(r for _, fixes in typed for r in fixes)
            elif not fld.values:
                args[key] = [] if "array" in _schema_types(prop) else ""
            else:
                args[key], fixes = _scalar(fld.values[0], prop, fld.block)
                repairs.extend(fixes)
        return args, tuple(repairs)

    def is_separator(self, line: str) -> bool:
        """A ``---`` line (not indented inside an open block scalar) starts the body."""
        if self.json_lines is not None or line.strip() != "---":
            return False
        return self.scalar is None or line[0] not in " \t"
