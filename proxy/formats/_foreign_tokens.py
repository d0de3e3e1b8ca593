"""Special-token call blocks of lenient recognition: DeepSeek, Kimi K2 and GLM-4.5 (one call per block)::

    <BAR tool_calls_begin BAR><BAR tool_call_begin BAR>function<BAR tool_sep BAR>NAME\\n```json\\n{...}\\n```
        <BAR tool_call_end BAR>...                     (DeepSeek V3; V3.1: NAME<BAR tool_sep BAR>{...})
    <|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{...}
        <|tool_call_end|>...<|tool_calls_section_end|>                                    (Kimi K2)
    <tool_call>NAME\\n<arg_key>k</arg_key>\\n<arg_value>v</arg_value>\\n</tool_call>         (GLM-4.5 / 4.7)

(DeepSeek's BAR is the fullwidth vertical line U+FF5C, and its words are joined by U+2581, not ``_``.)

Pure functions over a text and a position, like ``_foreign_xml``: ``lenient.ForeignCalls`` holds a block
from its opener to its end marker (``TokenStyle.call_end``; the section's end, when the model left the
call's end out), decodes it here, and after it reads the next ``call_begin`` as another block of the
same section. Every function is a bounded number of ``str.find`` passes: linear in the block.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ._args import ToolIndex
from ._rawvalue import typed_arguments
from .base import ToolSpec


@dataclass(frozen=True, slots=True)
class TokenStyle:
    """One special-token family: what starts and ends one call, what ends the section."""

    kind: str
    call_begin: str
    call_end: str
    section_end: str
    separator: str  # between the name and the arguments
    trailer: str | None = None  # a token the model may write right after the section (markup too)


DEEPSEEK = TokenStyle(
    "deepseek",
    "<\uff5ctool\u2581call\u2581begin\uff5c>",
    "<\uff5ctool\u2581call\u2581end\uff5c>",
    "<\uff5ctool\u2581calls\u2581end\uff5c>",
    "<\uff5ctool\u2581sep\uff5c>",
    "<\uff5cend\u2581of\u2581sentence\uff5c>",
)
KIMI = TokenStyle(
    "kimi", "<|tool_call_begin|>", "<|tool_call_end|>", "<|tool_calls_section_end|>", "<|tool_call_argument_begin|>"
)
# What opens a block: a section's opener, or a call's own (the section's left out).
OPENERS: dict[str, TokenStyle] = {
    "<\uff5ctool\u2581calls\u2581begin\uff5c>": DEEPSEEK,
    DEEPSEEK.call_begin: DEEPSEEK,
    "<|tool_calls_section_begin|>": KIMI,
    KIMI.call_begin: KIMI,
}
STYLES = {style.kind: style for style in (DEEPSEEK, KIMI)}
ARG_KEY, ARG_KEY_END, ARG_VALUE, ARG_VALUE_END = "<arg_key>", "</arg_key>", "<arg_value>", "</arg_value>"
GLM_END = "</tool_call>"
_GLM_NAME = re.compile(r"[A-Za-z_][\w.:/-]{0,63}[ \t]*(?:\r?\n[ \t\r\n]{0,32})?")
_KIMI_NAME = re.compile(r"(?:functions\.)?(.*?)(?::\d+)?")
_FENCE = re.compile(r"```[A-Za-z0-9_]*[ \t]*\r?\n?")


def glm_head(s: str, k: int) -> bool | None:
    """After ``<tool_call>``: whether a GLM body (a bare name, then ``<arg_key>`` or the end) starts at ``k``."""
    m = _GLM_NAME.match(s, k)
    if m is None:
        return False
    j = m.end()
    if j == len(s):
        return None
    if s.startswith(ARG_KEY, j) or s.startswith(GLM_END, j):
        return True
    rest = s[j:]
    return None if any(len(rest) < len(t) and t.startswith(rest) for t in (ARG_KEY, GLM_END)) else False


def decode_token_call(style: TokenStyle, block: str, tools: Sequence[ToolSpec]) -> list[tuple[str, Any]] | None:
    """The one call of a DeepSeek / Kimi block (opener to end marker), arguments as JSON text; None: no call."""
    start = block.rfind(style.call_begin)
    body = block[start + len(style.call_begin) :] if start >= 0 else block[block.find(">") + 1 :]
    for end in (style.call_end, style.section_end):
        cut = body.find(end)
        body = body[:cut] if cut >= 0 else body
    head, sep, args = body.partition(style.separator)
    if not sep:
        return None
    if style is DEEPSEEK and head.strip() in ("function", ""):  # V3: the type, then the name on its line
        name, _, args = args.partition("\n")
    else:
        name = head
    name = name.strip()
    if style is KIMI:
        name = _KIMI_NAME.fullmatch(name).group(1)  # type: ignore[union-attr]
    args = args.strip()
    fence = _FENCE.match(args)
    if fence is not None:
        args = args[fence.end() :].removesuffix("```").strip()
    return [(name, args or "{}")] if name else None


def decode_glm(block: str, tools: Sequence[ToolSpec]) -> list[tuple[str, Any]] | None:
    """The one call of a GLM ``<tool_call>NAME<arg_key>..`` block, values typed by the tool's schema."""
    start = block.find(">") + 1
    end = block.rfind(GLM_END)
    body = block[start : end if end >= start else len(block)]
    first = body.find(ARG_KEY)
    name = (body if first < 0 else body[:first]).strip()
    if not name:
        return None
    params: list[tuple[str, str]] = []
    pos = first
    while pos >= 0:
        key_end = body.find(ARG_KEY_END, pos)
        value = body.find(ARG_VALUE, key_end) if key_end >= 0 else -1
        if value < 0:
            break
        value_end = body.find(ARG_VALUE_END, value)
        stop = value_end if value_end >= 0 else len(body)
        params.append((body[pos + len(ARG_KEY) : key_end].strip(), body[value + len(ARG_VALUE) : stop]))
        pos = body.find(ARG_KEY, stop) if value_end >= 0 else -1
    resolved = ToolIndex(tools).resolve(name)[0]
    schema: Mapping[str, Any] = {}
    if resolved is not None:
        schema = next(t.parameters for t in tools if t.name == resolved)
    return [(name, typed_arguments(params, schema))]
