"""Gemma 4 call blocks of lenient recognition, one call each::

    <|tool_call>call:get_weather{location:<|"|>Paris<|"|>,days:3,units:[<|"|>C<|"|>]}<tool_call|>

The arguments are an object literal with bare keys, JSON numbers, ``true`` / ``false`` / ``null``, and
strings between ``<|"|>`` delimiters (nothing inside them is escaped). ``_foreign.ForeignCalls`` holds a
block from its opener to its closer (at most ``BLOCK_CAP``) and decodes it here: one pass over the block,
the strings found with ``str.find`` from where the last one ended, the keys quoted by one regex pass over
the text between them. Linear.
"""

from __future__ import annotations

import json
import re
from typing import Any

GEMMA_OPEN, GEMMA_CLOSE = "<|tool_call>", "<tool_call|>"
_QUOTE = '<|"|>'
_HEAD = re.compile(r"[ \t\r\n]*call:([A-Za-z_][\w.:-]{0,63})[ \t]*\{")
_BARE_KEY = re.compile(r"([{,][ \t\r\n]*)([A-Za-z_][\w.-]{0,63})[ \t]*:")


def decode_gemma(block: str) -> list[tuple[str, Any]] | None:
    """The one call of a block from its opener to its closer: its name and arguments as JSON text; None:
    no call (a block cut before its closer is none: where its object ends is not known)."""
    if not block.endswith(GEMMA_CLOSE):
        return None
    body = block[len(GEMMA_OPEN) : -len(GEMMA_CLOSE)] if block.startswith(GEMMA_OPEN) else block[: -len(GEMMA_CLOSE)]
    m = _HEAD.match(body)
    end = body.rfind("}")
    if m is None or end < m.end() - 1:
        return None
    return [(m.group(1), as_json(body[m.end() - 1 : end + 1]))]


def as_json(literal: str) -> str:
    """Gemma's object literal as JSON text: ``<|"|>`` strings as JSON strings, bare keys quoted."""
    out: list[str] = []
    pos = 0
    while (start := literal.find(_QUOTE, pos)) >= 0:
        stop = literal.find(_QUOTE, start + len(_QUOTE))
        if stop < 0:
            break
        out.append(_BARE_KEY.sub(r'\1"\2":', literal[pos:start]))
        out.append(json.dumps(literal[start + len(_QUOTE) : stop], ensure_ascii=False))
        pos = stop + len(_QUOTE)
    out.append(_BARE_KEY.sub(r'\1"\2":', literal[pos:]))
    return "".join(out)
