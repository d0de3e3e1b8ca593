"""Tool-call text protocols, by stable name (the ``tool_mode`` values used in rules files).

Adding a format: one new module with a ``ToolFormat`` class, one line here, its tests. A format whose
calls a grammar can pin down sets ``grammar`` to a ``CallGrammar`` (its builder beside it, e.g.
``_hermes_grammar``); ``None`` otherwise. That attribute is the only list of formats with a grammar.

This module is the package's public face: code outside ``formats`` imports from here (or from a
format's own module), never from the private ``_`` modules. Besides the registry it offers the
text helpers other sans-IO filters share (``find_first``, ``partial_marker_len``), the thinking
split (``set_thinking``), the hermes call and result tags, and ``plain_key`` (pythonic keywords).
"""

from __future__ import annotations

from ._args import canonical_json
from ._hermes_markup import CLOSE as CALL_CLOSE
from ._hermes_markup import OPEN as CALL_OPEN
from ._hermes_markup import RESPONSE as RESULT_OPEN
from ._hermes_markup import RESPONSE_END as RESULT_CLOSE
from ._prompt import PLACEHOLDERS
from ._pythonic_values import plain_key
from ._text import find_first, partial_marker_len
from ._thought import set_thinking
from .base import (
    CallGrammar,
    Event,
    Malformed,
    Reasoning,
    SchemaRules,
    SecondToolStarted,
    StreamParser,
    Text,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallRecord,
    ToolCallStart,
    ToolChoice,
    ToolFormat,
    ToolSpec,
)
from .caret import CaretFormat
from .hermes import HermesFormat
from .morph_xml import MorphXmlFormat
from .pythonic import PythonicFormat
from .qwen3_xml import Qwen3XmlFormat
from .react import ReactFormat
from .xml import XmlFormat

FORMATS: dict[str, ToolFormat] = {
    fmt.name: fmt
    for fmt in (
        ReactFormat(),
        XmlFormat(),
        HermesFormat(),
        CaretFormat(),
        Qwen3XmlFormat(),
        MorphXmlFormat(),
        PythonicFormat(),
    )
}


def get_format(name: str) -> ToolFormat:
    """The registered format called ``name``; ``KeyError`` if there is none."""
    return FORMATS[name]


__all__ = [
    "CALL_CLOSE",
    "CALL_OPEN",
    "FORMATS",
    "PLACEHOLDERS",
    "RESULT_CLOSE",
    "RESULT_OPEN",
    "CallGrammar",
    "Event",
    "Malformed",
    "Reasoning",
    "SchemaRules",
    "SecondToolStarted",
    "StreamParser",
    "Text",
    "ToolCallArgs",
    "ToolCallEnd",
    "ToolCallRecord",
    "ToolCallStart",
    "ToolChoice",
    "ToolFormat",
    "ToolSpec",
    "canonical_json",
    "find_first",
    "get_format",
    "partial_marker_len",
    "plain_key",
    "set_thinking",
]
