"""Small text helpers shared by the streaming parsers: marker hold-back, marker search, event buffering.

The functions keep no state (the parsers own their cursors); ``EventBuffer`` holds only the
events of one ``feed``/``close`` call.
"""

from __future__ import annotations

from collections.abc import Iterable

from .base import Event, Reasoning, Text

TextKind = type[Text] | type[Reasoning]

# Past this many characters a held-back tail that still looks like a marker prefix is flushed
# as text (rule 4 of the parser rules: bounded hold-back).
MAX_HOLDBACK = 64


def partial_marker_len(text: str, markers: Iterable[str]) -> int:
    """Length of the longest suffix of ``text`` that is a proper prefix of one of ``markers``.

    The parser may emit everything before that suffix as text now; the suffix must wait for
    more input. Cost is O(sum of marker lengths), independent of ``len(text)``.
    """
    best = 0
    for marker in markers:
        limit = min(len(marker) - 1, len(text))
        for size in range(limit, best, -1):
            if marker.startswith(text[-size:]):
                best = size
                break
    return best


def find_first(text: str, markers: Iterable[str], start: int = 0) -> tuple[int, str] | None:
    """The earliest occurrence of any marker at or after ``start``: ``(position, marker)``."""
    found: tuple[int, str] | None = None
    for marker in markers:
        pos = text.find(marker, start)
        if pos != -1 and (found is None or pos < found[0] or (pos == found[0] and len(marker) > len(found[1]))):
            found = (pos, marker)
    return found


class EventBuffer:
    """The events of one ``feed``/``close`` call, with adjacent text of one kind joined.

    Parsers emit text in many small pieces; gathering a run in a list and joining it once when
    another kind or event follows keeps the output short and the cost linear.
    """

    __slots__ = ("_events", "_kind", "_run")

    def __init__(self) -> None:
        self._events: list[Event] = []
        self._kind: TextKind = Text
        self._run: list[str] = []

    def text(self, kind: TextKind, piece: str) -> None:
        """Queue visible text (``Text`` or ``Reasoning``); empty pieces are dropped."""
        if piece:
            if kind is not self._kind:
                self._flush()
                self._kind = kind
            self._run.append(piece)

    def push(self, event: Event) -> None:
        """Queue a non-text event after the text so far."""
        if self._run:
            self._flush()
        self._events.append(event)

    def take(self) -> list[Event]:
        """Everything queued since the last ``take``, oldest first; the buffer is empty afterwards."""
        if self._run:  # checked here: ``take`` runs once per ``feed``, mostly with no text pending
            self._flush()
        events, self._events = self._events, []
        return events

    def _flush(self) -> None:
        if self._run:
            self._events.append(self._kind("".join(self._run)))
            self._run = []
