"""Markup of the hermes format: its tags, and deciding what a ``<``, ``{`` or backtick in prose starts.

Pure functions over a text and a position, shared by the states of ``hermes.HermesParser``: which tag
starts here (or may, once more text arrives), whether a bare ``{`` opens a call object or a fence a
json block holding one, and how to remove tags from prose without the removal spelling a new tag.
They keep no state and emit no events; holding back and flushing stay with the parser.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ._jsonscan import ARGS_KEYS

OPEN, CLOSE = "<tool_call>", "</tool_call>"
THINK, THINK_END = "<think>", "</think>"
RESPONSE, RESPONSE_END = "<tool_response>", "</tool_response>"
FENCE = "```"
BROKEN = "<tool_call"  # a tag that never closes: dropped as broken markup
GEMMA_CLOSE = "<tool_call|>"  # Gemma 4's call closer: text here, lenient recognition's markup
_LOOSE_ATTRS = 64
TEXT_TAGS = (OPEN, CLOSE, THINK, THINK_END, RESPONSE, RESPONSE_END)
BLOCK_TAGS = (CLOSE, OPEN)
BARE_STOPS = (*TEXT_TAGS, FENCE)
_JOIN_TARGETS = (*TEXT_TAGS, "<tool_call", "</tool_call")  # what prose must not spell across removed markup
_FENCE_LANGS = ("", "json", "json5", "tool_call")
FENCE_WINDOW = 128  # the fence line plus blank lines examined for a fenced call
_PREFIX_WS = 64
_PREFIX_WINDOW = 2 * _PREFIX_WS + 16  # enough to decide whether a bare `{` opens a call object

TEXT_HIT = re.compile(r"<(?:/?t|/?\Z)|```|`{1,2}\Z|\{")  # what may start a marker; every TEXT tag is <t or </t
LOOSE_TAG = re.compile(rf"(</?tool_call)([^<>\n]{{0,{_LOOSE_ATTRS}}})(>)?")
MARKUP = re.compile(rf"</?tool_call(?:[^<>\n]{{0,{_LOOSE_ATTRS}}}>)?|</?think>|</?tool_response>")
_PREFIX = re.compile(  # a bare object that opens like a call: {"name": / {"arguments": / {'parameters':
    rf"\{{[ \t\r\n]{{0,{_PREFIX_WS}}}([\"'])(?:name|arguments|parameters)\1[ \t\r\n]{{0,{_PREFIX_WS}}}:"
)
_BLANK = re.compile(r"[ \t\r]*")
_FENCE_HEAD = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[ \t]*\r?\n[ \t\r\n]*")
_FENCE_PARTIAL = re.compile(r"```[ \t]*[A-Za-z0-9_+.-]*[ \t]*\r?")


def call_prefix(s: str, p: int = 0) -> bool | None:
    """Whether ``s[p:]`` (a bare ``{``) opens a call object; None while undecided."""
    if _PREFIX.match(s, p) is not None:
        return True
    if len(s) - p >= _PREFIX_WINDOW:
        return False
    text = s[p:]
    rest = text[1:].lstrip(" \t\r\n")
    if len(text) - len(rest) > _PREFIX_WS + 1:
        return False
    if not rest or rest[0] not in "\"'":
        return None if not rest else False
    for key in ("name", *ARGS_KEYS):
        for quote in "\"'":
            token = quote + key + quote
            if token.startswith(rest):
                return None
            if rest.startswith(token):
                after = rest[len(token) :].lstrip(" \t\r\n")
                if not after:
                    return None if len(rest) - len(token) <= _PREFIX_WS else False
                return after[0] == ":"
    return False


def fence_call_start(window: str) -> int | None:
    """Offset of the ``{`` when a fence opens a json/bare block with an object; -1 if not; None: wait."""
    m = _FENCE_HEAD.match(window)
    if m is None:
        undecided = len(window) < FENCE_WINDOW and _FENCE_PARTIAL.fullmatch(window) is not None
        return None if undecided else -1
    if m.end() == len(window):
        return None if len(window) < FENCE_WINDOW else -1
    wanted = m.group(1).lower() in _FENCE_LANGS and window[m.end()] == "{"
    return m.end() if wanted else -1


def tag_at(s: str, p: int, tags: Sequence[str]) -> str | None:
    """The tag at ``s[p]``; ``""`` when ``s[p:]`` may still become one; None when it cannot."""
    for tag in tags:
        if s.startswith(tag, p):
            return tag
    rest = s[p : p + 16]
    if p + len(rest) == len(s) and any(len(rest) < len(tag) and tag.startswith(rest) for tag in tags):
        return ""
    return None


def text_tag(s: str, p: int) -> tuple[str | None, int]:
    """The prose tag at ``s[p]`` (``<``) and its length. ``<tool_call ...>`` counts as the tag;
    ``<tool_call`` that cannot become one is ``BROKEN``; ``""`` while undecided; None: no tag (Gemma 4's
    ``<tool_call|>`` neither)."""
    tag = tag_at(s, p, TEXT_TAGS)
    if tag is not None:
        return tag, len(tag)
    m = LOOSE_TAG.match(s, p)
    if m is None or s.startswith(GEMMA_CLOSE, p):
        return None, 1
    if m.group(3):
        return (CLOSE if m.group(1) == "</tool_call" else OPEN), m.end() - p
    if m.end() == len(s) and len(m.group(2)) < _LOOSE_ATTRS:
        return "", 0
    return BROKEN, len(m.group(1))


def join_rest(tail: str, s: str, i: int, final: bool = False) -> str | None:
    """The start of ``s[i:]`` that would complete a tag begun by ``tail`` ("" if none; None: undecided)."""
    if "<" not in tail:  # every tag starts with "<"
        return ""
    for tag in _JOIN_TARGETS:
        for k in range(1, len(tag)):
            if tail.endswith(tag[:k]):
                rest = tag[k:]
                if s.startswith(rest, i):
                    return rest
                if not final and len(s) - i < len(rest) and rest.startswith(s[i:]):
                    return None
    return ""


def strip_markup(text: str) -> str:
    """``text`` without tags, nor the tags their removal would join (``<tool_<tool_call>call>``)."""
    pieces, tail, i = [], "", 0
    while (m := MARKUP.search(text, i)) is not None:
        pieces.append(text[i : m.start()])
        tail = (tail + text[max(i, m.start() - 16) : m.start()])[-16:]
        i = m.end()
        while rest := join_rest(tail, text, i):
            i += len(rest)
    pieces.append(text[i:])
    return "".join(pieces)


def advance_line(flag: bool, s: str, a: int, b: int) -> bool:
    """Whether position ``b`` is still at a line start (only blanks since a newline)."""
    if a >= b:
        return flag
    nl = s.rfind("\n", a, b)
    if nl >= 0:
        return _BLANK.fullmatch(s, nl + 1, b) is not None
    return flag and _BLANK.fullmatch(s, a, b) is not None
