"""The constrained path with a real model: a GBNF grammar from the request's tools keeps a small
model's output to a valid call (issue 11 item 1).

A handful of questions over three tools with different schemas (an enum, an integer with bounds, a
nested object, an array); ``tool_choice`` required or named, streamed and not. Every answer must be
exactly one structured call to a tool that was offered, its arguments valid against that tool's
schema, no markup in the content, and the relay must show that the grammar went upstream.
"""

from __future__ import annotations

import json
import time
from typing import Any

import jsonschema
import pytest
from openai import OpenAI

from tests.realmodel.helpers import WEATHER_TOOL, markup_in, merge_stream
from tests.realmodel.recorder import RecordingRelay

pytestmark = pytest.mark.realmodel

# The formats with a grammar, and the grammar's last line when a call is demanded.
ROOTS = {"hermes": "root ::= tool-calls | bare-calls", "pythonic": "root ::= call-list"}
MAX_TOKENS = 96
TOOLS: list[dict[str, Any]] = [
    WEATHER_TOOL,
    {
        "type": "function",
        "function": {
            "name": "convert_currency",
            "description": "Convert an amount of money from one currency to another.",
            "parameters": {
                "type": "object",
                "properties": {
                    "amount": {"type": "number"},
                    "source": {"type": "string", "enum": ["USD", "EUR", "GBP", "JPY"]},
                    "target": {"type": "string", "enum": ["USD", "EUR", "GBP", "JPY"]},
                },
                "required": ["amount", "source", "target"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "create_event",
            "description": "Create a calendar event.",
            "parameters": {
                "type": "object",
                "properties": {
                    "title": {"type": "string"},
                    "duration_minutes": {"type": "integer", "minimum": 5, "maximum": 480},
                    "attendees": {"type": "array", "items": {"type": "string"}},
                    "place": {
                        "type": "object",
                        "properties": {"city": {"type": "string"}, "room": {"type": "string"}},
                        "required": ["city"],
                    },
                },
                "required": ["title", "duration_minutes"],
            },
        },
    },
]
SCHEMAS = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
# (question, tool_choice, streamed)
QUESTIONS: list[tuple[str, Any, bool]] = [
    ("What is the weather like in Oslo?", "required", False),
    ("How many yen is 250 dollars?", "required", True),
    ("Book a 45 minute meeting called Budget review with Ana and Bo in Lisbon.", "required", False),
    ("Is it raining in Lima?", {"type": "function", "function": {"name": "get_weather"}}, True),
    ("I need an event.", {"type": "function", "function": {"name": "create_event"}}, False),
]


def ask(client: OpenAI, fmt: str, question: str, choice: Any, stream: bool) -> tuple[str | None, list[tuple[str, str]]]:
    """(content, [(name, arguments)]) of one answer in format ``fmt``, streamed or not."""
    params: dict[str, Any] = {
        "model": f"qwen-{fmt}-constrained",
        "messages": [{"role": "user", "content": question}],
        "tools": TOOLS,
        "tool_choice": choice,
        "temperature": 0,
        "max_tokens": MAX_TOKENS,
    }
    if stream:
        merged = merge_stream(client.chat.completions.create(**params, stream=True))
        assert merged.finish_reason == "tool_calls", merged
        return merged.content, [(c.name, c.arguments) for c in merged.calls]
    choice_ = client.chat.completions.create(**params).choices[0]
    assert choice_.finish_reason == "tool_calls", choice_
    calls = choice_.message.tool_calls or []
    return choice_.message.content, [(c.function.name, c.function.arguments) for c in calls]


@pytest.mark.parametrize("fmt", sorted(ROOTS))
@pytest.mark.parametrize(("question", "choice", "stream"), QUESTIONS, ids=[f"q{i}" for i in range(len(QUESTIONS))])
def test_every_constrained_answer_is_a_schema_valid_call(
    client: OpenAI, recorded: RecordingRelay, fmt: str, question: str, choice: Any, stream: bool
) -> None:
    started = time.perf_counter()
    content, calls = ask(client, fmt, question, choice, stream)
    print(f"{question!r}: {calls} in {time.perf_counter() - started:.2f} s")
    assert len(calls) == 1, calls
    name, arguments = calls[0]
    if isinstance(choice, dict):
        assert name == choice["function"]["name"]
    jsonschema.validate(json.loads(arguments), SCHEMAS[name])
    assert not markup_in(content), content
    sent = [exchange.request for exchange in recorded.exchanges]
    assert sent and all("grammar" in body for body in sent), "the grammar did not go upstream"
    assert len(sent) == 1, f"re-asked: the grammar let an invalid call through ({len(sent)} attempts)"
    assert sent[0]["grammar"].splitlines()[-1] == ROOTS[fmt]
