"""The ``morph_xml`` syntax as text, both ways: decoding one tool element into a call, writing calls and the prompt.

A block is one element named after an offered tool, its parameters as child elements (the AI SDK tool
middleware's morphXml protocol)::

    <search_docs>
    <query>a &lt; b</query>
    <limit>5</limit>
    <tags><item>api</item><item>auth</item></tags>
    <filters><lang>py</lang></filters>
    </search_docs>

Reading, guided by the tool's schema: a string-typed element is raw text up to its own closing tag (code
with ``<`` in it needs no escaping), with XML's entities decoded; single-line values are trimmed, multi-line
ones lose one leading and one trailing newline. Other elements nest: child elements make an object, a
repeated element or ``<item>`` children make an array, a self-closing or empty element is empty; scalar
text stays text for ``finalize_call`` to convert by the schema. Comments are skipped, CDATA is raw text,
an unclosed element ends with its parent, a stray closing tag is ignored. One forward pass; nesting deeper
than ``MAX_DEPTH`` is read as text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._hermes_render import _example_arguments
from ._prompt import NO_TOOL, example_tool
from ._qwen3_block import _Finder
from ._rawvalue import entity_decode, param_schema
from ._xml_render import _value as _scalar_value
from ._xml_render import call_arguments, trim_value
from .base import ToolCallRecord, ToolChoice, ToolSpec

MAX_DEPTH = 32
MAX_NAME = 100
RESPONSE = "<tool_response"
# A tag without attributes: <name>, </name>, <name/> (blanks before > allowed). Linear: no nested quantifiers.
TAG = re.compile(rf"<(/?)([A-Za-z_][\w.:-]{{0,{MAX_NAME - 1}}})[ \t]*(/?)>")
CLOSE_TAG = re.compile(rf"</([A-Za-z_][\w.:-]{{0,{MAX_NAME - 1}}})[ \t]*>")

Call = tuple[str, dict[str, Any]]
_ABSENT = object()  # an empty element of a number/boolean/null parameter: left out, as if not written


class _Closers:
    """Every closing tag of a body, found in one pass, by name: the next ``</name>`` after a cursor that only
    moves forward is then amortized O(1), however many distinct names a body opens and leaves open."""

    __slots__ = ("_at", "_length", "_next")

    def __init__(self, body: str) -> None:
        self._length = len(body)
        self._at: dict[str, list[tuple[int, int]]] = {}
        for match in CLOSE_TAG.finditer(body):
            self._at.setdefault(match.group(1), []).append((match.start(), match.end()))
        self._next: dict[str, int] = {}

    def next(self, name: str, pos: int) -> tuple[int, int]:
        """``(start, end)`` of the first ``</name>`` at or after ``pos``; ``(len, len)`` when there is none."""
        found = self._at.get(name, ())
        i = self._next.get(name, 0)
        while i < len(found) and found[i][0] < pos:
            i += 1
        self._next[name] = i
        return found[i] if i < len(found) else (self._length, self._length)


@dataclass(slots=True)
class _Node:
    """An element read as structure: its text pieces and its children (name, node or raw string) in order."""

    name: str
    schema: Any
    text: list[str] = field(default_factory=list)
    children: list[tuple[str, _Node | str]] = field(default_factory=list)


def _types(schema: Any) -> frozenset[str]:
    kind = schema.get("type") if isinstance(schema, Mapping) else None
    if isinstance(kind, str):
        return frozenset((kind,))
    return frozenset(k for k in kind if isinstance(k, str)) if isinstance(kind, list) else frozenset()


def _child_schema(parent: Any, name: str) -> Any:
    """The schema of child element ``name``: an array's items, else the object's property."""
    if not isinstance(parent, Mapping):
        return None
    if _types(parent) == {"array"}:
        return parent.get("items")
    return param_schema(parent, name)


def _raw_string(raw: str) -> str:
    """A string element's text: a CDATA section as written, else entities decoded; trimmed when it is one
    line, else one newline off each end."""
    stripped = raw.strip()
    if stripped.startswith("<![CDATA[") and stripped.endswith("]]>"):
        return stripped[9:-3]
    value = entity_decode(raw)
    return value.strip() if "\n" not in value.strip() else trim_value(value)


def _parse(body: str, schema: Any) -> _Node:
    """The element tree of a tool element's body (the text between its tags)."""
    root = _Node("", schema)
    stack = [root]
    find = _Finder(body)
    closers = _Closers(body)
    pos = 0
    while pos < len(body):
        top = stack[-1]
        lt = body.find("<", pos)
        if lt == -1:
            top.text.append(body[pos:])
            break
        top.text.append(body[pos:lt])
        match = TAG.match(body, lt)
        if match is None:
            pos = _special(body, lt, top, find)
            continue
        closing, name, self_closing = match.groups()
        pos = match.end()
        if closing:
            depth = next((i for i in range(len(stack) - 1, 0, -1) if stack[i].name == name), 0)
            del stack[depth or len(stack) :]  # a stray closing tag (depth 0) changes nothing
            continue
        child_schema = _child_schema(top.schema, name)
        if self_closing:
            top.children.append((name, _Node(name, child_schema)))
        elif len(stack) > MAX_DEPTH:
            top.text.append(match.group())  # too deep to be arguments: text
        elif "string" in _types(child_schema):
            end, after = closers.next(name, pos)
            parent_end = closers.next(top.name, pos)[0] if top.name else end
            top.children.append((name, body[pos : min(end, parent_end)]))
            pos = after if end <= parent_end else parent_end  # left open: it ends with its parent
        else:
            node = _Node(name, child_schema)
            top.children.append((name, node))
            stack.append(node)
    return root


