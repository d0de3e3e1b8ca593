"""What the real-model tests share: the weather tool, markup markers, stream accumulation with checks."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import jsonschema
from openai.types.chat import ChatCompletionChunk

WEATHER_PARAMETERS: dict[str, Any] = {
    "type": "object",
    "properties": {
        "city": {"type": "string", "description": "City name, e.g. Paris"},
        "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
    },
    "required": ["city"],
}
WEATHER_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather in a city.",
        "parameters": WEATHER_PARAMETERS,
    },
}
WEATHER_MESSAGES: list[dict[str, Any]] = [
    {
        "role": "system",
        "content": "You are a helpful assistant. Use a tool when it can answer the question. "
        "Once you have the tool result, answer the user in one short sentence.",
    },
    {"role": "user", "content": "What is the weather like in Paris right now?"},
]
# Fragments of every emulated syntax, and a JSON call object however spaced, that must never reach
# user-visible text (a linear regex: alternatives of literals, one bounded whitespace run each).
MARKUP = re.compile(r'</?tool_call|Action( Input)?:|</?tool:|\^\^\^|\{\s*"name"\s*:')


def markup_in(text: str | None) -> list[str]:
    """The markup fragments present in ``text`` (empty when clean)."""
    return [m.group(0) for m in MARKUP.finditer(text or "")]


def check_weather_arguments(arguments: str) -> dict[str, Any]:
    """Arguments are a JSON object, valid against the tool's schema, naming a non-empty city."""
    args = json.loads(arguments)
    jsonschema.validate(args, WEATHER_PARAMETERS)
    assert args["city"].strip(), args
    return dict(args)


@dataclass(slots=True)
class StreamedCall:
    """One tool call merged from its stream fragments."""

    id: str
    name: str
    arguments: str = ""


@dataclass(slots=True)
class StreamedMessage:
    """The message a client gets by merging every delta of a streamed completion."""

    content: str = ""
    calls: list[StreamedCall] = field(default_factory=list)
    finish_reason: str | None = None
    chunks: int = 0


def merge_stream(chunks: Iterable[ChatCompletionChunk]) -> StreamedMessage:
    """Merge deltas the way a client does, asserting OpenAI's delta rules on the way.

    Rules: the first delta names the assistant role; a tool call's first fragment carries its
    ``id``, ``type`` and ``function.name`` and indexes are contiguous from 0; no choice delta follows
    the ``finish_reason``.
    """
    merged = StreamedMessage()
    for chunk in chunks:
        merged.chunks += 1
        if not chunk.choices:  # a usage-only chunk (it may follow the finish_reason)
            continue
        assert merged.finish_reason is None, f"a chunk after finish_reason: {chunk}"
        choice = chunk.choices[0]
        delta = choice.delta
        if merged.chunks == 1:
            assert delta.role == "assistant", chunk
        merged.content += delta.content or ""
        for part in delta.tool_calls or []:
            if part.index == len(merged.calls):
                assert part.id and part.type == "function" and part.function and part.function.name, part
                merged.calls.append(StreamedCall(id=part.id, name=part.function.name))
            assert part.index < len(merged.calls), f"tool call index {part.index} skips ahead"
            if part.function and part.function.arguments:
                merged.calls[part.index].arguments += part.function.arguments
        if choice.finish_reason is not None:
            merged.finish_reason = choice.finish_reason
    assert merged.finish_reason is not None, "the stream ended without a finish_reason"
    return merged
