"""An output that starts inside a thought: the chat template wrote ``<think>``, the model only ``</think>``.

Thinking models' templates (DeepSeek-R1, QwQ, Qwen3 thinking) often end the prompt with ``<think>\\n``,
so the output starts inside the thought and has only the closing tag::

    The user wants the weather, so I call the tool.
    </think>

    <tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>

``ThoughtStart`` wraps any format's parser (the emulation loop does it, by the rule's ``thinking``
option) and, before the parser sees anything, decides whether the output starts this way; the text
before that ``</think>`` is ``Reasoning``, the rest goes to the format's parser (which handles
``<think>...</think>`` blocks itself). Modes:

* ``off`` (the default): the parser gets the output unchanged. The formats themselves hold back only a
  possible marker prefix (parser rule 4), so a plain answer streams from its first token.
* ``template``: for models whose template always opens the thought (DeepSeek-R1 and its distills).
  Reasoning streams at once up to ``</think>`` (only a possible partial tag is held); an output without
  ``</think>`` is all Reasoning. A ``<think>`` the model wrote anyway at the very start is dropped.
* ``auto``: for models that sometimes start inside a thought. Only at the start of the output, at most
  ``THOUGHT_HOLD`` characters are held back. A ``</think>`` that ends within them, with no ``<think>``
  before it, makes the text before it Reasoning; an ``<think>`` first, ``THOUGHT_HOLD`` characters
  without ``</think>``, or the end of the output hand everything to the parser unchanged. The decision
  depends only on positions in the text, never on the chunking. Cost: the first ``THOUGHT_HOLD``
  characters of every output reach the client (and the cut) that much later, never more.

Sans-IO and linear: each feed searches only the new text plus a tag's length of overlap.
"""

from __future__ import annotations

from typing import Literal

from ._text import partial_marker_len
from .base import Event, FinishReason, Reasoning, StreamParser

ThinkingMode = Literal["auto", "template", "off"]

THOUGHT_HOLD = 2048  # characters held back at the start in ``auto`` mode, waiting for a possible </think>
_OPEN, _CLOSE = "<think>", "</think>"


class ThoughtStart:
    """A ``StreamParser`` that reads a leading thought closed by ``</think>``, then defers to ``inner``."""

    def __init__(self, inner: StreamParser, mode: ThinkingMode = "auto") -> None:
        self.inner = inner
        self.mode: ThinkingMode = mode
        self._held = ""  # auto: the undecided start; template: a possible partial tag
        self._deciding = mode != "off"
        self._started = False  # template: non-space reasoning was emitted
        self._strip = False  # drop the whitespace between </think> and what follows

    def feed(self, text: str) -> list[Event]:
        if not self._deciding:
            return self._pass(text)
        if self.mode == "template":
            return self._feed_template(text, final=False)
        return self._feed_auto(text, final=False)

    def close(self, finish_reason: FinishReason = "stop") -> list[Event]:
        events: list[Event] = []
        if self._deciding:
            events = self._feed_template("", final=True) if self.mode == "template" else self._feed_auto("", True)
        return events + self.inner.close(finish_reason)

    # ---- modes ------------------------------------------------------------------------------

    def _feed_auto(self, text: str, final: bool) -> list[Event]:
        searched = max(len(self._held) - len(_CLOSE) + 1, 0)
        held = self._held + text
        close = held.find(_CLOSE, searched, THOUGHT_HOLD)
        opened = held.find(_OPEN, searched, THOUGHT_HOLD)
        if close != -1 and (opened == -1 or close < opened):
            return self._end_thought(held, close)
        if opened != -1 or final or len(held) >= THOUGHT_HOLD:
            self._held, self._deciding = "", False
            return self._pass(held)
        self._held = held
        return []

    def _feed_template(self, text: str, final: bool) -> list[Event]:
        held = self._held + text
        if not self._started:
            body = held.lstrip()
            if not final and len(body) < len(_OPEN) and _OPEN.startswith(body):
                self._held = held
                return []
            held = body.removeprefix(_OPEN).lstrip()
            self._started = bool(held)
        close = held.find(_CLOSE)
        if close != -1:
            return self._end_thought(held, close)
        keep = 0 if final else partial_marker_len(held, (_CLOSE,))
        self._held = held[len(held) - keep :] if keep else ""
        thought = held[: len(held) - keep]
        return [Reasoning(thought)] if thought else []

    # ---- shared -----------------------------------------------------------------------------

    def _end_thought(self, held: str, close: int) -> list[Event]:
        """``held[:close]`` was the thought; what follows ``</think>`` goes to the parser."""
        thought = held[:close] if self.mode == "template" else held[:close].strip()  # template: streamed raw
        self._held, self._deciding, self._strip = "", False, True
        events: list[Event] = [Reasoning(thought)] if thought else []
        return events + self._pass(held[close + len(_CLOSE) :])

    def _pass(self, text: str) -> list[Event]:
        if self._strip:
            text = text.lstrip()
            if not text:
                return []
            self._strip = False
        return self.inner.feed(text) if text else []


def think_start(parser: StreamParser, mode: ThinkingMode = "auto") -> StreamParser:
    """``parser`` reading a leading thought (module docstring); ``off`` returns it unchanged."""
    return parser if mode == "off" else ThoughtStart(parser, mode)


def set_thinking(parser: StreamParser, mode: ThinkingMode) -> StreamParser:
    """A new parser (a format's ``new_parser``, or one already wrapped) reading in ``mode``."""
    if not isinstance(parser, ThoughtStart):
        return think_start(parser, mode)
    if mode == "off":
        return parser.inner
    parser.mode = mode
    return parser
