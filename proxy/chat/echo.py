"""Sans-IO filter that keeps the model's repetition of toolshim's own instructions out of its text.

Small models often echo the tool prompt ("To call the tools, write a tool block: Rules: ...",
"Call at most one tool per turn.") before or instead of answering. The client must never see
that. The filter compares the model's text with the texts actually injected into this request's
conversation (``EmulationPlan.injected``: the tool prompt, a policy's instruction, the result wrappers
and markers; then each re-ask's or forced answer's message), not with a list of strings.

The text is judged in segments: a line, or a sentence within a line (ended by ``.``, ``!``,
``?`` or ``:``; a segment end does not depend on what follows, so any split of the text gives
the same segments). Words are compared normalized (case-folded, punctuation dropped).
A segment is an echo when it has at least ``MIN_WORDS`` words and every word trigram in it occurs
in the instructions, or when it is a paraphrase: ``LONG_RUN`` known trigrams in a row (six words
verbatim) and at most half of it unknown ("You can call this tool only when you need it; otherwise
answer the user directly."). A shorter segment that equals a whole instruction segment ("Rules:",
a tool's name, "Paris" from a parameter's example) is an echo only next to one, or in a run of such
segments that together have ``MIN_WORDS`` words, every trigram of them in the instructions (the short
lines of a copied worked example: ``title: Shopping list`` / ``priority: 2`` / ``tags:``): it is held
until the next segment decides, and shown when that one is the model's own text.

A segment is held back only while it can still turn out to be an echo: when its first word is one
the instructions lack, or at the first trigram (or second word) they lack, it is released and the
rest of the segment streams through at once, so normal text waits at most a few words (a word still
arriving is judged by its start: no instruction word begins like "partia"). Paraphrases need the
whole segment, so they are recognized where holding costs nothing: in answers that are not streamed
(``max_misses=MAX_MISSES``: the segment is held until that many misses). In a stream, a segment is also
held while every word of it is a word of toolshim's short notes (``NOTE_CHARS``: the sentences it adds to
a turn, such as the folded results' last instruction, a policy's or a re-ask's message; not the tool
prompt, whose words an answer shares): a sentence written only in those words is judged whole, as a
buffered one ("The question asks about New York, which these results do not cover yet."), while an
answer is released at its first word of its own (a number, a name from a result).

One pass over the text; each word is looked up in a set once. No I/O, no clock. An instruction text is
indexed once per process (``_index_of``), not once per request.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from .mentions import WrapperMentions

MIN_WORDS = 4  # a shorter segment is an echo only when it equals a whole instruction segment
MAX_MISSES = 6  # buffered answers: words / trigrams a paraphrase may have that the instructions lack
LONG_RUN = 4  # known trigrams in a row (6 words of the instructions verbatim) that make a paraphrase an echo
NOTE_CHARS = 600  # an injected text this short is a note (a sentence for the turn), not the tool prompt
MAX_HELD = 4000  # characters held for one segment at most; past it the segment is released as text
NOTE_RUN = 2  # known trigrams in a row (4 words verbatim) that make a segment in the notes' words alone an echo
MAX_OFF_NOTES = 2  # words outside toolshim's notes a streamed segment may have and still be held as a paraphrase

_WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")
SEGMENT_END = re.compile(r"[.!?:\n]")  # a segment (a line, or a sentence in it) ends here


def ends_outside_brackets(text: str) -> bool:
    """Whether a segment of ``text`` ends outside brackets: a quoted call's arguments hold colons
    (``renew_loan({"barcode": ...}) returned: ``), and so does a quoted JSON result (``returned {"sent": true}.``);
    the sentence is only known after them."""
    return any(_depth(text, end.start()) <= 0 for end in SEGMENT_END.finditer(text))


def _depth(text: str, end: int) -> int:
    """How many brackets (round, square, curly) are open in ``text`` before ``end``."""
    return sum(text.count(opening, 0, end) - text.count(closing, 0, end) for opening, closing in ("()", "[]", "{}"))


_TAG = re.compile(r"</?[A-Za-z_][^<>\n]{0,200}>")
_WORD_CHARS = "'\u2019"


def _words(text: str) -> list[str]:
    return [word.casefold() for word in _WORD.findall(text)]


def _segments(text: str) -> list[str]:
    """Lines, then sentences within them (the terminator stays with its sentence)."""
    out: list[str] = []
    start = 0
    for match in SEGMENT_END.finditer(text):
        out.append(text[start : match.end()])
        start = match.end()
    out.append(text[start:])
    return [segment for segment in out if segment.strip()]


@dataclass(frozen=True, slots=True)
class _TextIndex:
    """The n-grams of one instruction text, as read and with its tags taken out."""

    trigrams: frozenset[tuple[str, str, str]]
    vocabulary: frozenset[str]
    segments: frozenset[tuple[str, ...]]
    prefixes: frozenset[str]


@lru_cache(maxsize=64)
def _index_of(text: str) -> _TextIndex:
    """Index ``text`` once per process: the tool prompt for the same tools is the same text in every
    request, and indexing it (every word's every prefix) took more calls than the rest of an emulated
    request's path (``bench/crossings.py``)."""
    trigrams: set[tuple[str, str, str]] = set()
    vocabulary: set[str] = set()
    segments: set[tuple[str, ...]] = set()
    untagged = _TAG.sub("", text)
    for version in (text, untagged) if untagged != text else (text,):
        for segment in _segments(version):
            words = _words(segment)
            if words:
                segments.add(tuple(words))
        words = _words(version)  # trigrams across segment ends too: a model joins "if price < 3:" and "buy 2"
        vocabulary.update(words)
        trigrams.update(zip(words, words[1:], words[2:], strict=False))
    prefixes = frozenset(word[:end] for word in vocabulary for end in range(1, len(word) + 1))
    return _TextIndex(frozenset(trigrams), frozenset(vocabulary), frozenset(segments), prefixes)


class Instructions:
    """The n-gram index of the instruction texts one request rendered."""

    __slots__ = ("note_words", "prefixes", "segments", "trigrams", "vocabulary")

    def __init__(self, texts: Iterable[str] = ()) -> None:
        self.trigrams: set[tuple[str, str, str]] = set()
        self.vocabulary: set[str] = set()
        self.note_words: set[str] = set()  # the words of the short texts (NOTE_CHARS): a stream holds their sentences
        self.segments: set[tuple[str, ...]] = set()
        self.prefixes: set[str] = set()  # of the vocabulary's words: a partial word outside them decides at once
        for text in texts:
            self.add(text)

    def add(self, text: str) -> None:
        """Index another instruction text (a re-ask's corrective message), also as it reads once the
        parser has taken its tags out ("One <param:...> element per parameter" echoed as "One element per
        parameter")."""
        index = _index_of(text)
        self.trigrams |= index.trigrams
        self.vocabulary |= index.vocabulary
        self.segments |= index.segments
        self.prefixes |= index.prefixes
        if len(text) <= NOTE_CHARS:
            self.note_words |= index.vocabulary

    def __bool__(self) -> bool:
        return bool(self.vocabulary)


class EchoFilter:
    """``feed(text) -> text`` without the echoed segments; ``flush()`` at a call, a re-ask or the end."""

    __slots__ = (
        "_after_drop",
        "_best_run",
        "_held",
        "_index",
        "_max_misses",
        "_mentions",
        "_misses",
        "_off_notes",
        "_pending",
        "_released",
        "_run",
        "_short",
        "_short_starts",
        "_short_words",
        "_words",
        "dropped",
    )

    def __init__(self, instructions: Instructions, max_misses: int = 0) -> None:
        self._index = instructions
        self._mentions = WrapperMentions()  # toolshim's result wrapper named in inline code: no brackets
        self._max_misses = max_misses  # 0: released at the first miss (streams); MAX_MISSES: paraphrases too
        self._held = ""  # the current segment, while it may be an echo
        self._pending = ""  # a partial word at the end of the held text, not judged yet
        self._released = False  # the current segment is known not to be an echo: pass it through
        self._words: list[str] = []
        self._misses = 0  # words (the first two) and trigrams of the segment the instructions lack
        # words of the segment so far that toolshim's notes lack (a stream holds a segment of few such words: a
        # paraphrase; a buffered answer holds every segment up to MAX_MISSES anyway)
        self._off_notes = 0
        self._run = 0  # known trigrams in a row, now
        self._best_run = 0  # ... and the longest such run in the segment
        self._after_drop = False  # the segment before was dropped: a bare line break goes with it
        self._short: list[str] = []  # short segments that match the instructions, waiting for the next one
        self._short_words: list[str] = []  # their words, in order: a run of them can be an echo together
        self._short_starts: list[tuple[int, int]] = []  # where each of them starts in _short and _short_words
        self.dropped = 0  # segments dropped, for the tally

    def feed(self, text: str) -> str:
        if not self._index:
            return text
        mentions = self._mentions
        if mentions.held or "`" in text or "<" in text:  # else no wrapper mention can start: most pieces
            text = mentions.feed(text)
        return self._segments_of(text)

    def _segments_of(self, text: str) -> str:
        """Judge ``text`` segment by segment; what may be shown now."""
        out: list[str] = []
        start = 0
        for match in SEGMENT_END.finditer(text):
            out.append(self._take(text[start : match.end()]))
            out.append(self._end_segment())
            start = match.end()
        out.append(self._take(text[start:]))
        return "".join(out)

    def add_instructions(self, text: str) -> None:
        """A re-ask's corrective message: the model must not echo it either."""
        self._index.add(text)

    def flush(self) -> str:
        """The end of the text so far: judge the open segment (it ends here)."""
        if not self._index:
            return ""
        rest = self._segments_of(self._mentions.flush()) if self._mentions.held else ""
        last = rest + self._end_segment()
        return last + self._take_short()

    def _take(self, piece: str) -> str:
        """Add ``piece`` (no segment end inside) to the open segment; what may be shown now."""
        if not piece:
            return ""
        if self._released:
            return piece
        self._held += piece
        text = self._pending + piece
        cut = len(text)  # the trailing run of word characters may continue in the next piece
        while cut and (text[cut - 1].isalnum() or text[cut - 1] in _WORD_CHARS):
            cut -= 1
        self._pending = text[cut:]
        for word in _WORD.findall(text[:cut]):
            self._words.append(word.casefold())
            if not self._still_possible():
                return self._release()
        # the first word, or no misses left and no word outside the notes either: a word no instruction word
        # starts like decides
        at_limit = not self._words or (self._misses >= self._max_misses and not self._notes_hold(1))
        if self._pending and at_limit and self._pending.casefold() not in self._index.prefixes:
            return self._release()  # no instruction word starts like this: the segment is the model's own
        if len(self._held) > MAX_HELD:
            return self._release()
        return ""

    def _still_possible(self) -> bool:
        """Count the newest word: known (its trigram, or for the first two the word itself, is in the
        instructions) or a miss; the segment may still be an echo while the misses stay few."""
        words = self._words
        self._off_notes += words[-1] not in self._index.note_words
        if len(words) >= 3:
            known = (words[-3], words[-2], words[-1]) in self._index.trigrams
            self._run = self._run + 1 if known else 0
            self._best_run = max(self._best_run, self._run)
        else:
            known = words[-1] in self._index.vocabulary
            if not known and len(words) == 1:
                return False  # a segment opening with a word the instructions lack is the model's own
        self._misses += not known
        if self._misses <= self._max_misses:
            return True
        # a streamed segment written so far in the words of toolshim's notes (all but a few) is held to its end
        # and judged whole (a paraphrase of the last instruction); more words of the model's own release it
        return self._notes_hold()

    def _notes_hold(self, more: int = 0) -> bool:
        """Whether the segment, with ``more`` words outside the notes, is still held as a possible paraphrase of
        them (there are notes, and it has few words of its own)."""
        return bool(self._index.note_words) and self._off_notes + more <= MAX_OFF_NOTES

    def _release(self) -> str:
        held, self._held, self._released, self._after_drop = self._held, "", True, False
        return self._take_short() + held

    def _take_short(self) -> str:
        short = "".join(self._short)
        self._short.clear()
        self._short_words.clear()
        self._short_starts.clear()
        return short

    def _end_segment(self) -> str:
        """Close the open segment: drop it when it was an echo, else give back what was held."""
        held, released, misses, best_run, off_notes = (
            self._held,
            self._released,
            self._misses,
            self._best_run,
            self._off_notes,
        )
        words = self._words + [word.casefold() for word in _WORD.findall(self._pending)]
        self._held, self._pending, self._released, self._words = "", "", False, []
        self._misses = self._run = self._best_run = self._off_notes = 0
        if released:
            return held
        if not held.strip() or not words:  # blanks, or punctuation only ("---"): they go with their neighbours
            if self._short:
                self._short.append(held)
                return ""
            return "" if self._after_drop else held
        if len(words) >= MIN_WORDS and (
            _all_known(words, self._index)
            or _paraphrase(words, misses, best_run)
            or _told_back(words, off_notes, best_run)
        ):
            self._drop_short()  # the short segments before it were part of the echo
            return ""
        if len(words) < MIN_WORDS and tuple(words) in self._index.segments:
            if self._after_drop:
                self.dropped += 1
                return ""
            self._short_starts.append((len(self._short), len(self._short_words)))
            self._short.append(held)
            self._short_words += words
            shown = self._trim_chain()
            chain = self._short_words
            if len(chain) >= MIN_WORDS and _all_known(chain, self._index):
                self._drop_short()  # short lines copied in a row (a worked example): an echo together
            return shown
        self._after_drop = False
        return self._take_short() + held

    def _trim_chain(self) -> str:
        """Release the oldest held short segments until the rest reads as one run of the instructions."""
        starts = self._short_starts
        while len(starts) > 1 and not _all_known(self._short_words, self._index):
            text_at, word_at = starts[1]
            shown = "".join(self._short[:text_at])
            del self._short[:text_at], self._short_words[:word_at], starts[0]
            self._short_starts = starts = [(t - text_at, w - word_at) for t, w in starts]
            if shown:
                return shown + self._trim_chain()
        return ""

    def _drop_short(self) -> None:
        """The held short segments (and the segment that ended them) were an echo."""
        self._short.clear()
        self._short_words.clear()
        self._short_starts.clear()
        self.dropped += 1
        self._after_drop = True


def _paraphrase(words: list[str], misses: int, best_run: int) -> bool:
    """A segment that repeats the instructions with a few words changed ("You can call this tool only
    when you need it; otherwise answer the user directly."): a long verbatim run, most of it known."""
    return best_run >= LONG_RUN and 2 * misses <= len(words) - 2


def _told_back(words: list[str], off_notes: int, best_run: int) -> bool:
    """A segment that tells toolshim's notes back in their own words: a long verbatim run of them, and at most a
    fifth of its words not the notes' ("The question does not cover the Matterhorn yet, so call the next tool you
    need."); or only the notes' words, four of them verbatim ("The results do not cover these results yet."). An
    answer brings words of its own: the values and names a result gave."""
    if off_notes == 0 and best_run >= NOTE_RUN:
        return True
    return best_run >= LONG_RUN and 5 * off_notes <= len(words)


def _all_known(words: list[str], index: Instructions) -> bool:
    return all(gram in index.trigrams for gram in zip(words, words[1:], words[2:], strict=False))
