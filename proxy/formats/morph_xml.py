"""The ``morph_xml`` tool-call format: one XML element per call, named after the tool (the AI SDK tool middleware's
morphXml protocol).

Wire syntax (what the model writes)::

    Let me look that up.
    <search_docs>
    <query>streaming &amp; retries</query>
    <limit>5</limit>
    <tags><item>api</item><item>http</item></tags>
    </search_docs>

Only the request's tool names open a block (``<NAME>``, or ``<NAME/>`` for a call without arguments); any
other tag (``<b>``, ``<city>`` in prose) is text. Models also write arguments as attributes
(``<get_weather city="Paris"/>``, ``<get_weather city="Paris">...</get_weather>``): read as the same
parameter elements, written first. How an element's body becomes arguments (nested objects,
repeated elements and ``<item>`` children as arrays, raw-text strings, entities, schema typing): ``_morph_block``.

Stop sequences: a call ends with ``</NAME>``, which no fixed stop string can name, so ``<tool_response`` (where
the model starts to imitate a result) is the stop, as in the ``xml`` format; one reaching the parser ends it.

Parser states (``_State``, one ``_step_*`` method each, see ``MorphXmlParser._steps``) and transitions:

* PROSE: text (``_tagprose``: code fences and inline code keep markers as text). ``<NAME>`` -> BODY (after
  ``max_calls`` calls: SecondToolStarted, DONE); ``<NAME/>`` is a whole call; ``<NAME `` -> ATTRS; ``<think>`` -> THINK;
  ``<tool_response`` -> DONE; stray ``</NAME>`` and ``</think>`` are dropped. ``<TOOL_NAME>`` / ``<tool_name>`` (the
  prompt's own placeholders, copied) -> BODY too, and the element is dropped as Malformed, taking no call slot.
* ATTRS: held until the tag's ``>`` (at most ``_ATTRS_CAP`` characters): quoted attributes only and
  ``/>`` -> a whole call, ``>`` -> BODY; anything else: the held text was prose -> PROSE.
* THINK: reasoning until ``</think>`` -> PROSE.
* BODY: the element's text up to its matching ``</NAME>`` (a nested ``<NAME>`` counts), decoded once, then
  ToolCallEnd or Malformed -> PROSE. Text between parameter elements is repair ``stray_text``.
* DONE: all input ignored.

At ``close("stop")`` an open element is completed (a stop may have eaten ``</NAME>``) unless text other than
parameter elements stands in it (then it was prose mentioning the tag: Malformed); with ``"length"`` or
``"content_filter"`` it is Malformed (``_calls``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from enum import IntEnum, auto
from typing import Any

from ._calls import CallSlots
from ._guard import CallOpener, guard
from ._hermes_render import _example_arguments
from ._machine import StepParser
from ._morph_block import RESPONSE, SYNTAX, TAG, decode_element, example_call, render_calls
from ._prompt import choice_instruction, describe_tools, example_calls
from ._tagprose import THINK, THINK_END, TagProse, held_back
from ._text import EventBuffer
from .base import CallGrammar, Event, FinishReason, StreamParser, ToolCallRecord, ToolChoice, ToolSpec

_BLANKS = 16  # blanks allowed before a closing tag's ">" (bounds what BODY holds back)
_ATTRS_CAP = 8192  # the longest opening tag with attributes held before it counts as prose
_ATTR = re.compile(r"""[ \t\r\n]+([A-Za-z_][\w.-]{0,99})[ \t]*=[ \t]*(?:"([^"<]*)"|'([^'<]*)')""")
_ATTRS_END = re.compile(r"[ \t\r\n]*(/?)>")
# finalize_call's names for converting text to the schema's type: in this format that is the syntax, not a repair.
_SYNTAX_COERCIONS = frozenset(("coerce_types", "embedded_json", "wrap_array"))
# The prompt's own placeholder names (SYNTAX's <TOOL_NAME>, the result's <tool_name>): an element so named is the
# model copying the instructions, not a call or prose. It is read like a call block, then dropped as Malformed.
_PLACEHOLDERS = ("TOOL_NAME", "tool_name")


class _State(IntEnum):  # IntEnum: hashed in C, for the step table lookup on every step
    PROSE = auto()
    ATTRS = auto()
    THINK = auto()
    BODY = auto()
    DONE = auto()