def _special(body: str, lt: int, top: _Node, find: _Finder) -> int:
    """A ``<`` that opens no tag: a comment (skipped), CDATA (raw text) or plain text."""
    if body.startswith("<!--", lt):
        return find.next("-->", lt + 4) + 3
    if body.startswith("<![CDATA[", lt):
        end = find.next("]]>", lt + 9)
        top.text.append(body[lt + 9 : end].replace("&", "&amp;"))  # raw: entity_decode gives it back as written
        return end + 3
    top.text.append("<")
    return lt + 1


def _value(item: _Node | str, schema: Any) -> Any:
    """One element as an argument value, by its schema."""
    if isinstance(item, str):
        return _raw_string(item)
    kinds = _types(schema)
    if not item.children:
        text = entity_decode("".join(item.text)).strip()
        if not text:
            return (
                []
                if "array" in kinds
                else {}
                if "object" in kinds
                else ""
                if "string" in kinds or not kinds
                else _ABSENT
            )
        if "string" in kinds:
            return _raw_string("".join(item.text))
        if text.lower() == "null" and kinds:
            return None
        return _scalar_value(text, schema)
    items = schema.get("items") if isinstance(schema, Mapping) else None
    all_items = all(name == "item" for name, _ in item.children)
    if "array" in kinds and "object" not in kinds:
        return [_value(child, items) for _, child in item.children] if all_items else [_object(item.children, items)]
    if all_items and "object" not in kinds:  # <item> children of an untyped element: the AI SDK's array shape
        return [_value(child, items) for _, child in item.children]
    return _object(item.children, schema)


def _object(children: list[tuple[str, _Node | str]], schema: Any) -> dict[str, Any]:
    """Child elements by name; a name given more than once makes an array."""
    grouped: dict[str, list[_Node | str]] = {}
    for name, child in children:
        grouped.setdefault(name, []).append(child)
    out: dict[str, Any] = {}
    for name, items in grouped.items():
        prop = param_schema(schema, name) if isinstance(schema, Mapping) else None
        if len(items) == 1:
            value = _value(items[0], prop)
            if value is not _ABSENT:
                out[name] = value
        else:
            each = prop.get("items") if isinstance(prop, Mapping) and "array" in _types(prop) else prop
            out[name] = [v for v in (_value(child, each) for child in items) if v is not _ABSENT]
    return out


