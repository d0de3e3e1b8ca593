"""One retry budget per client call: toolshim's own retries and the SDK's do not multiply.

The official OpenAI SDK retries a failed call twice by default where ``x-should-retry`` says
``true`` (5xx, 408, 429). toolshim sends the upstream a second call of its own for some requests
(a re-ask, the ``auto`` fallback); when such a request still fails, its error says
``x-should-retry: false``. Measured with the real ``openai`` package and its default retries against
a fake upstream that keeps failing: at most 3 upstream calls per client call.
"""

from __future__ import annotations

from typing import Any

import openai
import pytest

from tests.fakes import FakeUpstream, Reply, text_stream
from tests.formats.tools import OPENAI_TOOLS

BAD_GATEWAY = Reply(status=502, body={"error": {"message": "bad gateway", "type": "server_error"}})
MESSAGES = [{"role": "user", "content": "Weather in Paris?"}]


async def call(proxy: Any, **extra: Any) -> openai.APIStatusError:
    """One client call with the SDK's default retries (2), fast; the error it ends with."""
    client = openai.AsyncOpenAI(base_url=proxy.base_url, api_key="x")
    assert client.max_retries == 2  # the SDK's default, the one under test
    async with client:
        with pytest.raises(openai.APIStatusError) as info:
            answer = await client.chat.completions.create(model="m", messages=MESSAGES, **extra)  # type: ignore[call-overload]
            if extra.get("stream"):
                async for _ in answer:
                    pass
    return info.value


@pytest.mark.parametrize("mode", ["native", "hermes", "auto"])
@pytest.mark.parametrize("stream", [False, True], ids=["complete", "stream"])
async def test_a_failing_upstream_gets_at_most_three_calls(
    start_proxy: Any, fake_upstream: FakeUpstream, mode: str, stream: bool
) -> None:
    fake_upstream.script(BAD_GATEWAY)
    proxy = await start_proxy(models=[{"match": "*", "upstream": "up", "tool_mode": mode}])
    error = await call(proxy, stream=stream, tools=[OPENAI_TOOLS["get_weather"]])
    assert error.status_code == 502
    assert len(fake_upstream.requests) == 3  # one per SDK try: toolshim itself tried once each time


async def test_a_reask_that_fails_is_not_retried_by_the_sdk(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    """tool_choice demands a call, the model answers in text, toolshim re-asks, and the re-ask meets a
    persistent 502: 2 upstream calls, not 2 per SDK try (6)."""

    def reply() -> Reply:
        reasked = len(fake_upstream.requests[-1]["messages"]) > len(MESSAGES) + 1  # the system prompt aside
        return BAD_GATEWAY if reasked else Reply(pieces=text_stream(["It is sunny."]))

    fake_upstream._next = reply  # type: ignore[method-assign]
    proxy = await start_proxy(models=[{"match": "*", "upstream": "up", "tool_mode": "hermes"}])
    error = await call(proxy, tools=[OPENAI_TOOLS["get_weather"]], tool_choice="required")
    assert error.status_code == 502 and error.response.headers["x-should-retry"] == "false"
    assert len(fake_upstream.requests) == 2


async def test_the_auto_fallback_that_fails_is_not_retried_by_the_sdk(
    start_proxy: Any, fake_upstream: FakeUpstream
) -> None:
    """``auto``: native is refused for its tools, the emulated call fails too: 2 upstream calls, no more."""
    fake_upstream.script(Reply(status=500, body={"error": {"message": "this model does not support tools"}}))
    proxy = await start_proxy(models=[{"match": "*", "upstream": "up", "tool_mode": "auto"}])
    error = await call(proxy, tools=[OPENAI_TOOLS["get_weather"]])
    assert error.status_code == 500 and error.response.headers["x-should-retry"] == "false"
    assert len(fake_upstream.requests) == 2
    assert "tools" in fake_upstream.requests[0] and "tools" not in fake_upstream.requests[1]
