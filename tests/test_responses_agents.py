"""The OpenAI Agents SDK with its default model class (the Responses API) runs a ``@function_tool``
agent loop through toolshim to a final answer, streamed and not, against a scripted upstream."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agents import Agent, RunConfig, Runner, function_tool
from agents.models.openai_provider import OpenAIProvider

from tests.fakes import FakeUpstream
from tests.test_responses import call_reply, client, rules, text_reply

CALLS: list[str] = []


@function_tool
def get_weather(city: str) -> str:
    """Weather for a city."""
    CALLS.append(city)
    return f"21 C and sunny in {city}"


@pytest.mark.parametrize("mode", ["hermes", "react", "native"])
@pytest.mark.parametrize("streamed", [False, True])
async def test_agent_loop_reaches_a_final_answer(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path, mode: str, streamed: bool
) -> None:
    CALLS.clear()
    fake_upstream.script(call_reply(mode, streamed), text_reply(mode, streamed))
    proxy = await start_proxy(models=rules(mode), data_dir=tmp_path)
    agent = Agent(name="weather", instructions="Answer with the tool.", tools=[get_weather], model="m")
    async with client(proxy) as openai_client:
        config = RunConfig(
            model_provider=OpenAIProvider(openai_client=openai_client, use_responses=True), tracing_disabled=True
        )
        if streamed:
            result = Runner.run_streamed(agent, "What is the weather in Paris?", run_config=config)
            kinds = [event.type async for event in result.stream_events()]
            assert "raw_response_event" in kinds and "run_item_stream_event" in kinds
        else:
            result = await Runner.run(agent, "What is the weather in Paris?", run_config=config)  # type: ignore[assignment]
    assert result.final_output == "It is sunny in Paris."
    assert CALLS == ["Paris"]
    assert all(path == "/v1/chat/completions" for path in fake_upstream.paths) and len(fake_upstream.paths) == 2
    assert "21 C and sunny in Paris" in "".join(str(m["content"]) for m in fake_upstream.requests[1]["messages"])
