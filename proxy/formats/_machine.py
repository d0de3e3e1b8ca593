"""The feed loop the state-machine parsers share: ``StepParser``.

A parser holds undecided input in ``_buf`` from ``_pos`` on, a current ``_state`` and a table ``_steps``
of one step method per state. A step consumes what it can decide and returns True to go on (its state
may have changed) or False when it needs more input. ``feed`` appends the new text to what is left and
runs steps until one waits or the parser reaches its ``DONE`` state; ``close`` stays each parser's own
(how an unfinished block ends differs per format).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from enum import IntEnum
from typing import Generic, TypeVar

from ._text import EventBuffer
from .base import Event

S = TypeVar("S", bound=IntEnum)


class StepParser(Generic[S]):
    """Base of the format parsers that run a step table over their states ``S``; subclasses set ``DONE`` (a
    class attribute) and fill the fields."""

    DONE: S  # the state after which all input is ignored
    _buf: str
    _pos: int
    _state: S
    _steps: Mapping[S, Callable[[], bool]]
    _out: EventBuffer

    def feed(self, text: str) -> list[Event]:
        if self._state is self.DONE or not text:
            return []
        self._buf, self._pos = self._buf[self._pos :] + text, 0
        self._run()
        return self._out.take()

    def _run(self) -> None:
        """Run the current state's step until one needs more input or the parser is DONE."""
        done, steps = self.DONE, self._steps
        while self._state is not done and steps[self._state]():
            pass
