"""Small text helpers shared by the streaming parsers: marker hold-back and think-tag scanning.

Nothing here keeps state; the parsers own their cursors.
"""

from __future__ import annotations

from collections.abc import Iterable

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
