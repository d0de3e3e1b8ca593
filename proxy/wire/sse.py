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

``PayloadReader`` reads an OpenAI-style upstream stream with it: bytes in any split, each event's
``data`` out, ``[DONE]`` the end, the errors such a stream can end in raised as toolshim's own.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from .errors import UpstreamProtocolError, stream_error, upstream_too_large
from .jsoncodec import dumps_event

DONE = "[DONE]"
_LINE_END = re.compile(r"\r\n|\r|\n")
# A finish_reason with a string value: the answer is complete even if [DONE] never comes.
_FINISHED = re.compile(r'"finish_reason"\s*:\s*"')


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


class PayloadReader:
    """Sans-IO: an upstream's OpenAI-style event stream, as bytes in any split, to its events' payloads.

    ``feed`` takes each piece of the body and returns the ``data`` of the events it completed; ``end``
    takes the end of the body (an unterminated last event still counts). The stream is ``over`` at
    ``[DONE]`` or at a failure, after the payloads before it: nothing later is read. ``failure`` says
    what it ended in: an ``error`` event (with the upstream's message), an event past
    ``max_event_bytes`` (``upstream_event_too_large``), or, once ``end`` was reached, a body that
    stopped before ``[DONE]`` and before any ``finish_reason`` (a crashed server: not a clean end)."""

    def __init__(self, upstream: str, max_event_bytes: int) -> None:
        self._upstream = upstream
        self._limit = max_event_bytes
        self._decoder = SSEDecoder(max_event_bytes)
        self._utf8 = codecs.getincrementaldecoder("utf-8")("replace")
        self._finished = False  # a finish_reason came
        self._failure: UpstreamProtocolError | None = None
        self.over = False  # [DONE] or a failure: read no further

    def feed(self, raw: bytes) -> list[str]:
        if self.over:
            return []
        return self._events(raw, final=False)

    def end(self) -> list[str]:
        if self.over:
            return []
        payloads = self._events(b"", final=True)
        if not self.over and not self._finished:
            self._failure = UpstreamProtocolError(
                f"upstream '{self._upstream}' ended the stream before the answer was finished"
            )
        self.over = True
        return payloads

    def failure(self) -> UpstreamProtocolError | None:
        return self._failure

    def _events(self, raw: bytes, final: bool) -> list[str]:
        try:
            events = self._decoder.decode(self._utf8.decode(raw, final))
            if final:
                events += self._decoder.flush()
        except EventTooLarge as exc:
            payloads = self._payloads(exc.events)
            if not self.over:
                self._failure, self.over = upstream_too_large(self._upstream, self._limit), True
            return payloads
        return self._payloads(events)

    def _payloads(self, events: list[SSEEvent]) -> list[str]:
        out: list[str] = []
        for event in events:
            if event.data == DONE:
                self.over = True
                break
            if event.event == "error":
                self._failure, self.over = stream_error(event.data), True
                break
            self._finished = self._finished or _FINISHED.search(event.data) is not None
            out.append(event.data)
        return out


def encode(data: str) -> bytes:
    """One SSE event carrying ``data``; a payload with line breaks becomes several data lines."""
    if "\n" in data or "\r" in data:
        lines = _LINE_END.split(data)
        return "".join(f"data: {line}\n" for line in lines).encode("utf-8") + b"\n"
    return b"data: " + data.encode("utf-8") + b"\n\n"


# One SSE event carrying a payload as compact JSON, ``encode_json(payload, name=None)``; named, as the
# Responses API streams them. The codec frames it: one call per streamed chunk.
encode_json = dumps_event


DONE_BYTES = encode(DONE)
