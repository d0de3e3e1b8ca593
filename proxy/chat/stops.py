"""Stop enforcement: find the first stop sequence in the model's text, whatever the server did with ``stop``.

Some model servers ignore ``stop`` or accept only a few sequences. The emulation loop feeds every
piece of upstream content through a ``StopMatcher`` before the parser sees it; the matcher hands back
only the text before the first occurrence of any stop sequence (the format's and the client's, also
those that did not fit in the upstream's ``max_stop_sequences``), so the parser sees exactly what a
server that honours ``stop`` would have sent. On a hit the loop closes the upstream connection (the
server stops generating) and closes the parser with finish reason ``"stop"``.

Sans-IO and linear: a stop may straddle chunk boundaries, so the longest tail that is a proper prefix
of a stop sequence is held back (at most the longest stop's length minus one), also when a shorter stop
was found inside it; each feed searches only the held tail plus the new text. Nothing here raises.
"""

from __future__ import annotations

import re
from collections.abc import Iterable


class StopMatcher:
    """Cuts a text stream at the first of ``stops``; ``feed`` returns the text that is safe to parse."""

    __slots__ = ("_held", "_search", "_stops", "hit")

    def __init__(self, stops: Iterable[str]) -> None:
        self._stops = tuple(dict.fromkeys(s for s in stops if s))
        # One search for all stops: leftmost first, the longest of those starting at one place first.
        self._search = re.compile("|".join(re.escape(s) for s in sorted(self._stops, key=len, reverse=True))).search
        self._held = ""
        self.hit: str | None = None  # the stop sequence found; nothing is returned after it

    @property
    def active(self) -> bool:
        """Whether there is anything to enforce (no stops: ``feed`` returns its input unchanged)."""
        return bool(self._stops)

    def feed(self, text: str) -> str:
        """The text before any stop sequence; a possible partial stop at the end is held back."""
        if self.hit is not None:
            return ""
        if not self._stops:
            return text
        data = self._held + text
        found = self._search(data)
        start = len(data) - _partial_stop_len(data, self._stops)  # where a stop may still be completing
        if found is not None and found.start() <= start:
            self._held, self.hit = "", found.group()
            return data[: found.start()]
        # A stop found after the start of one still completing (stops "<" and "><<", text "><" then "<")
        # waits with it: the next feed or ``flush`` decides which comes first.
        self._held = data[start:]
        return data[:start]

    def flush(self) -> str:
        """End of the stream: the held-back tail is text, up to a stop it may hold (see ``feed``)."""
        held, self._held = self._held, ""
        if self.hit is not None:
            return ""
        found = self._search(held) if self._stops else None
        if found is not None:
            self.hit = found.group()
            return held[: found.start()]
        return held


def _partial_stop_len(data: str, stops: tuple[str, ...]) -> int:
    """Length of the longest suffix of ``data`` that is a proper prefix of a stop sequence.

    Like ``partial_marker_len``, but it only tries the suffixes that start with a stop's first
    character (found by ``str.find``), which keeps the common case, no candidate at all, at one C-level
    search per stop: this runs on every upstream chunk.
    """
    best, n = 0, len(data)
    for stop in stops:
        pos = data.find(stop[0], max(n - len(stop) + 1, 0))
        while pos != -1 and n - pos > best:
            if stop.startswith(data[pos:]):
                best = n - pos
                break
            pos = data.find(stop[0], pos + 1)
    return best
