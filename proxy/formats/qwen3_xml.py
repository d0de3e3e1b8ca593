"""The ``qwen3_xml`` tool-call format: Qwen3-Coder's ``<function=NAME>`` blocks with raw-text parameters.

Wire syntax (what the model writes; values are raw text, typed by the tool's schema)::

    I'll write it.
    <tool_call>
    <function=write_file>
    <parameter=path>
    src/app.py
    </parameter>
    <parameter=content>
    def f(x):
        return "a<b" and x
    </parameter>
    </function>
    </tool_call>

What models write besides (vLLM's qwen3coder parser accepts it too): no ``<tool_call>`` wrapper, a missing
``</parameter>`` (the value ends at the next ``<parameter=`` or ``</function>``), a missing ``</function>``
(it ends at ``</tool_call>`` or the next ``<function=``), several functions in one wrapper. How a block
becomes calls and how values are typed: ``_qwen3_block``.

``</tool_call>`` is a stop sequence (one-call turns end after the first block; a stop that ate it leaves a
block ``close()`` completes), left out between calls; ``<tool_response>`` stops an imitated result.

Parser states (``_State``, one ``_step_*`` method each, see ``Qwen3XmlParser._steps``) and transitions:

* PROSE: text (``_tagprose``: code fences and inline code keep markers as text). ``<tool_call>`` -> WRAPPER;
  ``<function=`` -> FUNC_TAG (bare); ``<think>`` -> THINK; ``<tool_response`` -> DONE; ``<parameter=`` ->
  STRAY_TAG; stray ``</tool_call>``/``</function>``/``</parameter>``/``</think>`` are dropped.
* THINK: reasoning until ``</think>`` -> PROSE.
* STRAY_TAG: a ``<parameter=NAME>`` outside a function: the tag is dropped, its value stays text -> PROSE.
* WRAPPER: inside ``<tool_call>``, between functions: ``<function=`` -> FUNC_TAG; ``</tool_call>`` -> PROSE
  (Malformed when it held no function); other text is ignored (repair ``stray_text``).
* FUNC_TAG: the name up to ``>``; after ``max_calls`` calls -> SecondToolStarted, DONE; else ToolCallStart
  (offered tools only) -> FUNCTION. A bad name -> Malformed, back where it came from.
* FUNCTION: the body, with ``<parameter=``/``</parameter>`` tracked so that markup inside a value stays value;
  ``</function>`` ends it -> WRAPPER or PROSE; ``</tool_call>`` ends it and the wrapper (repair
  ``unclosed_function``) -> PROSE; ``<function=`` / ``<tool_call>`` outside a value end it (repair) -> FUNC_TAG
  / WRAPPER. The function's text is decoded once, at its end (``decode_qwen3_block``).
* DONE: all input ignored.

At ``close("stop")`` an open function is completed (a stop sequence may have eaten its closing tags; an open
value ends with the output); with ``"length"`` or ``"content_filter"`` it is Malformed (``_calls``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from enum import IntEnum, auto
from typing import Any

from ._calls import CallSlots
from ._guard import CallOpener, guard
from ._hermes_markup import RESPONSE, RESPONSE_END
from ._hermes_render import _example_arguments
from ._machine import StepParser
from ._prompt import choice_instruction, describe_tools, example_calls
from ._qwen3_block import (
    CLOSE,
    FUNCTION,
    FUNCTION_END,
    LINE_STARTS,
    LINE_STOPS,
    MAX_NAME,
    OPEN,
    PARAM,
    PARAM_END,
    SYNTAX,
    decode_qwen3_block_with,
    example_call,
    render_calls,
)
from ._tagprose import THINK, THINK_END, TagProse, held_back
from ._text import EventBuffer
from .base import CallGrammar, Event, FinishReason, Malformed, StreamParser, ToolCallRecord, ToolChoice, ToolSpec

_STOP = "<tool_response"
_PROSE_MARKERS = (OPEN, CLOSE, FUNCTION, FUNCTION_END, PARAM, PARAM_END, _STOP)
_BODY_MARKERS = (PARAM, PARAM_END, FUNCTION_END, CLOSE, FUNCTION, OPEN)
_BODY_LONGEST = max(map(len, _BODY_MARKERS))
_BODY_RE = re.compile("|".join(map(re.escape, _BODY_MARKERS)))  # literal alternatives: no backtracking
_WRAPPER_MARKERS = (FUNCTION, CLOSE)
_NAME_RE = re.compile(rf"[^<>\r\n]{{0,{MAX_NAME + 1}}}")
# finalize_call's names for converting text to the schema's type: in this format that is the syntax, not a repair.
_SYNTAX_COERCIONS = frozenset(("coerce_types", "embedded_json", "wrap_array"))


class _State(IntEnum):  # IntEnum: hashed in C, for the step table lookup on every step
    PROSE = auto()
    THINK = auto()
    STRAY_TAG = auto()
    WRAPPER = auto()
    FUNC_TAG = auto()
    FUNCTION = auto()
    DONE = auto()


class Qwen3XmlParser(StepParser[_State]):
    """Sans-IO parser for one response; see the module docstring for states and transitions."""

    DONE = _State.DONE

    def __init__(self, tools: Sequence[ToolSpec], max_calls: int = 1) -> None:
        self._out = EventBuffer()
        self._calls = CallSlots(tools, max_calls, self._out)
        self._prose = TagProse(_PROSE_MARKERS, self._out)
        self._buf = ""
        self._pos = 0
        self._state = _State.PROSE
        self._wrapped = False  # inside <tool_call>
        self._wrapper_raw: list[str] = []  # the wrapper's text before its first function (for Malformed)
        self._wrapper_calls = 0  # functions read in the current wrapper
        self._wrapper_junk = False  # text other than blanks between functions
        self._raw: list[str] = []  # the open function's text, from "<function="
        self._name = ""
        self._in_value = False
        self._repairs: list[str] = []
        self._steps: dict[_State, Callable[[], bool]] = {
            _State.PROSE: self._step_prose,
            _State.THINK: self._step_think,
            _State.STRAY_TAG: self._step_stray_tag,
            _State.WRAPPER: self._step_wrapper,
            _State.FUNC_TAG: self._step_func_tag,
            _State.FUNCTION: self._step_function,
        }

    def close(self, finish_reason: FinishReason = "stop") -> list[Event]:
        state, rest = self._state, self._buf[self._pos :]
        if state is _State.PROSE:
            self._prose.flush(rest)
        elif state is _State.THINK:
            self._prose.think(rest + THINK_END, 0)
        elif state is _State.FUNC_TAG:
            self._out.push(Malformed(FUNCTION + rest, "unfinished function tag"))
        elif state is _State.WRAPPER and not self._wrapper_calls:
            self._out.push(Malformed("".join(self._wrapper_raw) + rest, "tool block without a function"))
        elif state is _State.FUNCTION:
            self._raw.append(rest)
            raw = "".join(self._raw)
            self._calls.close_block(finish_reason, raw, lambda: self._finish_function(["unclosed_function"]))
        self._state, self._buf, self._pos = _State.DONE, "", 0
        return self._out.take()

    # ---- states outside functions ----

    def _step_prose(self) -> bool:
        found = self._prose.scan(self._buf, self._pos)
        self._pos = found.end
        marker = found.marker
        if marker is None:
            return False
        if found.joined or marker in (CLOSE, FUNCTION_END, PARAM_END, THINK_END, PARAM):
            self._state = _State.STRAY_TAG if marker in (FUNCTION, PARAM) else _State.PROSE
            self._prose.after_markup(False)
        elif marker == _STOP:
            self._state = _State.DONE
        elif marker == THINK:
            self._state = _State.THINK
        elif self._calls.cut():  # a new block (<tool_call> or a bare <function=) after max_calls calls
            self._state = _State.DONE
        elif marker == OPEN:
            self._open_wrapper()
        else:
            self._state = _State.FUNC_TAG
        return True

    def _step_think(self) -> bool:
        found = self._prose.think(self._buf, self._pos)
        self._pos = found.end
        if found.marker is None:
            return False
        self._state = _State.PROSE
        return True

    def _scan_name(self) -> tuple[str, bool] | None:
        """Consume a tag name at the cursor: ``(name, closed_by_gt)``; None while it may still grow."""
        buf, pos = self._buf, self._pos
        match = _NAME_RE.match(buf, pos)
        end = match.end() if match else pos
        if end == len(buf) and end - pos <= MAX_NAME:
            return None
        name = buf[pos:end]
        closed = end < len(buf) and buf[end] == ">" and len(name) <= MAX_NAME
        self._pos = end + 1 if closed else end
        return name, closed

    def _step_stray_tag(self) -> bool:
        """Drop a stray tag's name up to ``>`` (``<parameter=NAME>`` outside a function); its value stays text."""
        if self._scan_name() is None:
            return False
        self._state = _State.PROSE
        self._prose.after_markup(False)
        return True

    def _open_wrapper(self) -> None:
        self._state, self._wrapped = _State.WRAPPER, True
        self._wrapper_raw, self._wrapper_calls, self._wrapper_junk = [OPEN], 0, False

    def _step_wrapper(self) -> bool:
        buf, pos = self._buf, self._pos
        lt = buf.find("<", pos)
        junk = buf[pos : len(buf) if lt == -1 else lt]
        self._wrapper_junk = self._wrapper_junk or bool(junk.strip())
        if not self._wrapper_calls:
            self._wrapper_raw.append(junk)
        if lt == -1:
            self._pos = len(buf)
            return False
        head = buf[lt : lt + len(CLOSE)]
        for marker in _WRAPPER_MARKERS:
            if head.startswith(marker):
                self._pos = lt + len(marker)
                if marker == CLOSE:
                    self._end_wrapper()
                elif self._calls.cut():
                    self._state = _State.DONE
                else:
                    self._state = _State.FUNC_TAG
                return True
            if marker.startswith(head) and lt + len(head) == len(buf):
                self._pos = lt
                return False
        self._pos = lt + 1
        self._wrapper_junk = True
        if not self._wrapper_calls:
            self._wrapper_raw.append("<")
        return True

    def _end_wrapper(self) -> None:
        if not self._wrapper_calls:
            self._out.push(Malformed("".join(self._wrapper_raw) + CLOSE, "tool block without a function"))
        self._wrapped, self._state = False, _State.PROSE
        self._prose.after_markup(True)

    # ---- a function ----

    def _step_func_tag(self) -> bool:
        start = self._pos
        scanned = self._scan_name()
        if scanned is None:
            return False
        raw, closed = scanned
        name = raw.strip()
        if not closed or not name:
            self._out.push(Malformed(FUNCTION + raw + ">" * closed, "malformed function tag"))
            self._state = _State.WRAPPER if self._wrapped else _State.PROSE
            if not self._wrapped:
                self._prose.after_markup(False)
            return True
        self._calls.start(name)
        self._name, self._raw, self._in_value = name, [FUNCTION, self._buf[start : self._pos]], False
        self._repairs = ["stray_text"] if self._wrapper_junk else []
        self._state = _State.FUNCTION
        return True

    def _step_function(self) -> bool:
        buf, pos = self._buf, self._pos
        while True:
            match = _BODY_RE.search(buf, pos)
            if match is None:
                self._take(len(buf) - held_back(buf, pos, _BODY_MARKERS, _BODY_LONGEST))
                return False
            marker, lt = match.group(), match.start()
            if self._in_value and marker != PARAM_END and (marker not in LINE_STOPS or not self._line_start(lt)):
                pos = lt + len(marker)  # the value's own text
            elif marker in (PARAM, PARAM_END):
                self._in_value = marker == PARAM
                pos = lt + len(marker)
            else:
                self._take(lt)
                self._end_function(marker, lt)
                return True

    def _line_start(self, at: int) -> bool:
        """Whether the marker at ``at`` starts a line or follows a tag (inside a value: ends it)."""
        if at > self._pos:
            return self._buf[at - 1] in LINE_STARTS
        last = next((piece for piece in reversed(self._raw) if piece), "")
        return last[-1:] in tuple(LINE_STARTS)

    def _take(self, end: int) -> None:
        self._raw.append(self._buf[self._pos : end])
        self._pos = end

    def _end_function(self, marker: str, at: int) -> None:
        """The function ends at ``marker`` (at ``at``): decode it, then go where the marker leads."""
        if marker == FUNCTION_END:
            self._raw.append(FUNCTION_END)
            self._pos = at + len(FUNCTION_END)
            self._finish_function([])
            self._state = _State.WRAPPER if self._wrapped else _State.PROSE
        elif marker == CLOSE:
            self._pos = at + len(CLOSE)
            self._finish_function(["unclosed_function"])
            self._state = _State.PROSE
        else:  # <function= or <tool_call> outside a value: this function was never closed
            self._pos = at + len(marker)
            self._finish_function(["unclosed_function"])
            if self._calls.cut():
                self._state = _State.DONE
            elif marker == OPEN:
                self._open_wrapper()
            else:
                self._state = _State.FUNC_TAG
            return
        if self._state is _State.PROSE:
            self._wrapped = False
            self._prose.after_markup(True)

    def _finish_function(self, repairs: list[str]) -> None:
        """Decode the function's text once and finalize its call."""
        raw = "".join(self._raw)
        self._raw = []
        self._wrapper_calls += 1
        decoded = decode_qwen3_block_with(raw, self._calls.tools)
        arguments = decoded[0][1] if decoded else None
        self._calls.finish(self._name, arguments, raw, before=[*self._repairs, *repairs], hide=_SYNTAX_COERCIONS)


