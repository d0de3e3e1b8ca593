"""The ``hermes`` format: one JSON call object per ``<tool_call>`` block (Qwen2.5 / Hermes style).

Wire syntax, as asked of the model and as ``render_calls`` writes it::

    Let me check.
    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>

Small models drop the tags, so a *bare* call object at the start of a line (alone, or as the
first thing in a ```json / bare ``` fence) is a call too, when its ``name`` is one of the request's
tools and it has ``arguments`` (or ``parameters``). Any other bare JSON stays text exactly as written.
Inside tags the JSON may be sloppy (json5, single quotes, Python literals): ``finalize_call`` repairs it.

States (``_State``; one ``_step_*`` method each, ``_close_*`` for the end of output):

* TEXT: prose. ``<tool_call>`` -> BLOCK_OPEN (or the cut); ``<think>`` -> THINK; ``{`` at a line
  start -> CANDIDATE; ````` -> CANDIDATE when a call-like object opens a json/bare fence, else
  FENCE; ``<tool_response>`` -> DONE (a hallucinated result); stray closing tags, a ``<tool_call``
  that never closes (Malformed) and text that would spell a tag across removed markup are dropped;
  a tag right after a backtick is a mention and stays text.
* THINK: Reasoning until ``</think>`` -> TEXT.  FENCE: a code fence in prose, text until ````` -> TEXT.
* CANDIDATE: a bare ``{``: a bounded prefix check (``{"name"`` ...), then the object is held
  (up to ``_BARE_CAP``) until balanced -> a call (TEXT, or FENCE_TAIL in a fence) or text (tags
  inside it removed and reported, unless it sits in a code fence).
* FENCE_TAIL: after a fenced call: its closing ````` is dropped -> TEXT.
* BLOCK_OPEN: after ``<tool_call>``: ``{`` -> BLOCK_OBJECT, anything else -> BLOCK_RAW.
* BLOCK_OBJECT: the object, scanned incrementally: ToolCallStart once ``"name"`` is read,
  ToolCallArgs for the raw ``arguments`` text, ToolCallEnd when balanced -> BLOCK_AFTER. A tag
  outside a string ends it early (brackets closed). BLOCK_RAW: a non-object body until ``</tool_call>``.
* BLOCK_AFTER: ``</tool_call>`` -> TEXT; another ``{`` -> BLOCK_OBJECT (next call); junk -> Malformed.
* DONE: after the cut (SecondToolStarted) or ``<tool_response>``; input is ignored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from enum import Enum, StrEnum
from typing import Any

from ._args import ToolIndex, finalize_call, parse_json_lenient
from ._prompt import choice_instruction, describe_tools
from ._text import MAX_HOLDBACK, find_first, partial_marker_len
from .base import (
    Event,
    FinishReason,
    Malformed,
    Reasoning,
    SecondToolStarted,
    StreamParser,
    Text,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallRecord,
    ToolCallStart,
    ToolChoice,
    ToolSpec,
)

_OPEN, _CLOSE = "<tool_call>", "</tool_call>"
_THINK, _THINK_END = "<think>", "</think>"
_RESPONSE, _RESPONSE_END = "<tool_response>", "</tool_response>"
_FENCE = "```"
_BROKEN = "<tool_call"  # a tag that never closes: dropped as broken markup
_LOOSE_ATTRS = 64
_TEXT_TAGS = (_OPEN, _CLOSE, _THINK, _THINK_END, _RESPONSE, _RESPONSE_END)
_BLOCK_TAGS = (_CLOSE, _OPEN)
_BARE_STOPS = (*_TEXT_TAGS, _FENCE)
_JOIN_TARGETS = (*_TEXT_TAGS, "<tool_call", "</tool_call")  # what prose must not spell across removed markup
_ARGS_KEYS = ("arguments", "parameters")
_FENCE_LANGS = ("", "json", "json5", "tool_call")
_BARE_CAP = 1 << 20  # a bare candidate object longer than this is flushed as text
_CAPTURE_CAP = 256  # longest key / name string kept while scanning
_FENCE_WINDOW = 128  # the fence line plus blank lines examined for a fenced call
_PREFIX_WS = 64
_PREFIX_WINDOW = 2 * _PREFIX_WS + 16  # enough to decide whether a bare `{` opens a call object

_TEXT_HIT = re.compile(r"<(?:/?t|/?\Z)|```|`{1,2}\Z|\{")  # what may start a marker; every TEXT tag is <t or </t
_LOOSE_TAG = re.compile(rf"(</?tool_call)([^<>\n]{{0,{_LOOSE_ATTRS}}})(>)?")
_MARKUP = re.compile(rf"</?tool_call(?:[^<>\n]{{0,{_LOOSE_ATTRS}}}>)?|</?think>|</?tool_response>")
_PREFIX = re.compile(  # a bare object that opens like a call: {"name": / {"arguments": / {'parameters':
    rf"\{{[ \t\r\n]{{0,{_PREFIX_WS}}}([\"'])(?:name|arguments|parameters)\1[ \t\r\n]{{0,{_PREFIX_WS}}}:"
)
_BLANK = re.compile(r"[ \t\r]*")
_WS = re.compile(r"[ \t\r\n]*")
_SEP = re.compile(r"[ \t\r\n,]*")
_FENCE_HEAD = re.compile(r"```[ \t]*([A-Za-z0-9_+.-]*)[ \t]*\r?\n[ \t\r\n]*")
_FENCE_PARTIAL = re.compile(r"```[ \t]*[A-Za-z0-9_+.-]*[ \t]*\r?")
_NAMED_OBJECT = re.compile(r"\s*([A-Za-z_][\w.-]*)\s*(\{.*\})\s*", re.S)
_OUTSIDE_BLOCK = re.compile(r"[{}\[\]\"',:<]")
_OUTSIDE_BARE = re.compile(r"[{}\[\]\"',:<`]")
_INSIDE = {'"': re.compile(r'["\\]'), "'": re.compile(r"['\\]")}
_KEY, _COLON, _VALUE, _NEXT = range(4)  # what the scanner expects next at depth 1


class _Scan(Enum):
    MORE = "more"  # consumed up to the returned position; wants more input
    DONE = "done"  # the object closed just before the returned position
    SPECIAL = "special"  # a ``<`` or backtick outside strings at the returned position


class _ObjectScanner:
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

    def scan(self, s: str, i: int, end: int) -> tuple[int, _Scan]:
        """Scan ``s[i:end]`` (``s[0]`` sits at offset ``self.size``); stop early at DONE/SPECIAL."""
        base = self.size
        while i < end:
            if self.quote:
                i = self._in_string(s, i, end, base)
                if self.quote:
                    return i, _Scan.MORE
                continue
            m = self.outside.search(s, i, end)
            if m is None:
                return end, _Scan.MORE
            j = m.start()
            c = s[j]
            if c in "<`":
                return j, _Scan.SPECIAL
            i = j + 1
            if self._structural(c, base + j):
                return i, _Scan.DONE
        return i, _Scan.MORE

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
            self.key_is_args = value in _ARGS_KEYS and not self.args_seen
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


def _call_parts(obj: Any) -> tuple[str, Any, bool] | None:
    """``(name, arguments, has_arguments)`` of a parsed call object (also OpenAI's nested shape)."""
    if isinstance(obj, dict) and isinstance(obj.get("function"), dict) and "name" not in obj:
        obj = obj["function"]
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None
    for key in _ARGS_KEYS:
        if key in obj:
            return obj["name"], obj[key], True
    return obj["name"], None, False


def _extract(raw: str, sc: _ObjectScanner) -> tuple[str, Any, bool] | None:
    """Name and arguments of a complete object: from the scanned spans, else by parsing it."""
    if sc.name is not None and sc.args_start is not None and sc.args_end is not None:
        span = raw[sc.args_start : sc.args_end].strip()
        args: Any = span
        if sc.args_kind in ('"', "'"):
            decoded = parse_json_lenient(span)
            args = decoded[0] if decoded is not None and isinstance(decoded[0], str) else span
        elif sc.args_kind == "p" and span in ("", "null", "None"):
            args = None
        return sc.name, args, True
    parsed = parse_json_lenient(raw)
    found = _call_parts(parsed[0]) if parsed is not None else None
    if found is None and sc.name is not None:
        return sc.name, None, False
    return found


def _call_prefix(s: str, p: int = 0) -> bool | None:
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
    for key in ("name", *_ARGS_KEYS):
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


def _fence_call_start(window: str) -> int | None:
    """Offset of the ``{`` when a fence opens a json/bare block with an object; -1 if not; None: wait."""
    m = _FENCE_HEAD.match(window)
    if m is None:
        undecided = len(window) < _FENCE_WINDOW and _FENCE_PARTIAL.fullmatch(window) is not None
        return None if undecided else -1
    if m.end() == len(window):
        return None if len(window) < _FENCE_WINDOW else -1
    wanted = m.group(1).lower() in _FENCE_LANGS and window[m.end()] == "{"
    return m.end() if wanted else -1


def _tag_at(s: str, p: int, tags: Sequence[str]) -> str | None:
    """The tag at ``s[p]``; ``""`` when ``s[p:]`` may still become one; None when it cannot."""
    for tag in tags:
        if s.startswith(tag, p):
            return tag
    rest = s[p : p + 16]
    if p + len(rest) == len(s) and any(len(rest) < len(tag) and tag.startswith(rest) for tag in tags):
        return ""
    return None


def _text_tag(s: str, p: int) -> tuple[str | None, int]:
    """The prose tag at ``s[p]`` (``<``) and its length. ``<tool_call ...>`` counts as the tag;
    ``<tool_call`` that cannot become one is ``_BROKEN``; ``""`` while undecided; None: no tag."""
    tag = _tag_at(s, p, _TEXT_TAGS)
    if tag is not None:
        return tag, len(tag)
    m = _LOOSE_TAG.match(s, p)
    if m is None:
        return None, 1
    if m.group(3):
        return (_CLOSE if m.group(1) == "</tool_call" else _OPEN), m.end() - p
    if m.end() == len(s) and len(m.group(2)) < _LOOSE_ATTRS:
        return "", 0
    return _BROKEN, len(m.group(1))


def _join_rest(tail: str, s: str, i: int, final: bool = False) -> str | None:
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


def _strip_markup(text: str) -> str:
    """``text`` without tags, nor the tags their removal would join (``<tool_<tool_call>call>``)."""
    pieces, tail, i = [], "", 0
    while (m := _MARKUP.search(text, i)) is not None:
        pieces.append(text[i : m.start()])
        tail = (tail + text[max(i, m.start() - 16) : m.start()])[-16:]
        i = m.end()
        while rest := _join_rest(tail, text, i):
            i += len(rest)
    pieces.append(text[i:])
    return "".join(pieces)


def _advance_line(flag: bool, s: str, a: int, b: int) -> bool:
    """Whether position ``b`` is still at a line start (only blanks since a newline)."""
    if a >= b:
        return flag
    nl = s.rfind("\n", a, b)
    if nl >= 0:
        return _BLANK.fullmatch(s, nl + 1, b) is not None
    return flag and _BLANK.fullmatch(s, a, b) is not None


def _truncated(finish: FinishReason) -> bool:
    return finish in ("length", "content_filter")


def _merge_repairs(*groups: Sequence[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(r for group in groups for r in group))


class _State(StrEnum):
    TEXT = "text"
    THINK = "think"
    FENCE = "fence"
    CANDIDATE = "candidate"
    FENCE_TAIL = "fence_tail"
    BLOCK_OPEN = "block_open"
    BLOCK_OBJECT = "block_object"
    BLOCK_RAW = "block_raw"
    BLOCK_AFTER = "block_after"
    DONE = "done"


class HermesParser:
    """Sans-IO parser of one response in the hermes format; see the module docstring."""

    def __init__(self, tools: Sequence[ToolSpec], max_calls: int = 1) -> None:
        self._index = ToolIndex(tools)
        self._max = max_calls
        self._state = _State.TEXT
        self._buf = ""  # undecided input: a marker prefix, a held candidate head, a partial escape
        self._line_start = True  # only blanks since the last newline (or the start of output)
        self._tail = ""  # the last prose emitted: a `<tool_call>` mention, or a tag joined across markup
        self._after_block = False  # whitespace right after a block is dropped unless prose follows
        self._join = False  # markup was removed: what follows must not complete a tag with `_tail`
        self._calls = 0  # call indexes handed out
        self._open: int | None = None  # the index of a started, unfinished call
        self._sc: _ObjectScanner | None = None
        self._name_tried = self._stream_args = False
        self._args_sent = 0
        self._prefix = ""  # held text before a bare candidate's `{` (a fence opener)
        self._fenced = False
        self._parts: list[str] = []  # a raw block body, or junk after a call object
        self._steps: dict[_State, Callable[[list[Event]], bool]] = {
            _State.TEXT: self._step_text, _State.THINK: self._step_think, _State.FENCE: self._step_fence,
            _State.CANDIDATE: self._step_candidate, _State.FENCE_TAIL: self._step_fence_tail,
            _State.BLOCK_OPEN: self._step_block_open, _State.BLOCK_OBJECT: self._step_block_object,
            _State.BLOCK_RAW: self._step_block_raw, _State.BLOCK_AFTER: self._step_block_after,
        }
        self._closers: dict[_State, Callable[[list[Event], FinishReason], None]] = {
            _State.TEXT: self._close_text, _State.THINK: self._close_think, _State.FENCE: self._close_fence,
            _State.CANDIDATE: self._close_candidate, _State.FENCE_TAIL: self._close_quietly,
            _State.BLOCK_OPEN: self._close_block_open, _State.BLOCK_OBJECT: self._close_block_object,
            _State.BLOCK_RAW: self._close_block_raw, _State.BLOCK_AFTER: self._close_quietly,
        }

    def feed(self, text: str) -> list[Event]:
        if self._state is _State.DONE or not text:
            return []
        self._buf += text
        out: list[Event] = []
        while self._state is not _State.DONE and self._steps[self._state](out):
            pass
        return out

    def close(self, finish_reason: FinishReason = "stop") -> list[Event]:
        if self._state is _State.DONE:
            return []
        out: list[Event] = []
        self._closers[self._state](out, finish_reason)
        self._state, self._buf = _State.DONE, ""
        return out

    # ---- prose ---------------------------------------------------------------------------

    def _step_text(self, out: list[Event]) -> bool:
        if self._join and not self._drop_joined_tag():
            return False
        if self._after_block and not self._skip_block_gap():
            return False
        s, line, i = self._buf, self._line_start, 0  # `line`: the line-start flag at `i`
        while (m := _TEXT_HIT.search(s, i)) is not None:
            p, c = m.start(), m.group()
            if c == "{" and _advance_line(line, s, i, p) and _call_prefix(s, p) is not False:
                self._flush_prose(out, p, True)
                self._start_candidate(s[p:], "", fenced=False)
                return True
            if c[0] == "`":
                self._flush_prose(out, p, _advance_line(line, s, i, p))
                return self._open_fence(out)
            tag, size = _text_tag(s, p) if c[0] == "<" else (None, 1)
            if tag == "" or (tag and (s[p - 1] if p else self._tail[-1:]) != "`"):
                self._flush_prose(out, p, _advance_line(line, s, i, p))
                if tag == "":
                    return False
                self._buf = s[p + size :]
                self._on_tag(out, tag, s[p : p + size])
                return True
            i, line = p + size, False  # past a non-blank character: not at a line start
        self._flush_prose(out, len(s), _advance_line(line, s, i, len(s)))
        return False

    def _flush_prose(self, out: list[Event], p: int, line: bool) -> None:
        """Emit ``buf[:p]`` as text; ``line`` is the line-start flag at ``p``."""
        if p:
            out.append(Text(self._buf[:p]))
            self._tail = (self._tail + self._buf[max(0, p - 16) : p])[-16:]
        self._buf, self._line_start = self._buf[p:], line

    def _text(self, out: list[Event], seg: str) -> None:
        if seg:
            out.append(Text(seg))
            self._line_start = _advance_line(self._line_start, seg, 0, len(seg))
            self._tail = (self._tail + seg[-16:])[-16:]

    def _drop_joined_tag(self) -> bool:
        """After removed markup, text completing a tag with the prose before it (``<`` + block +
        ``tool_call>``) is markup too: dropped. False while undecided."""
        while rest := _join_rest(self._tail, self._buf, 0):
            self._buf = self._buf[len(rest) :]
        self._join = rest is None
        return not self._join

    def _skip_block_gap(self) -> bool:
        """Drop the whitespace right after a block unless prose follows; False while undecided."""
        s = self._buf
        k = _WS.match(s).end()  # type: ignore[union-attr]
        if k <= MAX_HOLDBACK:
            if k == len(s):
                return False
            if s[k] in "<{":
                self._line_start = _advance_line(self._line_start, s, 0, k)
                self._buf = s[k:]
        self._after_block = False
        return True

    def _broken_tag(self, out: list[Event], raw: str) -> None:
        """``<tool_call`` that never becomes a tag is broken markup: reported, never shown."""
        out.append(Malformed(raw, f"broken tag {raw!r}"))
        self._join = True

    def _on_tag(self, out: list[Event], tag: str, raw: str) -> None:
        if tag == _BROKEN:
            self._broken_tag(out, raw)
        elif tag == _OPEN:
            if not self._cut(out):
                self._state = _State.BLOCK_OPEN
        elif tag == _THINK:
            self._state = _State.THINK
        elif tag == _RESPONSE:  # the model is inventing the tool's result: nothing after it is real
            self._state, self._buf = _State.DONE, ""
        else:  # a stray closing tag is markup: dropped
            self._end_block()

    def _open_fence(self, out: list[Event]) -> bool:
        s = self._buf
        if not s.startswith(_FENCE):
            return False
        at = _fence_call_start(s[:_FENCE_WINDOW])
        if at is None:
            return False
        if at < 0:
            self._text(out, _FENCE)
            self._buf, self._state = s[len(_FENCE) :], _State.FENCE
        else:
            self._start_candidate(s[at:], s[:at], fenced=True)
        return True

    def _step_think(self, out: list[Event]) -> bool:
        s = self._buf
        p = s.find(_THINK_END)
        cut = len(s) - partial_marker_len(s, (_THINK_END,)) if p < 0 else p
        if cut:
            out.append(Reasoning(s[:cut]))
        if p < 0:
            self._buf = s[cut:]
            return False
        self._buf = s[p + len(_THINK_END) :]
        self._end_block()
        return True

    def _step_fence(self, out: list[Event]) -> bool:
        s = self._buf
        p = s.find(_FENCE)
        if p < 0:
            cut = len(s) - partial_marker_len(s, (_FENCE,))
            self._text(out, s[:cut])
            self._buf = s[cut:]
            return False
        self._text(out, s[: p + len(_FENCE)])
        self._buf, self._state = s[p + len(_FENCE) :], _State.TEXT
        return True

    def _end_block(self, fenced: bool = False) -> None:
        self._state = _State.FENCE_TAIL if fenced else _State.TEXT
        self._line_start, self._after_block, self._join = True, True, True

    # ---- bare call objects -------------------------------------------------------------------

    def _start_candidate(self, s: str, prefix: str, fenced: bool) -> None:
        self._buf, self._prefix, self._fenced, self._sc = s, prefix, fenced, None
        self._state = _State.CANDIDATE

    def _step_candidate(self, out: list[Event]) -> bool:
        if self._sc is None:
            verdict = _call_prefix(self._buf)
            if verdict is None:
                return False
            if not verdict:
                s = self._buf
                self._release(out, "{")
                self._buf = s[1:]
                return True
            self._new_object(_OUTSIDE_BARE)
        sc, s, i = self._scanner(), self._buf, 0
        while True:
            p, why = sc.scan(s, i, min(len(s), _BARE_CAP - sc.size))
            tag = _tag_at(s, p, _BARE_STOPS) if why is _Scan.SPECIAL else ""
            if tag is not None:
                break
            i = p + 1  # a `<` or backtick that starts no marker
        sc.commit(s[:p])
        if tag == _CLOSE:
            self._buf = s[p + len(_CLOSE) :]
            self._candidate_block(out)
            return True
        self._buf = s[p:]
        if why is _Scan.DONE:
            if not self._decide(out, sc.text(), ()):
                self._release(out, sc.text())
        elif tag:  # a marker outside any string: this was prose
            self._release(out, sc.text())
        elif sc.size + len(self._buf) >= _BARE_CAP:  # too long for a call: flush exactly the cap
            k = _BARE_CAP - sc.size
            head, self._buf = self._buf[:k], self._buf[k:]
            self._release(out, sc.text() + head)
        else:
            return False
        return True

    def _release(self, out: list[Event], body: str) -> None:
        """The candidate is prose after all: emit it exactly as written (tags inside it excepted)."""
        text = self._prefix + body
        if not self._fenced and _MARKUP.search(text):
            out.append(Malformed(text, "tags inside a JSON object in prose"))
            text = _strip_markup(text)
        self._text(out, text)
        self._prefix, self._sc, self._join = "", None, True
        self._state = _State.FENCE if self._fenced else _State.TEXT

    def _decide(self, out: list[Event], raw: str, extra: tuple[str, ...]) -> bool:
        """Make a balanced bare object a call if it names a tool and has arguments."""
        sc = self._scanner()
        found = _extract(raw, sc) if sc.name is None or sc.name in self._index else None
        if found is None or not found[2] or found[0] not in self._index:
            return False
        raw_block, self._prefix = self._prefix + raw, ""
        if not self._cut(out):
            self._finish_call(out, found[0], found[1], raw_block, extra, self._fragment(raw))
            self._end_block(self._fenced)
        return True

    def _candidate_block(self, out: list[Event]) -> None:
        """A bare object followed by ``</tool_call>``: a block whose opening tag was dropped."""
        raw, self._prefix = self._scanner().text(), ""
        if not self._cut(out):
            self._finish_object(out, raw, raw + _CLOSE)
            self._end_block(self._fenced)

    def _step_fence_tail(self, out: list[Event]) -> bool:
        s = self._buf
        k = _WS.match(s).end()  # type: ignore[union-attr]
        if k <= MAX_HOLDBACK:
            if len(s) - k < len(_FENCE) and _FENCE.startswith(s[k:]):
                return False
            if s.startswith(_FENCE, k):  # the fence's closing line: markup of the call
                self._buf = s[k + len(_FENCE) :]
                self._end_block()
                self._line_start = False
                return True
            if s[k] == "{":
                self._start_candidate(s[k:], s[:k], fenced=True)
                return True
        self._state = _State.FENCE  # prose in the fence whose opening line the call took
        return True

    # ---- <tool_call> blocks --------------------------------------------------------------

    def _step_block_open(self, out: list[Event]) -> bool:
        s = self._buf = self._buf[_WS.match(self._buf).end() :]  # type: ignore[union-attr]
        if not s:
            return False
        tag = _tag_at(s, 0, _BLOCK_TAGS) if s[0] == "<" else None
        if tag == "":
            return False
        if tag == _OPEN:  # a repeated opening tag
            self._buf = s[len(_OPEN) :]
        elif tag == _CLOSE:
            self._fail(out, _OPEN + _CLOSE, "empty <tool_call> block")
            self._buf = s[len(_CLOSE) :]
            self._end_block()
        elif s[0] == "{":
            self._new_object(_OUTSIDE_BLOCK)
            self._state = _State.BLOCK_OBJECT
        else:
            self._parts, self._state = [], _State.BLOCK_RAW
        return True

    def _step_block_object(self, out: list[Event]) -> bool:
        sc, s, i = self._scanner(), self._buf, 0
        while True:
            p, why = sc.scan(s, i, len(s))
            tag = _tag_at(s, p, _BLOCK_TAGS) if why is _Scan.SPECIAL else ""
            if tag is not None:
                break
            i = p + 1
        self._commit_block(out, s[:p])
        self._buf = s[p + len(_CLOSE) :] if tag == _CLOSE else s[p:]
        if tag:  # a tag outside any string ends the block, even with brackets still open
            self._finish_object(out, sc.text(), _OPEN + sc.text() + (_CLOSE if tag == _CLOSE else ""))
            self._end_block()
        elif why is _Scan.DONE:
            self._finish_object(out, sc.text(), _OPEN + sc.text())
            self._parts, self._state = [], _State.BLOCK_AFTER
        else:
            return False
        return True

    def _commit_block(self, out: list[Event], seg: str) -> None:
        """Consume scanned body text: start the call once its name is read, stream its arguments."""
        sc = self._scanner()
        base = sc.size
        sc.commit(seg)
        if self._open is None and not self._name_tried and sc.name is not None:
            self._name_tried = True
            resolved = self._index.resolve(sc.name)[0]
            if resolved is not None:
                self._begin(out, resolved)
                self._stream_args = not sc.args_before_name
        if self._open is None or not self._stream_args or sc.args_kind != "{" or sc.args_start is None:
            return
        lo = max(self._args_sent, sc.args_start, base)
        hi = sc.size if sc.args_end is None else sc.args_end
        if hi > lo:
            out.append(ToolCallArgs(self._open, seg[lo - base : hi - base]))
            self._args_sent = hi

    def _step_block_raw(self, out: list[Event]) -> bool:
        s = self._buf
        found = find_first(s, _BLOCK_TAGS)
        if found is None:
            cut = len(s) - partial_marker_len(s, _BLOCK_TAGS)
            self._parts.append(s[:cut])
            self._buf = s[cut:]
            return False
        p, tag = found
        self._parts.append(s[:p])
        self._buf = s[p + len(_CLOSE) :] if tag == _CLOSE else s[p:]
        self._finish_raw(out)
        if self._state is not _State.DONE:
            self._end_block()
        return True

    def _step_block_after(self, out: list[Event]) -> bool:
        if not self._parts:  # separators between call objects; inside junk they are part of it
            self._buf = self._buf[_SEP.match(self._buf).end() :]  # type: ignore[union-attr]
        s = self._buf
        if not s:
            return False
        tag = _tag_at(s, 0, _BLOCK_TAGS) if s[0] == "<" else None
        if tag == "":
            return False
        if tag:
            self._flush_junk(out)
            self._buf = s[len(_CLOSE) :] if tag == _CLOSE else s
            self._end_block()
        elif s[0] == "{" and not self._parts:  # another call object in the same block
            if not self._cut(out):
                self._new_object(_OUTSIDE_BLOCK)
                self._state = _State.BLOCK_OBJECT
        else:
            q = s.find("<", 1)
            self._parts.append(s if q < 0 else s[:q])
            self._buf = "" if q < 0 else s[q:]
            return q >= 0
        return True

    def _flush_junk(self, out: list[Event]) -> None:
        if self._parts:
            out.append(Malformed("".join(self._parts), "unexpected text after the call object in <tool_call>"))
            self._parts = []

    # ---- calls -------------------------------------------------------------------------------

    def _scanner(self) -> _ObjectScanner:
        assert self._sc is not None, "no object is being scanned"
        return self._sc

    def _new_object(self, outside: re.Pattern[str]) -> None:
        self._sc = _ObjectScanner(outside)
        self._name_tried = self._stream_args = False
        self._args_sent = 0

    def _cut(self, out: list[Event]) -> bool:
        """At a new call past ``max_calls``: report the cut point and ignore the rest."""
        if self._calls < self._max:
            return False
        out.append(SecondToolStarted(self._calls))
        self._state, self._buf = _State.DONE, ""
        return True

    def _begin(self, out: list[Event], name: str) -> int:
        index, self._open = self._calls, self._calls
        self._calls += 1
        out.append(ToolCallStart(index, name))
        return index

    def _fail(self, out: list[Event], raw: str, reason: str) -> None:
        out.append(Malformed(raw, reason, index=self._open))
        self._open = None

    def _fragment(self, raw: str) -> str | None:
        sc = self._scanner()
        if sc.args_kind == "{" and sc.args_start is not None and sc.args_end is not None:
            return raw[sc.args_start : sc.args_end]
        return None

    def _finish_object(self, out: list[Event], raw: str, raw_block: str) -> None:
        """Finalize a scanned object (its missing closing brackets supplied)."""
        sc = self._scanner()
        closers = sc.closers()
        found = _extract(raw + closers, sc)
        if found is None:
            self._fail(out, raw_block, 'no JSON object with a "name" in <tool_call>')
            return
        name = sc.name if self._open is not None and sc.name is not None else found[0]
        extra = ("unclosed_brackets",) if closers else ()
        self._finish_call(out, name, found[1], raw_block, extra, self._fragment(raw + closers))

    def _finish_raw(self, out: list[Event]) -> None:
        """Finalize a block body that did not open with ``{``: a list of calls, a fenced object..."""
        body = "".join(self._parts).strip()
        raw_block, self._parts = _OPEN + body, []
        parsed = parse_json_lenient(body)
        named = _NAMED_OBJECT.fullmatch(body) if parsed is None else None
        if named is not None and (args := parse_json_lenient(named.group(2))) is not None:
            parsed = ({"name": named.group(1), "arguments": args[0]}, args[1])
        items = [] if parsed is None else parsed[0] if isinstance(parsed[0], list) else [parsed[0]]
        if not items:
            self._fail(out, raw_block, "<tool_call> holds no JSON call object")
        for item in items:
            found = _call_parts(item)
            if found is None:
                self._fail(out, raw_block, 'no JSON object with a "name" in <tool_call>')
            elif self._cut(out):
                return
            else:
                self._finish_call(out, found[0], found[1], raw_block, parsed[1] if parsed else (), None)

    def _finish_call(
        self, out: list[Event], name: str, args: Any, raw_block: str, extra: tuple[str, ...], fragment: str | None
    ) -> None:
        outcome = finalize_call(self._index, name, args)
        if not outcome.ok or outcome.arguments is None:
            self._fail(out, raw_block, outcome.error or "invalid arguments")
            return
        index = self._open
        if index is None:
            index = self._begin(out, outcome.name)
            if fragment:
                out.append(ToolCallArgs(index, fragment))
        out.append(ToolCallEnd(index, outcome.name, outcome.arguments, _merge_repairs(extra, outcome.repairs)))
        self._open = None

    # ---- end of output -----------------------------------------------------------------------

    def _close_text(self, out: list[Event], finish: FinishReason) -> None:
        s = self._buf
        while self._join and (rest := _join_rest(self._tail, s, 0, final=True)):
            s = s[len(rest) :]
        m = _LOOSE_TAG.match(s)
        if m is not None or (len(s) >= len("<tool") and (_OPEN.startswith(s) or _CLOSE.startswith(s))):
            self._broken_tag(out, m.group(1) if m else s)  # output ends inside a tag
            s = s[m.end(1) :] if m else ""
        if not (self._after_block and _WS.fullmatch(s)):
            self._text(out, s)

    def _close_fence(self, out: list[Event], finish: FinishReason) -> None:
        self._text(out, self._buf)

    def _close_think(self, out: list[Event], finish: FinishReason) -> None:
        if self._buf:
            out.append(Reasoning(self._buf))

    def _close_quietly(self, out: list[Event], finish: FinishReason) -> None:
        self._flush_junk(out)  # what is held here is whitespace, a partial tag or junk

    def _close_candidate(self, out: list[Event], finish: FinishReason) -> None:
        sc = self._sc
        if sc is not None and not sc.quote and not _truncated(finish):  # cut by a stop string?
            closers = sc.closers()
            if self._decide(out, sc.text() + closers, ("unclosed_brackets",) if closers else ()):
                return
        self._release(out, (sc.text() if sc is not None else "") + self._buf)

    def _close_block_open(self, out: list[Event], finish: FinishReason) -> None:
        self._fail(out, _OPEN + self._buf, "empty <tool_call> block")

    def _close_block_object(self, out: list[Event], finish: FinishReason) -> None:
        sc = self._scanner()
        raw_block = _OPEN + sc.text() + (self._buf if sc.quote else "")
        if _truncated(finish):
            self._fail(out, raw_block, f"<tool_call> block truncated (finish_reason={finish})")
        elif sc.quote:
            self._fail(out, raw_block, "<tool_call> block ends inside a JSON string")
        else:  # the server dropped the `</tool_call>` stop string: complete the block
            self._finish_object(out, sc.text(), raw_block)

    def _close_block_raw(self, out: list[Event], finish: FinishReason) -> None:
        self._parts.append(self._buf)
        if _truncated(finish):
            self._fail(out, _OPEN + "".join(self._parts), f"<tool_call> block truncated (finish_reason={finish})")
        else:
            self._finish_raw(out)


# ---- the format ------------------------------------------------------------------------------


def _example_value(schema: Any) -> Any:
    """A plausible value for a parameter in the worked example."""
    if not isinstance(schema, dict):
        return "example"
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) and kind else kind
    samples = {"integer": 1, "number": 1.5, "boolean": True, "array": [], "object": {}, "null": None}
    return samples.get(kind, "example") if isinstance(kind, str) else "example"


def _example_arguments(spec: ToolSpec) -> dict[str, Any]:
    props = spec.parameters.get("properties") or {}
    if not isinstance(props, dict):
        return {}
    names = [n for n in spec.parameters.get("required") or () if n in props] or list(props)[:1]
    return {n: _example_value(props[n]) for n in names}


def _render_call(name: str, arguments: Any) -> str:
    body = json.dumps({"name": name, "arguments": arguments}, ensure_ascii=False)
    return f"{_OPEN}\n{body}\n{_CLOSE}"


class HermesFormat:
    """``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, as Qwen2.5 and Hermes are trained."""

    name = "hermes"

    def render_tools(self, tools: Sequence[ToolSpec], tool_choice: ToolChoice, parallel: bool) -> str:
        named = [t for t in tools if tool_choice.mode == "named" and t.name == tool_choice.name]
        sample = (named or list(tools))[0] if tools else ToolSpec("tool_name")
        # Qwen2.5's own template wording (what Qwen and Hermes models are trained on) with the shared
        # tool list; the choice sentence last, where small models heed it best.
        return "\n".join([
            "# Tools",
            "",
            "You may call one or more functions to assist with the user query.",
            "",
            "You are provided with function signatures within <tools></tools> XML tags:",
            "<tools>",
            describe_tools(tools),
            "</tools>",
            "",
            "For each function call, return a json object with function name and arguments within "
            "<tool_call></tool_call> XML tags:",
            "<tool_call>",
            '{"name": <function-name>, "arguments": <args-json-object>}',
            "</tool_call>",
            "Each call goes in its own <tool_call></tool_call> tags, as strict JSON (double quotes, newlines "
            "inside strings as \\n). After a call, stop: the result comes back inside "
            "<tool_response></tool_response> tags.",
            "",
            "For example:",
            _render_call(sample.name, _example_arguments(sample)),
            "",
            choice_instruction(tool_choice, parallel),
        ])

    def render_calls(self, calls: Sequence[ToolCallRecord]) -> str:
        blocks = []
        for call in calls:
            try:
                arguments: Any = json.loads(call.arguments) if call.arguments.strip() else {}
            except ValueError:  # not JSON: hand it back as the string the client sent
                arguments = call.arguments
            blocks.append(_render_call(call.name, arguments))
        return "\n".join(blocks)

    def render_result(self, name: str, content: str) -> str:
        return f"<tool_response>\n{content}\n</tool_response>"

    def stop_sequences(self) -> tuple[str, ...]:
        # `</tool_call>` ends generation after the first block (servers usually leave it out of the
        # text: close() completes the block); `<tool_response>` stops an invented result.
        return (_CLOSE, _RESPONSE)

    def new_parser(self, tools: Sequence[ToolSpec], max_calls: int = 1) -> StreamParser:
        return HermesParser(tools, max_calls)
