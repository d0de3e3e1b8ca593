"""The XML call styles of lenient recognition: what opens a block, where it ends, and its calls.

Two styles, decoded by the pure block decoders of their own formats::

    <tool_call>                        <search_docs>
    <function=get_weather>             <query>retries</query>
    <parameter=city>                   <limit>5</limit>
    Paris                              </search_docs>
    </parameter>
    </function>
    </tool_call>
      qwen3_xml (wrapper optional)       morph_xml (an offered tool's exact name as the tag; arguments
                                       also as quoted attributes: <search_docs query="x" limit="5"/>)

Pure functions over a text and a position; ``lenient.ForeignCalls`` owns the cursor, the hold-back and
the events. A head is decided from a bounded prefix: a ``<parameter=`` (or ``</function>``) after
``<function=NAME>``, a child element (or the closing tag) after ``<NAME>``; anything else is prose.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from ._foreign_open import HOLD_CAP
from ._morph_block import decode_morph_block
from ._qwen3_block import decode_qwen3_block
from .base import ToolSpec
from .morph_xml import attributes

FUNCTION = "<function="
FUNCTION_END = "</function>"
PARAM = "<parameter="
TOOL_CALL_END = "</tool_call>"
QWEN3_ENDS = (FUNCTION_END, TOOL_CALL_END)
_TOOL_TAG = re.compile(r"<([A-Za-z_][\w.:-]{0,99})[ \t]*(/?)>")
_ATTR_TAG = re.compile(r"<([A-Za-z_][\w.:-]{0,99})[ \t\r\n]")  # an element's name, then its attributes


def partial(s: str, k: int, markers: Sequence[str]) -> bool:
    """Whether ``s[k:]`` (the end of the input) is a proper prefix of one of ``markers``."""
    rest = s[k:]
    return any(len(rest) < len(m) and m.startswith(rest) for m in markers)


def qwen3_body(s: str, k: int) -> bool | None:
    """After ``<function=NAME>`` and blanks: whether a qwen3 body (params, or the end) starts at ``k``."""
    if s.startswith(PARAM, k) or s.startswith(FUNCTION_END, k):
        return True
    return None if partial(s, k, (PARAM, FUNCTION_END)) else False


def morph_tag(s: str, p: int, tools: Mapping[str, ToolSpec]) -> tuple[str, int, bool] | None:
    """``<NAME>`` / ``<NAME/>`` at ``p`` naming an offered tool exactly: the name, the tag's end, self-closing."""
    m = _TOOL_TAG.match(s, p)
    if m is None or m.group(1) not in tools:
        return None
    return m.group(1), m.end(), bool(m.group(2))


def morph_attr_tag(s: str, p: int, tools: Mapping[str, ToolSpec]) -> tuple[str, int, bool] | Literal[False] | None:
    """``<NAME k="v" ...>`` / ``<NAME k="v"/>`` at ``p`` naming an offered tool: the name, the tag's end,
    self-closing; False: no such tag; None: undecided (the tag's ``>`` not read yet, at most ``HOLD_CAP``)."""
    m = _ATTR_TAG.match(s, p)
    if m is None or m.group(1) not in tools:
        return False
    gt = s.find(">", m.end(), p + HOLD_CAP)
    if gt < 0:
        return None if len(s) - p < HOLD_CAP else False
    found = attributes(s[m.end() - 1 : gt + 1])
    return False if found is None else (m.group(1), gt + 1, found[1])


def _as_children(block: str) -> str:
    """A morph block whose opening tag has attributes, the attributes written as its first children."""
    m = _ATTR_TAG.match(block)
    gt = block.find(">")
    found = attributes(block[m.end() - 1 : gt + 1]) if m is not None and gt > 0 else None
    if m is None or found is None:
        return block
    name = m.group(1)
    children = "".join(f"<{key}>{value}</{key}>" for key, value in found[0].items())
    return f"<{name}>{children}" + (f"</{name}>" if found[1] else block[gt + 1 :])


def morph_partial(s: str, p: int, tools: Mapping[str, ToolSpec]) -> bool:
    """Whether ``s[p:]`` (the end of the input) may still become an offered tool's tag."""
    rest = s[p:]
    return len(rest) <= 104 and any(f"<{name}".startswith(rest) or _opens(rest, name) for name in tools)


def _opens(rest: str, name: str) -> bool:
    head = f"<{name}"
    return rest.startswith(head) and not rest[len(head) :].strip(" \t/")


def morph_body(s: str, k: int, name: str) -> bool | None:
    """After ``<NAME>`` and blanks: whether a child element or the closing tag starts at ``k``."""
    close = f"</{name}>"
    if s.startswith(close, k):
        return True
    if k + 1 >= len(s):
        return None if s[k:] in ("", "<") else False
    if s[k] == "<" and (s[k + 1].isalpha() or s[k + 1] == "_"):
        return True
    return None if partial(s, k, (close,)) else False


def decode(kind: str, block: str, tools: Sequence[ToolSpec]) -> list[tuple[str, Any]] | None:
    """The calls in a complete (or cut) block of ``kind``; None when it holds none."""
    if kind == "qwen3_xml":
        calls = decode_qwen3_block(block, tools)
    else:
        calls = decode_morph_block(_as_children(block), tools)
    return None if calls is None else [(name, args) for name, args in calls]
