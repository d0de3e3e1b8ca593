"""Tool sets the format tests share (OpenAI ``tools`` shape and ToolSpec)."""

from __future__ import annotations

from typing import Any

from toolshim.formats.base import ToolSpec

OPENAI_TOOLS: dict[str, dict[str, Any]] = {
    "get_weather": {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string", "description": "City name, e.g. Paris"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
            },
        },
    },
    "write_file": {
        "type": "function",
        "function": {
            "name": "write_file",
            "description": "Write text to a file, replacing it.",
            "parameters": {
                "type": "object",
                "properties": {
                    "path": {"type": "string"},
                    "content": {"type": "string"},
                },
                "required": ["path", "content"],
            },
        },
    },
    "search_docs": {
        "type": "function",
        "function": {
            "name": "search_docs",
            "description": "Search the documentation.",
            "parameters": {
                "type": "object",
                "properties": {
                    "query": {"type": "string"},
                    "limit": {"type": "integer", "minimum": 1},
                    "tags": {"type": "array", "items": {"type": "string"}},
                    "exact": {"type": "boolean"},
                    "filters": {
                        "type": "object",
                        "properties": {"lang": {"type": "string"}, "since": {"type": "number"}},
                    },
                },
                "required": ["query"],
            },
        },
    },
}

TOOLS: list[ToolSpec] = [ToolSpec.from_openai(t) for t in OPENAI_TOOLS.values()]
TOOL_NAMES: list[str] = [t.name for t in TOOLS]
