"""Two ways models write badly around a call, handled the same in every format: ``TurnGuard``.

* **A call in a code fence** (```` ```xml\\n<tool:get_weather>…\\n``` ````): a fence whose first
  non-blank line opens a call block of the format is markup, not prose. The fence line (and the blank
  lines after it) is dropped before the format's parser sees it, and so is the bare closing fence that
  ends it (nested ```` ```lang ```` fences inside the block are counted, so a fence inside an argument
  stays). A fence holding anything else is text as before.
* **An invented tool result**: once a call was written (``ToolCallEnd`` or ``Malformed`` of a call),
  a line that opens like a tool result (``Observation:``, ``"Observation:``, ``**Observation:**``,
  ``Tool result:``, ``Result:``, ``<tool_response>``, ``<tool_result>`` ...) ends the turn: it and all
  that follows never reach the client, as if the stop sequence had matched.

* **A misnamed wrapper** (``MisnamedWrapper``): an answer that opens with ``<tool_response>`` (small Qwen
  models write it where they mean ``<tool_call>``, or around their answer: ``<tool_response>1.25
  euros</tool_response>``; there is no result before a call) loses that tag and its ``</tool_response>``,
  a tag alone on its line with its line break; what it wraps (a call, or prose) is read as usual. The
  formats' result stop sequences start with a line break (``\n<tool_response>``), so the server does not
  end such an answer before its first character.

All are sans-IO filters around the wrapped parser: input before it, events after it. Hold-back is
bounded: a fence line and its first content line (``_FENCE_WINDOW``), a line start after a call
(``_OBS_WINDOW``). Each character is examined a bounded number of times.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from ._hermes_markup import RESPONSE as _WRAPPER_OPEN
from ._hermes_markup import RESPONSE_END as _WRAPPER_CLOSE
from ._text import partial_marker_len
from .base import Event, FinishReason, Malformed, StreamParser, Text, ToolCallEnd

_FENCE_WINDOW = 256  # a fence line plus blank lines plus the start of its first content line
_OBS_WINDOW = 48  # a line start after a call held until it is known not to open a tool result
_FENCE_LINE = re.compile(r"[ \t]{0,16}```[ \t]*([A-Za-z0-9_+.:-]*)[ \t]*\r?\n")
_FENCE_HEAD = re.compile(r"[ \t]{0,16}(?:`{0,3}|```[ \t]*[A-Za-z0-9_+.:-]*[ \t]*\r?)\Z")
_BLANK_LINES = re.compile(r"(?:[ \t]*\r?\n)*[ \t]*")
_WRAPPER_OPENING = re.compile(rf"[ \t]{{0,16}}{re.escape(_WRAPPER_OPEN)}[ \t]*(\r?\n)?")
_WRAPPER_HOLD = 40  # the answer's start held at most this long while it may open a misnamed wrapper
_BLANKS = re.compile(r"[ \t]*")
_CLOSING = re.compile(r"[ \t]{0,16}```[ \t]*(?:\r?\n|\Z)")
_OBSERVATION = re.compile(
    r"[ \t>#*_`\"'(\[-]{0,8}(?:"
    r"(?:observation|tool[ _-]?(?:result|response|output)|function[ _-]?(?:result|response|output)"
    r"|result|output)s?[ \t*_`\"']{0,4}[:\uff1a]"
    r"|</?(?:tool_response|tool_result|observation|function_results?|tool_output|result)\b)",
    re.IGNORECASE,
)


_DECORATION = " \t>#*_`\"'([-"
_RESULT_WORDS = tuple(
    {"observation", "result", "output", "<tool_response", "<tool_result", "<observation", "<function_result"}
    | {"<tool_output", "</tool_response", "<result"}
    | {
        f"{who}{sep}{what}"
        for who in ("tool", "function")
        for sep in ("", " ")
        for what in ("result", "response", "output")
    }
)


def _may_open_result(line: str) -> bool:
    """Whether a line start (no newline in it yet) may still turn out to open a tool result."""
    if "\n" in line:
        return False
    rest = line.lstrip(_DECORATION).lower().replace("_", " ").replace("-", " ")
    rest = rest.replace("<tool ", "<tool_").replace("</tool ", "</tool_").replace("<function ", "<function_")
    return any(word.startswith(rest) or rest.startswith(word) for word in _RESULT_WORDS)


class MisnamedWrapper:
    """Input filter: an answer opening with ``<tool_response>`` loses that tag and its ``</tool_response>``.

    The opening tag counts at the very start only (after blanks), alone on its line or with text after it
    (``<tool_response>1024</tool_response>``: the model's answer inside); the closing tag anywhere after it.
    A tag alone on its line goes with its line break. Holds at most ``_WRAPPER_HOLD`` characters at the
    start and a partial closing tag at a chunk's end, so any split gives the same text.
    """

    __slots__ = ("_at_line_start", "_held", "_state", "_swallow")

    def __init__(self) -> None:
        self._state = "head"  # head: undecided; wrapped: the closing tag is due; off: nothing to do
        self._held = ""
        self._at_line_start = True  # the text passed so far ends at a line start
        self._swallow = False  # a closing tag alone on its line was dropped: its line break goes too

    def feed(self, text: str, final: bool) -> str:
        if self._state == "head":
            return self._open(self._held + text, final)
        if self._state == "wrapped":
            return self._close(self._held + text, final)
        if self._swallow:
            return self._drop_line_break(self._held + text, final)
        return text

    def _open(self, s: str, final: bool) -> str:
        self._held = ""
        m = _WRAPPER_OPENING.match(s)
        if m is not None and (final or m.group(1) or m.end() < len(s)):
            self._state = "wrapped"
            self._at_line_start = bool(m.group(1))
            return self._close(s[m.end() :], final)
        stripped = s.lstrip(" \t")
        maybe = _WRAPPER_OPEN.startswith(stripped) or (m is not None and m.end() == len(s))
        if maybe and not final and len(s) < _WRAPPER_HOLD:
            self._held = s
            return ""
        self._state = "off"
        return s

    def _close(self, s: str, final: bool) -> str:
        self._held = ""
        i = s.find(_WRAPPER_CLOSE)
        if i < 0:
            keep = 0 if final else partial_marker_len(s, (_WRAPPER_CLOSE,))
            self._held, s = s[len(s) - keep :] if keep else "", s[: len(s) - keep]
            self._note_passed(s)
            return s
        self._state = "off"
        line = s.rfind("\n", 0, i)
        alone = (self._at_line_start if line < 0 else True) and not s[line + 1 : i].strip(" \t")
        rest = s[i + len(_WRAPPER_CLOSE) :]
        if alone:
            self._swallow = True
            rest = self._drop_line_break(rest, final)
        return s[:i] + rest

    def _drop_line_break(self, text: str, final: bool) -> str:
        """After a closing tag that began its line: the blanks after it and its line break go too."""
        self._held = ""
        at = _BLANKS.match(text).end()  # type: ignore[union-attr]
        if not final and (at == len(text) or text[at:] == "\r"):
            self._held = text  # undecided: blanks so far, or maybe half of "\r\n"
            return ""
        self._swallow = False
        if text.startswith("\r\n", at):
            return text[at + 2 :]
        return text[at + 1 :] if text.startswith("\n", at) else text[at:]

    def _note_passed(self, s: str) -> None:
        """Whether only blanks stand between the last line break passed (or the start) and the end of ``s``."""
        nl = s.rfind("\n")
        self._at_line_start = (nl >= 0 or self._at_line_start) and not s[nl + 1 :].strip(" \t")


@dataclass(frozen=True, slots=True)
class CallOpener:
    """How a format's call block starts, for telling a fenced call from a fenced example of prose."""

    pattern: re.Pattern[str]
    window: int = 64  # once this much of the first line is seen (or it ends), an opener shows or not

    def opens(self, line: str, final: bool) -> bool | None:
        """Whether the first content line of a fence opens a call block; None while undecided."""
        if self.pattern.match(line) is not None:
            return True
        if final or "\n" in line or len(line) >= self.window:
            return False
        return None


class TurnGuard:
    """A format's parser with fenced calls read as calls and invented tool results cut; see the module."""

    def __init__(self, inner: StreamParser, opener: CallOpener | None) -> None:
        self.inner, self.opener = inner, opener
        self._in = ""  # held input: a possible fence line at a line start
        self._in_line = True  # the input is at a line start
        self._depth = 0  # open fences inside an unfenced call (0: none; 1: only the dropped one)
        self._text_fence = False  # inside a fence passed through as text
        self._called = False  # a call was written: an invented result may follow
        self._wrapper = MisnamedWrapper()
        self._out = ""  # held output text at a line start after a call
        self._out_line = False
        self._done = False

    def feed(self, text: str) -> list[Event]:
        if self._done or not text:
            return []
        return self._events(self.inner.feed(self._unfence(self._wrapper.feed(text, False), False)))

    def close(self, finish_reason: FinishReason = "stop") -> list[Event]:
        if self._done:
            return []
        rest = self._unfence(self._wrapper.feed("", True), True)
        events = self.inner.feed(rest) if rest else []
        if self._done:
            return self._events(events)
        events = self._events(events)
        if self._done:
            return events
        events += self._events(self.inner.close(finish_reason), final=True)
        self._done = True
        return events

    # ---- input: fences around a call ------------------------------------------------------------

    def _unfence(self, text: str, final: bool) -> str:
        """``text`` with the fences around call blocks removed (some may be held for the next piece)."""
        if self.opener is None:
            return text
        s, out, i = self._in + text, [], 0
        self._in = ""
        while i < len(s):
            if not self._in_line:
                nl = s.find("\n", i)
                if nl < 0:
                    out.append(s[i:])
                    break
                out.append(s[i : nl + 1])
                i, self._in_line = nl + 1, True
                continue
            step = self._line(s, i, final)
            if step is None:
                self._in = s[i:]
                break
            keep, i = step
            out.append(keep)
        return "".join(out)

    def _line(self, s: str, i: int, final: bool) -> tuple[str, int] | None:
        """A line start at ``s[i]``: what of it passes and where scanning goes on; None: hold."""
        m = _FENCE_LINE.match(s, i)
        if m is None:
            if not final and len(s) - i < _FENCE_WINDOW and _FENCE_HEAD.match(s, i):
                return None  # may still become a fence line
            if self._depth and _CLOSING.match(s, i):  # a closing fence at the very end
                self._depth -= 1
                if self._depth == 0:
                    return "", len(s)
            self._in_line = False
            return "", i
        if self._depth:  # inside an unfenced call: count nested fences, drop the closing one
            if m.group(1):
                self._depth += 1
            else:
                self._depth -= 1
                if self._depth == 0:
                    self._in_line = True
                    return "", m.end()
            self._in_line = True
            return s[i : m.end()], m.end()
        if self._text_fence:
            self._text_fence = False
            self._in_line = True
            return s[i : m.end()], m.end()
        blank = _BLANK_LINES.match(s, m.end())
        start = blank.end() if blank is not None else m.end()
        assert self.opener is not None
        opens = self.opener.opens(s[start : start + _FENCE_WINDOW], final)
        if opens is None:
            return None if not final and len(s) - i < _FENCE_WINDOW else self._text(s, i, m.end())
        if not opens:
            return self._text(s, i, m.end())
        self._depth, self._in_line = 1, False  # the fence and blank lines go; the opener line passes
        return "", start

    def _text(self, s: str, i: int, end: int) -> tuple[str, int]:
        """A fence line that stays text: the fence it opens is prose until its closing line."""
        self._text_fence, self._in_line = True, True
        return s[i:end], end

    # ---- output: an invented tool result ends the turn -----------------------------------------

    def _events(self, events: list[Event], final: bool = False) -> list[Event]:
        out: list[Event] = []
        for event in events:
            if self._done:
                break
            if type(event) is Text and self._called:
                self._after_call(event.text, out, final=False)
                continue
            self._release(out)
            out.append(event)
            if isinstance(event, ToolCallEnd) or (isinstance(event, Malformed) and event.index is not None):
                self._called, self._out_line = True, True
        if final and not self._done:
            self._after_call("", out, final=True)
        return out

    def _after_call(self, text: str, out: list[Event], final: bool) -> None:
        """Text after a call: passed, unless a line of it opens an invented tool result (the end)."""
        s, i, shown = self._out + text, 0, []
        self._out = ""
        while i < len(s):
            if self._out_line:
                m = _OBSERVATION.match(s, i)
                if m is not None:
                    self._done = True
                    break
                if not final and len(s) - i < _OBS_WINDOW and _may_open_result(s[i:]):
                    self._out = s[i:]
                    break
            nl = s.find("\n", i)
            end = len(s) if nl < 0 else nl + 1
            shown.append(s[i:end])
            self._out_line, i = nl >= 0, end
        if shown and "".join(shown):
            out.append(Text("".join(shown)))

    def _release(self, out: list[Event]) -> None:
        """Held line-start text before a non-text event: it did not open a tool result."""
        if self._out:
            out.append(Text(self._out))
            self._out, self._out_line = "", False


def guard(inner: StreamParser, opener: CallOpener | None) -> StreamParser:
    """``inner`` behind a ``TurnGuard``: fenced calls are calls, an invented tool result ends the turn."""
    return TurnGuard(inner, opener)


def guard_around(parser: StreamParser, wrap: Callable[[StreamParser], StreamParser]) -> StreamParser:
    """``wrap`` applied to what ``parser`` guards, under that one guard (its call opener kept): a layer such as
    lenient recognition sits inside the format's guard, so calls of either kind are unfenced and cut after
    by one guard, and each piece crosses one guard, not two. A parser with no guard gets one (no opener)."""
    if isinstance(parser, TurnGuard):
        return TurnGuard(wrap(parser.inner), parser.opener)
    return TurnGuard(wrap(parser), None)
