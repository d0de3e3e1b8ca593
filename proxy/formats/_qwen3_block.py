"""The ``qwen3_xml`` syntax as text, both ways: decoding one block into calls, and writing calls and the prompt.

A block (what ``decode_qwen3_block`` reads; the ``<tool_call>`` wrapper is optional)::

    <tool_call>
    <function=write_file>
    <parameter=path>
    src/app.py
    </parameter>
    <parameter=content>
    print("a < b")
    </parameter>
    </function>
    </tool_call>

A value runs to ``</parameter>``, or, when that is missing, to the next ``<parameter=``, ``</function>`` or
``</tool_call>`` at the start of a line (mid-line they are the value's own text, e.g. code); one leading and
one trailing newline are dropped, the rest is raw text. A function runs to ``</function>``, ``</tool_call>``
or the next ``<function=`` outside a value. Values are typed by the tool's schema (``_rawvalue``: ints,
floats, booleans, ``null``, objects and arrays as JSON or Python literals).
Decoding is one forward pass: each marker is searched for once per occurrence (``_Finder``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from ._args import ToolIndex
from ._hermes_render import _example_arguments
from ._prompt import NO_TOOL, example_tool
from ._rawvalue import typed_arguments
from ._xml_render import call_arguments, trim_value
from .base import ToolCallRecord, ToolChoice, ToolSpec

OPEN = "<tool_call>"
CLOSE = "</tool_call>"
FUNCTION = "<function="
FUNCTION_END = "</function>"
PARAM = "<parameter="
PARAM_END = "</parameter>"
LINE_STOPS = (PARAM, FUNCTION_END, CLOSE)  # end a value whose </parameter> is missing, at a line start
LINE_STARTS = "\n>"  # what may precede a LINE_STOPS marker that ends a value
MAX_NAME = 100  # longest function/parameter name read; bounds the search for its ``>``
_BAD_NAME = frozenset("<>\n\r")

Call = tuple[str, dict[str, Any]]


class _Finder:
    """The next occurrence of each marker at or after a cursor that only moves forward: linear in the text."""

    __slots__ = ("_hits", "_text")

    def __init__(self, text: str) -> None:
        self._text = text
        self._hits: dict[str, int] = {}

    def next(self, marker: str, pos: int) -> int:
        """Position of ``marker`` at or after ``pos``; ``len(text)`` when there is none."""
        hit = self._hits.get(marker, -1)
        if hit < pos:
            hit = self._text.find(marker, pos)
            hit = len(self._text) if hit == -1 else hit
            self._hits[marker] = hit
        return hit


def read_name(text: str, start: int) -> tuple[str, int] | None:
    """The name after ``<function=`` / ``<parameter=`` at ``start`` and the position after its ``>``."""
    gt = text.find(">", start, start + MAX_NAME + 1)
    if gt == -1:
        return None
    name = text[start:gt].strip()
    if not name or any(c in _BAD_NAME for c in name):
        return None
    return name, gt + 1


def _value_end(text: str, find: _Finder, start: int) -> int:
    """Where a value starting at ``start`` ends: ``</parameter>``, or a ``<parameter=``, ``</function>`` or
    ``</tool_call>`` that starts a line (or follows a tag's ``>``); mid-line ones are the value's own text."""
    end = find.next(PARAM_END, start)
    for stop in LINE_STOPS:
        hit = find.next(stop, start)
        while hit < end and text[hit - 1] not in LINE_STARTS:
            hit = find.next(stop, hit + 1)
        end = min(end, hit)
    return end


def _read_params(text: str, find: _Finder, pos: int) -> tuple[list[tuple[str, str]], int]:
    """The params of the function whose body starts at ``pos``, and where the function ends."""
    params: list[tuple[str, str]] = []
    while True:
        end = min(find.next(FUNCTION_END, pos), find.next(CLOSE, pos), find.next(FUNCTION, pos))
        start = find.next(PARAM, pos)
        if start >= end:
            return params, end + len(FUNCTION_END) if text.startswith(FUNCTION_END, end) else end
        named = read_name(text, start + len(PARAM))
        if named is None:
            pos = start + len(PARAM)
            continue
        key, value_start = named
        key = key.strip("\"'`")  # <parameter="city">: the quotes are no part of the name
        value_end = _value_end(text, find, value_start)
        params.append((key, trim_value(text[value_start:value_end])))
        pos = value_end + len(PARAM_END) if text.startswith(PARAM_END, value_end) else value_end


def decode_qwen3_block(block: str, tools: Sequence[ToolSpec]) -> list[Call] | None:
    """The calls in one block, as ``(name, raw arguments)`` before ``finalize_call``; None when it holds none.

    Total: never raises, whatever ``block`` is. Names are as written (``finalize_call`` resolves them);
    values are typed by the schema of the tool the name resolves to.
    """
    return decode_qwen3_block_with(block, ToolIndex(tools))


def decode_qwen3_block_with(block: str, index: ToolIndex) -> list[Call] | None:
    """``decode_qwen3_block`` with the request's tools already indexed (a parser decodes many blocks)."""
    find = _Finder(block)
    calls: list[Call] = []
    pos = find.next(FUNCTION, 0)
    while pos < len(block):
        named = read_name(block, pos + len(FUNCTION))
        if named is None:
            pos = find.next(FUNCTION, pos + len(FUNCTION))
            continue
        name, body = named
        params, end = _read_params(block, find, body)
        resolved = index.resolve(name)[0]
        schema: Mapping[str, Any] = index.tools[resolved].parameters if resolved is not None else {}
        calls.append((name, typed_arguments(params, schema)))
        pos = find.next(FUNCTION, end)
    return calls or None


# ---- rendering ----------------------------------------------------------------------------

SYNTAX = """\
If you choose to call a function ONLY reply in the following format with NO suffix:

<tool_call>
<function=example_function_name>
<parameter=example_parameter_1>
value_1
</parameter>
<parameter=example_parameter_2>
This is the value for the second parameter
that can span
multiple lines
</parameter>
</function>
</tool_call>

<IMPORTANT>
Reminder:
- Function calls MUST follow the specified format: an inner <function=...></function> block must be nested \
within <tool_call></tool_call> XML tags
- Required parameters MUST be specified
- Values are raw text: write code, quotes and < > exactly as they are, never escaped. Write numbers, \
true/false, objects and arrays as JSON
- You may provide optional reasoning for your function call in natural language BEFORE the function call, \
but NOT after
- Each result comes back to you inside <tool_response></tool_response> tags; never write one yourself
- If there is no function call available, answer the question like normal with your current knowledge and \
do not tell the user about function calls
</IMPORTANT>"""


def _value_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def render_call(name: str, arguments: Mapping[str, Any]) -> str:
    """One call in its own ``<tool_call>`` block: strings raw, everything else as JSON, each on its own lines."""
    lines = [OPEN, f"{FUNCTION}{name}>"]
    for key, value in arguments.items():
        lines.extend((f"{PARAM}{key}>", _value_text(value), PARAM_END))
    lines.extend((FUNCTION_END, CLOSE))
    return "\n".join(lines)


def render_calls(calls: Sequence[ToolCallRecord]) -> str:
    """Earlier calls from the history, one block each."""
    return "\n".join(render_call(c.name, call_arguments(c.arguments)) for c in calls)


def example_call(tools: Sequence[ToolSpec], tool_choice: ToolChoice) -> str:
    """A worked example with a real tool: the named one, else the first; its required parameters."""
    sample = example_tool(tools, tool_choice) or NO_TOOL
    return render_call(sample.name, _example_arguments(sample))
