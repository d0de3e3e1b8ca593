"""Sans-IO filter: a call written as plain lines, when no call may be made, never reaches the client.

Under ``tool_choice: "none"`` (the client's, a loop policy's, or a forced answer's) the format's parser
keeps the calls it recognises out of the text (the builder withholds them). A small model also writes a
call as plain lines, the way a call looks once its markup is gone::

    get_weather
    city: Madrid

(it copies the form from its own earlier answers, where a client stored such words as the assistant's
text), or in the syntax of another of toolshim's formats than the one prompted, which lenient
recognition does not read (``^^^get_weather``, ``Action: get_weather``, ``<tool:get_weather>``,
``[get_weather(city="Madrid")]``). That is no answer either. ``PlainCalls`` drops it: a *name line* (a
request's tool name alone on its line, decoration such as ``###``, ``**``, backticks, ``^^^``, ``[``, ``<``
and a format keyword such as ``Action:`` or ``tool:`` aside, or followed by ``(``, ``{``, ``>`` or ``:``
and the rest of a call) and the *argument lines* after it (``key: value``, ``key=value`` or
``<key>value`` for one of that tool's parameters, ``Action Input:``, JSON punctuation, a closing
``^^^`` or tag, blank lines), up to the first other line, which is text again. Names are compared as the
parser resolves them (case, ``-``/``.``/space as ``_``).

A line is held only while its start may still open such a line (at most a tool name's length plus its
decoration); once decided it passes (or is dropped) to its end as it comes. Any split of the text gives the
same output. One pass; no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from ..formats import ToolSpec
from ..formats.history import quoted_folded_results, without_quoted_results

_DECORATION = " \t#*>`-^[<"  # before a name: markdown, caret's ``^^^``, pythonic's ``[``, a tag's ``<``
_KEY_DECORATION = " \t-*\"'`<"
# before a name or a key, the keywords of toolshim's formats: ``Action:``, ``<tool:``, ``<parameter=``, ...
_KEYWORDS = ("action input:", "action:", "tool:", "function=", "function:", "parameter=", "parameter:", "param:")
_WORD = re.compile(r"[A-Za-z_][\w.\-]*")
_AFTER_NAME = " \t`*\"'"
_CALL_LINE = "{}[](),^/"  # JSON punctuation, caret's closing ``^^^``, a closing tag (its ``<`` stripped)
_MAX_HEAD = 512  # a line start held at most this long while undecided


def _fold(name: str) -> str:
    return name.replace("-", "_").replace(" ", "_").replace(".", "_").casefold()


def quotes_folded_results(text: str, tools: Sequence[ToolSpec]) -> bool:
    """Whether ``text`` quotes a result as folded history tells it (``renew_loan({...}) returned: ...``), at a line's
    start or inside a sentence, for one of ``tools``: toolshim's rendering of a result, never an answer."""
    quoted = {_fold(name) for name in quoted_folded_results(text)}
    return bool(quoted) and any(_fold(tool.name) in quoted for tool in tools)


def without_quoted_tool_results(text: str, tools: Sequence[ToolSpec]) -> str:
    """``text`` without the folded rendering (``renew_loan({...}) returned: ``) of a result of one of ``tools`` it
    quotes: what an answer asked for again still quotes; the result it quotes, the client's own data, stays."""
    names = {_fold(tool.name) for tool in tools}
    return without_quoted_results(text, lambda name: _fold(name) in names)


MIN_QUOTED_RESULT = 12  # characters (whitespace aside) of a JSON result that, found whole in an answer, hand it on


def quotes_result_whole(text: str, results: Sequence[str]) -> bool:
    """Whether ``text`` holds one of ``results`` that is a JSON object or array, whole (whitespace aside): "The tool
    found that sending the message returned {"sent": true, "to": "1075551234", "characters": 27}." hands the tool's
    output on instead of answering from it."""
    squeezed = "".join(text.split())
    if "{" not in squeezed and "[" not in squeezed:
        return False
    for result in results:
        compact = "".join(result.split())
        if len(compact) >= MIN_QUOTED_RESULT and compact[0] in "{[" and compact in squeezed:
            return True
    return False


def _after_keyword(rest: str, final: bool) -> str | None:
    """``rest`` without a format keyword it opens with; ``None`` while it may still become one."""
    low = rest.casefold()
    for keyword in _KEYWORDS:
        if low.startswith(keyword):
            return rest[len(keyword) :].lstrip(" \t")
    if not final and any(keyword.startswith(low) for keyword in _KEYWORDS):
        return None
    return rest


