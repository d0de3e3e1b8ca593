"""Rate-limited logging for floods: at most one record per kind per interval, with a count of the rest.

Made for the event loop's exception handler: when the worker runs out of file descriptors,
asyncio's accept loop reports "socket.accept() out of system resource" (with a traceback) about
a thousand times a second; one worker wrote 270 MB of them in 45 s. ``install_loop_throttle``
lets the first of each kind through, holds back the same kind for ``interval`` seconds, and the
next one that gets through says how many were held back. It changes what is logged, not what
the loop does.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

_MAX_KINDS = 256  # kinds remembered; beyond that the memory starts over (bounded, whatever comes)
_MAX_KIND_CHARS = 200  # of each kind's text: messages alike in their first 200 characters are one kind


class LogThrottle:
    """Decides which records of each kind to let through: one per ``interval`` seconds."""

    def __init__(self, interval: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.interval = interval
        self._clock = clock
        self._kinds: dict[str, tuple[float, int]] = {}  # kind -> (when one last got through, held back since)

    def admit(self, kind: str) -> int | None:
        """``None``: hold this record back. Else let it through; the number is how many were held back."""
        kind = kind[:_MAX_KIND_CHARS]  # a message may quote request text: the key stays small
        now = self._clock()
        last = self._kinds.get(kind)
        if last is not None and now - last[0] < self.interval:
            self._kinds[kind] = (last[0], last[1] + 1)
            return None
        if last is None and len(self._kinds) >= _MAX_KINDS:
            self._kinds.clear()
        self._kinds[kind] = (now, 0)
        return last[1] if last is not None else 0


def install_loop_throttle(loop: asyncio.AbstractEventLoop, interval: float = 10.0) -> LogThrottle:
    """Route ``loop``'s exception reports through a ``LogThrottle`` keyed by their message."""
    throttle = LogThrottle(interval)

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        message = str(context.get("message") or "unhandled exception in event loop")
        held = throttle.admit(message)
        if held is None:
            return
        if held:
            context = {**context, "message": f"{message} ({held} more like this since the last one were not logged)"}
        loop.default_exception_handler(context)

    loop.set_exception_handler(handler)
    return throttle
