"""The ``pythonic`` tool format: a Python list of calls, as Llama 3.2+ and 4 are trained to write, BFCL's
prompt mode asks for, and vLLM's ``pythonic`` tool parser reads.

Wire syntax (keyword arguments, literal values; how they become JSON: ``_pythonic_values``)::

    [get_weather(city="Paris", unit="celsius"), get_time(zone="CET")]

A list opens at a line start (after blanks; ``[`` and the first name may be on separate lines), or mid-line
when its first name is an offered tool. What models write besides: one call without the brackets, alone on
its line and naming an offered tool (``get_weather(city="Paris")``, a stray ``]`` after it too: repair
``bare_call``), calls without the
comma between them (``missing_comma``), a list that never closes (the output or the first non-call ends it).
A list whose first name is no offered tool is ``Malformed`` (a re-ask), never text.

Parser states (``_State``, one ``_step_*`` method each) and transitions:

* LINE: a line start, decided from at most ``MAX_HOLDBACK`` characters: a ``` fence line (toggles the
  fence: inside one nothing is a call) -> TEXT; a list opener -> ARGS; ``<think>`` -> THINK; a bare call
  of an offered tool -> ARGS; else TEXT.
* TEXT: prose to the end of the line (-> LINE); mid-line ``[`` + an offered tool + ``(`` outside inline code
  -> ARGS.
* THINK: reasoning until ``</think>`` (and one line break after it) -> LINE.
* ARGS: the call's arguments, brackets and strings tracked, until its ``)``; the text is decoded once there.
  -> AFTER (in a list) or BARE_END.
* AFTER: between calls: ``,`` -> NEXT; ``]`` -> LINE (one newline swallowed); ``name(`` -> ARGS (repair);
  anything else ends the list -> TEXT.
* NEXT: after a comma: ``name(`` -> ARGS, or the cut (``SecondToolStarted``, DONE) after ``max_calls``
  calls; ``]`` -> LINE; anything else -> JUNK.
* JUNK: a non-call inside the list, dropped up to ``]`` or the line end (one ``Malformed``).
* BARE_END: after a bare call's ``)``: the rest of the line is blank -> a call (or the cut); else the
  whole line was prose -> TEXT.
* DONE: all input ignored.

At ``close("stop")`` an open call is completed by closing its brackets (a string left open is Malformed);
with ``"length"`` or ``"content_filter"`` it is Malformed (``_calls``). ``<tool_response`` is the stop sequence
(an invented result); a call list needs none, and the cut stops a second call.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from enum import IntEnum, auto
from typing import Any

from ._args import NAME_PREFIXES
from ._calls import CallSlots
from ._guard import CallOpener, guard
from ._hermes_markup import RESPONSE, RESPONSE_END
from ._hermes_render import _example_arguments
from ._machine import StepParser
from ._prompt import choice_instruction, describe_tools, example_calls
from ._pythonic_grammar import PYTHONIC_GRAMMAR
from ._pythonic_values import decode_arguments, render_list
from ._text import MAX_HOLDBACK, EventBuffer, partial_marker_len
from .base import CallGrammar, Event, FinishReason, Reasoning, StreamParser, Text, ToolCallRecord, ToolChoice, ToolSpec

_THINK_END = "</think>"
_NAME = r"[A-Za-z_][\w.\-]*"
_LIST_OPEN = re.compile(rf"[ \t]*\[\s*({_NAME})[ \t]*\(")
_LIST_PREFIX = re.compile(rf"[ \t]*(?:\[\s*(?:{_NAME}[ \t]*)?)?")
_BARE_OPEN = re.compile(rf"[ \t]*({_NAME})[ \t]*\(")
_BARE_PREFIX = re.compile(rf"[ \t]*(?:{_NAME}[ \t]*)?")
_THINK_OPEN = re.compile(r"[ \t]*<think>")
_THINK_PREFIX = re.compile(r"[ \t]*(?:<(?:t(?:h(?:i(?:n(?:k)?)?)?)?)?)?")
_FENCE = re.compile(r"[ \t]{0,16}```")
_FENCE_PREFIX = re.compile(r"[ \t]{0,16}`{0,2}")
_NEXT_CALL = re.compile(rf"({_NAME})[ \t]*\(")
_NEXT_PREFIX = re.compile(rf"{_NAME}[ \t]*")
_BLANKS = re.compile(r"\s*")
_BLANK_LINE = re.compile(r"[ \t\r]*\n")
_LINE_BLANKS = re.compile(r"[ \t;]*")
_BARE_TAIL = re.compile(r"[ \t;]*(?:\][ \t;]*)?")  # a "]" after a bare call: a list that lost its "["
_TEXT_STOP = re.compile(r"[\n\[`]")
_FENCE_NEWLINE = re.compile(r"\n")
_ARGS_STOP = re.compile(r"[()\[\]{}\"']")
_BARE_ARGS_STOP = re.compile(r"[()\[\]{}\"'\n]")  # a bare call also ends at a blank line: it was prose
_QUOTE_STOP = {q: re.compile(r"\\|" + re.escape(q)) for q in ('"', "'", '"""', "'''")}
_CLOSER = {"(": ")", "[": "]", "{": "}"}
_NAME_START = re.compile(r"[A-Za-z_]")


