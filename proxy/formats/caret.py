"""The ``caret`` tool format: YAML-ish ``^^^name`` blocks, easy for small models to write.

Wire syntax (the opening and closing lines start at column 0)::

    I'll save the file.
    ^^^write_file
    path: src/app.py
    tags:
      - a
      - b
    ---
    def main():
        print("hi ^^^ not a close")
    ^^^

Header lines are ``key: value``; a repeated key or a ``key:`` followed by ``  - item`` lines
makes an array; ``key: |`` starts a YAML block scalar; a header whose first line starts with
``{`` is one JSON object. Values are typed by the tool's JSON Schema (strings stay strings,
``"..."`` is unquoted, other types parse as JSON/json5). After a ``---`` line the rest of the
block, exact and unescaped, is the ``content`` argument; like a shell heredoc every body line
keeps its newline. Only a line that is exactly ``^^^`` (an optional ``\\r`` aside) closes it.

Parser states (one method each) and transitions:

* PROSE: text; at each line start decide (reading at most ``MAX_HOLDBACK`` characters) whether
  the line is an opener ``^^^name`` (-> HEADER, or the cut when ``max_calls`` calls started),
  a stray ``^^^`` (dropped), a ``````` fence toggle (markers inside fences stay text), or text.
  ``<think>`` -> THINK.
* THINK: reasoning until ``</think>`` -> PROSE.
* HEADER: whole lines; ``^^^`` -> PROSE (call finalized), ``^^^other`` -> implicit close and a
  new opener, ``---`` -> BODY.
* BODY: raw text until ``\\n^^^`` + end of line -> PROSE (call finalized). Searches only the
  new input plus a four-character overlap.
* DONE: after the cut; all further input is ignored.

A block whose name does not resolve gets no ``ToolCallStart``: it ends as ``Malformed`` without
an index and does not count toward ``max_calls``.

At ``close()`` an open block is completed (the server may have left the stop sequence
``\\n^^^\\n`` out) unless the finish reason is ``length``, which makes it ``Malformed``.
Rendering (``CaretFormat``) writes exactly what the parser reads back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum, IntEnum, auto
from typing import Any

from ._args import ToolIndex, finalize_call, parse_json_lenient
from ._caret_header import BLOCK_SCALARS, Header
from ._prompt import choice_instruction, describe_tools
from ._text import MAX_HOLDBACK, EventBuffer, partial_marker_len
from .base import (
    Event,
    FinishReason,
    Malformed,
    Reasoning,
    SecondToolStarted,
    StreamParser,
    Text,
    ToolCallEnd,
    ToolCallRecord,
    ToolCallStart,
    ToolChoice,
    ToolSpec,
)

_THINK_OPEN, _THINK_CLOSE, _BODY_CLOSE = "<think>", "</think>", "\n^^^"
# ``^^^name``; a caret too many right before the name (``^^^^name``) is still an opener
_OPENER = re.compile(r"(?:\^{3}|\^{4,}(?=\w))[ \t]*([\w.\-]*)[ \t]*\r?")
_OPENER_PREFIX = re.compile(r"\^*|(?:\^{3}|\^{4,}(?=\w))[ \t]*[\w.\-]*[ \t]*\r?")
_FENCE = re.compile(r"[ \t]{0,16}```")
_FENCE_PREFIX = re.compile(r"[ \t]{0,16}`{0,2}")
# Stops only where a line start needs a decision: a newline before `^`, a backtick, or the end.
_SCAN = re.compile(r"\n(?=[ \t]*(?:`|\Z)|\^)|<think>")
_SCAN_FENCED = re.compile(r"\n(?=[ \t]*(?:`|\Z)|\^)")
_CARETS = re.compile(r"\^+[ \t]*")
_KEY = re.compile(r"[A-Za-z_][\w.\-]*")
_LONG_CONTENT = 80  # `content` strings longer than this are rendered in the body


class _State(IntEnum):  # IntEnum: hashed in C for the per-step handler lookup
    PROSE = auto()
    THINK = auto()
    HEADER = auto()
    BODY = auto()
    DONE = auto()


class _Line(Enum):
    """What a line start turned out to be."""

    WAIT = auto()
    TEXT = auto()
    FENCE = auto()
    OPENER = auto()
    STRAY = auto()  # starts with ``^^^`` but is no opener: the carets are markup, the rest is text


def _line_kind(line: str, complete: bool, fenced: bool) -> tuple[_Line, str]:
    """Classify a line start; the verdict depends only on the line, never on the chunking."""
    if _FENCE.match(line):
        return _Line.FENCE, ""
    if not complete and _FENCE_PREFIX.fullmatch(line):
        return _Line.WAIT, ""
    if fenced or not line.startswith("^"):
        return _Line.TEXT, ""
    stray = (_Line.STRAY, "") if line.startswith("^^^") else (_Line.TEXT, "")
    if len(line) > MAX_HOLDBACK:
        return stray
    if complete:
        m = _OPENER.fullmatch(line)
        return (_Line.OPENER, m.group(1)) if m else stray
    return (_Line.WAIT, "") if _OPENER_PREFIX.fullmatch(line) else stray


# ---- the streaming parser -------------------------------------------------------------------


@dataclass(slots=True)
class _Block:
    """One open ``^^^name`` block: raw text for Malformed, header, body pieces."""

    name: str
    index: int | None  # None when the name did not resolve (no ToolCallStart was emitted)
    head: list[str]
    header: Header = field(default_factory=Header)
    line: list[str] = field(default_factory=list)  # pieces of the unfinished header line
    body: list[str] | None = None  # starts with the newline of the ``---`` line
    close: str = ""

    def raw(self) -> str:
        return "".join(self.head) + "".join(self.body or ()) + self.close

    def content(self) -> str | None:
        return "".join(self.body)[1:] if self.body is not None else None


def _close_len(data: str, at: int, eof: bool) -> int:
    """At ``data[at:]`` starting with ``^^^`` on a body line: length of the close line (with its
    newline), 0 when the line is not a close, -1 when more input is needed."""
    rest = data[at + 3 : at + 5]
    if rest.startswith("\n"):
        return 4
    if rest == "\r\n":
        return 5
    if rest in ("", "\r"):
        return len(rest) + 3 if eof else -1
    return 0


class CaretParser:
    """Streaming parser for caret blocks; see the module docstring for states and syntax."""

    def __init__(self, tools: Sequence[ToolSpec], max_calls: int = 1) -> None:
        self._index = ToolIndex(tools)
        self._schemas = {t.name: t.parameters for t in tools}
        self._max_calls = max_calls
        self._state = _State.PROSE
        self._carry = ""  # undecided input; bounded (a line start, a partial tag or close)
        self._bol = True  # the next input character starts a line
        self._fenced = False
        self._eof = False
        self._started = 0
        self._block: _Block | None = None
        self._events = EventBuffer()  # filled by the state handlers, emptied by each feed/close
        self._handlers = {
            _State.PROSE: self._prose,
            _State.THINK: self._think,
            _State.HEADER: self._header,
            _State.BODY: self._body,
        }

    def feed(self, text: str) -> list[Event]:
        if self._state is _State.DONE or self._eof or not text:
            return []
        return self._run(self._carry + text).take()

    def close(self, finish_reason: FinishReason = "stop") -> list[Event]:
        if self._state is _State.DONE or self._eof:
            return []
        self._eof = True
        events = self._run(self._carry)
        if self._state is _State.HEADER and self._block is not None and self._block.line:
            line = "".join(self._block.line)
            self._block.line.clear()
            self._header_line(line, events)
        block = self._block
        if self._state is _State.BODY and block is not None and block.body and any(block.body):
            block.body.append("\n")  # the newline that the left-out stop sequence "\n^^^\n" took
        if self._state in (_State.HEADER, _State.BODY):
            self._end_block(events, truncated=finish_reason == "length")
        self._state = _State.DONE
        return events.take()

    def _run(self, data: str) -> EventBuffer:
        self._carry = ""
        events = self._events
        pos = 0
        while pos < len(data) and self._state is not _State.DONE:
            pos = self._handlers[self._state](data, pos, events)
        return events

    def _hold(self, data: str, pos: int, markers: tuple[str, ...]) -> int:
        """Where decided input ends: before a possible partial marker (nothing held at EOF)."""
        if self._eof:
            return len(data)
        return len(data) - min(partial_marker_len(data, markers), len(data) - pos)

    # ---- states ----

    def _prose(self, data: str, pos: int, events: EventBuffer) -> int:
        """Scan text, deciding each line start; one Text event per run of decided text."""
        start = pos
        while True:
            if self._bol:
                nl = data.find("\n", pos, pos + MAX_HOLDBACK + 1)
                line = data[pos : nl if nl != -1 else pos + MAX_HOLDBACK + 1]
                kind, name = _line_kind(line, nl != -1 or self._eof, self._fenced)
                if kind is _Line.WAIT or kind is _Line.OPENER:
                    events.text(Text, data[start:pos])
                    if kind is _Line.WAIT:
                        self._carry = data[pos:]
                        return len(data)
                    return self._opener_line(data, pos, nl, name, events)
                self._bol = False
                if kind is _Line.FENCE:
                    self._fenced = not self._fenced
                elif kind is _Line.STRAY:
                    events.text(Text, data[start:pos])
                    pos = start = _CARETS.match(data, pos).end()  # type: ignore[union-attr]
            m = (_SCAN_FENCED if self._fenced else _SCAN).search(data, pos)
            if m is None:
                end = self._hold(data, pos, () if self._fenced else (_THINK_OPEN,))
                events.text(Text, data[start:end])
                self._carry = data[end:]
                return len(data)
            if m.group() != "\n":
                events.text(Text, data[start : m.start()])
                self._state = _State.THINK
                return m.end()
            pos, self._bol = m.end(), True

    def _opener_line(self, data: str, pos: int, nl: int, name: str, events: EventBuffer) -> int:
        """A complete ``^^^name`` line opens a block; a lone ``^^^`` outside a block is dropped."""
        end = nl + 1 if nl != -1 else len(data)
        self._bol = False
        if name:
            self._open(name, data[pos:end], events)
        else:  # stray closing markup: dropped, the next line starts fresh
            self._bol = True
        return end

    def _think(self, data: str, pos: int, events: EventBuffer) -> int:
        at = data.find(_THINK_CLOSE, pos)
        if at == -1:
            end = self._hold(data, pos, (_THINK_CLOSE,))
            events.text(Reasoning, data[pos:end])
            self._carry = data[end:]
            return len(data)
        events.text(Reasoning, data[pos:at])
        self._state, self._bol = _State.PROSE, True
        return at + len(_THINK_CLOSE)

    def _header(self, data: str, pos: int, events: EventBuffer) -> int:
        while self._state is _State.HEADER and self._block is not None:
            block = self._block
            nl = data.find("\n", pos)
            if nl == -1:
                block.line.append(data[pos:])
                return len(data)
            line = "".join(block.line) + data[pos:nl] if block.line else data[pos:nl]
            block.line.clear()
            if self._header_line(line, events):
                return nl  # the body starts with this newline
            pos = nl + 1
            if self._block is block:
                block.head.append("\n")
        return pos

    def _header_line(self, line: str, events: EventBuffer) -> bool:
        """Handle one complete header line; True when it was the ``---`` separator."""
        block = self._block
        assert block is not None
        text = line[:-1] if line.endswith("\r") else line
        opener = _OPENER.fullmatch(text)
        if opener is not None:  # ``^^^`` closes; ``^^^name`` closes implicitly and opens the next
            block.close = line if not opener.group(1) else ""
            self._end_block(events)
            if opener.group(1):
                self._open(opener.group(1), line, events)
            return False
        block.head.append(line)
        if block.header.is_separator(text):
            block.body = []
            self._state = _State.BODY
            return True
        block.header.add(text)
        return False

    def _body(self, data: str, pos: int, events: EventBuffer) -> int:
        block = self._block
        assert block is not None and block.body is not None
        search = pos
        while (at := data.find(_BODY_CLOSE, search)) != -1:
            size = _close_len(data, at + 1, self._eof)
            if size == -1:
                block.body.append(data[pos:at])
                self._carry = data[at:]
                return len(data)
            if size:
                block.body.append(data[pos : at + 1])  # heredoc: the last line keeps its newline
                block.close = data[at : at + 1 + size]
                self._end_block(events)
                return at + 1 + size
            search = at + 1
        end = self._hold(data, pos, (_BODY_CLOSE,))
        block.body.append(data[pos:end])
        self._carry = data[end:]
        return len(data)

    # ---- blocks ----

    def _open(self, name: str, raw_line: str, events: EventBuffer) -> None:
        """A complete opener line: report the cut, or start a block (and a call if the name resolves)."""
        if self._started >= self._max_calls:
            events.push(SecondToolStarted(self._started))
            self._state = _State.DONE
            return
        resolved, _ = self._index.resolve(name)
        index = None
        if resolved is not None:
            index = self._started
            self._started += 1
            events.push(ToolCallStart(index, resolved))
        self._block = _Block(name, index, [raw_line])
        self._state = _State.HEADER

    def _end_block(self, events: EventBuffer, truncated: bool = False) -> None:
        """Finalize the open block into ToolCallEnd or Malformed; back to PROSE at a line start."""
        block = self._block
        assert block is not None
        self._block, self._state, self._bol = None, _State.PROSE, True
        raw = block.raw()
        if truncated:
            events.push(Malformed(raw, "tool block cut off by the length limit", block.index))
            return
        resolved, _ = self._index.resolve(block.name)
        args, repairs = block.header.arguments(self._schemas.get(resolved or "", {}))
        error, content = block.header.error, block.content()
        if error is None and content is not None:
            if isinstance(args, dict) and "content" not in args:
                args["content"] = content
            elif content.strip():
                error = "content given both in the header and after ---"
        outcome = finalize_call(self._index, block.name, args)
        if error is None and outcome.ok and block.index is not None and outcome.arguments is not None:
            fixes = tuple(dict.fromkeys(repairs + outcome.repairs))
            events.push(ToolCallEnd(block.index, outcome.name, outcome.arguments, fixes))
        else:
            events.push(Malformed(raw, error or outcome.error or f"unknown tool {block.name!r}", block.index))


# ---- rendering ------------------------------------------------------------------------------

_SYNTAX = """\
To call a tool, write a caret block:
- a line `^^^` directly followed by the tool name, at the start of a line;
- one `key: value` line per argument. Write strings as they are, without quotes; numbers and \
booleans as JSON (5, true); objects as JSON on one line; arrays as `key:` followed by one \
`  - item` line per element;
- for a long or multi-line `content` argument: a line `---`, then the text exactly as it should be, \
line by line (no quotes, no escaping; every line keeps its newline); other multi-line strings go on \
one line as a JSON string ("line 1\\nline 2");
- a line `^^^` alone closes the block.
After the closing `^^^`, stop and wait: results arrive as `Result of <tool>:` messages."""

_EXAMPLE = """\
Example (`save_note` only illustrates the syntax):
^^^save_note
title: Shopping list
priority: 2
tags:
  - home
  - weekly
