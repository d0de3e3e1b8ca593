"""Server-sent events, sans-IO: an incremental decoder for upstream streams and the encoder.

The decoder follows the WHATWG event-stream rules that matter for OpenAI-style streams:
lines end in CRLF, LF or CR (only those: not U+2028, unlike ``str.splitlines``); several
``data:`` lines join with ``\\n``; lines starting with ``:`` are comments; an empty line
dispatches the event. It takes already-decoded text in chunks split anywhere and keeps only
the unfinished line and the event being built, so work is linear in the stream length.
One addition: llama.cpp writes a failure as an ``error:`` line (not ``data:``), which the
standard would drop with its message; it becomes an event named ``error``.

With ``max_event_size`` the decoder also bounds memory: an event (its data lines and the line
being read, in characters) that grows past the limit raises ``EventTooLarge`` at once, before the
rest arrives, and what was held is dropped; the decoder is finished after that. The exception
carries the complete events that came before it in the same chunk (``events``), so none is lost.
The caller (the upstream reader) turns it into an error; an endless line cannot grow memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .jsoncodec import dumps

DONE = "[DONE]"
_LINE_END = re.compile(r"\r\n|\r|\n")


@dataclass(frozen=True, slots=True)
class SSEEvent:
    data: str
    event: str | None = None


class EventTooLarge(ValueError):
    """One event grew past the decoder's ``max_event_size``; nothing of it was kept."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"an event is larger than the limit of {limit} characters")
        self.limit = limit
        self.events: list[SSEEvent] = []  # complete events before it in the chunk that raised


class SSEDecoder:
    """Feed text with ``decode``; get complete events. ``flush`` at end of stream."""

    def __init__(self, max_event_size: int | None = None) -> None:
        self._tail: list[str] = []  # pieces of the unfinished line (never holds a line end)
        self._tail_size = 0
        self._data: list[str] = []
        self._data_size = 0  # characters in ``_data``, with the newlines that will join them
        self._event: str | None = None
        self._pending_cr = False  # the last chunk ended in CR: a leading LF next is its CRLF partner
        self._limit = max_event_size
        self._failed = False

    def decode(self, chunk: str) -> list[SSEEvent]:
        if self._failed:
            raise EventTooLarge(self._limit or 0)
        if self._pending_cr and chunk:
            self._pending_cr = False
            if chunk.startswith("\n"):
                chunk = chunk[1:]  # the LF of a CRLF split across chunks
        if not chunk:
            return []
        # A CR always ends a line at once; only a following LF must be skipped, even in the next chunk.
        self._pending_cr = chunk.endswith("\r")
        events: list[SSEEvent] = []
        try:
            self._lines(chunk, events)
        except EventTooLarge as exc:
            exc.events = events
            raise
        return events

    def _lines(self, chunk: str, events: list[SSEEvent]) -> None:
        start = 0
        for match in _LINE_END.finditer(chunk):
            self._check(self._tail_size + match.start() - start)
            line = chunk[start : match.start()]
            if self._tail:
                line = "".join(self._tail) + line
                self._tail, self._tail_size = [], 0
            self._line(line, events)
            start = match.end()
        if start < len(chunk):
            self._check(self._tail_size + len(chunk) - start)
            self._tail.append(chunk[start:])
            self._tail_size += len(chunk) - start

    def flush(self) -> list[SSEEvent]:
        """End of stream: an unterminated last line and event still count."""
        if self._failed:
            raise EventTooLarge(self._limit or 0)
        events: list[SSEEvent] = []
        if self._tail:
            self._line("".join(self._tail), events)
            self._tail, self._tail_size = [], 0
        self._pending_cr = False
        self._line("", events)
        return events

    def _check(self, line_size: int) -> None:
        """Raise (dropping everything held) when the event with this line would pass the limit."""
        if self._limit is not None and self._data_size + line_size > self._limit:
            self._tail, self._data, self._tail_size, self._data_size = [], [], 0, 0
            self._failed = True
            raise EventTooLarge(self._limit)

    def _line(self, line: str, events: list[SSEEvent]) -> None:
        if not line:
            if self._data:
                events.append(SSEEvent("\n".join(self._data), self._event))
            self._data, self._data_size, self._event = [], 0, None
            return
        if line.startswith(":"):
            return
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
            self._data_size += len(value) + 1
        elif field == "error":  # llama.cpp's error event: keep its message
            self._data.append(value)
            self._data_size += len(value) + 1
            self._event = "error"
        elif field == "event":
            self._event = value


def encode(data: str) -> bytes:
    """One SSE event carrying ``data``; a payload with line breaks becomes several data lines."""
    if "\n" in data or "\r" in data:
        lines = _LINE_END.split(data)
        return "".join(f"data: {line}\n" for line in lines).encode("utf-8") + b"\n"
    return b"data: " + data.encode("utf-8") + b"\n\n"


def encode_json(payload: Any) -> bytes:
    """One SSE event carrying ``payload`` as compact JSON (which has no line breaks)."""
    return b"data: " + dumps(payload) + b"\n\n"


def encode_event(name: str, payload: Any) -> bytes:
    """A named event (``event: <name>``), as the Responses API streams them."""
    return f"event: {name}\n".encode() + encode_json(payload)


DONE_BYTES = encode(DONE)
