"""The ``hermes`` format: one JSON call object per ``<tool_call>`` block (Qwen2.5 / Hermes style).

Wire syntax, as asked of the model and as ``render_calls`` writes it::

    Let me check.
    <tool_call>
    {"name": "get_weather", "arguments": {"city": "Paris"}}
    </tool_call>

Small models drop the tags, so a *bare* call object at the start of a line (alone, or as the
first thing in a ```json / bare ``` fence) is a call too, when its ``name`` is one of the request's
tools and it has ``arguments`` (or ``parameters``). Any other bare JSON stays text exactly as written.
Commas and blanks between a call and a next object (``{...}, {...}``: a list without its brackets) are
markup when that object is a call too, and text as written when it is not.
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
* FENCE_TAIL: after a fenced call: its closing ````` is dropped -> TEXT; ``{`` (after commas) -> CANDIDATE.
* BLOCK_OPEN: after ``<tool_call>``: ``{`` -> BLOCK_OBJECT, anything else -> BLOCK_RAW.
* BLOCK_OBJECT: the object, scanned incrementally: ToolCallStart once ``"name"`` is read,
  ToolCallArgs for the raw ``arguments`` text, ToolCallEnd when balanced -> BLOCK_AFTER. A tag
  outside a string ends it early (brackets closed). BLOCK_RAW: a non-object body until ``</tool_call>``.
* BLOCK_AFTER: ``</tool_call>`` -> TEXT; another ``{`` -> BLOCK_OBJECT (next call); junk -> Malformed.
* DONE: after the cut (SecondToolStarted) or ``<tool_response>``; input is ignored.

At ``close()``, an open ``<tool_call>`` block follows the truncation rule of ``_calls`` (``length`` /
``content_filter``: Malformed; ``stop``: completed, brackets closed, unless it ends inside a string); a
bare candidate is a call after a ``stop``, or after any cut that came once its name and whole ``arguments``
value were read (``cut_after_arguments``: a model that runs away in a key of its own after the arguments,
``"response": "{\"name\": ...``, until ``max_tokens``); one cut earlier that names an offered tool is
Malformed (call markup, never text); any other is text. Call slots, the
cut and finishing a call: ``_calls``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from enum import IntEnum, auto
from typing import Any

from ._calls import CallSlots, truncated
from ._guard import CallOpener, guard
from ._hermes_calls import CallAssembler
from ._hermes_grammar import HERMES_GRAMMAR
from ._hermes_markup import (
    BARE_STOPS,
    BLOCK_TAGS,
    BROKEN,
    CLOSE,
    FENCE,
    FENCE_WINDOW,
    LOOSE_TAG,
    MARKUP,
    OPEN,
    RESPONSE,
    TEXT_HIT,
    THINK,
    THINK_END,
    advance_line,
    call_prefix,
    fence_call_start,
    join_rest,
    strip_markup,
    tag_at,
    text_tag,
)
from ._hermes_render import render_calls, tools_prompt, worked_example
from ._jsonscan import OUTSIDE_BARE, OUTSIDE_BLOCK, Scan
from ._text import MAX_HOLDBACK, EventBuffer, find_first, partial_marker_len
from .base import (
    CallGrammar,
    Event,
    FinishReason,
    Malformed,
    Reasoning,
    StreamParser,
    Text,
    ToolCallRecord,
    ToolChoice,
    ToolSpec,
)

_BARE_CAP = 1 << 20  # a bare candidate object longer than this is flushed as text
_WS = re.compile(r"[ \t\r\n]*")
_SEP = re.compile(r"[ \t\r\n,]*")


class _State(IntEnum):  # IntEnum: hashed in C, for the step table lookup on every step
    TEXT = auto()
    THINK = auto()
    FENCE = auto()
    CANDIDATE = auto()
    FENCE_TAIL = auto()
    BLOCK_OPEN = auto()
    BLOCK_OBJECT = auto()
    BLOCK_RAW = auto()
    BLOCK_AFTER = auto()
    DONE = auto()


class HermesParser:
    """Sans-IO parser of one response in the hermes format; see the module docstring."""

    def __init__(self, tools: Sequence[ToolSpec], max_calls: int = 1) -> None:
        self._out = EventBuffer()
        self._calls = CallSlots(tools, max_calls, self._out)
        self._c = CallAssembler(self._calls)
        self._state = _State.TEXT
        self._buf = ""  # undecided input: a marker prefix, a held candidate head, a partial escape
        self._line_start = True  # only blanks since the last newline (or the start of output)
        self._tail = ""  # the last prose emitted: a `<tool_call>` mention, or a tag joined across markup
        self._after_block = False  # whitespace right after a block is dropped unless prose follows
        self._join = False  # markup was removed: what follows must not complete a tag with `_tail`
        self._prefix = ""  # held text before a bare candidate's `{` (a fence opener)
        self._fenced = False
        self._parts: list[str] = []  # a raw block body, or junk after a call object
        self._steps: dict[_State, Callable[[], bool]] = {
            _State.TEXT: self._step_text,
            _State.THINK: self._step_think,
            _State.FENCE: self._step_fence,
            _State.CANDIDATE: self._step_candidate,
            _State.FENCE_TAIL: self._step_fence_tail,
            _State.BLOCK_OPEN: self._step_block_open,
            _State.BLOCK_OBJECT: self._step_block_object,
            _State.BLOCK_RAW: self._step_block_raw,
            _State.BLOCK_AFTER: self._step_block_after,
        }
        self._closers: dict[_State, Callable[[FinishReason], None]] = {
            _State.TEXT: self._close_text,
            _State.THINK: self._close_think,
            _State.FENCE: self._close_fence,
            _State.CANDIDATE: self._close_candidate,
            _State.FENCE_TAIL: self._close_quietly,
            _State.BLOCK_OPEN: self._close_block_open,
            _State.BLOCK_OBJECT: self._close_block_object,
            _State.BLOCK_RAW: self._close_block_raw,
            _State.BLOCK_AFTER: self._close_quietly,
        }

    def feed(self, text: str) -> list[Event]:
        if self._state is _State.DONE or not text:
            return []
        self._buf += text
        self._run()
        return self._out.take()

    def _run(self) -> None:
        """Run the current state's step until one needs more input or the parser is DONE."""
        while self._state is not _State.DONE and self._steps[self._state]():
            pass

    def close(self, finish_reason: FinishReason = "stop") -> list[Event]:
        if self._state is _State.DONE:
            return []
        self._closers[self._state](finish_reason)
        self._state, self._buf = _State.DONE, ""
        return self._out.take()

    # ---- prose ---------------------------------------------------------------------------

    def _step_text(self) -> bool:
        if self._join and not self._drop_joined_tag():
            return False
        if self._after_block and not self._skip_block_gap():
            return False
        if self._state is not _State.TEXT:  # the gap was held before a next object
            return True
        s, line, i = self._buf, self._line_start, 0  # `line`: the line-start flag at `i`
        while (m := TEXT_HIT.search(s, i)) is not None:
            p, c = m.start(), m.group()
            if c == "{" and advance_line(line, s, i, p) and call_prefix(s, p) is not False:
                self._flush_prose(p, True)
                self._start_candidate(s[p:], "", fenced=False)
                return True
            if c[0] == "`":
                self._flush_prose(p, advance_line(line, s, i, p))
                return self._open_fence()
            tag, size = text_tag(s, p) if c[0] == "<" else (None, 1)
            if tag == "" or (tag and (s[p - 1] if p else self._tail[-1:]) != "`"):
                self._flush_prose(p, advance_line(line, s, i, p))
                if tag == "":
                    return False
                self._buf = s[p + size :]
                self._on_tag(tag, s[p : p + size])
                return True
            i, line = p + size, False  # past a non-blank character: not at a line start
        self._flush_prose(len(s), advance_line(line, s, i, len(s)))
        return False

    def _flush_prose(self, p: int, line: bool) -> None:
        """Emit ``buf[:p]`` as text; ``line`` is the line-start flag at ``p``."""
        if p:
            self._out.text(Text, self._buf[:p])
            self._tail = (self._tail + self._buf[max(0, p - 16) : p])[-16:]
        self._buf, self._line_start = self._buf[p:], line

    def _text(self, seg: str) -> None:
        if seg:
            self._out.text(Text, seg)
            self._line_start = advance_line(self._line_start, seg, 0, len(seg))
            self._tail = (self._tail + seg[-16:])[-16:]

    def _drop_joined_tag(self) -> bool:
        """After removed markup, text completing a tag with the prose before it (``<`` + block +
        ``tool_call>``) is markup too: dropped. False while undecided."""
        while rest := join_rest(self._tail, self._buf, 0):
            self._buf = self._buf[len(rest) :]
        self._join = rest is None
        return not self._join

    def _skip_block_gap(self) -> bool:
        """Drop the whitespace right after a block unless prose follows; False while undecided.

        Commas there (``{...}, {...}``: a list without its brackets) are held as the prefix of the
        next object: dropped with it if it is a call, shown as written if it is prose."""
        s = self._buf
        k = _SEP.match(s).end()  # type: ignore[union-attr]
        if k <= MAX_HOLDBACK:
            if k == len(s):
                return False
            if s[k] == "{" and "," in s[:k]:
                self._after_block = False
                self._start_candidate(s[k:], s[:k], fenced=False)
                return True
            k = _WS.match(s).end()  # type: ignore[union-attr]
            if s[k] in "<{":
                self._line_start = advance_line(self._line_start, s, 0, k)
                self._buf = s[k:]
        self._after_block = False
        return True

    def _broken_tag(self, raw: str) -> None:
        """``<tool_call`` that never becomes a tag is broken markup: reported, never shown."""
        self._out.push(Malformed(raw, f"broken tag {raw!r}"))
        self._join = True

    def _on_tag(self, tag: str, raw: str) -> None:
        if tag == BROKEN:
            self._broken_tag(raw)
        elif tag == OPEN:
            if not self._cut():
                self._state = _State.BLOCK_OPEN
        elif tag == THINK:
            self._state = _State.THINK
        elif tag == RESPONSE:  # the model is inventing the tool's result: nothing after it is real
            self._state, self._buf = _State.DONE, ""
        else:  # a stray closing tag is markup: dropped
            self._end_block()

    def _open_fence(self) -> bool:
        s = self._buf
        if not s.startswith(FENCE):
            return False
        at = fence_call_start(s[:FENCE_WINDOW])
        if at is None:
            return False
        if at < 0:
            self._text(FENCE)
            self._buf, self._state = s[len(FENCE) :], _State.FENCE
        else:
            self._start_candidate(s[at:], s[:at], fenced=True)
        return True

    def _step_think(self) -> bool:
        s = self._buf
        p = s.find(THINK_END)
        cut = len(s) - partial_marker_len(s, (THINK_END,)) if p < 0 else p
        if cut:
            self._out.text(Reasoning, s[:cut])
        if p < 0:
            self._buf = s[cut:]
            return False
        self._buf = s[p + len(THINK_END) :]
        self._end_block()
        return True

    def _step_fence(self) -> bool:
        s = self._buf
        p = s.find(FENCE)
        if p < 0:
            cut = len(s) - partial_marker_len(s, (FENCE,))
            self._text(s[:cut])
            self._buf = s[cut:]
            return False
        self._text(s[: p + len(FENCE)])
        self._buf, self._state = s[p + len(FENCE) :], _State.TEXT
        return True

    def _end_block(self, fenced: bool = False) -> None:
        self._state = _State.FENCE_TAIL if fenced else _State.TEXT
        self._line_start, self._after_block, self._join = True, True, True

    # ---- bare call objects -------------------------------------------------------------------

    def _start_candidate(self, s: str, prefix: str, fenced: bool) -> None:
        self._buf, self._prefix, self._fenced, self._c.sc = s, prefix, fenced, None
        self._state = _State.CANDIDATE

    def _step_candidate(self) -> bool:
        if self._c.sc is None:
            verdict = call_prefix(self._buf)
            if verdict is None:
                return False
            if not verdict:
                s = self._buf
                self._release("{")
                self._buf = s[1:]
                return True
            self._c.new_object(OUTSIDE_BARE)
        sc, s, i = self._c.scanner(), self._buf, 0
        while True:
            p, why = sc.scan(s, i, min(len(s), _BARE_CAP - sc.size))
            tag = tag_at(s, p, BARE_STOPS) if why is Scan.SPECIAL else ""
            if tag is not None:
                break
            i = p + 1  # a `<` or backtick that starts no marker
        sc.commit(s[:p])
        if tag == CLOSE:
            self._buf = s[p + len(CLOSE) :]
            self._candidate_block()
            return True
        self._buf = s[p:]
        if why is Scan.DONE:
            if not self._decide(sc.text(), ()):
                self._release(sc.text())
        elif tag:  # a marker outside any string: this was prose
            self._release(sc.text())
        elif sc.size + len(self._buf) >= _BARE_CAP:  # too long for a call: flush exactly the cap
            k = _BARE_CAP - sc.size
            head, self._buf = self._buf[:k], self._buf[k:]
            self._release(sc.text() + head)
        else:
            return False
        return True

    def _release(self, body: str) -> None:
        """The candidate is prose after all: emit it exactly as written (tags inside it excepted)."""
        text = self._prefix + body
        if not self._fenced and MARKUP.search(text):
            self._out.push(Malformed(text, "tags inside a JSON object in prose"))
            text = strip_markup(text)
        self._text(text)
        self._prefix, self._c.sc, self._join = "", None, True
        self._state = _State.FENCE if self._fenced else _State.TEXT

    def _decide(self, raw: str, extra: tuple[str, ...]) -> bool:
        """Make a balanced bare object a call if it names a tool and has arguments."""
        found = self._c.bare_call(raw)
        if found is None:
            return False
        raw_block, self._prefix = self._prefix + raw, ""
        if not self._cut():
            self._c.finish_call(found[0], found[1], raw_block, extra, self._c.fragment(raw))
            self._end_block(self._fenced)
        return True

    def _candidate_block(self) -> None:
        """A bare object followed by ``</tool_call>``: a block whose opening tag was dropped."""
        raw, self._prefix = self._c.scanner().text(), ""
        if not self._cut():
            self._c.finish_object(raw, raw + CLOSE)
            self._end_block(self._fenced)

    def _step_fence_tail(self) -> bool:
        s = self._buf
        k, j = _WS.match(s).end(), _SEP.match(s).end()  # type: ignore[union-attr]
        if j > k and j <= MAX_HOLDBACK:  # commas: held before a next object, as after a block
            if j == len(s):
                return False
            if s[j] == "{":
                self._start_candidate(s[j:], s[:j], fenced=True)
                return True
        if k <= MAX_HOLDBACK:
            if len(s) - k < len(FENCE) and FENCE.startswith(s[k:]):
                return False
            if s.startswith(FENCE, k):  # the fence's closing line: markup of the call
                self._buf = s[k + len(FENCE) :]
                self._end_block()
                self._line_start = False
                return True
            if s[k] == "{":
                self._start_candidate(s[k:], s[:k], fenced=True)
                return True
        self._state = _State.FENCE  # prose in the fence whose opening line the call took
        return True

    # ---- <tool_call> blocks --------------------------------------------------------------

    def _step_block_open(self) -> bool:
        s = self._buf = self._buf[_WS.match(self._buf).end() :]  # type: ignore[union-attr]
        if not s:
            return False
        tag = tag_at(s, 0, BLOCK_TAGS) if s[0] == "<" else None
        if tag == "":
            return False
        if tag == OPEN:  # a repeated opening tag
            self._buf = s[len(OPEN) :]
        elif tag == CLOSE:
            self._calls.fail(OPEN + CLOSE, "empty <tool_call> block")
            self._buf = s[len(CLOSE) :]
            self._end_block()
        elif s[0] == "{":
            self._c.new_object(OUTSIDE_BLOCK)
            self._state = _State.BLOCK_OBJECT
        else:
            self._parts, self._state = [], _State.BLOCK_RAW
        return True

    def _step_block_object(self) -> bool:
        sc, s, i = self._c.scanner(), self._buf, 0
        while True:
            p, why = sc.scan(s, i, len(s))
            tag = tag_at(s, p, BLOCK_TAGS) if why is Scan.SPECIAL else ""
            if tag is not None:
                break
            i = p + 1
        self._c.commit(s[:p])
        self._buf = s[p + len(CLOSE) :] if tag == CLOSE else s[p:]
        if tag:  # a tag outside any string ends the block, even with brackets still open
            self._c.finish_object(sc.text(), OPEN + sc.text() + (CLOSE if tag == CLOSE else ""))
            self._end_block()
        elif why is Scan.DONE:
            self._c.finish_object(sc.text(), OPEN + sc.text())
            self._parts, self._state = [], _State.BLOCK_AFTER
        else:
            return False
        return True

    def _step_block_raw(self) -> bool:
        s = self._buf
        found = find_first(s, BLOCK_TAGS)
        if found is None:
            cut = len(s) - partial_marker_len(s, BLOCK_TAGS)
            self._parts.append(s[:cut])
            self._buf = s[cut:]
            return False
        p, tag = found
        self._parts.append(s[:p])
        self._buf = s[p + len(CLOSE) :] if tag == CLOSE else s[p:]
        self._finish_raw()
        if self._state is not _State.DONE:
            self._end_block()
        return True

    def _step_block_after(self) -> bool:
        if not self._parts:  # separators between call objects; inside junk they are part of it
            self._buf = self._buf[_SEP.match(self._buf).end() :]  # type: ignore[union-attr]
        s = self._buf
        if not s:
            return False
        tag = tag_at(s, 0, BLOCK_TAGS) if s[0] == "<" else None
        if tag == "":
            return False
        if tag:
            self._flush_junk()
            self._buf = s[len(CLOSE) :] if tag == CLOSE else s
            self._end_block()
        elif s[0] == "{" and not self._parts:  # another call object in the same block
            if not self._cut():
                self._c.new_object(OUTSIDE_BLOCK)
                self._state = _State.BLOCK_OBJECT
        else:
            q = s.find("<", 1)
            self._parts.append(s if q < 0 else s[:q])
            self._buf = "" if q < 0 else s[q:]
            return q >= 0
        return True

    def _flush_junk(self) -> None:
        if self._parts:
            self._out.push(Malformed("".join(self._parts), "unexpected text after the call object in <tool_call>"))
            self._parts = []

    # ---- calls -------------------------------------------------------------------------------

    def _cut(self) -> bool:
        """At a new call past ``max_calls``: report the cut point and ignore the rest."""
        if not self._calls.cut():
            return False
        self._state, self._buf = _State.DONE, ""
        return True

    def _finish_raw(self) -> None:
        """Finalize a block body that did not open with ``{``: a list of calls, a fenced object..."""
        body, self._parts = "".join(self._parts).strip(), []
        self._c.finish_raw(body, self._cut)

    # ---- end of output -----------------------------------------------------------------------

    def _close_text(self, finish: FinishReason) -> None:
        s = self._buf
        while self._join and (rest := join_rest(self._tail, s, 0, final=True)):
            s = s[len(rest) :]
        m = LOOSE_TAG.match(s)
        if m is not None or (len(s) >= len("<tool") and (OPEN.startswith(s) or CLOSE.startswith(s))):
            self._broken_tag(m.group(1) if m else s)  # output ends inside a tag
            s = s[m.end(1) :] if m else ""
        if not (self._after_block and _WS.fullmatch(s)):
            self._text(s)

    def _close_fence(self, finish: FinishReason) -> None:
        self._text(self._buf)

    def _close_think(self, finish: FinishReason) -> None:
        if self._buf:
            self._out.text(Reasoning, self._buf)

    def _close_quietly(self, finish: FinishReason) -> None:
        self._flush_junk()  # what is held here is whitespace, a partial tag or junk

    def _close_candidate(self, finish: FinishReason) -> None:
        sc = self._c.sc
        if sc is not None and not sc.quote and not truncated(finish):  # cut by a stop string?
            closers = sc.closers()
            if self._decide(sc.text() + closers, ("unclosed_brackets",) if closers else ()):
                return
        elif sc is not None and sc.call_read:  # cut after the arguments (a key the output ran away in)
            if self._decide(sc.text(), ("cut_after_arguments",)):
                return
        elif truncated(finish) and sc is not None and sc.name is not None and self._calls.resolve(sc.name):
            # a call to an offered tool, cut short: call markup, never text
            self._calls.fail(self._prefix + sc.text() + self._buf, f"bare call object cut (finish_reason={finish})")
            self._prefix, self._c.sc, self._buf = "", None, ""
            return
        self._release((sc.text() if sc is not None else "") + self._buf)

    def _close_block_open(self, finish: FinishReason) -> None:
        raw_block = OPEN + self._buf
        self._calls.close_block(finish, raw_block, lambda: self._calls.fail(raw_block, "empty <tool_call> block"))

    def _close_block_object(self, finish: FinishReason) -> None:
        sc = self._c.scanner()
        raw_block = OPEN + sc.text() + (self._buf if sc.quote else "")
        if sc.call_read and (sc.quote or truncated(finish)):  # the cut came after the arguments
            self._c.finish_object(sc.text(), raw_block, after_arguments=True)
            return
        self._calls.close_block(finish, raw_block, lambda: self._complete_block_object(raw_block))

    def _complete_block_object(self, raw_block: str) -> None:
        """The server dropped the `</tool_call>` stop string: complete the block (inside a string: only by
        the guarded inner-quotes repair)."""
        sc = self._c.scanner()
        if sc.quote:  # unescaped quotes in a value, perhaps: a guarded repair, else Malformed
            self._c.finish_open_string(raw_block[len(OPEN) :], raw_block)
        else:
            self._c.finish_object(sc.text(), raw_block)

    def _close_block_raw(self, finish: FinishReason) -> None:
        self._parts.append(self._buf)
        self._calls.close_block(finish, OPEN + "".join(self._parts), self._finish_raw)


