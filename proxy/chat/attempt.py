"""What one upstream round of an emulated answer produced, what the whole answer did, and the skipper of a
re-ask's repetition: the plain records ``ResponseBuilder`` fills and the emulator reads.

Kept apart from the builder so that the records (read by the emulator to decide a re-ask, and by the
metrics) are not buried in the builder's event handling.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ..formats import Malformed, ToolCallEnd


@dataclass(slots=True)
class Attempt:
    """What one upstream round produced (the I/O layer decides re-asks from it)."""

    can_repair: bool = False  # a repair re-ask is still allowed for this attempt
    raw: list[str] = field(default_factory=list)  # the model's text as received, for the dump
    parsed: list[str] = field(default_factory=list)  # the text before any stop sequence, for a re-ask
    calls: int = 0
    malformed: list[Malformed] = field(default_factory=list)
    cut: bool = False
    abandoned_call: bool = False  # a call was partly streamed, then failed: end the turn
    finish: str | None = None
    chunks: int = 0
    usage: dict[str, int] | None = None  # the latest usage this attempt reported (some servers repeat it)
    call_keys: set[str] = field(default_factory=set)  # name + canonical arguments of each call made
    withheld: int = 0  # calls written under tool_choice "none" (kept out of the answer)
    repeated: list[str] = field(default_factory=list)  # names of calls kept back: their result is in the history
    # calls kept back for values the conversation does not hold, each with its ["arg=value", ...]
    ungrounded: list[tuple[ToolCallEnd, list[str]]] = field(default_factory=list)
    unasked: list[str] = field(default_factory=list)  # tools of calls kept back: the question does not ask for them
    placeholders: list[str] = field(default_factory=list)  # ``name="..."`` of calls kept back: the example's filler


@dataclass(slots=True)
class Tally:
    """Facts about the whole answer, for metrics and the access log."""

    calls: int = 0
    parse_outcomes: list[str] = field(default_factory=list)  # clean / repaired / malformed, per block
    repairs: list[str] = field(default_factory=list)
    sanitized: int = 0  # blocks kept out of the content
    cuts: int = 0

    @property
    def parse_outcome(self) -> str | None:
        """For the access log: the latest block's outcome, except that a repair is not forgotten
        by a later clean block."""
        outcome: str | None = None
        for latest in self.parse_outcomes:
            outcome = outcome if outcome == "repaired" and latest == "clean" else latest
        return outcome


class Repetition:
    """Skips the start of a re-ask's text while it repeats ``sent`` (whitespace aside), a word at a time.

    At the first character that differs the rest is new text and passes, with the part of the word it differs in
    that matched (``Matterhorn is in Paris.`` sent, ``Mont Blanc ...`` written: the ``M`` is no repetition, and was
    lost when only the rest passed); new text that starts afresh after a sent text that ends in a word gets a space
    before it. Once all of ``sent`` was repeated, everything after it passes."""

    __slots__ = ("_gap", "_gap_open", "_held", "_open_end", "_pos", "_sent", "_starts", "done")

    def __init__(self, sent: str) -> None:
        self._sent = "".join(sent.split())
        self._starts = _word_starts(sent)  # where the words of ``sent`` start in ``_sent`` (and its end)
        self._open_end = bool(sent) and not sent[-1].isspace()
        self._pos = 0
        self._held = ""  # what matched since the last place both texts were between words
        self._gap = ""  # whitespace read since the last character that matched
        self._gap_open = True  # at the start, or after whitespace
        self.done = False

    def skip(self, text: str) -> str:
        for i, ch in enumerate(text):
            if ch.isspace():
                self._gap += ch
                self._gap_open = True
                continue
            between_words = self._gap_open and self._pos in self._starts
            if between_words:
                self._held = ""
            if self._pos < len(self._sent) and ch == self._sent[self._pos]:
                self._held += self._gap + ch
                self._gap, self._gap_open = "", False
                self._pos += 1
                continue
            self.done = True
            return self._given_back(between_words) + text[i:]
        if self._pos >= len(self._sent):  # all of it repeated: what follows passes as written
            self.done = True
            return self._gap
        return ""

    def _given_back(self, between_words: bool) -> str:
        """What passes before the first new character: the matched part of the word it is in, or the whitespace
        before it; a space when there is none and nothing was repeated."""
        if self._pos >= len(self._sent):
            return self._gap
        given = self._gap if between_words else self._held + self._gap
        repeated = self._pos - sum(not ch.isspace() for ch in given)
        return " " + given if not repeated and self._open_end and not given[:1].isspace() else given


def _word_starts(text: str) -> frozenset[int]:
    """The positions in ``text`` with its whitespace removed where a word starts, and its end."""
    starts = {0}
    position = 0
    for word in text.split():
        position += len(word)
        starts.add(position)
    return frozenset(starts)