class PlainCalls:
    """``feed(text) -> text`` without calls written as plain lines; ``flush()`` at the end."""

    __slots__ = ("_head", "_kind", "_params", "_prefixes", "_tool", "_tools", "dropped")

    def __init__(self, tools: Sequence[ToolSpec]) -> None:
        self._tools: dict[str, frozenset[str]] = {}
        for tool in tools:
            props = tool.parameters.get("properties")
            params = frozenset(_fold(str(p)) for p in props) if isinstance(props, dict) else frozenset()
            self._tools.setdefault(_fold(tool.name), params)
        self._prefixes = {name[:end] for name in self._tools for end in range(1, len(name) + 1)}
        self._params: set[str] = set()  # prefixes of the open call's parameters
        self._tool: frozenset[str] | None = None  # the open call's parameters (None: no call open)
        self._head = ""  # the start of the current line, while undecided
        self._kind: str | None = None  # the current line, once decided: "call" (dropped) or "text"
        self.dropped = 0  # calls dropped

    def feed(self, text: str) -> str:
        if not self._tools:
            return text
        out: list[str] = []
        while text:
            end = text.find("\n")
            piece, text = (text, "") if end < 0 else (text[: end + 1], text[end + 1 :])
            out.append(self._piece(piece))
        return "".join(out)

    def flush(self) -> str:
        """The end of the text: an undecided line is judged as it is."""
        head, self._head = self._head, ""
        shown = head if head and self._decide(head, final=True) == "text" else ""
        self._kind, self._tool = None, None
        return shown

    def _piece(self, piece: str) -> str:
        """Part of one line (ending with its line break, or not yet)."""
        ends = piece.endswith("\n")
        if self._kind is None:
            self._head += piece
            kind = self._decide(self._head, final=ends)
            if kind is None:
                return ""
            self._kind, piece, self._head = kind, self._head, ""
        shown = piece if self._kind == "text" else ""
        if ends:
            self._kind = None
        return shown

    def _decide(self, head: str, final: bool) -> str | None:
        """``"call"``, ``"text"``, or ``None`` while the line start may still go either way."""
        line = head.rstrip("\n")
        if self._tool is not None:
            kind = self._argument(line, final)
            if kind != "text":
                return kind
            self._tool = None  # not an argument: the call ended; the line may open another
        kind = self._name(line, final)
        if kind is None and len(head) > _MAX_HEAD:
            return "text"
        return kind

    def _name(self, line: str, final: bool) -> str | None:
        """A line that names a tool: alone, or opening its arguments."""
        rest = _after_keyword(line.lstrip(_DECORATION), final)
        if rest is None:
            return None
        word = _WORD.match(rest)
        if word is None:
            return None if not rest and not final else "text"
        name = _fold(word.group())
        if word.end() == len(rest) and not final:
            return None if name in self._prefixes else "text"
        if name not in self._tools:
            return "text"
        after = rest[word.end() :].lstrip(_AFTER_NAME)
        if after[:1] == ":":  # ``name:`` alone, or before its JSON arguments (not ``name: Paris is sunny``)
            after = after[1:].lstrip(" \t")
        if not after and not final:
            return None  # nothing after the name yet
        if after and after[0] not in "({>":
            return "text"
        self._tool = self._tools[name]
        self._params = {param[:end] for param in self._tool for end in range(1, len(param) + 1)}
        self.dropped += 1
        return "call"

    def _argument(self, line: str, final: bool) -> str | None:
        """A line of the open call: ``key: value`` / ``key=value`` / ``<key>value`` for one of its
        parameters, JSON punctuation, a closing line (``^^^``, ``</tool:name>``), or a blank line."""
        rest = _after_keyword(line.lstrip(_KEY_DECORATION), final)
        if rest is None:
            return None
        if not rest:
            return "call" if final else None  # a blank line goes with the call before it
        if rest[0] in _CALL_LINE:
            return "call"
        word = _WORD.match(rest)
        if word is None:
            return "text"
        key = _fold(word.group())
        after = rest[word.end() :].lstrip(" \t\"'`")
        if not after:
            if word.end() == len(rest) and not final:
                return None if key in self._params else "text"
            return None if not final and key in (self._tool or ()) else "text"
        return "call" if key in (self._tool or ()) and after[0] in ":=>" else "text"