class Qwen3XmlFormat:
    """``<tool_call><function=NAME><parameter=KEY>raw value</parameter></function></tool_call>`` tool calls."""

    name = "qwen3_xml"
    grammar: CallGrammar | None = None  # no grammar: its calls go unconstrained

    def render_tools(self, tools: Sequence[ToolSpec], tool_choice: ToolChoice, parallel: bool) -> str:
        return "\n\n".join(
            (
                "# Tools\n\nYou have access to the following functions:\n\n<tools>\n"
                + describe_tools(tools)
                + "\n</tools>",
                SYNTAX,
                "For example:\n" + example_call(tools, tool_choice),
                choice_instruction(tool_choice, parallel),
            )
        )

    def worked_example(self, tools: Sequence[ToolSpec], tool_choice: ToolChoice) -> list[tuple[str, dict[str, Any]]]:
        return example_calls(tools, tool_choice, _example_arguments)

    def render_calls(self, calls: Sequence[ToolCallRecord]) -> str:
        return render_calls(calls)

    def render_result(self, name: str, content: str) -> str:
        return f"{RESPONSE}\n{content}\n{RESPONSE_END}"

    def stop_sequences(self) -> tuple[str, ...]:
        # `</tool_call>` ends generation after the first block (close() completes it when the server left
        # the stop out of the text); `\n<tool_response>` stops an invented result
        # (at a line start only: an answer that opens with `<tool_response>` misnames its wrapper, see _guard).
        return (CLOSE, "\n" + RESPONSE)

    def stops_between_calls(self) -> tuple[str, ...]:
        return (CLOSE,)  # every block ends with it, the next block follows

    def new_parser(self, tools: Sequence[ToolSpec], max_calls: int = 1) -> StreamParser:
        return guard(Qwen3XmlParser(tools, max_calls), CallOpener(re.compile(r"<tool_call>|<function=")))
