"""Incremental scan of one JSON(-ish) call object, and reading a call out of it.

``ObjectScanner`` walks an object from its ``{`` in one linear pass over the chunks it is fed:
it tracks depth and strings, and at depth 1 the ``name`` value and the span of the ``arguments``
(or ``parameters``) value, so a call can start streaming before the object is complete. It never
parses or repairs: ``extract_call`` reads name and arguments once the object is balanced (from the
scanned spans, else by a lenient parse), and ``parse_call_list`` reads a block body that is not a
plain object. It stops at a ``<`` or backtick outside strings, which the hermes parser decides on.
``//`` and ``/* */`` comments outside strings are skipped whole (json5 allows them; the repair reads
them later), so quotes, brackets or markup inside a comment change nothing.
"""

from __future__ import annotations

import re
from enum import Enum
from typing import Any

from ._args import parse_json_lenient

ARGS_KEYS = ("arguments", "parameters")
_CAPTURE_CAP = 256  # longest key / name string kept while scanning
_NAMED_OBJECT = re.compile(r"\s*([A-Za-z_][\w.-]*)\s*(\{.*\})\s*", re.S)
OUTSIDE_BLOCK = re.compile(r"[{}\[\]\"',:</]")  # what the scanner stops at outside strings, in a block
OUTSIDE_BARE = re.compile(r"[{}\[\]\"',:</`]")  # ... and in a bare object, where a backtick may open a fence
_COMMENT_END = {"//": "\n", "/*": "*/"}
_INSIDE = {'"': re.compile(r'["\\]'), "'": re.compile(r"['\\]")}
_KEY, _COLON, _VALUE, _NEXT = range(4)  # what the scanner expects next at depth 1


class Scan(Enum):
    MORE = "more"  # consumed up to the returned position; wants more input
    DONE = "done"  # the object closed just before the returned position
    SPECIAL = "special"  # a ``<`` or backtick outside strings at the returned position


class ObjectScanner:
    """Linear, incremental scan of one JSON(-ish) object from its ``{``.

    Tracks depth and strings, and at depth 1 the ``name`` value and the span of the
    ``arguments`` value, so a call can start streaming before the object is complete.
    Offsets are absolute within the object text (``parts`` joined).
    """

    def __init__(self, outside: re.Pattern[str]) -> None:
        self.outside = outside
        self.parts: list[str] = []
        self.size = 0
        self.stack: list[str] = []
        self.quote = ""
        self.comment = ""  # "//" or "/*" while inside a comment
        self.expect = _KEY
        self.key_is_name = self.key_is_args = self.args_seen = self.args_before_name = False
        self.capture: list[str] | None = None
        self.captured = 0
        self.name: str | None = None
        self.args_start: int | None = None
        self.args_end: int | None = None
        self.args_kind = ""  # "{", "[", a quote, or "p" (primitive)

    def commit(self, seg: str) -> None:
        if seg:
            self.parts.append(seg)
            self.size += len(seg)

    def text(self) -> str:
        return "".join(self.parts)

    def closers(self) -> str:
        return "".join("}" if c == "{" else "]" for c in reversed(self.stack))

    @property
    def call_read(self) -> bool:
        """Whether the call's name and its whole ``arguments`` value were read: what follows them (another
        key, a string the output ran away in) changes nothing about the call."""
        return self.name is not None and self.args_start is not None and self.args_end is not None

    def scan(self, s: str, i: int, end: int) -> tuple[int, Scan]:
        """Scan ``s[i:end]`` (``s[0]`` sits at offset ``self.size``); stop early at DONE/SPECIAL."""
        base = self.size
        while i < end:
            if self.quote or self.comment:
                i = self._in_string(s, i, end, base) if self.quote else self._in_comment(s, i, end)
                if self.quote or self.comment:
                    return i, Scan.MORE
                continue
            m = self.outside.search(s, i, end)
            if m is None:
                return end, Scan.MORE
            j = m.start()
            c = s[j]
            if c in "<`":
                return j, Scan.SPECIAL
            if c == "/":
                if j + 1 >= end:
                    return j, Scan.MORE  # a comment may start: wait for the next character
                if s[j + 1] in "/*":
                    self.comment = s[j : j + 2]
                    i = j + 2
                else:
                    i = j + 1
                continue
            i = j + 1
            if self._structural(c, base + j):
                return i, Scan.DONE
        return i, Scan.MORE

    def _in_string(self, s: str, i: int, end: int, base: int) -> int:
        pattern, start = _INSIDE[self.quote], i
        while True:
            m = pattern.search(s, i, end)
            if m is None:
                self._keep(s, start, end)
                return end
            j = m.start()
            if s[j] == "\\":
                if j + 1 >= end:  # the escaped character has not arrived: carry the backslash
                    self._keep(s, start, j)
                    return j
                i = j + 2
                continue
            self._keep(s, start, j)
            self._string_closed(base + j)
            return j + 1

    def _in_comment(self, s: str, i: int, end: int) -> int:
        """Skip comment text; where scanning goes on (a ``*`` that may start ``*/`` is left unread)."""
        closer = _COMMENT_END[self.comment]
        at = s.find(closer, i, end)
        if at == -1:
            return end - 1 if closer == "*/" and end > i and s[end - 1] == "*" else end
        self.comment = ""
        return at if closer == "\n" else at + 2

    def _keep(self, s: str, a: int, b: int) -> None:
        if self.capture is not None and b > a:
            self.captured += b - a
            if self.captured <= _CAPTURE_CAP:
                self.capture.append(s[a:b])
            else:
                self.capture = None

    def _string_closed(self, pos: int) -> None:
        quote, self.quote = self.quote, ""
        if len(self.stack) != 1:
            return
        value = _decode_string(quote, self.capture)
        self.capture = None
        if self.expect == _KEY:
            self.expect = _COLON
            self.key_is_name = value == "name"
            self.key_is_args = value in ARGS_KEYS and not self.args_seen
            self.args_seen = self.args_seen or self.key_is_args
        elif self.expect == _VALUE:
            self.expect = _NEXT
            if self.key_is_args:
                self.args_end = pos + 1
            elif self.key_is_name and self.name is None and value is not None:
                self.name, self.args_before_name = value, self.args_seen

    def _structural(self, c: str, pos: int) -> bool:
        depth = len(self.stack)
        at_value = depth == 1 and self.expect == _VALUE
        if c in "\"'":
            self.quote = c
            if at_value and self.key_is_args:
                self.args_start, self.args_kind = pos, c
            wanted = depth == 1 and (self.expect == _KEY or (at_value and self.key_is_name))
            self.capture, self.captured = ([] if wanted else None), 0
        elif c in "{[":
            if at_value and self.key_is_args:
                self.args_start, self.args_kind = pos, c
            self.stack.append(c)
        elif c in "}]":
            if depth == 1:
                self._end_primitive(pos)
            self.stack.pop()
            if not self.stack:
                return True
            if depth == 2 and self.expect == _VALUE:
                if self.key_is_args:
                    self.args_end = pos + 1
                self.expect = _NEXT
        elif depth == 1 and c == ":" and self.expect in (_KEY, _COLON):
            if self.expect == _KEY:  # an unquoted (json5) key: not tracked
                self.key_is_name = self.key_is_args = False
            self.expect = _VALUE
            if self.key_is_args:
                self.args_start, self.args_kind = pos + 1, "p"
        elif depth == 1 and c == ",":
            self._end_primitive(pos)
            self.expect = _KEY
        return False

    def _end_primitive(self, pos: int) -> None:
        if self.expect == _VALUE and self.key_is_args and self.args_kind == "p" and self.args_end is None:
            self.args_end = pos


