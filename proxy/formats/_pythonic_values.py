"""Python call syntax to JSON arguments and back, for the ``pythonic`` format: ``f(city="Paris", days=3)``.

Reading never runs code: the call's text is parsed with ``ast`` and only literals are taken (strings,
numbers, ``True``/``False``/``None``, lists, tuples, sets, dicts, a sign on a number). What models write
besides, each a named repair: JSON's ``true``/``false``/``null`` (read as Python's, no repair: both
languages are in use), a bare identifier as a string value (``unit=celsius``: ``bare_word``), positional
arguments in the order of the tool's parameters (``positional_args``), one dict as the whole arguments
(``f({"city": "Paris"})``: ``arguments_object``), ``**{...}`` merged in. Arguments that are no Python at all
are read loosely (``loose_arguments``): ``key=value`` or ``key: value`` pieces split at commas and line
breaks, unquoted text as strings (``f(country=Brazil\nyear=2022)``, ``f(war=Battle of Stalingrad)``).
An expression or a call as a value is an error for a re-ask, never a guess.

Rendering writes what the reader reads back: JSON strings and numbers are Python literals already.
"""

from __future__ import annotations

import ast
import json
import keyword
import re
from collections.abc import Mapping, Sequence
from typing import Any

from .base import ToolSpec

Decoded = tuple[dict[str, Any] | None, tuple[str, ...], str | None]  # arguments, repairs, error

_CONSTANTS: dict[str, Any] = {"True": True, "False": False, "None": None, "true": True, "false": False, "null": None}
_MAX_ARGS_CHARS = 16_000_000  # ast builds a node per value: a call longer than this is refused, not parsed


class _NotLiteral(ValueError):
    """A value that is no literal (an expression, a call, ...)."""


class _Reader:
    """Literal values out of ``ast`` nodes, noting the repairs it made."""

    def __init__(self) -> None:
        self.repairs: list[str] = []

    def value(self, node: ast.expr) -> Any:
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, int, float, bool, type(None))):
            return node.value
        if isinstance(node, ast.Name):
            if node.id in _CONSTANTS:
                return _CONSTANTS[node.id]
            self._note("bare_word")
            return node.id
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = self.value(node.operand)
            if isinstance(inner, (int, float)) and not isinstance(inner, bool):
                return -inner if isinstance(node.op, ast.USub) else inner
        if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
            return [self.value(item) for item in node.elts]
        if isinstance(node, ast.Dict):
            return self._dict(node)
        raise _NotLiteral(ast.unparse(node)[:60])

    def _dict(self, node: ast.Dict) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, item in zip(node.keys, node.values, strict=True):
            if key is None:  # {**other}
                merged = self.value(item)
                if not isinstance(merged, dict):
                    raise _NotLiteral("** of a non-dict")
                out.update(merged)
                continue
            name = self.value(key)
            out[name if isinstance(name, str) else json.dumps(name)] = self.value(item)
        return out

    def _note(self, repair: str) -> None:
        if repair not in self.repairs:
            self.repairs.append(repair)


def _parameter_names(spec: ToolSpec | None) -> list[str]:
    props = spec.parameters.get("properties") if spec is not None else None
    return list(props) if isinstance(props, Mapping) else []


def _first_is_object(spec: ToolSpec | None) -> bool:
    props = spec.parameters.get("properties") if spec is not None else None
    if not isinstance(props, Mapping) or not props:
        return False
    first = next(iter(props.values()))
    return isinstance(first, Mapping) and first.get("type") == "object"


def _call_node(args_text: str) -> ast.Call | str:
    """The parsed ``f(<args_text>)``, or why it is no call."""
    if len(args_text) > _MAX_ARGS_CHARS:
        return "the call's arguments are too long"
    try:
        tree = ast.parse(f"f(\n{args_text}\n)", mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError) as exc:
        detail = exc.msg if isinstance(exc, SyntaxError) else type(exc).__name__
        return f"the call's arguments are not Python literals ({detail})"
    body = tree.body
    if not isinstance(body, ast.Call):
        return "not a function call"
    return body


def decode_arguments(args_text: str, spec: ToolSpec | None) -> Decoded:
    """The text between a call's parentheses as a JSON-ready dict, the repairs made, or an error."""
    node = _call_node(args_text)
    if isinstance(node, str):
        loose = _loose_arguments(args_text)
        if loose is None:
            return None, (), node
        placed = _place_positional(loose[0], loose[1], spec)
        if isinstance(placed, str):
            return None, (), placed
        return placed[0], ("loose_arguments", *placed[1]), None
    reader = _Reader()
    try:
        positional = [reader.value(arg) for arg in node.args if not isinstance(arg, ast.Starred)]
        if len(positional) != len(node.args):
            return None, (), "*args cannot be read as arguments"
        arguments: dict[str, Any] = {}
        for keyword in node.keywords:
            value = reader.value(keyword.value)
            if keyword.arg is not None:
                arguments[keyword.arg] = value
            elif isinstance(value, dict):
                arguments.update(value)
            else:
                return None, (), "** of a value that is no dict"
    except (_NotLiteral, RecursionError) as exc:
        return None, (), f"an argument is not a literal value: {exc}"
    placed = _place_positional(positional, arguments, spec)
    if isinstance(placed, str):
        return None, (), placed
    arguments, repairs = placed
    return arguments, (*reader.repairs, *repairs), None