# ---- the format ------------------------------------------------------------------------------


class HermesFormat:
    """``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``, as Qwen2.5 and Hermes are trained."""

    name = "hermes"
    grammar: CallGrammar | None = HERMES_GRAMMAR  # the grammar its calls are constrained to (_hermes_grammar)

    def render_tools(self, tools: Sequence[ToolSpec], tool_choice: ToolChoice, parallel: bool) -> str:
        return tools_prompt(tools, tool_choice, parallel)

    def worked_example(self, tools: Sequence[ToolSpec], tool_choice: ToolChoice) -> list[tuple[str, dict[str, Any]]]:
        return worked_example(tools, tool_choice)

    def render_calls(self, calls: Sequence[ToolCallRecord]) -> str:
        return render_calls(calls)

    def render_result(self, name: str, content: str) -> str:
        return f"<tool_response>\n{content}\n</tool_response>"

    def stop_sequences(self) -> tuple[str, ...]:
        # `</tool_call>` ends generation after the first block (servers usually leave it out of the
        # text: close() completes the block); `\n<tool_response>` stops an invented result
        # (at a line start only: an answer that opens with `<tool_response>` misnames its wrapper, see _guard).
        return (CLOSE, "\n" + RESPONSE)

    def stops_between_calls(self) -> tuple[str, ...]:
        return (CLOSE,)  # every block ends with it, the next block follows

    def new_parser(self, tools: Sequence[ToolSpec], max_calls: int = 1) -> StreamParser:
        return guard(HermesParser(tools, max_calls), CallOpener(re.compile(r"<tool_call[\s>]")))
