"""The ``xml`` tool-call format: ``<tool:NAME>`` blocks holding raw-text ``<param:NAME>`` values.

Wire syntax (what the model writes; values are raw text, never escaped)::

    Let me save it.
    <tool:write_file>
    <param:path>src/app.py</param:path>
    <param:content>
    def f(x):
        return "a<b" and x
    </param:content>
    </tool:write_file>

Only the exact ``</param:NAME>`` ends a value; one leading and one trailing newline are trimmed. A repeated
param makes an array. How values are typed and written: ``_xml_render``.

Results render as ``<tool_result:NAME>`` blocks, a tag family the parser never takes for a call.
``<tool_result`` is also the stop sequence: ``</tool:NAME>`` is name-specific, so no generic stop string could
end a block without cutting its close; stopping where the model starts to imitate a result stops it after its
last block instead. A ``<tool_result`` that reaches the parser anyway is treated as that stop (rest dropped).

Parser states (``_State``, one ``_step_*`` method each, see ``XmlParser._steps``) and transitions:

* PROSE: text. ``<tool:`` -> TOOL_TAG; ``</tool:``/``<param:``/``</param:`` -> STRAY_TAG; ``<think>`` -> THINK;
  ``</think>`` dropped; ``<tool_result`` -> DONE. Inside a ``` fence or an inline `code` span markers are text
  (a fence that opens with a call block is dropped before this parser sees it: ``_guard``).
* THINK: reasoning until ``</think>`` -> PROSE.
* TOOL_TAG: the name up to ``>``. A bad tag -> Malformed, PROSE. After ``max_calls`` calls ->
  SecondToolStarted, DONE. Else ToolCallStart (known tools only) -> BODY (``<tool:NAME/>`` ends at once).
* STRAY_TAG: ``</tool:``, ``<param:``, ``</param:`` tags outside any block are dropped (an opening param tag
  as Malformed) -> PROSE.
* BODY: between params. ``<param:`` -> PARAM_TAG; ``</tool:`` -> END_TAG; ``<tool:`` closes the block
  (repair ``unclosed_tool``) -> PROSE; other text is ignored (repair ``stray_text``).
* PARAM_TAG: the param name up to ``>`` -> VALUE (``<param:NAME/>`` is an empty value -> BODY).
* VALUE: raw text until the exact ``</param:NAME>`` -> BODY.
* END_TAG: the closing tag's name up to ``>``; the call is finalized -> PROSE.
* DONE: all input ignored.

At ``close("stop")`` an open block whose params are all closed is completed (the server may have stopped
before ``</tool:NAME>``); so is a last param that ends in (part of) its close tag. One that simply stops
(``<param:city>Par``) was cut off, not closed (no stop sequence ends inside a block): Malformed. With ``"length"``
or ``"content_filter"`` an open block is Malformed (the truncation rule of ``_calls``). Unknown tools get no
ToolCallStart: the block becomes Malformed without an index. Call slots, the cut and finishing a call: ``_calls``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from enum import IntEnum, auto
from typing import Any

from ._calls import CallSlots
from ._guard import CallOpener, guard
from ._machine import StepParser
from ._prompt import choice_instruction, describe_tools
from ._tagprose import THINK_END, TagProse
from ._text import EventBuffer
from ._xml_render import EXAMPLE, SYNTAX, call_arguments, read_arguments, render_call, trim_value
from .base import (
    CallGrammar,
    Event,
    FinishReason,
    Malformed,
    Reasoning,
    StreamParser,
    ToolCallRecord,
    ToolChoice,
    ToolSpec,
)

_PROSE_MARKERS = ("<tool:", "</tool:", "<param:", "</param:", "<think>", "</think>", "<tool_result")
_BODY_TAGS = ("<param:", "</tool:", "<tool:")
_MAX_NAME = 100  # longest tag name accepted; bounds what TOOL_TAG/PARAM_TAG/END_TAG hold back
_NAME_RE = re.compile(rf"[^<>\r\n]{{0,{_MAX_NAME + 1}}}")
# finalize_call's names for converting text to the schema's type: in this format that is the syntax, not a repair.
_SYNTAX_COERCIONS = frozenset(("coerce_types", "embedded_json", "wrap_array"))


class _State(IntEnum):  # IntEnum: hashed in C, for the step table lookup on every step
    PROSE = auto()
    THINK = auto()
    TOOL_TAG = auto()
    STRAY_TAG = auto()
    BODY = auto()
    PARAM_TAG = auto()
    VALUE = auto()
    END_TAG = auto()
    DONE = auto()


@dataclass(slots=True)
class _Block:
    """The tool block being read: its raw text (for Malformed), params so far and repairs."""

    written: str
    raw: list[str]
    params: list[tuple[str, str]] = field(default_factory=list)
    repairs: list[str] = field(default_factory=list)
    param: str = ""
    close_tag: str = ""
    value: list[str] = field(default_factory=list)


def _valid_name(name: str) -> bool:
    return bool(name) and not any(c.isspace() or c in "/<>" for c in name)


# ---- the parser ---------------------------------------------------------------------------


class XmlParser(StepParser[_State]):
    """Sans-IO parser for one response; see the module docstring for states and transitions."""

    DONE = _State.DONE

    def __init__(self, tools: Sequence[ToolSpec], max_calls: int = 1) -> None:
        self._out = EventBuffer()  # adjacent text pieces become one event
        self._calls = CallSlots(tools, max_calls, self._out)
        self._buf = ""
        self._pos = 0
        self._state = _State.PROSE
        self._prose = TagProse(_PROSE_MARKERS, self._out)  # code spans, hold-back, junctions, <think>
        self._stray = ""  # the marker that opened a tag outside any block (STRAY_TAG)
        self._block: _Block | None = None
        self._steps: dict[_State, Callable[[], bool]] = {
            _State.PROSE: self._step_prose,
            _State.THINK: self._step_think,
            _State.TOOL_TAG: self._step_tool_tag,
            _State.STRAY_TAG: self._step_stray_tag,
            _State.BODY: self._step_body,
            _State.PARAM_TAG: self._step_param_tag,
            _State.VALUE: self._step_value,
            _State.END_TAG: self._step_end_tag,
        }

    def close(self, finish_reason: FinishReason = "stop") -> list[Event]:
        state, rest = self._state, self._buf[self._pos :]
        if state is _State.PROSE:
            self._prose.flush(rest)
        elif state is _State.THINK:
            self._prose.emit(rest, Reasoning)
        elif state is _State.TOOL_TAG:
            self._out.push(Malformed("<tool:" + rest, "unfinished tool tag"))
        elif self._block is not None:
            self._close_open_block(finish_reason)
        self._stop()
        return self._out.take()

    # ---- helpers ----

    def _stop(self) -> None:
        self._state, self._buf, self._pos, self._block = _State.DONE, "", 0, None

    def _consume(self, end: int) -> str:
        """Advance the cursor to ``end``; inside a block the text also goes to its raw copy."""
        piece = self._buf[self._pos : end]
        self._pos = end
        if self._block is not None and piece:
            self._block.raw.append(piece)
        return piece

    def _scan_name(self) -> tuple[str, bool] | None:
        """Consume a tag name at the cursor: ``(name, closed_by_gt)``; None while it may still grow."""
        buf, pos = self._buf, self._pos
        match = _NAME_RE.match(buf, pos)
        end = match.end() if match else pos
        if end == len(buf) and end - pos <= _MAX_NAME:
            return None
        name = buf[pos:end]
        closed = end < len(buf) and buf[end] == ">" and len(name) <= _MAX_NAME
        self._consume(end + 1 if closed else end)
        return name, closed

    # ---- states outside blocks ----

    def _step_prose(self) -> bool:
        found = self._prose.scan(self._buf, self._pos)
        self._pos = found.end
        token = found.marker
        if token is None:
            return False
        if found.joined:  # spelled across dropped markup: dropped too; an unfinished tag's name with it
            if not token.endswith(">"):
                self._state, self._stray = _State.STRAY_TAG, ""
            self._prose.after_markup(False)
        elif token == "<tool_result":
            self._stop()
        elif token == "<think>":
            self._state = _State.THINK
        elif token == "<tool:":
            self._state = _State.TOOL_TAG
        elif token != THINK_END:
            self._state, self._stray = _State.STRAY_TAG, token
        return True

    def _step_think(self) -> bool:
        found = self._prose.think(self._buf, self._pos)
        self._pos = found.end
        if found.marker is None:
            return False
        self._state = _State.PROSE
        return True

    def _step_tool_tag(self) -> bool:
        scanned = self._scan_name()
        if scanned is None:
            return False
        raw, closed = scanned
        name = raw.strip()
        self_closing = closed and name.endswith("/")
        if self_closing:
            name = name[:-1].rstrip()
        self._state = _State.PROSE
        if not closed or not _valid_name(name):
            self._out.push(Malformed("<tool:" + raw + (">" if closed else ""), "malformed tool tag"))
            return True
        if self._calls.cut():
            self._stop()
            return True
        self._calls.start(name)
        self._block = _Block(name, [f"<tool:{raw}>"])
        self._state = _State.BODY
        if self_closing:
            self._end_block()
        return True

    def _step_stray_tag(self) -> bool:
        scanned = self._scan_name()
        if scanned is None:
            return False
        self._state = _State.PROSE
        if self._stray == "<param:":  # a call whose <tool:NAME> went missing: its values stay, its tags go
            self._out.push(Malformed(f"<param:{scanned[0]}" + ">" * scanned[1], "parameter tag outside a tool block"))
        return True

    # ---- states inside a block ----

    def _step_body(self) -> bool:
        assert self._block is not None
        buf, pos = self._buf, self._pos
        lt = buf.find("<", pos)
        stray = self._consume(len(buf) if lt == -1 else lt)
        if stray.strip():
            self._block.repairs.append("stray_text")
        if lt == -1:
            return False
        head = buf[lt : lt + 7]
        if head.startswith("<tool:"):
            self._block.repairs.append("unclosed_tool")
            self._end_block()
            self._prose.skip_nl = False
            return True
        for tag, state in (("<param:", _State.PARAM_TAG), ("</tool:", _State.END_TAG)):
            if head.startswith(tag):
                self._consume(lt + len(tag))
                self._state = state
                return True
        if len(head) < 7 and any(tag.startswith(head) for tag in _BODY_TAGS):
            return False
        self._consume(lt + 1)
        self._block.repairs.append("stray_text")
        return True

    def _step_param_tag(self) -> bool:
        assert self._block is not None
        scanned = self._scan_name()
        if scanned is None:
            return False
        raw, closed = scanned
        name = raw.strip()
        self._state = _State.BODY
        if closed and name.endswith("/") and _valid_name(name[:-1].rstrip()):
            self._block.params.append((name[:-1].rstrip(), ""))
        elif not closed or not _valid_name(name):
            self._block.repairs.append("stray_text")
        else:
            self._block.param, self._block.close_tag, self._block.value = name, f"</param:{name}>", []
            self._state = _State.VALUE
        return True

    def _step_value(self) -> bool:
        blk = self._block
        assert blk is not None
        buf, close = self._buf, blk.close_tag
        end = buf.find(close, self._pos)
        if end == -1:
            safe = len(buf) - len(close) + 1  # a close tag can only start at or after this
            if safe > self._pos:
                blk.value.append(self._consume(safe))
            return False
        blk.value.append(self._consume(end))
        self._consume(end + len(close))
        blk.params.append((blk.param, trim_value("".join(blk.value))))
        blk.value = []
        self._state = _State.BODY
        return True

    def _step_end_tag(self) -> bool:
        assert self._block is not None
        scanned = self._scan_name()
        if scanned is None:
            return False
        raw, closed = scanned
        if not closed or raw.strip() != self._block.written:
            self._block.repairs.append("close_tag_mismatch")
        self._end_block()
        return True

    def _end_block(self) -> None:
        """Finalize the open block into ToolCallEnd or Malformed and go back to prose."""
        blk = self._block
        assert blk is not None
        self._block, self._state = None, _State.PROSE
        self._prose.after_markup(True)
        spec = self._calls.spec(blk.written)
        arguments = read_arguments(blk.params, spec.parameters) if spec is not None else None
        self._calls.finish(blk.written, arguments, "".join(blk.raw), before=blk.repairs, hide=_SYNTAX_COERCIONS)

    def _close_open_block(self, finish_reason: FinishReason) -> None:
        """End of output inside a block: the truncation rule, else ``_complete_open_block``."""
        assert self._block is not None
        state, rest = self._state, self._consume(len(self._buf))
        self._calls.close_block(finish_reason, "".join(self._block.raw), lambda: self._complete_open_block(state, rest))

    def _complete_open_block(self, state: _State, rest: str) -> None:
        """Complete a block the output ended in, when where it ends is unambiguous; else Malformed."""
        blk = self._block
        assert blk is not None
        reason = None
        if state is _State.PARAM_TAG or (state is _State.BODY and rest.startswith("<p")):
            reason = "unfinished parameter tag"
        elif state is _State.VALUE:
            value = self._unclosed_value("".join(blk.value) + rest)
            if value is None:
                reason = "unclosed parameter"
            else:
                blk.params.append((blk.param, value))
                blk.repairs.append("unclosed_param")
        if reason is not None:
            self._calls.fail("".join(blk.raw), reason)
            self._block = None
            return
        if state is not _State.END_TAG or rest.strip() != blk.written:
            blk.repairs.append("unclosed_tool")
        self._end_block()

    def _unclosed_value(self, value: str) -> str | None:
        """The last param's value when its close tag is missing, or None when where it ends is unclear."""
        assert self._block is not None
        body, block_close = value.rstrip(), f"</tool:{self._block.written}>"
        if body.endswith(block_close):
            value = body[: -len(block_close)]
        else:
            close = self._block.close_tag
            for size in range(len(close) - 1, 1, -1):
                if value.endswith(close[:size]):
                    value = value[:-size]
                    break
            else:
                return None  # the value just stops: cut off (``{"city": "Par"}`` is no call)
        if "<param:" in value or "</tool:" in value:
            return None
        return trim_value(value)