def _decode_string(quote: str, capture: list[str] | None) -> str | None:
    """The value of a captured key/name string, or None when it was too long to keep."""
    if capture is None:
        return None
    raw = "".join(capture)
    parsed = parse_json_lenient(quote + raw + quote) if "\\" in raw else None
    return parsed[0] if parsed is not None and isinstance(parsed[0], str) else raw


class RawArgs(str):
    """``arguments`` text exactly as written (an object, a number...): text to parse. Any other ``str``
    an extracted call holds is a JSON string value, which may be a plain input rather than JSON."""

    __slots__ = ()


def call_parts(obj: Any) -> tuple[str, Any, bool] | None:
    """``(name, arguments, has_arguments)`` of a parsed call object (also OpenAI's nested shape)."""
    if isinstance(obj, dict) and isinstance(obj.get("function"), dict) and "name" not in obj:
        obj = obj["function"]
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    for key in ARGS_KEYS:
        if key in obj:
            return obj["name"], obj[key], True
    return obj["name"], None, False


def extract_call(raw: str, sc: ObjectScanner) -> tuple[str, Any, bool] | None:
    """Name and arguments of a complete object: from the scanned spans, else by parsing it."""
    if sc.name is not None and sc.args_start is not None and sc.args_end is not None:
        span = raw[sc.args_start : sc.args_end].strip()
        args: Any = RawArgs(span)
        if sc.args_kind in ('"', "'"):
            decoded = parse_json_lenient(span)
            args = decoded[0] if decoded is not None and isinstance(decoded[0], str) else RawArgs(span)
        elif sc.args_kind == "p" and span in ("", "null", "None"):
            args = None
        return sc.name, args, True
    parsed = parse_json_lenient(raw)
    found = call_parts(parsed[0]) if parsed is not None else None
    if found is None and sc.name is not None:
        return sc.name, None, False
    return found


def parse_call_list(body: str) -> tuple[list[Any], tuple[str, ...]]:
    """The call-like items of a block body that is not a plain object, and the repairs made.

    A JSON list gives its items; ``name {...}`` reads as ``{"name": name, "arguments": {...}}``.
    """
    parsed = parse_json_lenient(body)
    named = _NAMED_OBJECT.fullmatch(body) if parsed is None else None
    if named is not None and (args := parse_json_lenient(named.group(2))) is not None:
        parsed = ({"name": named.group(1), "arguments": args[0]}, args[1])
    items = [] if parsed is None else parsed[0] if isinstance(parsed[0], list) else [parsed[0]]
    return items, tuple(parsed[1]) if parsed else ()
