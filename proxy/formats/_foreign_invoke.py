"""Invoke-style XML call blocks of lenient recognition: MiniMax-M2 and DeepSeek V3.2 / V4 (DSML)::

    <minimax:tool_call><invoke name="NAME"><parameter name="k">v</parameter></invoke></minimax:tool_call>
    <BAR DSML BAR function_calls> <BAR DSML BAR invoke name="NAME"> <BAR DSML BAR parameter name="k"
        string="true">v</BAR DSML BAR parameter> </BAR DSML BAR invoke> </BAR DSML BAR function_calls>

(DeepSeek's BAR is the fullwidth vertical line U+FF5C; V4 wraps the invokes in ``tool_calls`` instead of
``function_calls``; an invoke may hold a JSON object of arguments instead of parameter elements.) One block
holds one or more invokes, each a call.

Pure functions over a held block, like ``_foreign_tokens``: ``_foreign.ForeignCalls`` holds a block from
its opener to its closer (at most ``BLOCK_CAP``), decodes it here. Each invoke and parameter is found by a
``str.find`` / ``re.search`` from where the last one ended: linear in the block.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from ._args import ToolIndex
from ._rawvalue import typed_arguments
from .base import ToolSpec

DSML = "\uff5cDSML\uff5c"  # the prefix of every DeepSeek V3.2 / V4 call tag, after its "<" or "</"
# Block openers and their closers.
INVOKE_BLOCKS: dict[str, str] = {
    "<minimax:tool_call>": "</minimax:tool_call>",
    f"<{DSML}function_calls>": f"</{DSML}function_calls>",
    f"<{DSML}tool_calls>": f"</{DSML}tool_calls>",
}
_INVOKE = re.compile(r'<invoke[ \t]+name="([^"<>\n]{1,64})"[ \t]*>')
_INVOKE_END = "</invoke>"
_PARAM = re.compile(r'<parameter[ \t]+name="([^"<>\n]{1,64})"[^<>\n]{0,64}>')
_PARAM_END = "</parameter>"


def decode_invoke(block: str, tools: Sequence[ToolSpec]) -> list[tuple[str, Any]] | None:
    """The calls of an invoke block (opener to closer, or cut by a ``stop``): name and arguments each;
    None: no call. In a cut block the last invoke counts only when its ``</invoke>`` was written."""
    closed = block.endswith(tuple(INVOKE_BLOCKS.values()))
    body = block.replace(DSML, "")
    index = ToolIndex(tools)
    calls: list[tuple[str, Any]] = []
    pos = 0
    while (m := _INVOKE.search(body, pos)) is not None:
        end = body.find(_INVOKE_END, m.end())
        if end < 0 and not closed:
            break
        inner = body[m.end() : end if end >= 0 else len(body)]
        pos = end + len(_INVOKE_END) if end >= 0 else len(body)
        calls.append((m.group(1), _arguments(inner, _schema(index, tools, m.group(1)))))
    return calls or None


def _schema(index: ToolIndex, tools: Sequence[ToolSpec], name: str) -> Mapping[str, Any]:
    resolved = index.resolve(name)[0]
    return next((t.parameters for t in tools if t.name == resolved), {}) if resolved is not None else {}


def _arguments(inner: str, schema: Mapping[str, Any]) -> Any:
    """One invoke's arguments: its JSON object as written, else its parameters typed by the schema."""
    text = inner.strip()
    if text.startswith("{"):
        return text
    params: list[tuple[str, str]] = []
    pos = 0
    while (m := _PARAM.search(inner, pos)) is not None:
        end = inner.find(_PARAM_END, m.end())
        stop = end if end >= 0 else len(inner)
        params.append((m.group(1), inner[m.end() : stop]))
        pos = stop + len(_PARAM_END) if end >= 0 else len(inner)
    return typed_arguments(params, schema)
