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

Parser states (one ``_step_*`` method each, see ``CaretParser._steps``) and transitions:

* PROSE: text; at each line start decide (reading at most ``MAX_HOLDBACK`` characters) whether
  the line is an opener ``^^^name`` (-> HEADER, or the cut when ``max_calls`` calls started),
  a stray ``^^^`` (dropped), an opener written wrong ``^^^name: args`` (-> HEADER, the block Malformed),
  a ``````` fence toggle (markers inside fences stay text; a fence opening with a call: ``_guard``), or text.
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
``\\n^^^\\n`` out) unless the finish reason is ``length`` or ``content_filter``, which makes it
``Malformed`` (the truncation rule of ``_calls``, which also owns call slots and the cut). So is a
block whose last header line ends inside a quoted value (``city: "Par``): it was cut, as hermes's
block that ends inside a JSON string.
Rendering (``CaretFormat``) writes exactly what the parser reads back.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum, IntEnum, auto
from typing import Any

from ._args import parse_json_lenient
from ._calls import CallSlots, truncated
from ._caret_header import BLOCK_SCALARS, Header
from ._guard import CallOpener, guard
from ._hermes_render import _example_arguments
from ._machine import StepParser
from ._prompt import NO_TOOL, choice_instruction, describe_tools, example_calls, example_tool
from ._text import MAX_HOLDBACK, EventBuffer, partial_marker_len
from .base import (
    CallGrammar,
    Event,
    FinishReason,
    Reasoning,
    StreamParser,
    Text,
    ToolCallRecord,
    ToolChoice,
    ToolSpec,
)

_THINK_OPEN, _THINK_CLOSE, _BODY_CLOSE = "<think>", "</think>", "\n^^^"
# ``^^^name``; a caret too many right before the name (``^^^^name``) is still an opener
_OPENER = re.compile(r"(?:\^{3}|\^{4,}(?=\w))[ \t]*([\w.\-]*)[ \t]*\r?")
# ``^^^name: args`` / ``^^^name(args)``: a block opener with junk after the name (Malformed, never text)
_BAD_OPENER = re.compile(r"\^{3,}[ \t]*([A-Za-z_][\w.\-]*)[ \t]*[:(\[{=,]")
_OPENER_PREFIX = re.compile(r"\^*|(?:\^{3}|\^{4,}(?=\w))[ \t]*[\w.\-]*[ \t]*\r?")
_FENCE = re.compile(r"[ \t]{0,16}```")
_FENCE_PREFIX = re.compile(r"[ \t]{0,16}`{0,2}")
# Stops only where a line start needs a decision: a newline before `^`, a backtick, or the end.
_SCAN = re.compile(r"\n(?=[ \t]*(?:`|\Z)|\^)|<think>")
_SCAN_FENCED = re.compile(r"\n(?=[ \t]*(?:`|\Z)|\^)")
_CARETS = re.compile(r"\^+[ \t]*")
_BLANKS = re.compile(r"[ \t]*")
_KEY = re.compile(r"[A-Za-z_][\w.\-]*")
_LONG_CONTENT = 80  # `content` strings longer than this are rendered in the body


class _State(IntEnum):  # IntEnum: hashed in C, for the step table lookup on every step
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
    BAD_OPENER = auto()  # ``^^^name: value``: an opener written wrong, a Malformed block


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
    bad = _BAD_OPENER.match(line)
    if bad is not None:
        return (_Line.BAD_OPENER, bad.group(1)) if complete else (_Line.WAIT, "")
    if complete:
        m = _OPENER.fullmatch(line)
        return (_Line.OPENER, m.group(1)) if m else stray
    return (_Line.WAIT, "") if _OPENER_PREFIX.fullmatch(line) else stray


# ---- the streaming parser -------------------------------------------------------------------


@dataclass(slots=True)
class _Block:
    """One open ``^^^name`` block: raw text for Malformed, header, body pieces."""

    name: str
    head: list[str]
    header: Header = field(default_factory=Header)
    line: list[str] = field(default_factory=list)  # pieces of the unfinished header line
    body: list[str] | None = None  # starts with the newline of the ``---`` line
    close: str = ""
    bad: str | None = None  # why the opener line itself is wrong: the block is Malformed

    def raw(self) -> str:
        return "".join(self.head) + "".join(self.body or ()) + self.close

    def content(self) -> str | None:
        return "".join(self.body)[1:] if self.body is not None else None


_QUOTED_START = re.compile(r'[^:"]+:[ \t]*"')


def _open_quote(line: str) -> bool:
    """``key: "...`` without its closing quote (backslash escapes aside): the output was cut in it."""
    start = _QUOTED_START.match(line)
    if start is None:
        return False
    rest = line[start.end() :].rstrip("\r")
    escaped = False
    for ch in rest:
        if escaped:
            escaped = False
        elif ch == "\\":
            escaped = True
        elif ch == '"':
            return False
    return True


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


