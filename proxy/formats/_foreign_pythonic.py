"""Pythonic call lists in lenient recognition: ``[get_weather(city='Paris'), search(query="x")]``.

Under a prompted format other than ``pythonic`` a list opens only where ``[`` (blanks after it allowed) is
followed by an offered tool's name and ``(``; ``lenient.ForeignCalls`` then holds it to its matching ``]``,
found by ``ListScanner`` (brackets and Python strings tracked, the cursor never moves back: linear), and
``decode_list`` reads the held list with the ``pythonic`` format's own parser, so its values and repairs are
the format's. A list that reads as anything but calls (prose after a call inside the brackets,
``[get_weather(city) is the tool]``) is text as written; a blank line outside a string ends the hold: prose
that began like a list.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from .base import Malformed, Text, ToolCallEnd, ToolSpec
from .pythonic import PythonicParser

_STOP = re.compile(r"[()\[\]{}\"'\n]")
_QUOTE_STOP = {q: re.compile(r"\\|" + re.escape(q)) for q in ('"', "'", '"""', "'''")}
_CLOSER = {"(": ")", "[": "]", "{": "}"}
_LINE_BLANKS = re.compile(r"[ \t\r]*")


class ListScanner:
    """The end of a pythonic list whose ``[`` was read: brackets and strings tracked across chunks."""

    __slots__ = ("_escape", "quote", "stack")

    def __init__(self) -> None:
        self.stack = ["]"]  # closers still expected
        self.quote: str | None = None  # the open string's quote
        self._escape = False  # a backslash in a string ended the last chunk

    def scan(self, s: str, i: int) -> tuple[int, bool | None]:
        """Scan ``s`` from ``i``: ``(position, verdict)``; verdict True: the list closed just before
        ``position``; False: a blank line outside a string at ``position`` (no list); None: more input is
        needed, ``s[position:]`` (a few characters at most) is to be scanned again with it."""
        while True:
            if self.quote is not None:
                if self._escape:
                    if i == len(s):
                        return i, None
                    i, self._escape = i + 1, False
                m = _QUOTE_STOP[self.quote].search(s, i)
                if m is None:
                    keep = 0
                    if len(self.quote) == 3:  # one or two quotes may begin the closing triple quote
                        tail = s[max(i, len(s) - 2) :]
                        keep = len(tail) - len(tail.rstrip(self.quote[0]))
                    return len(s) - keep, None
                i = m.end()
                if m.group() == "\\":
                    self._escape = True
                else:
                    self.quote = None
                continue
            m = _STOP.search(s, i)
            if m is None:
                return len(s), None
            mark, at = m.group(), m.start()
            if mark == "\n":
                k = _LINE_BLANKS.match(s, at + 1).end()  # type: ignore[union-attr]
                if k == len(s):
                    return at, None  # the line after may still be blank
                if s[k] == "\n":
                    return at, False
                i = at + 1
            elif mark in "\"'":
                run = len(s) - at
                if run < 3 and s[at:] == mark * run:
                    return at, None  # may still become a triple quote
                self.quote = mark * 3 if s.startswith(mark * 3, at) else mark
                i = at + len(self.quote)
            elif mark in _CLOSER:
                self.stack.append(_CLOSER[mark])
                i = at + 1
            else:
                i = at + 1
                if mark in self.stack:
                    del self.stack[len(self.stack) - 1 - self.stack[::-1].index(mark) :]
                if not self.stack:
                    return i, True

    def closers(self) -> str:
        """What closes the open brackets (the output ended inside the list)."""
        return "".join(reversed(self.stack))


def decode_list(block: str, tools: Sequence[ToolSpec]) -> list[tuple[str, str]] | str | None:
    """The calls of a held list ``[...]``: (name, arguments as JSON text) each; a str: the reason it is
    Malformed (a call that cannot be made); None: it is no list of calls (text)."""
    parser = PythonicParser(tools, len(block) + 1)
    events = parser.feed(block) + parser.close("stop")
    if any(isinstance(e, Text) and e.text.strip() for e in events):
        return None
    broken = next((e for e in events if isinstance(e, Malformed)), None)
    if broken is not None:
        return broken.reason
    calls = [(e.name, e.arguments) for e in events if isinstance(e, ToolCallEnd)]
    return calls or None