class MorphXmlParser(StepParser[_State]):
    """Sans-IO parser for one response; see the module docstring for states and transitions."""

    DONE = _State.DONE

    def __init__(self, tools: Sequence[ToolSpec], max_calls: int = 1) -> None:
        self._out = EventBuffer()
        self._calls = CallSlots(tools, max_calls, self._out)
        self._names = {t.name: t for t in tools if TAG.fullmatch(f"<{t.name}>")}
        self._opens = {f"<{n}>": n for n in self._names}
        self._empties = {f"<{n}/>": n for n in self._names}
        self._attributed = {f"<{n} ": n for n in self._names}
        self._placeholders = {f"<{p}>": p for p in _PLACEHOLDERS if p not in self._names}
        markers = [*self._opens, *self._empties, *self._attributed, *(f"</{n}>" for n in self._names), RESPONSE]
        markers += [*self._placeholders, *(f"</{p}>" for p in self._placeholders.values())]
        self._prose = TagProse(markers, self._out)
        self._buf = ""
        self._pos = 0
        self._state = _State.PROSE
        self._raw: list[str] = []  # the open element's text, from its opening tag
        self._open_tag = ""
        self._close_tag = ""
        self._echo = False  # the open element is a placeholder (dropped when it ends), not a call
        self._attr_name = ""  # the tool whose opening tag with attributes is being read
        self._depth = 0
        self._tags = re.compile("(?!)")  # the open element's opening and closing tags
        self._partial_close = self._tags  # a closing tag without its ">" yet
        self._steps: dict[_State, Callable[[], bool]] = {
            _State.PROSE: self._step_prose,
            _State.ATTRS: self._step_attrs,
            _State.THINK: self._step_think,
            _State.BODY: self._step_body,
        }

    def close(self, finish_reason: FinishReason = "stop") -> list[Event]:
        state, rest = self._state, self._buf[self._pos :]
        if state is _State.ATTRS:  # the output ended inside the tag: it was prose
            self._prose.flush(f"<{self._attr_name}{rest}")
        elif state is _State.PROSE:
            self._prose.flush(rest)
        elif state is _State.THINK:
            self._prose.think(rest + THINK_END, 0)
        elif state is _State.BODY:
            self._raw.append(rest)
            raw = "".join(self._raw)
            self._calls.close_block(finish_reason, raw, lambda: self._finish(raw, closed=False))
        self._state, self._buf, self._pos = _State.DONE, "", 0
        return self._out.take()

    def _step_prose(self) -> bool:
        found = self._prose.scan(self._buf, self._pos)
        self._pos = found.end
        marker = found.marker
        if marker is None:
            return False
        if marker == THINK and not found.joined:
            self._state = _State.THINK
        elif marker == RESPONSE and not found.joined:
            self._state = _State.DONE
        elif marker in self._placeholders and not found.joined:
            self._open_body(self._placeholders[marker], marker, call=False)
        elif found.joined or not (marker in self._opens or marker in self._empties or marker in self._attributed):
            self._prose.after_markup(False)  # a stray closing tag, or a tag spelled across removed markup
        elif marker in self._attributed:
            self._pos -= 1  # the blank after the name starts the first attribute
            self._attr_name, self._state = self._attributed[marker], _State.ATTRS
        elif self._calls.cut():
            self._state = _State.DONE
        elif marker in self._empties:
            name = self._empties[marker]
            self._calls.start(name)
            self._finish(marker, closed=True)
        else:
            self._open_body(self._opens[marker], marker)
        return True

    def _open_body(self, name: str, raw: str, call: bool = True) -> None:
        """An element opened (``raw``: its opening tag, attributes already written as children): -> BODY;
        ``call`` False for a placeholder element (no call index is taken)."""
        self._echo = not call
        if call:
            self._calls.start(name)
        opening = f"<{name}>"
        self._raw, self._open_tag, self._close_tag, self._depth = [raw], opening, f"</{name}>", 1
        close = rf"</{re.escape(name)}[ \t]{{0,{_BLANKS}}}"  # "</NAME >" closes too
        self._tags, self._partial_close = re.compile(rf"{re.escape(opening)}|{close}>"), re.compile(close)
        self._state = _State.BODY

    def _step_attrs(self) -> bool:
        """``<NAME`` and a blank were read (the blank is at ``_pos``): wait for the tag's end, then decide."""
        buf, start = self._buf, self._pos
        gt = buf.find(">", start, start + _ATTRS_CAP)
        if gt == -1:
            if len(buf) - start >= _ATTRS_CAP:
                self._attrs_are_prose()
                return True
            return False
        attrs = attributes(buf[start : gt + 1])
        if attrs is None:
            self._attrs_are_prose()
            return True
        self._pos, name, self._state = gt + 1, self._attr_name, _State.PROSE
        children = "".join(f"<{key}>{value}</{key}>" for key, value in attrs[0].items())
        if self._calls.cut():
            self._state = _State.DONE
        elif attrs[1]:
            self._calls.start(name)
            self._finish(f"<{name}>{children}</{name}>", closed=True)
        else:
            self._open_body(name, f"<{name}>{children}")
        return True

    def _attrs_are_prose(self) -> None:
        """The tag after ``<NAME `` is no attribute list: ``<NAME`` was prose; scanning goes on at the blank."""
        self._prose.emit(f"<{self._attr_name}")
        self._prose.resumed = False  # nothing was removed: no junction to check
        self._state = _State.PROSE

    def _step_think(self) -> bool:
        found = self._prose.think(self._buf, self._pos)
        self._pos = found.end
        if found.marker is None:
            return False
        self._state = _State.PROSE
        return True

    def _step_body(self) -> bool:
        buf, pos = self._buf, self._pos
        while True:
            match = self._tags.search(buf, pos)
            if match is None:
                self._take(len(buf) - self._held_back(buf, pos))
                return False
            pos = match.end()
            if not match.group().startswith("</"):
                self._depth += 1
                continue
            self._depth -= 1
            if not self._depth:
                self._take(pos)
                self._finish("".join(self._raw), closed=True)
                return True

    def _held_back(self, buf: str, pos: int) -> int:
        """Length of the tail that may still become the element's opening or closing tag."""
        held = held_back(buf, pos, (self._open_tag, self._close_tag), len(self._close_tag))
        lt = buf.rfind("<", max(pos, len(buf) - len(self._close_tag) - _BLANKS))
        if lt != -1 and self._partial_close.fullmatch(buf, lt):
            held = max(held, len(buf) - lt)
        return held

    def _take(self, end: int) -> None:
        self._raw.append(self._buf[self._pos : end])
        self._pos = end

    def _finish(self, raw: str, *, closed: bool) -> None:
        """Decode the element once and finalize its call; back to prose."""
        self._raw, self._state = [], _State.PROSE
        self._prose.after_markup(True)
        if self._echo:
            self._echo = False
            self._calls.fail(raw, "the syntax's placeholder element (the prompt copied), not a call")
            return
        element = decode_element(raw, self._names)
        if element is None:  # cannot happen: the block starts with an offered tool's tag
            self._calls.fail(raw, "not a tool element")
            return
        if element.stray_text and not closed:
            self._calls.fail(raw, "unclosed tool element holding text")
            return
        repairs = [*(["stray_text"] if element.stray_text else []), *([] if closed else ["unclosed_tool"])]
        self._calls.finish(element.name, element.arguments, raw, before=repairs, hide=_SYNTAX_COERCIONS)


