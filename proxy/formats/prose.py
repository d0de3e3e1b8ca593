"""Plain text with ``<think>`` blocks: the parser of an emulated rule's turn that has no tools.

With tools, the format's parser reads ``<think>...</think>`` as Reasoning; a turn without tools
must read the same (``reasoning_content``, not tags in the content), yet call markup in it is
only text: no tool exists to call, and a block read as a malformed call would be asked again.
``ProseParser`` knows just ``<think>`` (outside markdown code, as the tag formats read it, via
``TagProse``); a stray ``</think>`` is dropped. The rule's ``thinking`` option wraps it like any
format's parser. Sans-IO, never raises.
"""

from __future__ import annotations

from enum import IntEnum, auto

from ._machine import StepParser
from ._tagprose import THINK, THINK_END, TagProse
from ._text import EventBuffer
from .base import Event, FinishReason


class _State(IntEnum):
    PROSE = auto()
    THINK = auto()
    DONE = auto()


class ProseParser(StepParser[_State]):
    """Text, and ``<think>`` blocks as Reasoning; no calls."""

    DONE = _State.DONE

    def __init__(self) -> None:
        self._out = EventBuffer()
        self._prose = TagProse((), self._out)
        self._buf = ""
        self._pos = 0
        self._state = _State.PROSE
        self._steps = {_State.PROSE: self._step_prose, _State.THINK: self._step_think}

    def close(self, finish_reason: FinishReason = "stop") -> list[Event]:
        rest = self._buf[self._pos :]
        if self._state is _State.PROSE:
            self._prose.flush(rest)
        elif self._state is _State.THINK:
            self._prose.think(rest + THINK_END, 0)
        self._state, self._buf, self._pos = _State.DONE, "", 0
        return self._out.take()

    def _step_prose(self) -> bool:
        found = self._prose.scan(self._buf, self._pos)
        self._pos = found.end
        if found.marker is None:
            return False
        if found.marker == THINK and not found.joined:
            self._state = _State.THINK
        else:  # a stray </think> (or a tag spelled across removed markup): dropped
            self._prose.after_markup(False)
        return True

    def _step_think(self) -> bool:
        found = self._prose.think(self._buf, self._pos)
        self._pos = found.end
        if found.marker is None:
            return False
        self._state = _State.PROSE
        return True
