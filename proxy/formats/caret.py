"""PLACEHOLDER: the caret format is being written; this module will be replaced."""

from __future__ import annotations

from collections.abc import Sequence

from .base import Event, FinishReason, StreamParser, Text, ToolCallRecord, ToolChoice, ToolSpec


class _EchoParser:
    def feed(self, text: str) -> list[Event]:
        return [Text(text)] if text else []

    def close(self, finish_reason: FinishReason = "stop") -> list[Event]:
        return []


class CaretFormat:
    name = "caret"

    def render_tools(self, tools: Sequence[ToolSpec], tool_choice: ToolChoice, parallel: bool) -> str:
        return ""

    def render_calls(self, calls: Sequence[ToolCallRecord]) -> str:
        return ""

    def render_result(self, name: str, content: str) -> str:
        return content

    def stop_sequences(self) -> tuple[str, ...]:
        return ()

    def new_parser(self, tools: Sequence[ToolSpec], max_calls: int = 1) -> StreamParser:
        return _EchoParser()
