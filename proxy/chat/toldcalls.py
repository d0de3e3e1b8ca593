"""Sans-IO: the calls a model wrote as lines of folded results, with a result it made up.

With ``tool_history: "folded"`` the model reads what the tools returned as lines of facts
(``- get_weather({"city": "Paris"}) returned: {...}``). Asked for the next call, a small model sometimes
writes it in that very form, result and all: ``get_weather({"city":"Tokyo"}) returned: {"celsius": 20}``.
The call it names is the call it means; the result is its own invention. A line whose call the conversation
has not made yet is read as that call (checked against the tool's schema as any call is, by the hermes
parser, whose JSON it is); a line that repeats a call already made is a copy of the results (no call).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Sequence

from ..formats import CALL_CLOSE, CALL_OPEN, ToolCallEnd, ToolSpec, get_format
from ..formats.history import folded_result_calls
from .repeats import call_key


def told_calls(
    text: str, tools: Sequence[ToolSpec], made: Callable[[], Collection[str]], max_calls: int
) -> list[ToolCallEnd]:
    """The calls ``text`` names in folded result lines that are not among the ``made()`` ones (``call_key``;
    asked for only when there are such lines), at most ``max_calls``, each valid for one of ``tools``."""
    lines = folded_result_calls(text)
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
