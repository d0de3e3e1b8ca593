"""The ``react`` format: the classic ReAct protocol (Thought / Action / Action Input / Observation).

Wire example (the model writes everything except the Observation, which the stop sequence
``"\\nObservation:"`` prevents and the server usually leaves out of the output)::

    Thought: I need the weather in Paris.
    Action: get_weather
    Action Input: {"city": "Paris"}
    Observation: 18 °C, sunny            <- written by the proxy on the next turn
    Thought: I now know the answer.
    Final Answer: It is 18 °C in Paris.

``Thought:`` text is Reasoning, ``Final Answer:`` text and unmarked text are Text, and
``<think>...</think>`` is Reasoning anywhere in prose. Markers count only at the start of a line and
never inside a ``` fence in prose (the line syntax: ``_react_lines``; a fence that opens with a call is
dropped before this parser sees it: ``_guard``). Text without markers passes
unchanged; whitespace next to a marker, block or think tag is dropped, and two sections of one channel
are joined by a newline. ``Observation:`` before any Action is Reasoning. ``Action Input: {...}, {...}``:
each further object is a further call of the same tool (or the cut).

Answer fallback: small models sometimes end a turn without ``Final Answer:``, writing the answer as
an ``Observation:`` (imitating the tool result in the history) or as a bare ``Thought:``. Those
sections stream as Reasoning, since a ``Final Answer:`` or an Action may still follow. At ``close()``
(not when the output was cut, ``length`` or ``content_filter``: a cut-off thought may be a call's
preamble), if the output had no ``Final Answer:`` marker, no Action block (started, malformed or cut)
and no non-blank Text, the text of the last ``Observation:`` section, or else of the last ``Thought:``
section, is emitted once more as Text (stripped; at most ``KEEP_LIMIT`` characters are kept per
section, so the cost is bounded), unless a line of it starts with ``Action:`` / ``Action Input:``
(call markup glued to a marker is never an answer). The rule only looks at what the whole output
contains, so it gives the same events in any chunking. ``<think>`` text never becomes content, and an
``Observation:`` after a call is still an invented tool result that ends the turn.

States and transitions (one ``_step_*`` method per state, see ``_ReactParser._steps``)::

    PROSE        --"Thought:"/"Final Answer:"--> PROSE (switch channel)
                 --"<think>"-->                  THINK --"</think>"--> PROSE
                 --"Action:"-->                  ACTION_NAME (or cut: SecondToolStarted, DONE)
                 --"Action Input:" (orphan)-->   INPUT_START, no name: Malformed at the end
                 --"Observation:" after a call--> DONE (a hallucinated result: ignore the rest)
    ACTION_NAME  --end of line-->   AWAIT_INPUT  (ToolCallStart if the name resolves)
    AWAIT_INPUT  --"Action Input:"--> INPUT_START;  "{" or "```" --> INPUT_START (marker omitted);
                 --other line-->    PROSE (call with no arguments)
    INPUT_START  --"{"--> INPUT_JSON;  "```lang" --> INPUT_START (fenced);  a marker --> PROSE
                 --other--> INPUT_RAW
    INPUT_JSON   --balanced "}"--> INPUT_AFTER (ToolCallEnd);  a marker line outside strings --> PROSE
    INPUT_RAW    --marker line / closing fence--> PROSE (call finalized from the raw text)
    INPUT_AFTER  --optional closing "```"--> PROSE (Text channel, at a line start: markers count)

The JSON object is scanned with its string state (both quote kinds, escapes) tracked, so a
``"\\nAction:"`` inside a string value never ends the input; its raw text streams as
ToolCallArgs. Arguments are repaired and validated once, by ``finalize_call``. Call slots, the cut and
the end-of-output rule for an open block (``length`` / ``content_filter``: Malformed): ``_calls``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from enum import IntEnum, auto
from typing import Any

from ._calls import CallSlots, truncated
from ._guard import CallOpener, guard
from ._machine import StepParser
from ._prompt import example_calls
from ._react_lines import (
    COMMENT_END,
    FENCE,
    FENCE_TAG,
    FIRST_CHARS,
    INDENT,
    JSON_RUN,
    LINE_PREFIXES,
    SPACE,
    STRING_BODY,
    THINK_CLOSE,
    THINK_OPEN,
    Line,
    LineInfo,
    Marker,
    Section,
    arguments_line,
    classify_line,
    clean_name,
    example_arguments,
    has_call_line,
    input_arguments,
    prompt_text,
)
from ._text import MAX_HOLDBACK, EventBuffer, TextKind, partial_marker_len
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

_OBSERVATION = Marker.OBSERVATION.value.lower() + ":"
_MIN_PARTIAL_STOP = 3  # "Obs": shorter line ends ("O") are too likely to be real text


_NEXT_INPUT = re.compile(r"[ \t\r\n,;]*")  # between two Action Input objects (a comma or semicolon required)


class _State(IntEnum):  # IntEnum: hashed in C, for the step table lookup on every step
    PROSE = auto()
    THINK = auto()
    ACTION_NAME = auto()
    AWAIT_INPUT = auto()
    INPUT_START = auto()
    INPUT_JSON = auto()
    INPUT_RAW = auto()
    INPUT_AFTER = auto()
    DONE = auto()


class _ReactParser(StepParser[_State]):
    """Sans-IO ReAct parser for one response (see the module docstring for the states)."""

    DONE = _State.DONE

    def __init__(self, tools: Sequence[ToolSpec], max_calls: int) -> None:
        self._out = EventBuffer()
        self._calls = CallSlots(tools, max_calls, self._out)
        self._blocks = 0  # Action blocks seen, started or not
        self._state = _State.PROSE
        self._steps: dict[_State, Callable[[], bool]] = {
            _State.PROSE: self._step_prose,
            _State.THINK: self._step_think,
            _State.ACTION_NAME: self._step_action_name,
            _State.AWAIT_INPUT: self._step_await_input,
            _State.INPUT_START: self._step_input_start,
            _State.INPUT_JSON: self._step_input_json,
            _State.INPUT_RAW: self._step_input_raw,
            _State.INPUT_AFTER: self._step_input_after,
        }
        self._buf, self._pos, self._final = "", 0, False  # _final: close() is running, no more input comes
        self._line_start, self._in_fence = True, False
        self._section, self._outer = Section(Text, strip=False), Section(Text)
        self._emitted: set[TextKind] = set()  # channels that already got text, for the section separator
        self._answered = False  # a Final Answer marker or an Action block: no answer fallback
        self._has_text = False  # non-blank Text was emitted: no answer fallback
        self._thought: Section | None = None  # the last Thought section, for the fallback
        self._observation: Section | None = None  # the last Observation section before any Action
        self._final_answer = False  # a Final Answer was given: a later Action is a hallucination, not a call
        self._reset_block()

    def _reset_block(self) -> None:
        self._name: str | None = None
        self._name_parts: list[str] = []
        self._raw: list[str] = []  # the whole block as written, for Malformed
        self._args: list[str] = []  # the Action Input text
        self._fenced, self._depth, self._quote, self._arg_line_start = False, 0, "", False
        self._comment = ""  # "//" or "/*" inside the JSON input: quotes, braces and markers in it count for nothing
        self._name_wait = False  # "Action:" ended its line without a name: the name may be on the next one
        self._repairs: list[str] = []  # this block's repairs of the line syntax, reported with the call

    # ---- public API ------------------------------------------------------------------

    def close(self, finish_reason: FinishReason = "stop") -> list[Event]:
        if self._state is _State.DONE:
            return []
        self._buf, self._pos, self._final = self._buf[self._pos :], 0, True
        self._drop_partial_stop()
        self._run()
        self._end_block(finish_reason)
        if self._state in (_State.PROSE, _State.THINK) and self._section.pending:
            self._emit_text(self._section.channel, self._section.pending)  # trailing whitespace of the output
        self._state = _State.DONE
        if not truncated(finish_reason):  # a cut-off thought may be a call's preamble, not an answer
            self._answer_fallback()
        return self._out.take()

    def _drop_partial_stop(self) -> None:
        """At close: a last line that is only the start of ``Observation:`` (``Obs``: the stop sequence,
        cut short by the server or the token limit) is dropped, never text or argument."""
        buf = self._buf
        nl = buf.rfind("\n")
        word = buf[nl + 1 :].strip().strip("*").lower()
        at_line = nl != -1 or self._at_line_start()
        if at_line and len(word) >= _MIN_PARTIAL_STOP and _OBSERVATION.startswith(word) and word != _OBSERVATION:
            self._buf = buf[: max(nl, 0)]  # the newline belongs to the stop sequence ("\nObservation:")
            if nl == -1 and self._state is _State.PROSE:  # ... and it may wait as trailing whitespace
                self._section.pending = self._section.pending.removesuffix("\n")
            self._repairs.append("partial_stop")

    def _at_line_start(self) -> bool:
        """Whether the unread text starts a line (for ``_drop_partial_stop``)."""
        if self._state is _State.PROSE:
            return self._line_start
        if self._state in (_State.INPUT_RAW, _State.INPUT_JSON):
            return self._arg_line_start and not self._quote
        return self._state is _State.AWAIT_INPUT or (self._state is _State.ACTION_NAME and self._name_wait)

    # ---- output ----------------------------------------------------------------------

    def _emit_text(self, cls: TextKind, text: str) -> None:
        self._emitted.add(cls)
        self._has_text = self._has_text or (cls is Text and not text.isspace())
        self._out.text(cls, text)

    def _answer_fallback(self) -> None:
        """At the end: an answer written only as Observation / Thought becomes content (module docstring)."""
        if self._answered or self._has_text:
            return
        sec = self._observation or self._thought
        answer = "".join(sec.kept).strip() if sec is not None else ""
        if answer and not has_call_line(answer):  # call markup glued to a marker is not an answer
            self._emit_text(Text, answer)

    def _say(self, text: str) -> None:
        """Emit prose on the current section's channel, holding back trailing whitespace (capped)."""
        sec = self._section
        if not sec.started:
            text = text.lstrip() if sec.strip else text
            if not text:
                return
            sec.started = True
            if sec.channel in self._emitted:
                sec.pending = "\n"  # keep separate sections of one channel apart
        body = text.rstrip()
        if body:
            self._emit_text(sec.channel, sec.remember(sec.pending + body))
            sec.pending = text[len(body) :]
        else:
            sec.pending += text
        if len(sec.pending) > MAX_HOLDBACK:
            self._emit_text(sec.channel, sec.remember(sec.pending[:-MAX_HOLDBACK]))
            sec.pending = sec.pending[-MAX_HOLDBACK:]

    def _to_prose(self, channel: TextKind, line_start: bool, keep: bool = False) -> Section:
        self._state, self._section, self._line_start = _State.PROSE, Section(channel, keep=keep), line_start
        return self._section

    # ---- states ----------------------------------------------------------------------

    def _step_prose(self) -> bool:
        buf, pos = self._buf, self._pos
        if pos >= len(buf):
            return False
        if self._line_start:
            info = classify_line(buf, pos, self._final)
            if info is None:
                return False
            self._line_start = False
            if info[0] is Line.FENCE:
                self._in_fence = not self._in_fence
            elif info[0] is Line.MARKER and not self._in_fence:
                self._pos = info[2]
                self._on_marker(info[1], buf[pos : info[2]])  # type: ignore[arg-type]
            return True
        stop, at_line = self._plain_lines(pos)
        if not self._in_fence:
            think = buf.find(THINK_OPEN, pos, stop)
            if think != -1:
                self._say(buf[pos:think])
                self._pos = think + len(THINK_OPEN)
                self._state, self._outer, self._section = _State.THINK, self._section, Section(Reasoning)
                return True
            if not at_line and not self._final:
                stop -= partial_marker_len(buf[max(pos, stop - len(THINK_OPEN)) : stop], (THINK_OPEN,))
        self._say(buf[pos:stop])
        self._pos, self._line_start = stop, at_line
        return at_line

    def _plain_lines(self, pos: int) -> tuple[int, bool]:
        """Extend over lines that cannot start with a marker or fence: ``(stop, stop is a line start)``."""
        buf, n = self._buf, len(self._buf)
        while True:
            nl = buf.find("\n", pos)
            if nl == -1:
                return n, False
            pos = nl + 1
            first = INDENT.match(buf, pos).end()  # type: ignore[union-attr]
            if first + 3 > n or (buf[first] in FIRST_CHARS and buf[first : first + 3].lower() in LINE_PREFIXES):
                return pos, True

    def _on_marker(self, marker: Marker, raw: str) -> None:
        # A Final Answer or an Action block (started, malformed or cut) rules out the answer fallback.
        self._answered = self._answered or marker not in (Marker.THOUGHT, Marker.OBSERVATION)
        if self._final_answer and marker in (Marker.ACTION, Marker.ACTION_INPUT):
            self._state = _State.DONE  # an Action after the Final Answer: the answer wins (as in LangChain)
        elif marker is Marker.THOUGHT:
            self._thought = self._to_prose(Reasoning, line_start=False, keep=True)
        elif marker is Marker.OBSERVATION and not self._blocks:
            self._observation = self._to_prose(Reasoning, line_start=False, keep=True)
        elif marker is Marker.FINAL_ANSWER:
            self._final_answer = True
            self._to_prose(Text, line_start=False)
        elif marker is Marker.OBSERVATION:
            self._state = _State.DONE  # the model is inventing a tool result: nothing after it counts
        elif self._calls.cut():
            self._state = _State.DONE
        else:
            self._reset_block()
            self._raw.append(raw)
            self._state = _State.ACTION_NAME if marker is Marker.ACTION else _State.INPUT_START

    def _step_think(self) -> bool:
        buf, pos = self._buf, self._pos
        end = buf.find(THINK_CLOSE, pos)
        if end != -1:
            self._say(buf[pos:end])
            self._pos = end + len(THINK_CLOSE)
            self._state, self._section, self._line_start = _State.PROSE, self._outer, True
            self._section.strip = self._section.strip or not self._section.started
            return True
        stop = len(buf)
        if not self._final:
            stop -= partial_marker_len(buf[max(pos, stop - len(THINK_CLOSE)) :], (THINK_CLOSE,))
        self._say(buf[pos:stop])
        self._pos = stop
        return False

    def _step_action_name(self) -> bool:
        buf, pos = self._buf, self._pos
        if self._name_wait:  # the line after a bare "Action:": a name, unless it is a marker or fence
            info = classify_line(buf, pos, self._final)
            if info is None:
                return False
            self._name_wait = False
            if info[0] is not Line.PLAIN:
                self._complete_name()
                return True
        nl = buf.find("\n", pos)
        stop = len(buf) if nl == -1 else nl + 1
        self._name_parts.append(buf[pos:stop])
        self._raw.append(buf[pos:stop])
        self._pos = stop
        if nl == -1:
            return False
        self._complete_name()
        return True

    def _complete_name(self) -> None:
        """The Action line is complete: announce the call if its name resolves to a tool."""
        self._name = clean_name("".join(self._name_parts))
        if not self._name and not self._final and not self._name_wait and self._name_parts:
            self._name_parts, self._name_wait = [], True  # "Action:\nsearch" (LangChain reads it)
            self._repairs.append("name_next_line")
            return
        self._calls.start(self._name)
        self._state = _State.AWAIT_INPUT

    def _skip_space(self) -> int:
        """Consume whitespace into the raw block; the new position."""
        end = SPACE.match(self._buf, self._pos).end()  # type: ignore[union-attr]
        self._raw.append(self._buf[self._pos : end])
        self._pos = end
        return end

    def _step_await_input(self) -> bool:
        buf, pos = self._buf, self._skip_space()
        if pos >= len(buf):
            return False
        if buf[pos] == "{" or buf.startswith(FENCE, pos):
            self._state = _State.INPUT_START
            return True
        info = classify_line(buf, pos, self._final)
        if info is None:
            return False
        if info[1] is Marker.ACTION_INPUT:
            self._raw.append(buf[pos : info[2]])
            self._pos, self._state = info[2], _State.INPUT_START
        else:
            self._finish_block(None)
        return True

    def _step_input_start(self) -> bool:
        buf, pos = self._buf, self._skip_space()
        if pos >= len(buf):
            return False
        if buf[pos] == "{":
            self._state = _State.INPUT_JSON
            return True
        if buf.startswith(FENCE, pos) and self._fenced:  # an empty fenced input
            self._raw.append(FENCE)
            self._pos = pos + 3
            self._finish_block("")
            self._line_start = False
            return True
        if buf.startswith(FENCE, pos):
            tag_end = FENCE_TAG.match(buf, pos + 3).end()  # type: ignore[union-attr]
            if tag_end == len(buf) and tag_end - pos < 35 and not self._final:
                return False
            self._raw.append(buf[pos:tag_end])
            self._pos, self._fenced = tag_end, True
            return True
        info = classify_line(buf, pos, self._final)
        if info is None:
            return False
        if info[0] is Line.MARKER:
            self._finish_block("")
        else:
            self._state, self._arg_line_start = _State.INPUT_RAW, False
        return True

    def _step_input_json(self) -> bool:
        buf, n = self._buf, len(self._buf)
        start = pos = self._pos
        while pos < n:
            if self._quote:
                pos = STRING_BODY[self._quote].match(buf, pos).end()  # type: ignore[union-attr]
                if pos >= n or buf[pos] == "\\":  # a backslash at the end waits for its escaped char
                    break
                pos, self._quote = pos + 1, ""
                continue
            if self._comment:
                pos = self._skip_comment(pos)
                if self._comment:
                    break
                continue
            if self._arg_line_start:
                info = classify_line(buf, pos, self._final, strict=True)
                if info is None:
                    break
                if info[0] is Line.MARKER or (info[0] is Line.FENCE and self._fenced):
                    self._take_args(start, pos)
                    return self._end_input_at_line(info)
                self._arg_line_start = False
            pos = JSON_RUN.match(buf, pos).end()  # type: ignore[union-attr]
            if pos >= n:
                break
            char, pos = buf[pos], pos + 1
            if char == "{":
                self._depth += 1
            elif char == "}":
                self._depth -= 1
                if self._depth <= 0:
                    self._take_args(start, pos)
                    self._finish_block("".join(self._args), after=_State.INPUT_AFTER)
                    return True
            elif char == "\n":
                self._arg_line_start = True
            elif char == "/":
                if pos >= n and not self._final:
                    pos -= 1  # a comment may start: wait for the next character
                    break
                if pos < n and buf[pos] in "/*":
                    self._comment, pos = buf[pos - 1 : pos + 1], pos + 1
            else:
                self._quote = char
        self._take_args(start, pos)
        return False

    def _skip_comment(self, pos: int) -> int:
        """Past a JSON comment's end (a line comment stops before its newline, where a marker may follow);
        at the end of the buffer, all of it but a ``*`` that may start ``*/``."""
        buf, closer = self._buf, COMMENT_END[self._comment]
        at = buf.find(closer, pos)
        if at != -1:
            self._comment = ""
            return at if closer == "\n" else at + 2
        if closer == "*/" and buf.endswith("*") and not self._final and len(buf) > pos:
            return len(buf) - 1
        return len(buf)

    def _take_args(self, start: int, stop: int) -> None:
        """Consume ``buf[start:stop]`` as argument text and stream it if the call was announced."""
        piece = self._buf[start:stop]
        self._pos = stop
        if piece:
            self._args.append(piece)
            self._raw.append(piece)
            self._calls.args(piece)

    def _end_input_at_line(self, info: LineInfo) -> bool:
        """A marker line (or the closing fence) ended the Action Input: finalize what there is."""
        fence = info[0] is Line.FENCE
        if fence:
            self._raw.append(self._buf[self._pos : info[2]])
            self._pos = info[2]
        self._finish_block("".join(self._args))
        self._line_start = not fence
        return True

    def _step_input_raw(self) -> bool:
        buf, n, pos = self._buf, len(self._buf), self._pos
        while pos < n:
            if self._arg_line_start:
                info = classify_line(buf, pos, self._final)
                if info is None:
                    break
                if info[0] is Line.MARKER or (info[0] is Line.FENCE and self._fenced):
                    self._pos = pos
                    return self._end_input_at_line(info)
                self._arg_line_start = False
            nl = buf.find("\n", pos)
            stop = n if nl == -1 else nl + 1
            self._args.append(buf[pos:stop])
            self._raw.append(buf[pos:stop])
            pos, self._arg_line_start = stop, nl != -1
        self._pos = pos
        return False

    def _step_input_after(self) -> bool:
        """After the JSON object: swallow the closing fence of a fenced input, then back to prose."""
        buf, pos = self._buf, self._pos
        sep = _NEXT_INPUT.match(buf, pos).end()  # type: ignore[union-attr]
        if sep == len(buf) and sep - pos <= MAX_HOLDBACK and not self._final:
            return False  # blanks and commas: a next object may follow
        if sep < len(buf) and buf[sep] == "{" and ("," in buf[pos:sep] or ";" in buf[pos:sep]):
            return self._next_input(buf[pos:sep], sep)
        if self._fenced:
            end = SPACE.match(buf, pos).end()  # type: ignore[union-attr]
            if buf.startswith(FENCE, end):
                self._pos = end + 3
            elif not self._final and end - pos <= MAX_HOLDBACK and len(buf) - end < 3 and FENCE.startswith(buf[end:]):
                return False
        # The block is over: what follows starts afresh, so a marker glued to the closing "}" (a second
        # "Action:" written without a line break) is markup, never Text.
        self._to_prose(Text, line_start=True)
        self._reset_block()
        return True

    def _next_input(self, gap: str, pos: int) -> bool:
        """``Action Input: {...}, {...}``: a next object is a next call of the same tool (or the cut)."""
        name, fenced = self._name, self._fenced
        if self._calls.cut():
            self._state = _State.DONE
            return False
        self._reset_block()
        self._name, self._fenced, self._raw = name, fenced, [gap]
        if name is not None:
            self._calls.start(name)
        self._pos, self._state = pos, _State.INPUT_JSON
        return True

    # ---- finishing a block -------------------------------------------------------------

    def _end_block(self, finish_reason: FinishReason) -> None:
        """End of output inside a block: the truncation rule, else ``_complete_block``."""
        state = self._state
        if state in (_State.PROSE, _State.THINK, _State.INPUT_AFTER, _State.DONE):
            return
        leftover = self._buf[self._pos :]
        self._raw.append(leftover)
        self._calls.close_block(finish_reason, "".join(self._raw), lambda: self._complete_block(state, leftover))

    def _complete_block(self, state: _State, leftover: str) -> None:
        """The output ended in a block (a stop sequence may have eaten the rest): finalize what there is."""
        if state is _State.ACTION_NAME:
            self._name_parts.append(leftover)
            self._complete_name()
        elif state in (_State.INPUT_JSON, _State.INPUT_RAW):
            self._args.append(leftover)
        self._finish_block("".join(self._args) if state is not _State.AWAIT_INPUT else None)

    def _finish_block(self, raw_input: str | None, after: _State = _State.PROSE) -> None:
        """Finalize the call (ToolCallEnd or Malformed) and continue in ``after``."""
        self._blocks += 1
        raw = "".join(self._raw)
        if self._name is None:
            self._calls.fail(raw, "Action Input without an Action line")
        else:
            self._finalize(self._name, raw_input or "", raw)
        if after is _State.PROSE:
            self._to_prose(Text, line_start=True)
            self._reset_block()
        else:
            self._state = after

    def _finalize(self, name: str, text: str, raw: str) -> None:
        """End the call: the Action Input read as JSON, or as the value of the tool's one string parameter."""
        text = text.strip()
        spec = None if text.startswith(("{", "[")) or not text else self._calls.spec(name)
        arguments, extra = input_arguments(text, spec)
        self._calls.finish(name, arguments, raw, before=self._repairs, after=extra)