def _fold(name: str) -> str:
    """A name as ``ToolIndex`` compares it at its loosest: case and separators aside."""
    return name.casefold().replace("-", "_").replace(".", "_").replace(" ", "_")


SYNTAX = (
    "To call functions, reply with only a Python list of calls, keyword arguments with literal values:\n"
    "[func_name1(param1=value1, param2=value2), func_name2(param=value)]\n"
    "The results come back inside <tool_response></tool_response> tags."
)


# With several calls allowed: one call per item asked about, as OpenAI's parallel calls mean.
_SEVERAL = "all in the one list: a request about several things gets one call for each"


class _State(IntEnum):  # IntEnum: hashed in C, for the step table lookup on every step
    LINE = auto()
    TEXT = auto()
    THINK = auto()
    THOUGHT_END = auto()
    ARGS = auto()
    AFTER = auto()
    NEXT = auto()
    JUNK = auto()
    BARE_END = auto()
    DONE = auto()


class PythonicParser(StepParser[_State]):
    """Sans-IO parser for one response; see the module docstring for states and transitions."""

    DONE = _State.DONE

    def __init__(self, tools: Sequence[ToolSpec], max_calls: int = 1) -> None:
        self._out = EventBuffer()
        self._calls = CallSlots(tools, max_calls, self._out)
        # for the bare-call hold-back: a bare call's name is one of these (read in pieces, its start was held)
        self._names = tuple(_fold(prefix + t.name) for prefix in ("", *NAME_PREFIXES) for t in tools)
        self._buf = ""
        self._pos = 0
        self._final = False
        self._state = _State.LINE
        self._fenced = False  # inside a ``` fence of prose
        self._inline = False  # inside `inline code` on this line
        self._name = ""
        self._raw: list[str] = []  # the open call's text from its name (or the junk's text)
        self._open_len = 0  # length of the call's text up to and including "("
        self._stack: list[str] = []  # closers still expected in the open call
        self._quote: str | None = None  # the open string's quote
        self._bare = False
        self._repairs: list[str] = []
        self._steps: dict[_State, Callable[[], bool]] = {
            _State.LINE: self._step_line,
            _State.TEXT: self._step_text,
            _State.THINK: self._step_think,
            _State.THOUGHT_END: self._step_thought_end,
            _State.ARGS: self._step_args,
            _State.AFTER: self._step_after,
            _State.NEXT: self._step_next,
            _State.JUNK: self._step_junk,
            _State.BARE_END: self._step_bare_end,
        }

    def close(self, finish_reason: FinishReason = "stop") -> list[Event]:
        if self._state is _State.DONE:
            return self._out.take()
        self._final = True
        self._run()
        state, rest = self._state, self._buf[self._pos :]
        if state is _State.THINK:
            self._out.text(Reasoning, rest)
        elif state is _State.ARGS:
            raw = "".join(self._raw) + rest
            self._calls.close_block(finish_reason, raw, lambda: self._complete(raw))
        elif state is _State.JUNK:
            self._calls.fail("".join(self._raw) + rest, "not a call in the call list")
        self._state, self._buf, self._pos = _State.DONE, "", 0
        return self._out.take()

    # ---- prose ----

    def _open_end(self, start: int) -> bool:
        """Whether what begins at ``start`` may still grow into a marker (more input may come)."""
        return not self._final and len(self._buf) - start < MAX_HOLDBACK

    def _step_line(self) -> bool:
        buf, pos = self._buf, self._pos
        head = buf[pos : pos + MAX_HOLDBACK]
        waiting = self._open_end(pos)
        fence = _FENCE.match(head)
        if fence is not None:
            self._fenced = not self._fenced
            self._emit(pos + fence.end())
            self._state = _State.TEXT
            return True
        if self._fenced:
            if waiting and _FENCE_PREFIX.fullmatch(head):
                return False
            self._state = _State.TEXT
            return True
        opened = _LIST_OPEN.match(head)
        if opened is not None:
            self._open_list(opened.group(1), pos + opened.end(), pos + head.index("["))
            return True
        think = _THINK_OPEN.match(head)
        if think is not None:
            self._pos, self._state = pos + think.end(), _State.THINK
            return True
        bare = _BARE_OPEN.match(head)
        if bare is not None and self._may_name(bare.group(1)) and self._calls.resolve(bare.group(1)) is not None:
            self._begin(bare.group(1), pos + len(head) - len(head.lstrip(" \t")), pos + bare.end(), bare=True)
            return True
        if waiting and (
            any(p.fullmatch(head) for p in (_LIST_PREFIX, _THINK_PREFIX, _FENCE_PREFIX)) or self._may_name(head)
        ):
            return False
        self._state = _State.TEXT
        return True

    def _may_name(self, head: str) -> bool:
        """Whether a line start may still become a bare call: the start of an offered tool's name so far (or of one
        under a namespace models write, ``functions.`` or ``default_api.``)."""
        if _BARE_PREFIX.fullmatch(head) is None:
            return False
        word = _fold(head.strip())
        return any(name.startswith(word) for name in self._names)

    def _step_text(self) -> bool:
        buf, pos = self._buf, self._pos
        while True:
            found = (_FENCE_NEWLINE if self._fenced else _TEXT_STOP).search(buf, pos)
            if found is None:
                self._emit(len(buf))
                return False
            mark, at = found.group(), found.start()
            if mark == "\n":
                self._emit(at + 1)
                self._inline, self._state = False, _State.LINE
                return True
            pos = at + 1
            if mark == "`":
                self._inline = not self._inline
                continue
            if self._inline:
                continue
            opened = _LIST_OPEN.match(buf, at)
            if opened is not None and self._calls.resolve(opened.group(1)) is not None:
                self._emit(at)
                self._open_list(opened.group(1), opened.end(), at)
                return True
            if opened is None and self._open_end(at) and _LIST_PREFIX.fullmatch(buf, at):
                self._emit(at)
                return False

    def _step_think(self) -> bool:
        buf, pos = self._buf, self._pos
        end = buf.find(_THINK_END, pos)
        if end == -1:
            keep = 0 if self._final else partial_marker_len(buf[pos:], (_THINK_END,))
            self._out.text(Reasoning, buf[pos : len(buf) - keep])
            self._pos = len(buf) - keep
            return False
        self._out.text(Reasoning, buf[pos:end])
        self._pos, self._state = end + len(_THINK_END), _State.THOUGHT_END
        return True

    def _step_thought_end(self) -> bool:
        """One line break after ``</think>`` goes with it."""
        skip = self._line_break(self._pos)
        if skip is None:
            return False
        self._pos, self._state = self._pos + skip, _State.LINE
        return True

    def _line_break(self, at: int) -> int | None:
        """Length of the line break at ``at`` (0: none), or None while the input ends before it shows."""
        rest = self._buf[at : at + 2]
        if rest in ("", "\r") and not self._final:
            return None
        return 2 if rest == "\r\n" else 1 if rest[:1] == "\n" else 0

    def _emit(self, end: int) -> None:
        self._out.text(Text, self._buf[self._pos : end])
        self._pos = end

    # ---- calls ----

    def _open_list(self, name: str, args_at: int, bracket_at: int) -> None:
        self._pos = bracket_at + 1  # the bracket and the blanks before it are markup
        self._begin(name, self._pos, args_at, bare=False)

    def _begin(self, name: str, start: int, args_at: int, *, bare: bool) -> None:
        """A call ``name(`` from ``start``; its arguments begin at ``args_at``."""
        if not bare and self._calls.cut():
            self._state = _State.DONE
            return
        opener = self._buf[start:args_at]
        self._name, self._bare, self._raw, self._open_len = name, bare, [opener], len(opener)
        self._stack, self._quote, self._pos = [")"], None, args_at
        if not bare:
            self._calls.start(name)
        self._state = _State.ARGS

    def _step_args(self) -> bool:
        buf, pos = self._buf, self._pos
        while True:
            if self._quote is not None:
                found = _QUOTE_STOP[self._quote].search(buf, pos)
                if found is None:
                    self._take(len(buf) - self._partial_close(pos))
                    return False
                if found.group() == "\\" and found.end() == len(buf):
                    self._take(found.start())  # the escaped character is still to come
                    return False
                pos = found.end() + (found.group() == "\\")
                if found.group() != "\\":
                    self._quote = None
                continue
            found = (_BARE_ARGS_STOP if self._bare else _ARGS_STOP).search(buf, pos)
            if found is None:
                self._take(len(buf))
                return False
            mark, at = found.group(), found.start()
            if mark == "\n":
                blank = _BLANK_LINE.match(buf, at + 1)
                if blank is not None:
                    self._take(at)
                    self._out.text(Text, "".join(self._raw))  # no call after all: prose that began like one
                    self._state = _State.TEXT
                    return True
                if self._open_end(at + 1) and buf[at + 1 :].strip(" \t\r") == "":
                    self._take(at)
                    return False
                pos = at + 1
            elif mark in "\"'":
                run = len(buf) - at
                if run < 3 and not self._final and buf[at:] == mark * run:
                    self._take(at)  # may still become a triple quote
                    return False
                self._quote = mark * 3 if buf.startswith(mark * 3, at) else mark
                pos = at + len(self._quote)
            elif mark in _CLOSER:
                self._stack.append(_CLOSER[mark])
                pos = at + 1
            else:
                pos = at + 1
                if mark in self._stack:
                    del self._stack[len(self._stack) - 1 - self._stack[::-1].index(mark) :]
                if not self._stack:
                    self._take(pos)
                    self._end_call()
                    return True

    def _partial_close(self, start: int) -> int:
        """How many quotes at the end of the input may begin the open triple-quoted string's close."""
        quote = self._quote or ""
        if len(quote) < 3:
            return 0
        tail = self._buf[max(start, len(self._buf) - 2) :]
        return len(tail) - len(tail.rstrip(quote[0]))

    def _take(self, end: int) -> None:
        self._raw.append(self._buf[self._pos : end])
        self._pos = end

    def _end_call(self) -> None:
        if self._bare:
            self._state = _State.BARE_END
            return
        self._finish("".join(self._raw), [])
        self._state = _State.AFTER

    def _finish(self, raw: str, repairs: list[str]) -> None:
        """Decode the call's arguments once and finalize it (``Malformed`` when they are not literals)."""
        before, self._repairs = [*self._repairs, *repairs], []
        if self._calls.resolve(self._name) is None:
            self._calls.finish(self._name, {}, raw)  # Malformed, naming the unknown tool
            return
        arguments, found, error = decode_arguments(raw[self._open_len : -1], self._calls.spec(self._name))
        if arguments is None:
            self._calls.fail(raw, error or "unreadable arguments")
            return
        self._calls.finish(self._name, arguments, raw, before=[*before, *found])

    def _complete(self, raw: str) -> None:
        """The output ended inside a call (a stop ate its end): close its brackets, or Malformed in a string."""
        if self._quote is not None:
            self._calls.fail(raw, "the call ends inside a string")
        elif not (self._bare and self._calls.cut()):
            repairs = ["unclosed_call", *(["bare_call"] if self._bare else [])]
            self._finish(raw + "".join(reversed(self._stack)), repairs)

    def _step_bare_end(self) -> bool:
        buf = self._buf
        end = _BARE_TAIL.match(buf, self._pos).end()  # type: ignore[union-attr]
        if end == len(buf) and not self._final:
            return False
        if end < len(buf) and buf[end] not in "\r\n":  # more on the line: it was prose, e.g. `f(x) is ...`
            self._out.text(Text, "".join(self._raw))
            self._state = _State.TEXT
            return True
        skip = self._line_break(end)
        if skip is None:
            return False
        if self._calls.cut():
            self._state = _State.DONE
            return True
        self._finish("".join(self._raw), ["bare_call"])
        self._pos = end + skip
        self._state = _State.LINE
        return True

    def _step_after(self) -> bool:
        buf = self._buf
        at = _BLANKS.match(buf, self._pos).end()  # type: ignore[union-attr]
        if at == len(buf):
            self._pos = at
            return False
        mark = buf[at]
        if mark == ",":
            self._pos, self._state = at + 1, _State.NEXT
            return True
        if mark == "]":
            return self._close_list(at + 1)
        if _NAME_START.match(mark):
            follows = _NEXT_CALL.match(buf, at)
            if follows is not None:
                self._repairs = ["missing_comma"]
                self._begin(follows.group(1), at, follows.end(), bare=False)
                return True
            if self._open_end(at) and _NEXT_PREFIX.fullmatch(buf, at):
                return False
        line_start = "\n" in buf[self._pos : at]
        self._pos = at  # the list ended without its bracket: the rest is prose
        self._state = _State.LINE if line_start else _State.TEXT
        return True

    def _close_list(self, after: int) -> bool:
        """``]`` ends the list; one line break after it goes with it."""
        buf = self._buf
        skip = self._line_break(after)
        if skip is None:
            self._pos = after - 1  # see whether a line break follows
            return False
        self._pos = after + skip
        self._state = _State.LINE if skip or after == len(buf) else _State.TEXT
        return True

    def _step_next(self) -> bool:
        buf = self._buf
        at = _BLANKS.match(buf, self._pos).end()  # type: ignore[union-attr]
        self._pos = at
        if at == len(buf):
            return False
        if buf[at] == "]":
            return self._close_list(at + 1)
        follows = _NEXT_CALL.match(buf, at)
        if follows is not None:
            self._begin(follows.group(1), at, follows.end(), bare=False)
            return True
        if self._open_end(at) and _NEXT_PREFIX.fullmatch(buf, at):
            return False
        self._raw, self._state = [], _State.JUNK
        return True

    def _step_junk(self) -> bool:
        buf, pos = self._buf, self._pos
        end = min((i for i in (buf.find("]", pos), buf.find("\n", pos)) if i != -1), default=-1)
        if end == -1:
            self._take(len(buf))
            return False
        self._take(end)
        self._calls.fail("".join(self._raw), "not a call in the call list")
        self._raw = []
        if buf[end] == "]":
            self._state = _State.AFTER  # closes the list
        else:
            self._pos, self._state = end + 1, _State.LINE
        return True


