"""Sans-IO: what a model told about tools where it should have called one or answered.

**Calls written as folded result lines** (``told_calls``).
With ``tool_history: "folded"`` the model reads what the tools returned as lines of facts
(``- get_weather({"city": "Paris"}) returned: {...}``). Asked for the next call, a small model sometimes
writes it in that very form, result and all: ``get_weather({"city":"Tokyo"}) returned: {"celsius": 20}``.
The call it names is the call it means; the result is its own invention. A line whose call the conversation
has not made yet is read as that call (checked against the tool's schema as any call is, by the hermes
parser, whose JSON it is); a line that repeats a call already made is a copy of the results (no call).
So is a reply that is nothing but such calls without a result, ``get_population({"city": "Porto"})``, the
form the results show calls in (asked "Call `get_population` now", the small model wrote just that).

**Tools talked about** (``tools_talked_about``). After the results, a small model sometimes answers with
words about a tool instead: "call get_on_call", "The next tool you need is `get_flight_status`.". No user
asked about the tools by their identifiers; the emulator asks again (``Emulator._tool_talk``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Collection, Sequence

from ..formats import CALL_CLOSE, CALL_OPEN, ToolCallEnd, ToolSpec, get_format
from ..formats.history import folded_result_calls
from .repeats import call_key


def told_calls(
    text: str, tools: Sequence[ToolSpec], made: Callable[[], Collection[str]], max_calls: int
) -> list[ToolCallEnd]:
    """The calls ``text`` names in folded result lines, or in nothing but ``name({...})`` lines, that are not
    among the ``made()`` ones (``call_key``; asked for only when there are such lines), at most ``max_calls``,
    each valid for one of ``tools``."""
    lines = folded_result_calls(text) or plain_call_lines(text)
    if not lines or not tools:
        return []
    made_keys = made()
    fresh = [(name, args) for name, args in lines if call_key(name, args) not in made_keys]
    if not fresh:
        return []
    markup = "".join(
        f'{CALL_OPEN}\n{{"name": {json.dumps(name)}, "arguments": {args}}}\n{CALL_CLOSE}\n'
        for name, args in fresh[:max_calls]
    )
    parser = get_format("hermes").new_parser(list(tools), max_calls)
    events = parser.feed(markup) + parser.close("stop")
    return [event for event in events if isinstance(event, ToolCallEnd)]


_PLAIN_CALL_LINE = re.compile(r"[ \t]*(?:- )?([\w.\-]+)\((\{.*\})\)[ \t]*;?[ \t]*")


def plain_call_lines(text: str) -> list[tuple[str, str]]:
    """``name({...})`` lines, when every line of ``text`` that is not blank is one: (tool name, argument text)."""
    lines = [line for line in text.splitlines() if line.strip()]
    matches = [_PLAIN_CALL_LINE.fullmatch(line) for line in lines]
    if not lines or any(m is None for m in matches):
        return []
    return [(m[1], m[2]) for m in matches if m is not None]


_IDENTIFIER = re.compile(r"[_\d.\-]|[a-z][A-Z]")  # a name no prose word is: get_weather, getWeather, v2.search


def tools_talked_about(text: str, tools: Sequence[ToolSpec]) -> list[str]:
    """The names of ``tools`` that ``text`` mentions as tools: a name that is an identifier (``get_on_call``:
    not a word of prose) standing on its own, or any name in inline code (`` `calculator` ``,
    `` `get_weather(...)` ``). A name that is a plain word ("calculator") in prose is only a word."""
    found: list[str] = []
    for tool in tools:
        name = re.escape(tool.name)
        code = rf"`{name}(?:`|\()"
        pattern = rf"{code}|(?<![\w.\-]){name}(?![\w\-])" if _IDENTIFIER.search(tool.name) else code
        if tool.name not in found and re.search(pattern, text):
            found.append(tool.name)
    return found
