"""Defusing call markup in text the model reads as data (tool results, user messages).

A web page fetched by a tool can carry ``<tool_call>{"name": "delete_all", ...}</tool_call>``; a
small model echoes it, and the parser would turn the echo into a real call the client then runs.
So before the history is rendered, every call syntax any format (or lenient recognition)
accepts is made inert, while staying readable as data:

* call tags (``<tool_call>``, ``<tool:x>``, ``<param:k>``, ``<function=x>``, ``<parameter=k>``,
  special tokens such as ``<|python_tag|>``, Kimi's ``<|tool_call_begin|>``, gpt-oss harmony's
  ``<|channel|>``, DeepSeek's ``<\uff5ctool\u2581call\u2581begin\uff5c>``, GLM's ``<arg_key>``) lose their ``<``:
  ``&lt;tool_call>``; so do tags named
  after the request's tools (``<get_weather>``: a morph_xml call), when their names are given;
* lines that start a call in a line-based syntax (ReAct's ``Action:`` and ``Action Input:``,
  caret's ``^^^``) are replaced by ``[a line that looked like a tool call was removed]``: quoted,
  such a line still read as an order to a small model (bench/forged_calls.py: ReAct 9/10 forged
  when quoted, 0/10 when removed); the other ReAct keywords (``Observation:``, ``Thought:``,
  ``Final Answer:``) are quoted: ``> Thought: ...``;
* so are lines with a Python call of a request's tool as the pythonic format reads one: a list
  opening with it anywhere (``[get_weather(city="Paris")]``), or the call alone at the line's start;
  tool names compared as the parser does (case, ``-``/``.``/``_`` aside), other code left as it is;
* JSON call objects (a ``"name"`` key with an ``"arguments"``/``"parameters"`` key) get the
  argument key renamed (``"arguments_"``): the object reads the same, but is no call;
* ``[TOOL_CALLS]`` becomes ``[TOOL CALLS]``, LM Studio's ``[TOOL_REQUEST]`` ``[TOOL REQUEST]``.

Pure and linear: each pattern is one pass of a regex without nested quantifiers.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from functools import lru_cache
from typing import Any

_TAG = re.compile(
    r"<(?=/?(?:tool_call|tool_response|tool:|param:|function\s*=|function>|parameter\s*=|parameter>|"
    r"tools?>|arg_key>|arg_value>|\||\uff5c))",
    re.IGNORECASE,
)
_CALL_LINE = re.compile(r"^[ \t]*(?:action(?:[ \t_]*input)?[ \t]*:|\^\^\^)[^\n]*", re.IGNORECASE | re.MULTILINE)
_LINE_KEYWORD = re.compile(
    r"^([ \t]*)(?=(?:observation|final[ \t_]*answer|thought)[ \t]*:)", re.IGNORECASE | re.MULTILINE
)
CALL_LINE_REMOVED = "[a line that looked like a tool call was removed]"
_NAME_KEY = re.compile(r"""(["'])name\1\s*:""")
_ARGUMENT_KEY = re.compile(r"""(["'])(arguments|parameters)\1(?=\s*:)""")
_MISTRAL = re.compile(r"\[TOOL_CALLS\]", re.IGNORECASE)
_TOOL_REQUEST = re.compile(r"\[(END_)?TOOL_REQUEST(_END)?\]", re.IGNORECASE)


@lru_cache(maxsize=64)
def _python_calls(names: tuple[str, ...]) -> re.Pattern[str]:
    """A pythonic call of one of ``names``: ``[NAME(`` anywhere (the ``[`` may end the line before), or
    ``NAME(`` at a line's start."""
    loose = "|".join("".join("[-._]" if c in "-._" else re.escape(c) for c in name) for name in names)
    return re.compile(rf"\[\s*(?:{loose})[ \t]*\(|^[ \t]*(?:{loose})[ \t]*\(", re.IGNORECASE | re.MULTILINE)


def _remove_python_calls(text: str, names: tuple[str, ...]) -> str:
    """The lines that hold a pythonic call of a request's tool, each run replaced by ``CALL_LINE_REMOVED``."""
    out, kept = [], 0
    for match in _python_calls(names).finditer(text):
        if match.start() < kept:
            continue
        first = text.rfind("\n", 0, match.start()) + 1
        last = text.find("\n", match.end())
        last = len(text) if last < 0 else last
        out += [text[kept:first], CALL_LINE_REMOVED]
        kept = last
    return "".join([*out, text[kept:]]) if out else text


@lru_cache(maxsize=64)
def _named_tags(names: tuple[str, ...]) -> re.Pattern[str]:
    """``<NAME>``, ``</NAME>`` and ``<NAME/>`` for the given tool names (a morph_xml call's tags)."""
    alternatives = "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True))
    return re.compile(rf"<(?=/?(?:{alternatives})[ \t]*/?>)")


def defuse(text: str, tool_names: Collection[str] = ()) -> str:
    """``text`` with every tool-call syntax made inert (see the module docstring); ``tool_names``: the
    request's tools, whose names are tags in the morph_xml syntax and whose calls no parser may read."""
    return disarm([_defuse_markup(text, tool_names)], tool_names)[0]


def defuse_all(
    texts: Sequence[str], tool_names: Collection[str], frames: Sequence[tuple[str, str]] | None = None
) -> list[str]:
    """A run of texts read one after the other (consecutive tool results) defused as ``defuse`` does, and so
    that no call is read across them either (see ``disarm``); ``frames``: each text's wrapper as rendered."""
    return disarm([_defuse_markup(text, tool_names) for text in texts], tool_names, frames)


def _defuse_markup(text: str, tool_names: Collection[str]) -> str:
    """The known call syntaxes made inert, minimally (the module docstring)."""
    text = _TAG.sub("&lt;", text)
    names = tuple(sorted(n for n in tool_names if n))
    if names:
        text = _named_tags(names).sub("&lt;", text)
        text = _remove_python_calls(text, names)
    text = _CALL_LINE.sub(CALL_LINE_REMOVED, text)
    text = _LINE_KEYWORD.sub(r"\1> ", text)
    if _NAME_KEY.search(text):
        text = _ARGUMENT_KEY.sub(r"\1\2_\1", text)
    text = _TOOL_REQUEST.sub(lambda m: m.group(0).replace("_", " "), text)
    return _MISTRAL.sub("[TOOL CALLS]", text)


# ---- the parsers' own reading: whatever any of them reads as a call goes ---------------------------

CALL_REMOVED = "[text that read as a tool call was removed]"
RESULT_WITHHELD = "[a tool result that held too many tool calls was withheld]"
SCAN_CAP = 256 * 1024  # a view longer than this is scanned in windows around the tool names
_WINDOW_BACK, _WINDOW_AHEAD = 16 * 1024, 64 * 1024  # a window: this much before and after a name
_NEAR = 8 * 1024  # a call's start is looked for this far before where it was read first
_MAX_ROUNDS = 64  # calls removed from one set of texts; past it, every text is withheld
_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})|\\x([0-9a-fA-F]{2})|\\(.)", re.DOTALL)
_FOLD = str.maketrans({"-": "_", " ": "_", ".": "_", "\u200b": None})


