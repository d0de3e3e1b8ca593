"""First contact (issue 17): a demanded call that never comes, text a re-ask repeats, usage over re-asks.

End to end through the real OpenAI SDK and raw SSE against the scripted upstream.
"""

from __future__ import annotations

from typing import Any

import aiohttp
import openai
import pytest

from tests.checked import checked_openai
from tests.deltas import check_deltas, parse_sse
from tests.fakes import Reply, text_stream
from tests.test_emulation import USER, WEATHER, ask, call_text, emulated, pieces

BAD = '<tool_call>{"name": "get_weather", "arguments": {"town": "Paris"}}</tool_call>'
PREAMBLE = "I'll check the weather. "


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("choice", ["required", {"type": "function", "function": {"name": "get_weather"}}])
async def test_missing_required_call_is_an_openai_error(
    start_proxy: Any, fake_upstream: Any, stream: bool, choice: Any
) -> None:
    proxy = await start_proxy(models=emulated("hermes", max_required_retries=1))
    fake_upstream.script(Reply(pieces=text_stream(["I think it is sunny."])))
    async with checked_openai(proxy.base_url) as client:
        with pytest.raises(openai.APIStatusError) as caught:
            result = await client.chat.completions.create(
                model="m", messages=USER, tools=WEATHER, tool_choice=choice, stream=stream
            )
            if stream:
                async for _ in result:  # type: ignore[union-attr]
                    pass
    assert caught.value.status_code == 502
    body = caught.value.body
    assert isinstance(body, dict)
    error = body.get("error", body)
    assert set(error) == {"message", "type", "param", "code"}
    assert error["code"] == "no_valid_tool_call" and error["type"] == "upstream_error"
    assert "no valid tool call" in error["message"] and "on_missing_call" in error["message"]
    assert len(fake_upstream.requests) == 2  # the re-ask happened first
    assert proxy.metrics.requests.labels("*", "hermes", str(stream).lower(), "no_valid_tool_call")._value.get() == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_missing_required_call_can_return_the_text(start_proxy: Any, fake_upstream: Any, stream: bool) -> None:
    proxy = await start_proxy(models=emulated("hermes", max_required_retries=1, on_missing_call="text"))
    fake_upstream.script(Reply(pieces=text_stream(["No."])))
    result = await ask(proxy, stream, tool_choice="required")
    assert result["choices"][0]["finish_reason"] == "stop"
    assert result["choices"][0]["message"]["content"] == "No."


@pytest.mark.parametrize("stream", [False, True])
async def test_failed_reask_does_not_repeat_sent_text(start_proxy: Any, fake_upstream: Any, stream: bool) -> None:
    proxy = await start_proxy(models=emulated("hermes", max_repair_retries=1))
    fake_upstream.script(
        Reply(pieces=text_stream(pieces(PREAMBLE + BAD, 5))), Reply(pieces=text_stream(pieces(PREAMBLE + BAD, 3)))
    )
    result = await ask(proxy, stream)
    assert len(fake_upstream.requests) == 2
    message = result["choices"][0]["message"]
    assert not message.get("tool_calls")
    assert message["content"].strip() == PREAMBLE.strip()


async def test_reask_text_after_the_repetition_still_arrives(start_proxy: Any, fake_upstream: Any) -> None:
    proxy = await start_proxy(models=emulated("hermes", max_repair_retries=1))
    fake_upstream.script(
        Reply(pieces=text_stream(pieces(PREAMBLE + BAD, 5))),
        Reply(pieces=text_stream(pieces(PREAMBLE + "\n" + call_text("hermes"), 4))),
    )
    result = await ask(proxy, True)
    message = result["choices"][0]["message"]
    assert message["content"].strip() == PREAMBLE.strip()
    assert message["tool_calls"][0]["function"]["name"] == "get_weather"


