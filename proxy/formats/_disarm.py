"""The parsers decide what in data is a call: every span any format's parser reads as one is removed.

``defuse`` breaks the call syntaxes known when it was written; ``disarm`` is the rule behind it. Text a
model reads as data (tool results) is fed to every registered format's parser, strict and lenient, exactly
as the proxy parses a model's output; where one of them reads a call of an offered tool (a
``ToolCallStart``, whether or not the call would end well), the shortest stretch still read as that call
is replaced by ``CALL_REMOVED``, and the texts are read again, until no parser reads a call. So whatever a
parser would accept (split tags, unicode-escaped keys, self-closing tags, ``functions.`` names, markdown
around ReAct keywords, any syntax a lenient reader learns later) cannot reach the model as-is, and a
model that copies a result word for word writes no call.

Read: each text alone; consecutive texts run together with nothing and with a line break between (a
call split across two tool messages, copied without what surrounds them); and as rendered, between
their wrappers (``frames``, never rewritten).

Bounded work:

* a parser resolves no call without a tool name, so only texts that hold one are read: names compared as
  the parsers resolve them (``-``/``.``/``_``/blank and case aside, ``functions.`` and quotes around
  them) after backslash escapes are decoded (``\\u0067et_weather``);
* formats whose strict parser leaves the same events (the usual case: no markup of its own) share one
  lenient reading (the lenient layer sees the same input);
* a text longer than ``SCAN_CAP`` is read only in windows around its names;
* a call found is narrowed line by line, then by bisection over short texts; all calls one parser reads
  are removed in one round; past ``MAX_ROUNDS`` rounds the texts are withheld (``RESULT_WITHHELD``).
"""

from __future__ import annotations

import hashlib
import re
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from functools import partial

from . import FORMATS
from .base import Event, Reasoning, StreamParser, Text, ToolCallEnd, ToolCallStart, ToolFormat, ToolSpec
from .lenient import new_parser

CALL_REMOVED = "[text that read as a tool call was removed]"
RESULT_WITHHELD = "[a tool result that held too many tool calls was withheld]"
SCAN_CAP = 256 * 1024  # a text longer than this is read in windows around the tool names
MAX_ROUNDS = 16  # rounds of removal for one set of texts; past it, every text is withheld
_WINDOW_BACK, _WINDOW_AHEAD = 16 * 1024, 64 * 1024  # a window: this much before and after a name
_NEAR = 8 * 1024  # a call's start is looked for this far before where it was read
_CHUNK = 4096  # text is fed line by line, long lines in pieces of this size
_MAX_CALLS = 256  # calls one reading reports
_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\x([0-9a-fA-F]{2})|\\(.)", re.DOTALL)
_FOLD = str.maketrans({"-": "_", " ": "_", ".": "_"})
# the history is rendered again on every turn of a loop: readings of the same results are remembered,
# bounded in count and size (a set of texts over _CACHE_CHARS is not remembered)
_CACHE: OrderedDict[bytes, tuple[str, ...]] = OrderedDict()
_CACHE_COUNT, _CACHE_CHARS = 128, 256 * 1024

Span = tuple[int, int]
View = list[tuple[int | None, str]]  # (index of the data text, or None for fixed text such as a wrapper; text)


def _unescaped(text: str) -> str:
    """``text`` with backslash escapes decoded as a JSON/JSON5/Python reader might (for the name check)."""
    return _ESCAPE.sub(lambda m: chr(int(m[1] or m[2], 16)) if (m[1] or m[2]) else m[3], text)


def _folded(text: str) -> str:
    """Names as the parsers compare them: separators unified, case folded."""
    return text.translate(_FOLD).casefold()


def _name_spots(text: str, names: tuple[str, ...]) -> list[int]:
    """Where in ``text`` a tool name may be written (approximately, where escapes were decoded)."""
    sources = [_folded(text)]
    if "\\" in text:
        sources.append(_folded(_unescaped(text)))
    spots: set[int] = set()
    for name in names:
        key = _folded(name)
        for source in sources:
            start = source.find(key)
            while start >= 0 and len(spots) < 4096:
                spots.add(start)
                start = source.find(key, start + 1)
    return sorted(spots)


