"""Server-sent events, sans-IO: an incremental decoder for upstream streams and the encoder.

The decoder follows the WHATWG event-stream rules that matter for OpenAI-style streams:
lines end in CRLF, LF or CR (only those: not U+2028, unlike ``str.splitlines``); several
``data:`` lines join with ``\\n``; lines starting with ``:`` are comments; an empty line
dispatches the event. It takes already-decoded text in chunks split anywhere and keeps only
the unfinished line and the event being built, so work is linear in the stream length.
One addition: llama.cpp writes a failure as an ``error:`` line (not ``data:``), which the
standard would drop with its message; it becomes an event named ``error``.
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


class SSEDecoder:
    """Feed text with ``decode``; get complete events. ``flush`` at end of stream."""

    def __init__(self) -> None:
        self._tail: list[str] = []  # pieces of the unfinished line (never holds a line end)
        self._data: list[str] = []
        self._event: str | None = None
        self._pending_cr = False  # the last chunk ended in CR: a leading LF next is its CRLF partner

    def decode(self, chunk: str) -> list[SSEEvent]:
        if self._pending_cr and chunk:
            self._pending_cr = False
            if chunk.startswith("\n"):
                chunk = chunk[1:]  # the LF of a CRLF split across chunks
        if not chunk:
            return []
        # A CR always ends a line at once; only a following LF must be skipped, even in the next chunk.
        self._pending_cr = chunk.endswith("\r")
        events: list[SSEEvent] = []
        start = 0
        for match in _LINE_END.finditer(chunk):
            line = chunk[start : match.start()]
            if self._tail:
                line = "".join(self._tail) + line
                self._tail = []
            self._line(line, events)
            start = match.end()
        if start < len(chunk):
            self._tail.append(chunk[start:])
        return events

    def flush(self) -> list[SSEEvent]:
        """End of stream: an unterminated last line and event still count."""
        events: list[SSEEvent] = []
        if self._tail:
            self._line("".join(self._tail), events)
            self._tail = []
        self._pending_cr = False
        self._line("", events)
        return events

    def _line(self, line: str, events: list[SSEEvent]) -> None:
        if not line:
            if self._data:
                events.append(SSEEvent("\n".join(self._data), self._event))
            self._data, self._event = [], None
            return
        if line.startswith(":"):
            return
        field, _, value = line.partition(":")
        if value.startswith(" "):
            value = value[1:]
        if field == "data":
            self._data.append(value)
        elif field == "error":  # llama.cpp's error event: keep its message
            self._data.append(value)
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
