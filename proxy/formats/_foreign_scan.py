"""Incremental scan of one JSON(-ish) value that may hold tool calls, and reading the calls out of it.

``ValueScanner`` walks a value from its ``{`` or ``[`` in one linear pass over the chunks it is fed
(a cursor, never a re-scan). Besides depth and strings it follows just enough structure to say early
whether the value is call-shaped: the ``name`` of the first call object, where a call object may sit
(the value itself, an item of a top-level list, the value of ``function`` or an item of
``tool_calls``), and the first key of that object. ``verdict`` is True once such a ``name`` is read,
False as soon as the value cannot be a call (``{x``, ``{"city": ...``, ``[1, ...``), None while
undecided. ``read_calls`` reads the calls of a complete value, once. No events, no holding back:
that is ``lenient``'s job.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from ._args import parse_json_lenient
from ._jsonrepair import guessed_parse
from ._jsonscan import ARGS_KEYS, call_parts

# The keys a call object may open with; any other first key means "just JSON in prose".
CALL_KEYS = frozenset(("name", "arguments", "parameters", "function", "type", "id", "tool_calls", "index"))
LIST_KEYS = frozenset(("tool_calls", "calls"))
_CAPTURE_CAP = 256  # longest key / name kept while scanning
_OUTSIDE = re.compile(r"[{}\[\]\"',:]")
_INSIDE = {'"': re.compile(r'["\\]'), "'": re.compile(r"['\\]")}
_CALL, _LIST, _OTHER = range(3)  # the role of a container
_KEY, _COLON, _VALUE, _NEXT = range(4)  # what an object expects next


class _Level:
    """One open container: its role, and for objects what comes next and the current key."""

    __slots__ = ("expect", "fresh", "key", "keyed", "kind", "role")

    def __init__(self, kind: str, role: int) -> None:
        self.kind, self.role = kind, role
        self.expect = _KEY
        self.key: str | None = None
        self.fresh = True  # nothing read inside it yet
        self.keyed = False  # its first key was read


class ValueScanner:
    """Linear, incremental scan of one JSON(-ish) value from its ``{`` or ``[`` (module docstring)."""

    __slots__ = (
        "_capture",
        "_captured",
        "_escape",
        "_levels",
        "_quote",
        "args_end",
        "closed",
        "name",
        "rejected",
        "size",
    )

    def __init__(self, name: str | None = None) -> None:
        """``name``: the value is the arguments of a call to ``name`` (call-shaped from the start)."""
        self._levels: list[_Level] = []
        self._quote = ""
        self._escape = False
        self._capture: list[str] | None = None
        self._captured = 0
        self.size = 0  # characters consumed
        self.name = name  # the first call object's name
        self.rejected = False  # the value cannot be a call
        self.closed = False  # the value ended
        self.args_end: int | None = None  # just after the arguments of a value that is one call object

    @property
    def call_end(self) -> int | None:
        """Where the arguments end when the value is one call object whose name and whole ``arguments``
        (``parameters``) were read: what follows them (another key, a string the output ran away in) changes
        nothing about the call. ``None`` otherwise."""
        return self.args_end if self.name is not None else None

    @property
    def verdict(self) -> bool | None:
        """True: call-shaped (a name was read); False: not a call; None: undecided."""
        if self.rejected:
            return False
        return True if self.name is not None else None

    @property
    def in_string(self) -> bool:
        return bool(self._quote)

    def closers(self) -> str:
        """The brackets that would close the value now."""
        return "".join("}" if lv.kind == "{" else "]" for lv in reversed(self._levels))

    def scan(self, s: str, i: int, end: int, stop_on_reject: bool = True) -> tuple[int, bool]:
        """Consume ``s[i:end]``; stop just after the value closes (``(position, True)``), or where it
        turned out not to be a call (``rejected``, with ``stop_on_reject``)."""
        if self.closed:
            return i, True
        while i < end and not (stop_on_reject and self.rejected):
            if self._quote:
                i = self._in_string(s, i, end)
                continue
            m = _OUTSIDE.search(s, i, end)
            j = end if m is None else m.start()
            if self._levels and self._levels[-1].fresh and j > i and s[i:j].strip():
                self._first_token(self._levels[-1])
            if m is None:
                self.size += end - i
                return end, False
            self.size += j + 1 - i
            i = j + 1
            if self._structural(s[j]):
                return i, True
        return i, False

    def _in_string(self, s: str, i: int, end: int) -> int:
        start = i
        if self._escape:  # a backslash ended the last chunk: this character is escaped
            self._escape, i = False, i + 1
        pattern = _INSIDE[self._quote]
        while True:
            m = pattern.search(s, i, end)
            if m is None or (s[m.start()] == "\\" and m.start() + 1 >= end):
                self._escape = m is not None
                self._keep(s, start, end)
                self.size += end - start
                return end
            j = m.start()
            if s[j] == "\\":
                i = j + 2
                continue
            self._keep(s, start, j)
            self.size += j + 1 - start
            self._string_closed()
            return j + 1

    def _keep(self, s: str, a: int, b: int) -> None:
        if self._capture is not None and b > a:
            self._captured += b - a
            if self._captured <= _CAPTURE_CAP:
                self._capture.append(s[a:b])
            else:
                self._capture = None

    def _string_closed(self) -> None:
        quote, self._quote = self._quote, ""
        level = self._levels[-1]
        captured, self._capture = self._capture, None
        value = _decode_string(quote, captured)
        if level.kind != "{":
            level.expect = _NEXT
            return
        if level.expect == _KEY:
            level.key, level.expect = value, _COLON
            if not level.keyed:
                level.keyed = True
                if level.role == _CALL and self.name is None and value not in CALL_KEYS:
                    self.rejected = True
        elif level.expect == _VALUE:
            self._note_args_end(level)
            level.expect = _NEXT
            if level.role == _CALL and level.key == "name" and self.name is None:
                if value is None:
                    self.rejected = True
                else:
                    self.name = value

    def _note_args_end(self, level: _Level) -> None:
        """A value of ``level`` just ended: where, when it is the arguments of a value that is one call object."""
        if (
            self.args_end is None
            and level.expect == _VALUE
            and level.role == _CALL
            and level.key in ARGS_KEYS
            and self._levels[0] is level
        ):
            self.args_end = self.size

    def _first_token(self, level: _Level) -> None:
        """The first thing inside a call-role container is not what a call starts with."""
        level.fresh = False
        if level.role != _OTHER and self.name is None:
            self.rejected = True

    def _structural(self, c: str) -> bool:
        levels = self._levels
        parent = levels[-1] if levels else None
        if parent is not None and parent.fresh:
            parent.fresh = False
            if parent.role != _OTHER and self.name is None and not _opens_well(parent, c):
                self.rejected = True
        if c in "\"'":
            self._open_string(parent, c)
        elif c in "{[":
            levels.append(_Level(c, self._child_role(parent, c)))
        elif c in "}]":
            if parent is not None:
                levels.pop()
            if not levels:
                self.closed = True
                return True
            if levels[-1].kind == "{":
                self._note_args_end(levels[-1])
                levels[-1].expect = _NEXT
        elif c == ":" and parent is not None and parent.kind == "{":
            if parent.expect == _KEY:  # an unquoted key
                parent.key = None
                if parent.role == _CALL and self.name is None:
                    self.rejected = True
            parent.expect = _VALUE
        elif c == "," and parent is not None and parent.kind == "{":
            parent.expect = _KEY
        return False

    def _open_string(self, parent: _Level | None, quote: str) -> None:
        self._quote = quote
        wanted = False
        if parent is not None and parent.kind == "{":
            wanted = parent.expect == _KEY or (
                parent.expect == _VALUE and parent.role == _CALL and parent.key == "name"
            )
        self._capture, self._captured = ([] if wanted else None), 0

    def _child_role(self, parent: _Level | None, c: str) -> int:
        if parent is None:
            return _OTHER if self.name is not None else _CALL if c == "{" else _LIST
        if parent.kind == "[":
            return _CALL if parent.role == _LIST and c == "{" else _OTHER
        if parent.expect != _VALUE or parent.role != _CALL:
            return _OTHER
        if parent.key == "function" and c == "{":
            return _CALL
        if parent.key in LIST_KEYS and c == "[":
            return _LIST
        return _OTHER


def _opens_well(level: _Level, c: str) -> bool:
    """Whether a call-role container may start with ``c``: a quoted key in an object, an object in a list."""
    if level.kind == "{":
        return c in "\"'}"
    return c in "{]"


def _decode_string(quote: str, capture: list[str] | None) -> str | None:
    if capture is None:
        return None
    raw = "".join(capture)
    parsed = parse_json_lenient(quote + raw + quote) if "\\" in raw else None
    return parsed[0] if parsed is not None and isinstance(parsed[0], str) else raw


Call = tuple[str, Any]


def read_calls(text: str, known: Callable[[str], bool], need_args: bool) -> tuple[list[Call], tuple[str, ...]] | None:
    """The calls a complete value holds (an object, a list of them, ``{"tool_calls": [...]}``).

    None unless every item is a call object naming a tool ``known`` accepts, with ``arguments`` or
    ``parameters`` (without, only when not ``need_args`` and the object holds nothing else: a renamed
    ``"arguments_"`` key, as defusing writes, is no call): a value that is not wholly calls stays what it was.
    """
    parsed = _parsed(text)
    if parsed is None:
        return None
    value, repairs = parsed
    if isinstance(value, dict) and "name" not in value and "function" not in value:
        inner = next((value[k] for k in LIST_KEYS if isinstance(value.get(k), list)), None)
        value = inner if inner is not None else value
    items = value if isinstance(value, list) else [value]
    calls: list[Call] = []
    for item in items:
        found = call_parts(item)
        if found is None or not known(found[0]) or (not found[2] and (need_args or not _name_only(item))):
            return None
        calls.append((found[0], found[1]))
    return (calls, tuple(repairs)) if calls else None


def unknown_call(text: str, known: Callable[[str], bool]) -> str | None:
    """The name of the first call object in a complete value that names no offered tool while it
    carries ``arguments`` / ``parameters``: a call the model meant, to a tool it made up. None else
    (a value with any other shape stays what it was)."""
    parsed = _parsed(text)
    if parsed is None:
        return None
    value = parsed[0]
    if isinstance(value, dict) and "name" not in value and "function" not in value:
        value = next((value[k] for k in LIST_KEYS if isinstance(value.get(k), list)), value)
    for item in value if isinstance(value, list) else [value]:
        found = call_parts(item)
        if found is None or not found[2]:
            return None
        if not known(found[0]):
            return found[0]
    return None


def _parsed(text: str) -> tuple[Any, tuple[str, ...]] | None:
    """The value, repaired; a value that does not parse as written gets the backslash guess
    (``{"command": "dir C:\"}``): only call objects are kept of it, and their arguments are validated."""
    parsed = parse_json_lenient(text)
    return parsed if parsed is not None else guessed_parse(text, only="trailing_backslash")


def _name_only(item: Any) -> bool:
    """Whether a call object without arguments holds nothing but its name (and type / id)."""
    obj = item.get("function", item) if isinstance(item, dict) and "name" not in item else item
    return isinstance(obj, dict) and set(obj) <= {"name", "type", "id"}