async def test_usage_sums_every_attempt_and_metrics_agree(start_proxy: Any, fake_upstream: Any) -> None:
    proxy = await start_proxy(models=emulated("hermes"))
    first = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}
    second = {"prompt_tokens": 130, "completion_tokens": 20, "total_tokens": 150}
    fake_upstream.script(
        Reply(pieces=text_stream(["It is sunny."], usage=first)),
        Reply(pieces=text_stream(pieces(call_text("hermes")), usage=second)),
    )
    payload = {
        "model": "m",
        "messages": USER,
        "tools": WEATHER,
        "tool_choice": "required",
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    async with (
        aiohttp.ClientSession() as session,
        session.post(proxy.base_url + "/chat/completions", json=payload) as resp,
    ):
        chunks, done = parse_sse(await resp.text())
    assert done
    check_deltas(chunks)
    assert chunks[-1]["usage"] == {"prompt_tokens": 230, "completion_tokens": 30, "total_tokens": 260}
    assert proxy.metrics.prompt_tokens.labels("*")._value.get() == 230
    assert proxy.metrics.completion_tokens.labels("*")._value.get() == 30


async def test_usage_repeated_in_every_chunk_is_counted_once(start_proxy: Any, fake_upstream: Any) -> None:
    """Some servers (vLLM's continuous usage stats) put the running usage in every chunk."""
    from tests.fakes import chunk, sse

    proxy = await start_proxy(models=emulated("hermes"))
    events = [sse(chunk({"role": "assistant", "content": ""}, usage={"prompt_tokens": 50, "completion_tokens": 0}))]
    events += [
        sse(chunk({"content": p}, usage={"prompt_tokens": 50, "completion_tokens": i + 1}))
        for i, p in enumerate(["Hello", " there", "."])
    ]
    events += [sse(chunk({}, "stop", usage={"prompt_tokens": 50, "completion_tokens": 3})), sse("[DONE]")]
    fake_upstream.script(Reply(pieces=events))
    result = await ask(proxy, False)
    assert result["usage"]["prompt_tokens"] == 50 and result["usage"]["completion_tokens"] == 3


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("where", ["content", "reasoning", "drop"])
async def test_text_before_a_call_goes_where_the_rule_says(
    start_proxy: Any, fake_upstream: Any, stream: bool, where: str
) -> None:
    """pydantic-ai's ``run_stream`` takes a turn's first text as the final answer: a preamble can move."""
    proxy = await start_proxy(models=emulated("hermes", text_before_call=where))
    fake_upstream.script(Reply(pieces=text_stream(pieces(PREAMBLE + "\n" + call_text("hermes"), 4))))
    message = (await ask(proxy, stream))["choices"][0]["message"]
    assert message["tool_calls"][0]["function"]["name"] == "get_weather"
    content, reasoning = (message["content"] or "").strip(), (message.get("reasoning_content") or "").strip()
    expected = {"content": (PREAMBLE.strip(), ""), "reasoning": ("", PREAMBLE.strip()), "drop": ("", "")}[where]
    assert (content, reasoning) == expected


@pytest.mark.parametrize("where", ["reasoning", "drop"])
async def test_text_without_a_call_stays_content(start_proxy: Any, fake_upstream: Any, where: str) -> None:
    proxy = await start_proxy(models=emulated("hermes", text_before_call=where))
    fake_upstream.script(Reply(pieces=text_stream(pieces("It is sunny in Paris.", 4))))
    message = (await ask(proxy, True))["choices"][0]["message"]
    assert message["content"] == "It is sunny in Paris." and not message.get("tool_calls")


async def test_usage_after_an_auto_fallback_counts_the_emulated_calls(start_proxy: Any, fake_upstream: Any) -> None:
    """The rejected native call reports no usage; the emulated attempts that follow are summed."""
    proxy = await start_proxy(
        models=[{"match": "*", "upstream": "up", "tool_mode": "auto", "fallback_format": "hermes"}]
    )
    rejection = Reply(status=400, body={"error": {"message": "model does not support tools", "type": "api_error"}})
    first = {"prompt_tokens": 40, "completion_tokens": 5, "total_tokens": 45}
    second = {"prompt_tokens": 60, "completion_tokens": 9, "total_tokens": 69}
    fake_upstream.script(
        rejection,
        Reply(pieces=text_stream(["No call."], usage=first)),
        Reply(pieces=text_stream(pieces(call_text("hermes")), usage=second)),
    )
    result = await ask(proxy, False, tool_choice="required")
    assert len(fake_upstream.requests) == 3
    usage = {key: result["usage"][key] for key in ("prompt_tokens", "completion_tokens", "total_tokens")}
    assert usage == {"prompt_tokens": 100, "completion_tokens": 14, "total_tokens": 114}
    assert proxy.metrics.prompt_tokens.labels("*")._value.get() == 100