---
Milk
Eggs "large"
^^^"""


def _is_plain(text: str) -> bool:
    """Whether a string reads back unchanged when written unquoted in a header line."""
    if not text or text != text.strip() or "\n" in text or "\r" in text or text[0] in '"{[':
        return False
    if text in BLOCK_SCALARS:
        return False
    try:
        json.loads(text)  # "5", "true", "null" would read back as JSON values
    except ValueError:
        return True
    return False


def _render_value(value: Any) -> str:
    if isinstance(value, str) and _is_plain(value):
        return value
    return json.dumps(value, ensure_ascii=False)


def _body_safe(text: str) -> bool:
    """Whether ``text`` reads back from a body: it must end with a newline (the last body line
    keeps it) and hold no line that is exactly ``^^^`` (it would close the block)."""
    wrapped = "\n" + text
    return text.endswith("\n") and "\n^^^\n" not in wrapped and "\n^^^\r\n" not in wrapped


def render_block(name: str, args: Mapping[str, Any]) -> str:
    """One call as a caret block: arrays as YAML lists, long ``content`` in the body."""
    if not all(_KEY.fullmatch(key) for key in args):
        return f"^^^{name}\n{json.dumps(dict(args), ensure_ascii=False)}\n^^^"
    lines, body = [f"^^^{name}"], None
    for key, value in args.items():
        if key == "content" and isinstance(value, str) and _body_safe(value):
            if "\n" in value or len(value) > _LONG_CONTENT:
                body = value
                continue
        if isinstance(value, list) and value:
            lines.append(f"{key}:")
            lines.extend(f"  - {_render_value(item)}" for item in value)
        else:
            lines.append(f"{key}: {_render_value(value)}")
    if body is not None:
        return "\n".join([*lines, "---", body]) + "^^^"
    return "\n".join([*lines, "^^^"])


class CaretFormat:
    """``^^^name`` blocks with ``key: value`` headers and an optional raw ``content`` body."""

    name = "caret"

    def render_tools(self, tools: Sequence[ToolSpec], tool_choice: ToolChoice, parallel: bool) -> str:
        parts = ["# Tools", describe_tools(tools), choice_instruction(tool_choice, parallel), _SYNTAX, _EXAMPLE]
        return "\n\n".join(parts)

    def render_calls(self, calls: Sequence[ToolCallRecord]) -> str:
        blocks = []
        for call in calls:
            parsed = parse_json_lenient(call.arguments) if call.arguments.strip() else ({}, ())
            if parsed is not None and isinstance(parsed[0], dict):
                blocks.append(render_block(call.name, parsed[0]))
            else:  # not an object: show it as it was sent
                blocks.append(f"^^^{call.name}\n{call.arguments.strip()}\n^^^")
        return "\n".join(blocks)

    def render_result(self, name: str, content: str) -> str:
        """``Result of name:`` then the content; lines that start with ``^^^`` get a leading space
        so a result never reads as a call."""
        return f"Result of {name}:\n" + re.sub(r"(?m)^\^\^\^", " ^^^", content)

    def stop_sequences(self) -> tuple[str, ...]:
        """``\\n^^^\\n`` ends the first block's closing line and never occurs in an opener
        (``^^^name``) or inside a block. The server leaves it out; ``close()`` completes the block.
        A block closed by end of output without the final newline is completed the same way."""
        return ("\n^^^\n",)

    def new_parser(self, tools: Sequence[ToolSpec], max_calls: int = 1) -> StreamParser:
        return CaretParser(tools, max_calls)