def _windows(text: str, names: tuple[str, ...]) -> list[Span]:
    """The stretches of ``text`` a parser could read a call in: all of it when short, else around names."""
    spots = _name_spots(text, names)
    if not spots or len(text) <= SCAN_CAP:
        return [(0, len(text))] if spots else []
    merged: list[Span] = []
    for spot in spots:
        start, end = max(0, spot - _WINDOW_BACK), min(len(text), spot + _WINDOW_AHEAD)
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


def _is_call(event: Event) -> bool:
    return isinstance(event, ToolCallStart | ToolCallEnd)


def _pieces(text: str) -> list[int]:
    """The ends of the pieces ``text`` is fed in: lines, long ones cut every ``_CHUNK`` characters."""
    ends, position = [], 0
    while position < len(text):
        cut = text.find("\n", position, position + _CHUNK)
        position = cut + 1 if cut >= 0 else min(len(text), position + _CHUNK)
        ends.append(position)
    return ends


def _read(parser_of: Callable[[], StreamParser], text: str, ends: list[int]) -> tuple[list[int], list[Event]]:
    """Where (piece ends) a parser fed ``text`` reads calls, and all its events."""
    parser = parser_of()
    found: list[int] = []
    events: list[Event] = []
    start = 0
    for end in ends:
        got = parser.feed(text[start:end])
        if any(_is_call(e) for e in got):
            found.append(end)
        events += got
        start = end
    got = parser.close("stop")
    if any(_is_call(e) for e in got):
        found.append(len(text))
    return found, events + got


def _reads(fmt: ToolFormat, specs: list[ToolSpec], text: str) -> bool:
    parser = new_parser(fmt, specs, 1)
    return any(_is_call(e) for e in parser.feed(text) + parser.close("stop"))


def _key(events: list[Event]) -> tuple[object, ...]:
    """A strict reading's events with adjacent texts merged: equal keys, equal lenient readings."""
    merged: list[Event] = []
    for event in events:
        last = merged[-1] if merged else None
        if isinstance(event, Text) and isinstance(last, Text):
            merged[-1] = Text(last.text + event.text)
        elif isinstance(event, Reasoning) and isinstance(last, Reasoning):
            merged[-1] = Reasoning(last.text + event.text)
        else:
            merged.append(event)
    return tuple(merged)


def _narrowed(fmt: ToolFormat, specs: list[ToolSpec], text: str, low: int, end: int) -> Span | None:
    """The shortest stretch of ``text[low:end]`` ``fmt``'s parser still reads a call in, or None."""
    near = max(low, end - _NEAR)
    line = text.rfind("\n", near, max(near, end - 1)) + 1 or near
    while line > near and not _reads(fmt, specs, text[line:end]):
        line = text.rfind("\n", near, line - 1) + 1 or near
    if not _reads(fmt, specs, text[line:end]):
        if line == low or not _reads(fmt, specs, text[low:end]):
            return None
        line, near = low, low
    start = _bisect_last(line, text.find("\n", line, end) + 1 or end, lambda s: _reads(fmt, specs, text[s:end]))
    stop = _bisect_first(start, end, lambda e: _reads(fmt, specs, text[start:e]))
    return start, stop


def _bisect_last(low: int, high: int, holds: Callable[[int], bool]) -> int:
    """The largest ``s`` in [low, high) with ``holds(s)`` (``holds(low)`` is known to hold)."""
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if holds(middle) else (low, middle)
    return low


def _bisect_first(low: int, high: int, holds: Callable[[int], bool]) -> int:
    """The smallest ``e`` in (low, high] with ``holds(e)`` (``holds(high)`` is known to hold)."""
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if holds(middle) else (middle, high)
    return high


