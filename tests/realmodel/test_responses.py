"""The Responses API with a real model: ``client.responses.create`` / ``.stream`` with a function tool
gives a structured ``function_call`` item in the emulated formats, and the second turn (with the
result, by ``previous_response_id``) ends in text. Protocol properties only, never wording."""

from __future__ import annotations

from typing import Any

import pytest
from openai import OpenAI

from tests.realmodel.helpers import WEATHER_MESSAGES, WEATHER_PARAMETERS, check_weather_arguments, markup_in

pytestmark = pytest.mark.realmodel

TOOL: dict[str, Any] = {
    "type": "function",
    "name": "get_weather",
    "description": "Get the current weather in a city.",
    "parameters": WEATHER_PARAMETERS,
}
INSTRUCTIONS = str(WEATHER_MESSAGES[0]["content"])
QUESTION = str(WEATHER_MESSAGES[1]["content"])


@pytest.mark.parametrize("model", ["qwen-hermes", "qwen-react"])
@pytest.mark.parametrize("streamed", [False, True])
def test_function_call_then_answer(client: OpenAI, model: str, streamed: bool) -> None:
    params: dict[str, Any] = {
        "model": model,
        "instructions": INSTRUCTIONS,
        "tools": [TOOL],
        "temperature": 0,
        "max_output_tokens": 128,
    }
    if streamed:
        with client.responses.stream(input=QUESTION, **params) as stream:
            kinds = [event.type for event in stream]
            first = stream.get_final_response()
        assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    else:
        first = client.responses.create(input=QUESTION, **params)
    calls = [item for item in first.output if item.type == "function_call"]
    assert len(calls) == 1 and calls[0].name == "get_weather", first
    assert calls[0].id.startswith("fc_") and calls[0].call_id
    check_weather_arguments(calls[0].arguments)
    assert not markup_in(first.output_text), first.output_text
    result = {
        "type": "function_call_output",
        "call_id": calls[0].call_id,
        "output": '{"city": "Paris", "temperature_c": 18, "conditions": "sunny"}',
    }
    # instructions are not carried over by previous_response_id (as at OpenAI): send them again
    second = client.responses.create(
        previous_response_id=first.id,
        input=[result],
        model=model,
        instructions=INSTRUCTIONS,
        tools=[TOOL],
        tool_choice="none",
        temperature=0,
        max_output_tokens=128,
    )
    assert second.status == "completed" and second.output_text.strip(), second
    assert not [item for item in second.output if item.type == "function_call"]
    assert not markup_in(second.output_text), second.output_text
