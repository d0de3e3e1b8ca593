"""Tool-call text protocols, by stable name (the ``tool_mode`` values used in rules files).

Adding a format: one new module with a ``ToolFormat`` class, one line here, its tests.
"""

from __future__ import annotations

from .base import (
    Event,
    Malformed,
    Reasoning,
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
    "FORMATS",
    "Event",
    "Malformed",
    "Reasoning",
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
    "get_format",
]