class CaretParser(StepParser[_State]):
    """Streaming parser for caret blocks; see the module docstring for states and syntax."""

    DONE = _State.DONE

    def __init__(self, tools: Sequence[ToolSpec], max_calls: int = 1) -> None:
        self._out = EventBuffer()  # filled by the steps, emptied by each feed/close
        self._calls = CallSlots(tools, max_calls, self._out)
        self._state = _State.PROSE
        self._buf, self._pos = "", 0  # input from _pos on is undecided; bounded (a line start, a partial tag)
        self._bol = True  # the character at _pos starts a line
        self._fenced = False
        self._strip_blanks = False  # stray carets ended the input so far: blanks that follow go with them
        self._final = False  # close() is running: no more input comes
        self._block: _Block | None = None
        self._steps: dict[_State, Callable[[], bool]] = {
            _State.PROSE: self._step_prose,
            _State.THINK: self._step_think,
            _State.HEADER: self._step_header,
            _State.BODY: self._step_body,
        }

    def close(self, finish_reason: FinishReason = "stop") -> list[Event]:
        if self._state is _State.DONE:
            return []
        self._buf, self._pos, self._final = self._buf[self._pos :], 0, True
        self._run()
        self._end_of_output(finish_reason)
        self._state = _State.DONE
        return self._out.take()

    def _run(self) -> None:
        """Run the current state's step until one needs more input or the parser is DONE."""
        while self._state is not _State.DONE and self._pos < len(self._buf) and self._steps[self._state]():
            pass

    def _hold(self, pos: int, markers: tuple[str, ...]) -> int:
        """Where decided input ends: before a possible partial marker (nothing held at the end)."""
        data = self._buf
        if self._final:
            return len(data)
        return len(data) - min(partial_marker_len(data, markers), len(data) - pos)

    # ---- states ----

    def _step_prose(self) -> bool:
        """Scan text, deciding each line start; one Text event per run of decided text."""
        data, out = self._buf, self._out
        pos = start = self._pos
        if self._strip_blanks:  # the blanks after stray carets, however the input was split
            pos = start = _BLANKS.match(data, pos).end()  # type: ignore[union-attr]
            self._pos = pos
            if pos == len(data):
                return False
            self._strip_blanks = False
        while True:
            if self._bol:
                nl = data.find("\n", pos, pos + MAX_HOLDBACK + 1)
                line = data[pos : nl if nl != -1 else pos + MAX_HOLDBACK + 1]
                kind, name = _line_kind(line, nl != -1 or self._final, self._fenced)
                if kind is _Line.WAIT or kind is _Line.OPENER or kind is _Line.BAD_OPENER:
                    out.text(Text, data[start:pos])
                    self._pos = pos
                    if kind is _Line.WAIT:
                        return False
                    self._opener_line(nl, name, kind is _Line.BAD_OPENER)
                    return True
                self._bol = False
                if kind is _Line.FENCE:
                    self._fenced = not self._fenced
                elif kind is _Line.STRAY:
                    out.text(Text, data[start:pos])
                    pos = start = _CARETS.match(data, pos).end()  # type: ignore[union-attr]
                    if pos == len(data):
                        self._pos, self._strip_blanks = pos, not self._final
                        return False
            m = (_SCAN_FENCED if self._fenced else _SCAN).search(data, pos)
            if m is None:
                self._pos = self._hold(pos, () if self._fenced else (_THINK_OPEN,))
                out.text(Text, data[start : self._pos])
                return False
            if m.group() != "\n":
                out.text(Text, data[start : m.start()])
                self._state, self._pos = _State.THINK, m.end()
                return True
            pos, self._bol = m.end(), True

    def _opener_line(self, nl: int, name: str, bad: bool = False) -> None:
        """A complete ``^^^name`` line opens a block; a lone ``^^^`` outside a block is dropped.
        A ``bad`` opener (``^^^name: value``) opens a block too, so all of it is one Malformed."""
        end = nl + 1 if nl != -1 else len(self._buf)
        self._bol = False
        if name:
            self._open(name, self._buf[self._pos : end])
            if bad and self._block is not None:
                self._block.bad = "malformed block header (write the arguments on their own lines)"
        else:  # stray closing markup: dropped, the next line starts fresh
            self._bol = True
        self._pos = end

    def _step_think(self) -> bool:
        data, pos = self._buf, self._pos
        at = data.find(_THINK_CLOSE, pos)
        if at == -1:
            self._pos = self._hold(pos, (_THINK_CLOSE,))
            self._out.text(Reasoning, data[pos : self._pos])
            return False
        self._out.text(Reasoning, data[pos:at])
        self._state, self._bol, self._pos = _State.PROSE, True, at + len(_THINK_CLOSE)
        return True

    def _step_header(self) -> bool:
        data, pos = self._buf, self._pos
        while self._state is _State.HEADER and self._block is not None:
            block = self._block
            nl = data.find("\n", pos)
            if nl == -1:
                block.line.append(data[pos:])
                self._pos = len(data)
                return False
            line = "".join(block.line) + data[pos:nl] if block.line else data[pos:nl]
            block.line.clear()
            if self._header_line(line):
                self._pos = nl  # the body starts with this newline
                return True
            pos = nl + 1
            if self._block is block:
                block.head.append("\n")
        self._pos = pos
        return True

    def _header_line(self, line: str) -> bool:
        """Handle one complete header line; True when it was the ``---`` separator."""
        block = self._block
        assert block is not None
        text = line[:-1] if line.endswith("\r") else line
        opener = _OPENER.fullmatch(text)
        if opener is not None:  # ``^^^`` closes; ``^^^name`` closes implicitly and opens the next
            block.close = line if not opener.group(1) else ""
            self._end_block()
            if opener.group(1):
                self._open(opener.group(1), line)
            return False
        block.head.append(line)
        if block.header.is_separator(text):
            block.body = []
            self._state = _State.BODY
            return True
        block.header.add(text)
        return False

    def _step_body(self) -> bool:
        block = self._block
        assert block is not None and block.body is not None
        data, pos = self._buf, self._pos
        search = pos
        while (at := data.find(_BODY_CLOSE, search)) != -1:
            size = _close_len(data, at + 1, self._final)
            if size == -1:
                block.body.append(data[pos:at])
                self._pos = at
                return False
            if size:
                block.body.append(data[pos : at + 1])  # heredoc: the last line keeps its newline
                block.close = data[at : at + 1 + size]
                self._end_block()
                self._pos = at + 1 + size
                return True
            search = at + 1
        self._pos = self._hold(pos, (_BODY_CLOSE,))
        block.body.append(data[pos : self._pos])
        return False

    # ---- blocks ----

    def _open(self, name: str, raw_line: str) -> None:
        """A complete opener line: report the cut, or start a block (and a call if the name resolves)."""
        if self._calls.cut():
            self._state = _State.DONE
            return
        self._calls.start(name)
        self._block = _Block(name, [raw_line])
        self._state = _State.HEADER

    def _end_of_output(self, finish_reason: FinishReason) -> None:
        """The output ended: finish a block's last header line, then apply the truncation rule to an open block."""
        if self._state is _State.HEADER and self._block is not None and self._block.line:
            line = "".join(self._block.line)
            self._block.line.clear()
            if _open_quote(line) and not truncated(finish_reason):  # at length, the truncation rule says it
                self._block.head.append(line)
                self._calls.fail(self._block.raw(), "tool block ends inside a quoted value")
                self._block = None
                return
            self._header_line(line)  # `^^^` closes the block, `^^^name` opens the next
        block = self._block
        if self._state not in (_State.HEADER, _State.BODY) or block is None:
            return
        if self._state is _State.BODY and block.body and any(block.body):
            block.body.append("\n")  # the newline that the left-out stop sequence "\n^^^\n" took
        self._calls.close_block(finish_reason, block.raw(), self._end_block)

    def _end_block(self) -> None:
        """Finalize the open block into ToolCallEnd or Malformed; back to PROSE at a line start."""
        block = self._block
        assert block is not None
        self._block, self._state, self._bol = None, _State.PROSE, True
        spec = self._calls.spec(block.name)
        args, repairs = block.header.arguments(spec.parameters if spec is not None else {})
        error, content = block.bad or block.header.error, block.content()
        if error is None and content is not None:
            if isinstance(args, dict) and "content" not in args:
                args["content"] = content
            elif content.strip():
                error = "content given both in the header and after ---"
        if error is not None:
            self._calls.fail(block.raw(), error)
        else:
            self._calls.finish(block.name, args, block.raw(), before=repairs)


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
    grammar: CallGrammar | None = None  # no grammar: its calls go unconstrained

    def render_tools(self, tools: Sequence[ToolSpec], tool_choice: ToolChoice, parallel: bool) -> str:
        # The worked example calls a real tool (the named one, else the first): on BFCL the local model copied
        # an invented example tool's block word for word, and a copy of a real call is at least a call.
        sample = example_tool(tools, tool_choice) or NO_TOOL
        example = "Example:\n" + render_block(sample.name, _example_arguments(sample))
        parts = ["# Tools", describe_tools(tools), choice_instruction(tool_choice, parallel), _SYNTAX, example]
        return "\n\n".join(parts)

    def worked_example(self, tools: Sequence[ToolSpec], tool_choice: ToolChoice) -> list[tuple[str, dict[str, Any]]]:
        return example_calls(tools, tool_choice, _example_arguments)

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

    def stops_between_calls(self) -> tuple[str, ...]:
        """The closing line ``^^^`` of a block that another block follows ends with ``\\n^^^\\n`` too."""
        return ("\n^^^\n",)

    def new_parser(self, tools: Sequence[ToolSpec], max_calls: int = 1) -> StreamParser:
        return guard(CaretParser(tools, max_calls), CallOpener(re.compile(r"\^\^\^")))
