"""The call gate: whether a call the model wrote whole goes to the client, or is kept back, and why.

A small model's call can be worth nothing to the client: the instructions' worked example copied, a call whose
result the history already holds, values the conversation never gave (``grounding``), a tool the question does not
ask for, the example's placeholder filler. The gate judges each such call and records what it found on the
``Attempt`` (the facts the re-ask decision reads, ``reasks``); what the client then sees, and what is counted, is
the builder's business. Pure: no I/O, no clock; its inputs are fixed per answer, but for the trust the re-asks give.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import replace
from enum import Enum, auto

from ..formats import ToolCallEnd, ToolSpec
from .attempt import Attempt
from .example import WorkedExample
from .grounding import Grounds
from .repeats import call_key

log = logging.getLogger(__name__)


class Verdict(Enum):
    """Why a call is not sent (``None`` from ``CallGate.judge``: it is)."""

    COPIED_EXAMPLE = auto()  # the instructions' worked example, repeated with the rest of them: no call
    ANSWERED = auto()  # its result is in the history: answered from it instead
    MADE_UP = auto()  # required values the conversation does not hold: kept back for a re-ask
    UNASKED = auto()  # a tool the question shares no word with, after results: kept back for a re-ask
    UNASKED_BESIDE = auto()  # such a tool beside a call this turn already made, before any result: dropped
    PLACEHOLDER = auto()  # a value the worked example's filler gave, while a re-ask is allowed: kept back


class CallGate:
    """Judges the calls of one answer (over all its attempts)."""

    def __init__(
        self,
        tools: Mapping[str, ToolSpec],
        *,
        answered: frozenset[str] = frozenset(),
        example: WorkedExample | None = None,
        grounds: Grounds | None = None,
        unasked: frozenset[str] = frozenset(),
        unasked_beside_only: bool = False,
    ) -> None:
        self._tools = tools  # a call's tool by name (the first of a name)
        self.answered = answered  # calls (repeats.call_key) whose result the history holds: not sent again
        self.example = example  # the calls the instructions show, worked out only when the model copies them
        self._grounds = grounds  # a call's required values must come from the conversation (until trusted)
        self._names = grounds  # ...and the names it respells are written the conversation's way (always)
        self._unasked = unasked  # tools the question does not ask for: their calls are kept back (until trusted)
        self._unasked_beside_only = unasked_beside_only  # ...only beside a call already made (before any result)

    def trust_arguments(self) -> None:
        """The model was asked once about values it made up: what it writes from now on is taken."""
        self._grounds = None
        self._unasked = frozenset()

    def trust_placeholders(self) -> None:
        """The model was asked again after a placeholder: what it writes from now on is taken."""
        if self.example is not None:
            self.example.trust_placeholders()

    def respelled(self, event: ToolCallEnd) -> ToolCallEnd:
        """The call with the names the model respelled written as the conversation writes them ("Lisboa"
        for the user's "Lisbon"): the tool knows the user's name, and the repeat check sees the same call."""
        if self._names is None:
            return event
        arguments = self._names.respelled_arguments(self._tools.get(event.name), event.arguments)
        if arguments == event.arguments:
            return event
        return replace(event, arguments=arguments, repairs=(*event.repairs, "respelled"))

    def judge(self, event: ToolCallEnd, attempt: Attempt, calls_sent: int, echoed: bool) -> Verdict | None:
        """Why the whole call ``event`` is not sent, or ``None``; ``echoed``: the attempt repeated toolshim's text."""
        if self._copied_example(event, attempt, echoed):
            return Verdict.COPIED_EXAMPLE
        if call_key(event.name, event.arguments) in self.answered:
            attempt.repeated.append(event.name)
            return Verdict.ANSWERED
        if self._made_up(event, attempt):
            return Verdict.MADE_UP
        unasked = self._unasked_call(event, attempt, calls_sent)
        if unasked is not None:
            return unasked
        if self._placeholder(event, attempt):  # a grounded call (grounding judges the others)
            return Verdict.PLACEHOLDER
        return None

    def copies_placeholder(self, event: ToolCallEnd) -> bool:
        """Whether the call holds a value the worked example's filler gave (example.py)."""
        return self.example is not None and bool(self.example.copied(self._tools.get(event.name), event.arguments))

    def _copied_example(self, event: ToolCallEnd, attempt: Attempt, echoed: bool) -> bool:
        """A call that is the instructions' worked example, in an attempt that repeated instructions (an echo, or
        the lines that lead to the example): the model copied the prompt (a genuine call with the example's values
        comes without either)."""
        example = self.example
        if example is None or not example.shows(event.name, event.arguments):
            return False
        return echoed or example.copied_with("".join(attempt.raw))

    def _made_up(self, event: ToolCallEnd, attempt: Attempt) -> bool:
        """A call whose required values the conversation does not hold: kept back for a re-ask."""
        if self._grounds is None:
            return False
        missing = self._grounds.ungrounded(self._tools.get(event.name), event.arguments)
        if not missing:
            return False
        attempt.ungrounded.append((event, missing))
        log.info("call %s kept back: %s not in the conversation", event.name, ", ".join(missing))
        return True

    def _unasked_call(self, event: ToolCallEnd, attempt: Attempt, calls_sent: int) -> Verdict | None:
        """A call of a tool the question shares no word with: after tool results, a follow-up nobody asked
        for (buying the product a search found, a calculation on an answer already given), kept back for a
        re-ask; before any result, only beside a call already made (asked the time in two cities, the
        weather tool for the second), dropped: the next turn's results say what is still uncovered."""
        if event.name not in self._unasked:
            return None
        if self._unasked_beside_only:
            if not calls_sent:
                return None
            log.info("call %s dropped beside the turn's calls: the question does not ask for it", event.name)
            return Verdict.UNASKED_BESIDE
        attempt.unasked.append(event.name)
        attempt.withheld += 1  # written again once asked about: the re-ask after it is for a plain answer
        log.info("call %s kept back: the question does not ask for it", event.name)
        return Verdict.UNASKED

    def _placeholder(self, event: ToolCallEnd, attempt: Attempt) -> bool:
        """A call with a value the worked example's filler gave (``country: "example"``), while the model can be asked
        again: kept back (example.py). Told about the filler, a small model wrote it again nearly every time;
        asked the same question again, it mostly wrote the user's value."""
        if self.example is None or not attempt.can_repair:
            return False
        copied = self.example.placeholders(self._tools.get(event.name), event.arguments)
        if not copied:
            return False
        attempt.placeholders.extend(copied)
        log.info("call %s kept back: %s is the example's placeholder", event.name, ", ".join(copied))
        return True
