"""The real OpenAI SDK (sync and async, streaming and not) against the proxy in native mode.

The upstream is a real local aiohttp server (``tests.fakes``); nothing of the proxy is mocked.
Native mode must be an exact pass-through: the upstream sees the client's body (model renamed
if the rule says so) and the client sees the upstream's chunks, byte for byte, as they arrive.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import aiohttp
from openai import AsyncOpenAI, OpenAI

from tests.fakes import FakeUpstream, Reply, chunk, completion, sse, text_stream

USAGE = {"prompt_tokens": 21, "completion_tokens": 5, "total_tokens": 26}
NATIVE_RENAMED = [{"match": "my-model", "upstream": "up", "tool_mode": "native", "upstream_model": "real/model-7b"}]
MESSAGES: list[Any] = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]
TOOLS: list[Any] = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        },
    }
]
CALL = {"id": "call_abc", "type": "function", "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}


def async_client(base_url: str, **kwargs: Any) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=base_url, api_key=kwargs.pop("api_key", "unused"), max_retries=0, **kwargs)


def sync_client(base_url: str) -> OpenAI:
    return OpenAI(base_url=base_url, api_key="unused", max_retries=0)


def tool_call_stream() -> list[str]:
    """How OpenAI streams one tool call: id/name first, then argument fragments, then finish."""
    first = {"index": 0, "id": "call_abc", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
    return [
        sse(chunk({"role": "assistant", "content": None, "tool_calls": [first]})),
        sse(chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"ci'}}]})),
        sse(chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'ty":"Paris"}'}}]})),
        sse(chunk({}, "tool_calls")),
        sse({**chunk({}), "choices": [], "usage": USAGE}),
        sse("[DONE]"),
    ]


async def test_async_non_stream_content_usage_and_rename(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(Reply(body=completion("Hello there", usage=USAGE)))
    proxy = await start_proxy(models=NATIVE_RENAMED)
    async with async_client(proxy.base_url) as client:
        resp = await client.chat.completions.create(model="my-model", messages=MESSAGES, temperature=0.2, seed=7)
    assert resp.choices[0].message.content == "Hello there"
    assert resp.choices[0].finish_reason == "stop"
    assert resp.usage is not None and resp.usage.total_tokens == 26
    assert fake_upstream.paths == ["/v1/chat/completions"]
    assert fake_upstream.requests == [{"model": "real/model-7b", "messages": MESSAGES, "temperature": 0.2, "seed": 7}]


async def test_sync_non_stream_tool_calls_passthrough(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(Reply(body=completion(None, tool_calls=[CALL], finish="tool_calls")))
    proxy = await start_proxy(models=NATIVE_RENAMED)

    def call() -> Any:
        with sync_client(proxy.base_url) as client:
            return client.chat.completions.create(
                model="my-model", messages=MESSAGES, tools=TOOLS, tool_choice="auto", parallel_tool_calls=False
            )

    resp = await asyncio.to_thread(call)
    message = resp.choices[0].message
    assert resp.choices[0].finish_reason == "tool_calls"
    assert message.content is None
    assert [c.model_dump() for c in message.tool_calls or []] == [CALL]
    sent = fake_upstream.requests[0]
    assert sent == {
        "model": "real/model-7b",
        "messages": MESSAGES,
        "tools": TOOLS,
        "tool_choice": "auto",
        "parallel_tool_calls": False,
    }


async def test_async_stream_content_and_include_usage(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(Reply(pieces=text_stream(["Hel", "lo", " world"], usage=USAGE)))
    proxy = await start_proxy(models=NATIVE_RENAMED)
    async with async_client(proxy.base_url) as client:
        stream = await client.chat.completions.create(
            model="my-model", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
        chunks = [c async for c in stream]
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == "Hello world"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage is not None and chunks[-1].usage.total_tokens == 26
    assert fake_upstream.requests == [
        {"model": "real/model-7b", "messages": MESSAGES, "stream": True, "stream_options": {"include_usage": True}}
    ]


async def test_sync_stream_tool_call_deltas(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(Reply(pieces=tool_call_stream()))
    proxy = await start_proxy()

    def call() -> list[Any]:
        with sync_client(proxy.base_url) as client:
            stream = client.chat.completions.create(
                model="gpt-x", messages=MESSAGES, tools=TOOLS, stream=True, stream_options={"include_usage": True}
            )
            return list(stream)

    chunks = await asyncio.to_thread(call)
    deltas = [c.choices[0].delta.tool_calls for c in chunks if c.choices and c.choices[0].delta.tool_calls]
    assert deltas[0][0].id == "call_abc" and deltas[0][0].function.name == "get_weather"
    assert "".join(d[0].function.arguments or "" for d in deltas) == '{"city":"Paris"}'
    assert chunks[-2].choices[0].finish_reason == "tool_calls"
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == 21


async def test_stream_bytes_relayed_unchanged(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    """What the client receives is exactly what the upstream wrote (each event is `data: …\\n\\n`)."""
    pieces = tool_call_stream()
    fake_upstream.script(Reply(pieces=pieces))
    proxy = await start_proxy()
    body = {"model": "gpt-x", "messages": MESSAGES, "tools": TOOLS, "stream": True, "vendor_field": {"x": [1, 2]}}
    async with (
        aiohttp.ClientSession() as session,
        session.post(proxy.base_url + "/chat/completions", json=body) as resp,
    ):
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        received = await resp.read()
    assert received.decode() == "".join(pieces)
    # fields outside the allowlist never reach the upstream (see test_security_fields.py)
    assert fake_upstream.requests == [{k: v for k, v in body.items() if k != "vendor_field"}]


async def test_body_forwarded_exactly_with_only_model_renamed(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    proxy = await start_proxy(models=NATIVE_RENAMED, upstream_extra={"extra_body_fields": ["top_k"]})
    body: dict[str, Any] = {
        "model": "my-model",
        "messages": [
            *MESSAGES,
            {"role": "user", "content": "é✓😀\u2028"},
            {"role": "assistant", "content": None, "tool_calls": [CALL]},
            {"role": "tool", "tool_call_id": "call_abc", "content": "22C"},
        ],
        "tools": TOOLS,
        "tool_choice": {"type": "function", "function": {"name": "get_weather"}},
        "temperature": 0,
        "top_p": 0.9,
        "max_tokens": 50,
        "stop": ["\n\n"],
        "logit_bias": {"50256": -100},
        "response_format": {"type": "text"},
        "user": "u-1",
        "n": 1,
        "top_k": 40,
    }
    async with (
        aiohttp.ClientSession() as session,
        session.post(proxy.base_url + "/chat/completions", json=body) as resp,
    ):
        assert resp.status == 200
        assert (await resp.json())["choices"][0]["message"]["content"] == "ok"
    assert fake_upstream.requests == [{**body, "model": "real/model-7b"}]


async def test_model_kept_when_rule_has_no_upstream_model(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    proxy = await start_proxy()
    async with async_client(proxy.base_url) as client:
        await client.chat.completions.create(model="some/Model:latest", messages=MESSAGES)
    assert fake_upstream.requests[0]["model"] == "some/Model:latest"


async def test_chunks_relayed_as_they_arrive(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    """The client sees piece 1 while the upstream has not yet sent piece 2 (0.4 s later)."""
    fake_upstream.script(Reply(pieces=text_stream(["first", "second"]), delay=0.4))
    proxy = await start_proxy()
    arrivals: list[tuple[float, str, int]] = []
    async with async_client(proxy.base_url) as client:
        stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        async for c in stream:
            content = c.choices[0].delta.content if c.choices else None
            if content:
                arrivals.append((time.monotonic(), content, fake_upstream.pieces_sent[0]))
    assert [a[1] for a in arrivals] == ["first", "second"]
    first_time, _, sent_when_first_seen = arrivals[0]
    assert sent_when_first_seen == 2  # role chunk + "first": nothing after it was written yet
    assert arrivals[1][0] - first_time > 0.3


async def test_large_sse_line_relayed_intact(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    """A 300 KB data line (a big tool argument) is over aiohttp's 128 KiB line limit: must still pass."""
    big = json.dumps({"blob": "x" * 300_000, "tail": "é✓"})
    first = {"index": 0, "id": "call_big", "type": "function", "function": {"name": "save", "arguments": big}}
    pieces = [sse(chunk({"role": "assistant", "tool_calls": [first]})), sse(chunk({}, "tool_calls")), sse("[DONE]")]
    fake_upstream.script(Reply(pieces=pieces), Reply(pieces=pieces))
    proxy = await start_proxy()
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            proxy.base_url + "/chat/completions", json={"model": "m", "messages": MESSAGES, "stream": True}
        ) as resp,
    ):
        assert (await resp.read()).decode() == "".join(pieces)
    async with async_client(proxy.base_url) as client:
        stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
        chunks = [c async for c in stream]
    call = chunks[0].choices[0].delta.tool_calls
    assert call is not None and call[0].function is not None and call[0].function.arguments == big


async def test_upstream_ignoring_stream_flag_is_relayed_as_one_event(
    start_proxy: Any, fake_upstream: FakeUpstream
) -> None:
    """Some servers answer ``stream: true`` with a plain JSON body; the client still gets a stream."""
    body = completion("whole")
    fake_upstream.script(Reply(body=body))
    proxy = await start_proxy()
    async with (
        aiohttp.ClientSession() as session,
        session.post(
            proxy.base_url + "/chat/completions", json={"model": "m", "messages": MESSAGES, "stream": True}
        ) as resp,
    ):
        assert resp.status == 200
        text = (await resp.read()).decode()
    assert text.endswith("data: [DONE]\n\n")
    assert json.loads(text.removeprefix("data: ").split("\n\n")[0]) == body
