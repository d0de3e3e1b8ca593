"""Emulated tool calling with a real model: the OpenAI SDK sends ``tools``, the model only writes text.

Asserted as protocol properties, never as wording: a structured call to ``get_weather`` with
schema-valid JSON arguments, no markup in content, OpenAI's streaming delta rules, and (seen
through the recording relay) that the model server honoured the stop sequences toolshim sent.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from openai import OpenAI

from tests.realmodel.helpers import (
    WEATHER_MESSAGES,
    WEATHER_TOOL,
    check_weather_arguments,
    markup_in,
    merge_stream,
)
from tests.realmodel.recorder import RecordingRelay

pytestmark = pytest.mark.realmodel

EMULATED = ["qwen-hermes", "qwen-react"]
MAX_TOKENS = 128
# A prompt after which this model, unstopped, writes on past its ReAct call into an invented Observation.
RUN_ON_MESSAGES: list[dict[str, Any]] = [
    {"role": "system", "content": "You are a helpful assistant. Use a tool whenever it can answer the question."},
    {"role": "user", "content": "What is the weather like in Paris right now?"},
]


@pytest.mark.parametrize("model", EMULATED)
def test_weather_question_gives_a_structured_call(client: OpenAI, model: str) -> None:
    response = client.chat.completions.create(
        model=model, messages=WEATHER_MESSAGES, tools=[WEATHER_TOOL], temperature=0, max_tokens=MAX_TOKENS
    )
    choice = response.choices[0]
    assert choice.finish_reason == "tool_calls", response
    calls = choice.message.tool_calls or []
    assert len(calls) == 1, response
    call = calls[0]
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "get_weather"
    check_weather_arguments(call.function.arguments)
    assert not markup_in(choice.message.content), choice.message.content


@pytest.mark.parametrize("model", EMULATED)
def test_weather_question_streams_a_structured_call(client: OpenAI, model: str) -> None:
    stream = client.chat.completions.create(
        model=model, messages=WEATHER_MESSAGES, tools=[WEATHER_TOOL], temperature=0, max_tokens=MAX_TOKENS, stream=True
    )
    merged = merge_stream(stream)
    assert merged.finish_reason == "tool_calls", merged
    assert [c.name for c in merged.calls] == ["get_weather"]
    assert merged.calls[0].id.startswith("call_")
    check_weather_arguments(merged.calls[0].arguments)
    assert not markup_in(merged.content), merged.content


@pytest.mark.parametrize("model", EMULATED)
def test_model_server_honoured_the_stop_sequences(
    client: OpenAI, direct: OpenAI, recorded: RecordingRelay, model: str
) -> None:
    """What toolshim sent upstream carries the format's stop sequences, and the server obeyed them.

    Seen through the relay: toolshim's upstream request has ``stop`` and no ``tools``; the raw
    answer contains no stop string and did not run to ``max_tokens``. Then the recorded request is
    replayed straight to the server with and without its ``stop`` (temperature 0, same cache state
    for both replays, so the same tokens): the stopped text must be the unstopped text cut at the
    first stop string. With this prompt the model, left alone, invents an ``Observation:`` line after
    its ReAct call, so for ReAct the stop must actually have cut something.
    """
    client.chat.completions.create(
        model=model, messages=RUN_ON_MESSAGES, tools=[WEATHER_TOOL], temperature=0, max_tokens=MAX_TOKENS
    )
    [exchange] = [e for e in recorded.exchanges if e.path.endswith("/chat/completions")]
    sent: dict[str, Any] = exchange.request
    stops = [sent["stop"]] if isinstance(sent.get("stop"), str) else list(sent.get("stop") or [])
    assert "tools" not in sent and "tool_choice" not in sent, "tools must not reach a text-only upstream"
    if model == "qwen-react":
        assert "\nObservation:" in stops, f"ReAct must stop before an Observation: {stops}"
    assert stops, f"{model}: toolshim sent no stop sequences"
    assert not [s for s in stops if s in exchange.text()], f"a stop string leaked: {exchange.text()!r}"
    assert exchange.finish_reason() != "length", "the answer ran to max_tokens instead of stopping"

    unstopped = replay_text(direct, {k: v for k, v in sent.items() if k != "stop"})
    stopped = replay_text(direct, sent)
    assert stopped == cut_at_first_stop(unstopped, stops), (stopped, unstopped)
    if model == "qwen-react":
        assert stopped != unstopped, f"the model did not run on, so the stop was not exercised: {unstopped!r}"


def replay_text(direct: OpenAI, body: dict[str, Any]) -> str:
    """Send a recorded upstream body straight to the model server (streamed if it was) and return the text."""
    if not body.get("stream"):
        return direct.chat.completions.create(**body).choices[0].message.content or ""
    return "".join(
        chunk.choices[0].delta.content or "" for chunk in direct.chat.completions.create(**body) if chunk.choices
    )


def cut_at_first_stop(text: str, stops: list[str]) -> str:
    """``text`` up to the earliest occurrence of any stop string (OpenAI's stop semantics)."""
    hits = [text.find(s) for s in stops if s in text]
    return text[: min(hits)] if hits else text


def test_two_turn_loop_ends_with_a_text_answer(client: OpenAI) -> None:
    """call -> tool result -> answer: the conversation history round-trips through the format."""
    messages: list[dict[str, Any]] = list(WEATHER_MESSAGES)
    calls_made = 0
    for _ in range(3):
        response = client.chat.completions.create(
            model="qwen-hermes", messages=messages, tools=[WEATHER_TOOL], temperature=0, max_tokens=MAX_TOKENS
        )
        message = response.choices[0].message
        assert not markup_in(message.content), message.content
        if not message.tool_calls:
            break
        calls_made += len(message.tool_calls)
        messages.append(
            {
                "role": "assistant",
                "content": message.content,
                "tool_calls": [c.model_dump() for c in message.tool_calls],
            }
        )
        for call in message.tool_calls:
            args = check_weather_arguments(call.function.arguments)
            result = {"city": args["city"], "temperature_c": 21, "conditions": "sunny"}
            messages.append({"role": "tool", "tool_call_id": call.id, "content": json.dumps(result)})
    assert calls_made >= 1, "the model never called the tool"
    assert response.choices[0].finish_reason == "stop", response
    assert message.content and message.content.strip(), "the loop ended without a text answer"