def calls_read(text: str, specs: list[ToolSpec]) -> list[Span]:
    """The calls the first format whose parser reads any reads in ``text``, narrowed (non-overlapping)."""
    ends = _pieces(text)
    seen: set[tuple[object, ...]] = set()
    for fmt in FORMATS.values():
        found, events = _read(partial(fmt.new_parser, specs, _MAX_CALLS), text, ends)
        if not found:
            key = _key(events)
            if key in seen:
                continue
            seen.add(key)
            found, _ = _read(partial(new_parser, fmt, specs, _MAX_CALLS), text, ends)
        spans: list[Span] = []
        for end in found:
            span = _narrowed(fmt, specs, text, spans[-1][1] if spans else 0, end)
            if span is not None:
                spans.append(span)
        if spans:
            return spans
    return []


def _calls_in_view(view: View, names: tuple[str, ...], specs: list[ToolSpec]) -> list[Span]:
    text = "".join(piece for _, piece in view)
    for start, end in _windows(text, names):
        spans = calls_read(text[start:end], specs)
        if spans:
            return [(start + low, start + high) for low, high in spans]
    return []


def _remove(texts: list[str], view: View, spans: list[Span]) -> bool:
    """Replace, in each data text the spans cover, its part of each with ``CALL_REMOVED``; False when they
    cover no data text."""
    cuts: dict[int, list[Span]] = {}
    for span in spans:
        position = 0
        for index, piece in view:
            low, high = max(span[0], position), min(span[1], position + len(piece))
            if index is not None and low < high:
                cuts.setdefault(index, []).append((low - position, high - position))
            position += len(piece)
    for index, parts in cuts.items():
        for low, high in sorted(parts, reverse=True):
            texts[index] = texts[index][:low] + CALL_REMOVED + texts[index][high:]
    return bool(cuts)


def _views(texts: list[str], frames: Sequence[tuple[str, str]] | None, between: str) -> list[View]:
    views: list[View] = [[(i, t)] for i, t in enumerate(texts)]
    if len(texts) > 1:
        views.append([(i, t) for i, t in enumerate(texts)])
        views.append([piece for i, t in enumerate(texts) for piece in ([(None, "\n")] if i else []) + [(i, t)]])
    if frames is not None:
        framed: View = []
        for i, (t, (prefix, suffix)) in enumerate(zip(texts, frames, strict=True)):
            framed += [*([(None, between)] if i else []), (None, prefix), (i, t), (None, suffix)]
        views.append(framed)
    return views


def disarm(
    texts: Sequence[str],
    tool_names: Collection[str],
    frames: Sequence[tuple[str, str]] | None = None,
    between: str = "\n",
) -> list[str]:
    """``texts`` (data a model reads one after the other: a run of tool results) with every span that a
    format's parser reads as a call of one of ``tool_names`` replaced by ``CALL_REMOVED`` (see the module
    docstring); ``frames``: each text's prefix and suffix as rendered, ``between`` the texts."""
    names = tuple(sorted({n for n in tool_names if n}))
    if not names or not _name_spots("".join(texts), names):  # a call needs a name: none, nothing to read
        return list(texts)
    key = _cache_key(texts, names, frames, between) if sum(map(len, texts)) <= _CACHE_CHARS else None
    if key is not None and key in _CACHE:
        _CACHE.move_to_end(key)
        return list(_CACHE[key])
    out = _disarmed(list(texts), names, frames, between)
    if key is not None:
        _CACHE[key] = tuple(out)
        while len(_CACHE) > _CACHE_COUNT:
            _CACHE.popitem(last=False)
    return out


def _cache_key(
    texts: Sequence[str], names: tuple[str, ...], frames: Sequence[tuple[str, str]] | None, between: str
) -> bytes:
    digest = hashlib.sha256()
    framing = [piece for frame in frames or () for piece in frame]
    for part in (*names, "\x00", *framing, "\x00", between, *texts):
        digest.update(len(part).to_bytes(8, "big") + part.encode("utf-8", "surrogatepass"))
    return digest.digest()


def _disarmed(
    out: list[str], names: tuple[str, ...], frames: Sequence[tuple[str, str]] | None, between: str
) -> list[str]:
    specs = [ToolSpec(name, "", {"type": "object"}) for name in names]
    for _ in range(MAX_ROUNDS):
        for view in _views(out, frames, between):
            spans = _calls_in_view(view, names, specs)
            if spans and _remove(out, view, spans):
                break
        else:
            return out
    return [RESULT_WITHHELD for _ in out]