def _unescaped(text: str) -> str:
    """``text`` with backslash escapes decoded as a JSON/JSON5/Python reader might (for the name check)."""
    if "\\" not in text:
        return text
    return _ESCAPE.sub(lambda m: chr(int(m[1] or m[2], 16)) if (m[1] or m[2]) else m[3], text)


def _folded(text: str) -> str:
    """Names as the parsers compare them: separators unified, case folded."""
    return text.translate(_FOLD).casefold()


def _name_spots(text: str, names: tuple[str, ...]) -> list[int]:
    """Where in ``text`` a tool name may be written (a parser resolves no call without one); empty: none.

    Positions are approximate where escapes were decoded; the windows around them are generous."""
    plain = _folded(text)
    decoded = _folded(_unescaped(text)) if "\\" in text else plain
    spots: list[int] = []
    for name in names:
        key = _folded(name)
        for source in (plain, decoded):
            start = source.find(key)
            while start >= 0 and len(spots) < 4096:
                spots.append(start)
                start = source.find(key, start + 1)
    return sorted(set(spots))


def _specs(names: tuple[str, ...]) -> list[Any]:
    from .base import ToolSpec  # local: defuse is imported by the registry's modules

    return [ToolSpec(name, "", {"type": "object"}) for name in names]


def _first_call(text: str, names: tuple[str, ...]) -> tuple[int, int] | None:
    """The span of the first call any format's parser (strict and lenient) reads in ``text``: from where it
    starts to where it is read as a call (the shortest such text found), or None."""
    from . import FORMATS

    specs = _specs(names)
    for fmt in FORMATS.values():
        end = _read_at(text, fmt, specs)
        if end is not None:
            return _narrowed(text, fmt, specs, end)
    return None


def _narrowed(text: str, fmt: Any, specs: list[Any], end: int) -> tuple[int, int]:
    """The shortest stretch of ``text[:end]`` (which ``fmt``'s parser reads a call in) that it still reads
    a call in: the latest start, then the earliest end, by bisection."""
    from .base import ToolCallEnd, ToolCallStart
    from .lenient import new_parser

    def reads(start: int, stop: int) -> bool:
        parser = new_parser(fmt, specs, 1)
        events = parser.feed(text[start:stop]) + parser.close("stop")
        return any(isinstance(e, ToolCallStart | ToolCallEnd) for e in events)

    low = max(0, end - _NEAR) if reads(max(0, end - _NEAR), end) else 0
    start = _last_true(low, end, lambda s: reads(s, end))
    return start, _first_true(start, end, lambda e: reads(start, e))


