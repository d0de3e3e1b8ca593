"""Prose between call blocks for the tag formats whose markers all start with ``<`` (qwen3_xml, morph_xml).

``TagProse`` is composed into a parser (one per response). It finds the next marker outside markdown code
(a ``` fence or an inline `code` span keeps markers as text), emits the text before it, holds back only a
possible marker prefix at the end of the input (bounded by the longest marker), reads ``<think>`` blocks as
reasoning, swallows one newline after markup, and stops text from spelling a marker across removed markup
(``<`` + a dropped tag + ``tool_call>``): such a marker is reported as *joined* and the parser drops it.

It knows no block syntax: what a marker means is the parser's business. No I/O, never raises.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from functools import lru_cache

from ._text import EventBuffer, TextKind
from .base import Reasoning, Text

THINK = "<think>"
THINK_END = "</think>"


class _Code(Enum):
    NONE = "none"
    INLINE = "inline"
    FENCE = "fence"


_INLINE = re.compile(r"[`\n](?:(?<=`)`*)?")
_FENCE = re.compile(r"`+")


@dataclass(frozen=True, slots=True)
class Found:
    """What ``TagProse.scan`` stopped at: ``marker`` (None: it needs more input) ending at ``end``."""

    end: int
    marker: str | None = None
    joined: bool = False  # spelled across removed markup: the parser drops it


@lru_cache(maxsize=128)
def _prose_pattern(markers: tuple[str, ...]) -> re.Pattern[str]:
    """What ends plain prose: a backtick run or a marker. Written as "one char class, then the rest" because
    sre scans a leading class ~5x faster than an alternation; cached, as morph_xml's markers vary by request."""
    rest = "|".join(re.escape(m[1:]) for m in sorted(markers, key=len, reverse=True))
    return re.compile(rf"[`<](?:(?<=`)`*|{rest})")


def held_back(buf: str, start: int, markers: Sequence[str], longest: int) -> int:
    """Length of the tail of ``buf[start:]`` that may begin a marker (every marker starts with its only
    ``<``, so only the tail from the last ``<`` can qualify)."""
    lt = buf.rfind("<", max(start, len(buf) - longest))
    if lt == -1:
        return 0
    tail = buf[lt:]
    return len(tail) if any(m.startswith(tail) and m != tail for m in markers) else 0


class TagProse:
    """Prose scanning for one response; see the module docstring."""

    def __init__(self, markers: Sequence[str], out: EventBuffer) -> None:
        self.markers = tuple(dict.fromkeys((*markers, THINK, THINK_END)))
        self._longest = max(map(len, self.markers))
        self._plain = _prose_pattern(self.markers)
        self._out = out
        self._code = _Code.NONE
        self._scan = self._plain
        self._inline = 0  # backtick run length that opened the inline code span
        self._ticks = 0  # backticks of a run still in progress
        self._tail = ""  # the end of the content so far when it is a marker prefix, e.g. "<"
        self.resumed = False  # prose resumed after markup: check the junction with the content before it
        self.skip_nl = False  # swallow one newline after a closing tag

    def emit(self, text: str, kind: TextKind = Text) -> None:
        """Queue visible text, remembering the end of the content when it may begin a marker."""
        if text and kind is Text:
            tail = (self._tail + text[-self._longest :])[-self._longest :]
            self._tail = tail[len(tail) - held_back(tail, 0, self.markers, self._longest) :]
        self._out.text(kind, text)

    def after_markup(self, skip_newline: bool) -> None:
        """Markup was removed at the cursor: check the junction, and maybe swallow one newline."""
        self.resumed, self.skip_nl = True, skip_newline

    def scan(self, buf: str, pos: int) -> Found:
        """Emit prose from ``pos`` up to the next marker (returned, ``end`` after it) or the held-back tail."""
        if self.skip_nl:
            skipped = self._skip_newline(buf, pos)
            if skipped is None:
                return Found(pos)
            pos = skipped
        if self.resumed and pos < len(buf):
            joined = self._junction(buf, pos)
            if joined is not None:
                return joined
        start = pos
        while True:  # backtick runs and inline-ending newlines only change the code state: stay in the loop
            if self._ticks and pos < len(buf) and buf[pos] != "`":
                self._apply_ticks()
            match = self._scan.search(buf, pos)
            if match is None or match.group()[0] == "<":
                break
            pos = match.end()
            if match.group() == "\n":
                self._set_code(_Code.NONE)
            else:
                self._ticks += match.end() - match.start()
        if match is None:
            keep = held_back(buf, pos, self.markers, self._longest) if self._code is _Code.NONE else 0
            self.emit(buf[start : len(buf) - keep])
            return Found(len(buf) - keep)
        self.emit(buf[start : match.start()])
        self.resumed = True
        return Found(match.end(), "<" + match.group()[1:])

    def think(self, buf: str, pos: int) -> Found:
        """Reasoning from ``pos`` up to ``</think>`` (returned as the marker) or the held-back tail."""
        end = buf.find(THINK_END, pos)
        if end == -1:
            keep = held_back(buf, pos, (THINK_END,), len(THINK_END))
            self.emit(buf[pos : len(buf) - keep], Reasoning)
            return Found(len(buf) - keep)
        self.emit(buf[pos:end], Reasoning)
        self.after_markup(True)
        return Found(end + len(THINK_END), THINK_END)

    def flush(self, rest: str) -> None:
        """End of output in prose: the held-back tail is text (a lone ``\\r`` after markup is dropped)."""
        if not (self.skip_nl and rest == "\r"):
            self.emit(rest)

    # ---- helpers ----

    def _skip_newline(self, buf: str, pos: int) -> int | None:
        head = buf[pos : pos + 2]
        if head == "\r" or not head:
            return None
        self.skip_nl = False
        if head.startswith("\n"):
            return pos + 1
        return pos + 2 if head == "\r\n" else pos

    def _junction(self, buf: str, pos: int) -> Found | None:
        """Content ending in a marker prefix (``<``) must not join the next text into a marker."""
        head = self._tail + buf[pos : pos + self._longest]
        for marker in self.markers if self._tail else ():
            if head.startswith(marker):
                return Found(pos + len(marker) - len(self._tail), marker, joined=True)
            if marker.startswith(head):
                return Found(pos)
        self.resumed = False
        return None

    def _apply_ticks(self) -> None:
        """A backtick run ended: 3+ toggles a fence, 1-2 open an inline span closed by the same run."""
        run, self._ticks = self._ticks, 0
        if self._code is _Code.NONE:
            self._set_code(_Code.FENCE if run >= 3 else _Code.INLINE)
            self._inline = run
        elif run >= 3 if self._code is _Code.FENCE else run == self._inline:
            self._set_code(_Code.NONE)

    def _set_code(self, code: _Code) -> None:
        self._code = code
        self._scan = self._plain if code is _Code.NONE else _INLINE if code is _Code.INLINE else _FENCE