class ReactFormat:
    """ReAct text protocol: ``Action:`` / ``Action Input:`` lines, ``Observation:`` results."""

    name = "react"
    grammar: CallGrammar | None = None  # no grammar: its calls go unconstrained

    def render_tools(self, tools: Sequence[ToolSpec], tool_choice: ToolChoice, parallel: bool) -> str:
        return prompt_text(tools, tool_choice, parallel)

    def worked_example(self, tools: Sequence[ToolSpec], tool_choice: ToolChoice) -> list[tuple[str, dict[str, Any]]]:
        return example_calls(tools, tool_choice, example_arguments)

    def render_calls(self, calls: Sequence[ToolCallRecord]) -> str:
        return "\n".join(f"Action: {c.name}\nAction Input: {arguments_line(c.arguments)}" for c in calls)

    def render_result(self, name: str, content: str) -> str:
        return f"Observation: {content}"

    def stop_sequences(self) -> tuple[str, ...]:
        return ("\nObservation:",)

    def stops_between_calls(self) -> tuple[str, ...]:
        return ()  # Action blocks follow each other without an Observation line

    def new_parser(self, tools: Sequence[ToolSpec], max_calls: int = 1) -> StreamParser:
        return guard(_ReactParser(tools, max_calls), CallOpener(re.compile(r"(?:Thought|Action)[ \t]*:")))