def attributes(tag_rest: str) -> tuple[dict[str, str], bool] | None:
    """``' city="Paris" days='3'/>'`` -> ``({"city": "Paris", "days": "3"}, self_closing)``; None unless the
    text is one or more quoted attributes and the tag's end."""
    attrs: dict[str, str] = {}
    pos = 0
    while (m := _ATTR.match(tag_rest, pos)) is not None:
        attrs[m.group(1)] = m.group(2) if m.group(2) is not None else m.group(3)
        pos = m.end()
    end = _ATTRS_END.fullmatch(tag_rest, pos)
    return (attrs, bool(end.group(1))) if end is not None and attrs else None


class MorphXmlFormat:
    """``<NAME><KEY>value</KEY></NAME>`` tool calls, for the request's tool names."""

    name = "morph_xml"
    grammar: CallGrammar | None = None  # no grammar: its calls go unconstrained

    def render_tools(self, tools: Sequence[ToolSpec], tool_choice: ToolChoice, parallel: bool) -> str:
        return "\n\n".join(
            (
                "# Tools\n\nYou can call these tools:",
                describe_tools(tools),
                "# How to call a tool\n\n" + SYNTAX,
                "Example:\n" + example_call(tools, tool_choice),
                choice_instruction(tool_choice, parallel),
            )
        )

    def worked_example(self, tools: Sequence[ToolSpec], tool_choice: ToolChoice) -> list[tuple[str, dict[str, Any]]]:
        return example_calls(tools, tool_choice, _example_arguments)

    def render_calls(self, calls: Sequence[ToolCallRecord]) -> str:
        return render_calls(calls)

    def render_result(self, name: str, content: str) -> str:
        return f"{RESPONSE}>\n<tool_name>{name}</tool_name>\n<result>\n{content}\n</result>\n</tool_response>"

    def stop_sequences(self) -> tuple[str, ...]:
        return ("\n" + RESPONSE,)

    def stops_between_calls(self) -> tuple[str, ...]:
        return ()  # `<tool_response` only starts an imitated result, never a call

    def new_parser(self, tools: Sequence[ToolSpec], max_calls: int = 1) -> StreamParser:
        names = [*(re.escape(t.name) for t in tools), *_PLACEHOLDERS]  # a fence opening with either is markup
        return guard(MorphXmlParser(tools, max_calls), CallOpener(re.compile(rf"<(?:{'|'.join(names)})[\s/>]")))
