"""Lenient recognition: calls written in a syntax other than the prompted one still become calls.

Models slip into the call syntaxes they were trained on, whatever the prompt asked for. ``LenientParser``
wraps any format's parser; the Text that parser emits goes through ``ForeignCalls``, a sans-IO recognizer
of the common foreign syntaxes (all other events pass through, renumbered)::

    {"name": "get_weather", "arguments": {"city": "Paris"}}          bare object, also after prose
    [{"name": ...}, {"name": ...}]   {"tool_calls": [{"function": {...}}]}   {...}; {...}   {...}\\n{...}
    ```json\\n{"name": ...}\\n```                                       a json / bare fence
    <tool_call>{...}</tool_call>   <function_call>, <tools>, <tool>, <json>, <response>, <tool_calls>,
    <|python_tag|>{...}   <|tool_call|>[...]                           wrappers around the same JSON
    <tool_call>\\n```json\\n{...}\\n```\\n</tool_call>   ```xml\\n<tool_call>...</tool_call>\\n```   a fence in a
                                                                      wrapper, a wrapper (any tag) in a fence
    [get_weather(city='Paris'), search(q="x")]   <|python_start|>[...]<|python_end|>   (pythonic lists:
                                                                      _foreign_pythonic)
    [TOOL_CALLS] [{...}]   [TOOL_CALLS]get_weather[ARGS]{...}   [TOOL_CALLS]get_weather{...}   (Mistral; a
                                                                      </s> right after the calls is markup)
    <function=get_weather>{"city": "Paris"}</function>               (Llama 3.1 custom)
    <tool_call><function=get_weather><parameter=city>Paris</parameter></function></tool_call>   (qwen3_xml,
                                                                      the wrapper optional)
    <get_weather><city>Paris</city></get_weather>   <get_weather city="Paris"/>   (morph_xml: an offered
                                                                      tool's name; attributes as arguments)
    <BAR tool_calls_begin BAR>...   <|tool_calls_section_begin|>...   (DeepSeek V3/V3.1, Kimi K2: _foreign_tokens)
    <minimax:tool_call><invoke name="get_weather"><parameter name="city">Paris</parameter></invoke>...
        (MiniMax-M2; DeepSeek V3.2 / V4 DSML the same with BAR DSML BAR tags: _foreign_invoke)
    <|tool_call>call:get_weather{city:<|"|>Paris<|"|>}<tool_call|>   (Gemma 4: _foreign_gemma)
    <tool_call>get_weather<arg_key>city</arg_key><arg_value>Paris</arg_value></tool_call>   (GLM-4.5)
    <|channel|>commentary to=functions.get_weather <|constrain|>json<|message|>{...}<|call|>   (gpt-oss harmony;
        a message with no recipient: <|channel|>analysis<|message|>... is reasoning, final / commentary
        text, their headers and <|end|> / <|return|> dropped)
    [TOOL_REQUEST]{"name": ...}[END_TOOL_REQUEST]   [TOOL_REQUEST]\\nNAME {...}\\n[TOOL_REQUEST_END]   (LM Studio)

``parameters`` is read as ``arguments``; arguments may be an object or a JSON string. Only names of the
request's tools count: JSON that names none, a fence holding other JSON, a wrapper around prose, all stay
text exactly as written. A wrapper, fence or separator around a call never reaches content. A bare call
written inside a line of prose counts only when nothing but blanks, a separator or a next call follows
it on its line (``Call it as {...} later.`` is a mention); so does a pythonic list. An array's ``[`` (after
``<tools>``, ``[TOOL_CALLS]`` or alone) around calls the wrapped parser reads is their markup, its ``]``
too. The XML styles are decoded by their formats'
own block decoders (``_foreign_xml``).

A block the wrapped parser opened as its own but could not read (hermes' ``<tool_call>`` holding qwen3
XML, qwen3_xml's ``<tool_call>`` holding JSON) is ``Malformed`` there; when foreign recognition reads
that block's text as nothing but whole calls, those calls replace it (``rescue``).

States of ``ForeignCalls`` (one ``_step_*`` method each):

* PROSE: text. ``{``, ``[``, ``<``, a backtick may start a foreign syntax (not right after a backtick: a
  mention). A possible opener prefix is held (at most ``_OPENER_WINDOW`` characters) until decided; an
  opener -> HEAD; a non-json fence -> FENCE.
* FENCE: a code fence in prose: text until its closing fence -> PROSE.
* HEAD: after an opener (a tag, a fence line, ``[TOOL_CALLS]``, ``<function=NAME>``): blanks, then a
  value -> VALUE (or ``NAME[ARGS]`` first, for Mistral; a json fence line first, inside a wrapper tag), a
  pythonic list -> LIST; anything else: the opener was text -> PROSE.
* VALUE: the JSON value, scanned by ``ValueScanner`` with a cursor. Undecided (no ``name`` read yet) it is
  held, at most ``HOLD_CAP`` characters (opener included) -> then text; not call-shaped -> SKIP; call-shaped:
  held to its end (at most ``BLOCK_CAP``) -> calls, then AFTER (or text / Malformed when it is not one).
* LIST: a pythonic list (``[`` + an offered tool's ``name(``), held to its matching ``]`` (at most
  ``BLOCK_CAP``; a blank line outside a string: text) and read by the pythonic format's parser -> calls
  (AFTER), Malformed, or text when it reads as anything but calls.
* MESSAGE: a harmony analysis message, up to its end token or the next header: reasoning -> PROSE. (A
  final or commentary message with no recipient is prose: only its header and end token are dropped.) So
  is a Mistral ``[THINK]`` block opened before any text, up to ``[/THINK]`` (dropped) or ``[TOOL_CALLS]``.
* SKIP: the rest of a value that is not a call (at most ``HOLD_CAP`` characters), as text, unscanned for
  calls: a call object nested in other JSON stays text -> PROSE.
* XML: a qwen3_xml or morph_xml block, held until ``</function>`` / ``</tool_call>`` / ``</NAME>`` (at
  most ``BLOCK_CAP``), decoded -> calls (or Malformed), then AFTER.
* AFTER: separators (blanks, one ``,`` or ``;``), then the closing tag / fence (dropped; an outer one after
  it too: a fence around a tag, a tag around a fence, DeepSeek's end of sentence), another value
  (-> VALUE), ``[TOOL_CALLS]`` again (-> HEAD), another ``<function=`` in a qwen3 wrapper (-> XML), or
  anything else -> PROSE (separators shown as text; blanks before a ``<`` dropped). After a call written
  inside a line of prose, AFTER first decides whether the line ends there (else the call is text).
* DONE: after the cut (``SecondToolStarted``); input is ignored.

Bounds of the hold-back (text not yet released): an opener prefix ``OPENER_WINDOW`` (128) characters,
an undecided value ``HOLD_CAP`` (4 KiB) characters, separators ``GAP_CAP`` (64). A value known to be a call
(its name read, an offered tool) or an XML block is held until it ends, up to ``BLOCK_CAP`` (64 MiB),
then released as text (an XML block: Malformed). Every character is scanned a bounded number of times
(the cursor never moves back): the work is linear. Prose with no trigger character, and argument text
of the wrapped parser's calls, pass through without being buffered.

Non-Text events of the wrapped parser are boundaries: what is held is decided as at a cut-off output,
then the event passes. The call indexes, the ``max_calls`` cut and finishing calls go through one
``CallSlots`` shared by the wrapped parser's calls (renumbered) and the foreign ones.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from ._args import ToolIndex
from ._calls import CallSlots
from ._foreign import ForeignCalls
from ._foreign_open import BLOCK_CAP, HOLD_CAP
from ._guard import guard_around
from ._text import EventBuffer
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
    ToolCallStart,
    ToolFormat,
    ToolSpec,
)

__all__ = ["BLOCK_CAP", "HOLD_CAP", "LenientParser", "new_parser"]
_TOOL_CALL, _TOOL_CALL_END = "<tool_call>", "</tool_call>"


class LenientParser:
    """A format's parser plus ``ForeignCalls`` on its Text, with one ``CallSlots`` for both."""

    def __init__(self, primary: StreamParser, tools: Sequence[ToolSpec], max_calls: int) -> None:
        self._primary = primary
        self._out = EventBuffer()
        self._calls = CallSlots(tools, max_calls, self._out)
        self._foreign = ForeignCalls(self._calls, self._out)
        self._index: dict[int, int] = {}  # the wrapped parser's call index -> the response's
        self._streamed: set[int] = set()  # the wrapped parser's calls whose argument text was relayed
        self._done = False

    def feed(self, text: str) -> list[Event]:
        if self._done or not text:
            return []
        events = self._primary.feed(text)
        if len(events) == 1:  # the common cases: a piece of prose, a piece of a call's arguments
            event = events[0]
            if type(event) is Text and self._foreign.plain(event.text):
                return events
            if type(event) is ToolCallArgs and self._index.get(event.index) == event.index and self._foreign.idle:
                self._streamed.add(event.index)
                return events
        elif not events:
            return events
        self._relay(events)
        return self._out.take()

    def close(self, finish_reason: FinishReason = "stop") -> list[Event]:
        if self._done:
            return []
        self._relay(self._primary.close(finish_reason))
        if not self._done:
            self._foreign.close(finish_reason)
        self._done = True
        return self._out.take()

    def _relay(self, events: list[Event]) -> None:
        for event in events:
            if self._done:
                return
            if isinstance(event, Text):
                self._foreign.feed(event.text)
                self._done = self._foreign.done
                continue
            call = isinstance(event, ToolCallStart | ToolCallArgs | ToolCallEnd)
            self._foreign.boundary(call or (isinstance(event, Malformed) and event.index is not None))
            if self._foreign.done:
                self._done = True
                return
            self._pass(event)

    def _pass(self, event: Event) -> None:
        """One event of the wrapped parser, with the response's call index."""
        if isinstance(event, Reasoning):
            self._out.text(Reasoning, event.text)
        elif isinstance(event, ToolCallStart):
            if self._calls.cut():
                self._done = True
                return
            self._index[event.index] = self._calls.begin(event.name)
            self._calls.open = None  # the wrapped parser tracks its own open call
        elif isinstance(event, SecondToolStarted):
            self._out.push(SecondToolStarted(self._calls.count))
            self._done = True
        elif isinstance(event, ToolCallArgs | ToolCallEnd):
            index = self._index.get(event.index)
            if index is not None:
                self._streamed.add(event.index)
                self._out.push(event if index == event.index else replace(event, index=index))
        elif isinstance(event, Malformed):
            self._malformed(event)

    def _malformed(self, event: Malformed) -> None:
        """A block the wrapped parser could not read may be a foreign syntax that opened like its own
        (hermes' ``<tool_call>`` holding qwen3 XML, qwen3's ``<tool_call>`` holding JSON): its calls then.
        A call the wrapped parser started is rescued only as one call, and only when no argument text of
        it was relayed (fragments only ever append)."""
        index = self._index.get(event.index) if event.index is not None else None
        calls = rescue(event.raw, self._calls.tools, closed="truncated" not in event.reason)
        started = event.index is not None
        if calls is None or (started and (len(calls) != 1 or event.index in self._streamed)):
            self._out.push(replace(event, index=index))
            return
        for end in calls:
            if index is None:
                if self._calls.cut():
                    self._done = True
                    return
                index = self._calls.begin(end.name)
                self._calls.open = None
            self._out.push(replace(end, index=index))
            index = None