def _arguments_of(call: ToolCallRecord) -> dict[str, Any]:
    """A history call's arguments; text that is no JSON object is handed back as one ``arguments`` string."""
    try:
        value = json.loads(call.arguments) if call.arguments.strip() else {}
    except ValueError:
        value = call.arguments
    return value if isinstance(value, dict) else {"arguments": call.arguments}


class PythonicFormat:
    """``[name(key=value), ...]`` tool calls: a Python list of calls with literal arguments."""

    name = "pythonic"
    grammar: CallGrammar | None = PYTHONIC_GRAMMAR  # the grammar its calls are constrained to (_pythonic_grammar)

    def render_tools(self, tools: Sequence[ToolSpec], tool_choice: ToolChoice, parallel: bool) -> str:
        # No worked example with a real tool: on BFCL the local model copied its placeholder values and
        # called its tool when another fitted; the generic list in SYNTAX shows the syntax, as BFCL's prompt does.
        parts = ["# Tools\n\nYou can call these functions:\n\n" + describe_tools(tools), SYNTAX]
        if tool_choice.mode == "named":
            named = next((t for t in tools if t.name == tool_choice.name), ToolSpec(str(tool_choice.name)))
            parts.append("Call it like this:\n" + render_list([(named.name, _example_arguments(named))]))
        return "\n\n".join([*parts, choice_instruction(tool_choice, parallel, _SEVERAL)])

    def worked_example(self, tools: Sequence[ToolSpec], tool_choice: ToolChoice) -> list[tuple[str, dict[str, Any]]]:
        return example_calls(tools, tool_choice, _example_arguments) if tool_choice.mode == "named" else []

    def render_calls(self, calls: Sequence[ToolCallRecord]) -> str:
        return render_list([(call.name, _arguments_of(call)) for call in calls])

    def render_result(self, name: str, content: str) -> str:
        return f"{RESPONSE}\n{content}\n{RESPONSE_END}"

    def stop_sequences(self) -> tuple[str, ...]:
        return ("\n<tool_response",)  # an invented result (on its own line: _guard); the list needs no stop

    def stops_between_calls(self) -> tuple[str, ...]:
        return ()

    def new_parser(self, tools: Sequence[ToolSpec], max_calls: int = 1) -> StreamParser:
        return guard(PythonicParser(tools, max_calls), CallOpener(_LIST_OPEN))