def open_tag(block: str, names: Mapping[str, ToolSpec]) -> tuple[str, int, bool] | None:
    """The offered tool a block's first tag names, where its body starts, and whether it is self-closing."""
    start = len(block) - len(block.lstrip())
    match = TAG.match(block, start)
    if match is None or match.group(1) or match.group(2) not in names:
        return None
    return match.group(2), match.end(), bool(match.group(3))


def decode_morph_block(block: str, tools: Sequence[ToolSpec]) -> list[Call] | None:
    """The call in one tool element (``<NAME>...</NAME>`` or ``<NAME/>``, an offered tool's exact name), as
    ``[(name, raw arguments)]`` before ``finalize_call``; None when the block is no such element.

    Total: never raises. A missing closing tag reads the body to the end of ``block``.
    """
    decoded = decode_element(block, {t.name: t for t in tools})
    return None if decoded is None else [(decoded.name, decoded.arguments)]


@dataclass(frozen=True, slots=True)
class Element:
    """A decoded tool element: the call, and whether text stood between its parameter elements."""

    name: str
    arguments: dict[str, Any]
    stray_text: bool


def decode_element(block: str, names: Mapping[str, ToolSpec]) -> Element | None:
    """``decode_morph_block`` with the offered tools by name, also telling whether the body held stray text."""
    opened = open_tag(block, names)
    if opened is None:
        return None
    name, body_start, self_closing = opened
    if self_closing:
        return Element(name, {}, False)
    body = block[body_start:].rstrip()
    close = f"</{name}>"
    if body.endswith(close):
        body = body[: -len(close)]
    schema = names[name].parameters
    root = _parse(body, schema)
    return Element(name, _object(root.children, schema), bool("".join(root.text).strip()))


# ---- rendering ----------------------------------------------------------------------------


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;")


def _render_value(key: str, value: Any) -> list[str]:
    """The lines of one argument: strings as text, objects as child elements, arrays as ``<item>`` children."""
    if isinstance(value, str):
        text = _escape(value)
        return [f"<{key}>\n{text}\n</{key}>" if "\n" in text else f"<{key}>{text}</{key}>"]
    if isinstance(value, dict):
        inner = [line for k, v in value.items() for line in _render_value(str(k), v)]
    elif isinstance(value, list):
        inner = [line for v in value for line in _render_value("item", v)]
    else:
        return [f"<{key}>{json.dumps(value)}</{key}>"]
    return [f"<{key}>", *inner, f"</{key}>"] if inner else [f"<{key}></{key}>"]


def render_call(name: str, arguments: Mapping[str, Any]) -> str:
    """One call as its tool element, one parameter element per line."""
    lines = [line for key, value in arguments.items() for line in _render_value(key, value)]
    return "\n".join((f"<{name}>", *lines, f"</{name}>"))


def render_calls(calls: Sequence[ToolCallRecord]) -> str:
    """Earlier calls from the history, one element each."""
    return "\n".join(render_call(c.name, call_arguments(c.arguments)) for c in calls)


def example_call(tools: Sequence[ToolSpec], tool_choice: ToolChoice) -> str:
    """A worked example with a real tool: the named one, else the first; its required parameters."""
    sample = example_tool(tools, tool_choice) or NO_TOOL
    return render_call(sample.name, _example_arguments(sample))


SYNTAX = """\
To call a tool, write one XML element named after the tool, with one child element per parameter:
<TOOL_NAME>
<PARAMETER_NAME>value</PARAMETER_NAME>
</TOOL_NAME>
Rules:
- Use the tool's exact name as the outer tag; leave out optional parameters you do not need.
- Write tool calls as plain text, never inside a ``` code fence.
- Text values are written as they are (a multi-line value on its own lines between the tags); write &lt; for \
< and &amp; for & when you can. Numbers and true/false are plain text.
- An object parameter holds one child element per field; an array parameter holds one <item> element per item.
- After your last tool call, stop. Each result comes back to you inside <tool_response></tool_response>; \
never write a tool_response yourself."""