class XmlFormat:
    """``<tool:NAME><param:NAME>raw value</param:NAME></tool:NAME>`` tool calls."""

    name = "xml"
    grammar: CallGrammar | None = None  # no grammar: its calls go unconstrained

    def render_tools(self, tools: Sequence[ToolSpec], tool_choice: ToolChoice, parallel: bool) -> str:
        return "\n\n".join(
            (
                "# Tools\n\nYou can call these tools:",
                describe_tools(tools),
                "# How to call a tool\n\n" + SYNTAX,
                "Example (a made-up tool `save_note`, only to show the syntax):\n" + EXAMPLE,
                choice_instruction(tool_choice, parallel),
            )
        )

    def worked_example(self, tools: Sequence[ToolSpec], tool_choice: ToolChoice) -> list[tuple[str, dict[str, Any]]]:
        return []  # its example calls a made-up tool (``save_note``): no call of the request

    def render_calls(self, calls: Sequence[ToolCallRecord]) -> str:
        return "\n".join(render_call(c.name, call_arguments(c.arguments)) for c in calls)

    def render_result(self, name: str, content: str) -> str:
        return f"<tool_result:{name}>\n{content}\n</tool_result:{name}>"

    def stop_sequences(self) -> tuple[str, ...]:
        return ("<tool_result",)

    def stops_between_calls(self) -> tuple[str, ...]:
        return ()  # `<tool_result` only starts an imitated result, never a call block

    def new_parser(self, tools: Sequence[ToolSpec], max_calls: int = 1) -> StreamParser:
        return guard(XmlParser(tools, max_calls), CallOpener(re.compile(r"<tool:[A-Za-z_]")))