def rescue(raw: str, tools: Sequence[ToolSpec] | ToolIndex, closed: bool = False) -> list[ToolCallEnd] | None:
    """The calls foreign recognition reads in ``raw`` when it is nothing but whole calls (blanks aside), or None.

    ``closed``: the block was complete, its ``</tool_call>`` left out of ``raw`` (hermes' Malformed): it is
    put back, as a GLM block ends only there."""
    if closed and raw.startswith(_TOOL_CALL) and not raw.rstrip().endswith(_TOOL_CALL_END):
        raw += _TOOL_CALL_END
    index = tools if isinstance(tools, ToolIndex) else ToolIndex(tools)
    if not index.mentioned_in(raw):  # no tool named, no call to read: a flood of broken blocks stays cheap
        return None
    out = EventBuffer()
    foreign = ForeignCalls(CallSlots(index, len(raw) + 1, out), out)
    foreign.feed(raw)
    foreign.close("length")  # only whole blocks: one the output ended in stays the wrapped parser's
    events = out.take()
    ends = [e for e in events if isinstance(e, ToolCallEnd)]
    if not ends or any(isinstance(e, Malformed) or (isinstance(e, Text) and e.text.strip()) for e in events):
        return None
    return ends


def new_parser(fmt: ToolFormat, tools: Sequence[ToolSpec], max_calls: int = 1, lenient: bool = True) -> StreamParser:
    """A parser for one response in ``fmt``; with ``lenient``, foreign call syntaxes are calls too."""
    primary = fmt.new_parser(tools, max_calls)
    if not lenient:
        return primary
    # inside the format's guard: a call in a foreign syntax followed by an invented tool result ends the turn too
    return guard_around(primary, lambda inner: LenientParser(inner, tools, max_calls))