_LOOSE_KEY = re.compile(r"([A-Za-z_]\w*)[ \t]*[=:][ \t]*(.*)", re.S)
_MAX_LOOSE_CHARS = 20_000  # the loose reading is for a model's slip in a short call, not for bulk text


def _loose_arguments(args_text: str) -> tuple[list[Any], dict[str, Any]] | None:
    """What a model meant by arguments that are no Python: ``country=Brazil`` / ``year=2022`` on lines of
    their own, ``city: Paris``, words with spaces unquoted. Pieces are split at commas and line breaks
    outside brackets and quotes; ``key=value`` or ``key: value`` is a keyword, a piece before any is
    positional, a piece after one adds to its value (a list). None when nothing reads as arguments."""
    if len(args_text) > _MAX_LOOSE_CHARS:
        return None
    positional: list[Any] = []
    keywords: dict[str, Any] = {}
    last: str | None = None
    for piece in _top_level_pieces(args_text):
        keyed = _LOOSE_KEY.fullmatch(piece)
        if keyed is not None:
            last = keyed.group(1)
            keywords[last] = _loose_value(keyed.group(2))
        elif last is None:
            positional.append(_loose_value(piece))
        else:
            previous = keywords[last]
            keywords[last] = [*(previous if isinstance(previous, list) else [previous]), _loose_value(piece)]
    return (positional, keywords) if positional or keywords else None


def _top_level_pieces(text: str) -> list[str]:
    """``text`` split at commas and line breaks outside brackets and quotes, pieces stripped, empty ones left out."""
    pieces, start, depth, quote = [], 0, 0, ""
    for at, char in enumerate(text):
        if quote:
            quote = "" if char == quote and text[at - 1] != "\\" else quote
        elif char in "\"'":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            depth = max(depth - 1, 0)
        elif char in ",\n" and depth == 0:
            pieces.append(text[start:at])
            start = at + 1
    pieces.append(text[start:])
    return [piece.strip() for piece in pieces if piece.strip()]


def _loose_value(text: str) -> Any:
    """A literal when the text is one, else the text itself (quotes around it dropped)."""
    try:
        return _Reader().value(ast.parse(text, mode="eval").body)
    except (SyntaxError, ValueError, RecursionError, MemoryError, _NotLiteral):
        return text.strip().strip("\"'")


def _place_positional(
    positional: list[Any], keywords: dict[str, Any], spec: ToolSpec | None
) -> tuple[dict[str, Any], tuple[str, ...]] | str:
    """Positional values given the tool's parameter names, in the schema's order."""
    if not positional:
        return keywords, ()
    if len(positional) == 1 and isinstance(positional[0], dict) and not keywords and not _first_is_object(spec):
        return positional[0], ("arguments_object",)
    names = [n for n in _parameter_names(spec) if n not in keywords]
    if len(positional) > len(names):
        return f"{len(positional)} positional arguments, but the tool has {len(names)} more parameters"
    return {**dict(zip(names, positional, strict=False)), **keywords}, ("positional_args",)


# ---- rendering ------------------------------------------------------------------------------------


def literal(value: Any) -> str:
    """A JSON value as the Python literal that reads back as it."""
    if value is True or value is False or value is None:
        return {True: "True", False: "False", None: "None"}[value]
    if isinstance(value, Mapping):
        items = (f"{json.dumps(str(k), ensure_ascii=False)}: {literal(v)}" for k, v in value.items())
        return "{" + ", ".join(items) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(literal(v) for v in value) + "]"
    return json.dumps(value, ensure_ascii=False)


def plain_key(key: str) -> bool:
    """Whether ``key`` can be written as a Python keyword argument (``key=value``)."""
    return key.isidentifier() and not keyword.iskeyword(key)


def render_call(name: str, arguments: Mapping[str, Any]) -> str:
    """``name(key=value, ...)``; keys that are no Python identifier go in as ``**{...}``."""
    plain = [f"{k}={literal(v)}" for k, v in arguments.items() if plain_key(k)]
    odd = {k: v for k, v in arguments.items() if not plain_key(k)}
    return f"{name}({', '.join([*plain, *([f'**{literal(odd)}'] if odd else [])])})"


def render_list(calls: Sequence[tuple[str, Mapping[str, Any]]]) -> str:
    """``[f(a=1), g(b="x")]``."""
    return "[" + ", ".join(render_call(name, arguments) for name, arguments in calls) + "]"