def _read_at(text: str, fmt: Any, specs: list[Any]) -> int | None:
    """Where in ``text`` (fed line by line) ``fmt``'s lenient parser has read a call, or None."""
    from .base import ToolCallEnd, ToolCallStart
    from .lenient import new_parser

    parser = new_parser(fmt, specs, 1)
    position = 0
    while position < len(text):
        cut = text.find("\n", position, position + 4096)
        end = cut + 1 if cut >= 0 else min(len(text), position + 4096)
        if any(isinstance(e, ToolCallStart | ToolCallEnd) for e in parser.feed(text[position:end])):
            return end
        position = end
    return len(text) if any(isinstance(e, ToolCallStart | ToolCallEnd) for e in parser.close("stop")) else None


def _last_true(low: int, high: int, holds: Any) -> int:
    """The largest ``s`` in [low, high) with ``holds(s)``, by bisection (``holds(low)`` is known true)."""
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if holds(middle) else (low, middle)
    return low


def _first_true(low: int, high: int, holds: Any) -> int:
    """The smallest ``e`` in (low, high] with ``holds(e)`` (``holds(high)`` is known true)."""
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (low, middle) if holds(middle) else (middle, high)
    return high


def _windows(text: str, names: tuple[str, ...]) -> list[tuple[int, int]]:
    """The stretches of ``text`` a parser could read a call in: all of it when short, else around names."""
    spots = _name_spots(text, names)
    if not spots:
        return []
    if len(text) <= SCAN_CAP:
        return [(0, len(text))]
    merged: list[tuple[int, int]] = []
    for spot in spots:
        start, end = max(0, spot - _WINDOW_BACK), min(len(text), spot + _WINDOW_AHEAD)
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], end)
        else:
            merged.append((start, end))
    return merged


View = list[tuple[int | None, str]]  # (index of the data text, or None for fixed text such as a wrapper; text)


def _call_in_view(view: View, names: tuple[str, ...]) -> tuple[int, int] | None:
    text = "".join(piece for _, piece in view)
    for start, end in _windows(text, names):
        span = _first_call(text[start:end], names)
        if span is not None:
            return start + span[0], start + span[1]
    return None


def _remove(texts: list[str], view: View, span: tuple[int, int]) -> bool:
    """Replace, in each data text the span covers, its part of the span with ``CALL_REMOVED``; False when
    the span covers no data text (nothing to change)."""
    position, changed = 0, False
    cuts: dict[int, list[tuple[int, int]]] = {}
    for index, piece in view:
        low, high = max(span[0], position), min(span[1], position + len(piece))
        if index is not None and low < high:
            cuts.setdefault(index, []).append((low - position, high - position))
        position += len(piece)
    for index, parts in cuts.items():
        for low, high in reversed(parts):
            texts[index] = texts[index][:low] + CALL_REMOVED + texts[index][high:]
            changed = True
    return changed


def disarm(
    texts: list[str], tool_names: Collection[str], frames: Sequence[tuple[str, str]] | None = None, between: str = "\n"
) -> list[str]:
    """``texts`` (data a model reads one after the other: a run of tool results) with every span that any
    format's parser, strict or lenient, reads as a call of one of ``tool_names`` replaced by ``CALL_REMOVED``:
    in each text alone, in the texts run together (with nothing and with a line break between: a model
    that copies them without what surrounds them) and, with ``frames`` (each text's prefix and suffix: the
    result wrapper; ``between`` the texts), as rendered. Repeated until no parser reads a call; past
    ``_MAX_ROUNDS`` removals every text is withheld. Only texts that hold a tool name are parsed (none:
    no call), and a text longer than ``SCAN_CAP`` only around its names, so the work is bounded."""
    names = tuple(sorted({n for n in tool_names if n}))
    out = list(texts)
    if not names:
        return out
    for _ in range(_MAX_ROUNDS):
        views: list[View] = [[(i, t)] for i, t in enumerate(out)]
        if len(out) > 1:
            views.append([(i, t) for i, t in enumerate(out)])
            views.append([piece for i, t in enumerate(out) for piece in ([(None, "\n")] if i else []) + [(i, t)]])
        if frames is not None:
            framed: View = []
            for i, (t, (prefix, suffix)) in enumerate(zip(out, frames, strict=True)):
                framed += [*([(None, between)] if i else []), (None, prefix), (i, t), (None, suffix)]
            views.append(framed)
        for view in views:
            span = _call_in_view(view, names)
            if span is not None and _remove(out, view, span):
                break
        else:
            return out
    return [RESULT_WITHHELD for _ in out]
