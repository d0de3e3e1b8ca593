"""The litellm upstream, end to end without network: litellm's OpenAI-compatible route aimed at the fake.

``upstream_model: "openai/some-model"`` makes litellm speak OpenAI's protocol to ``base_url``;
the key still comes from the environment variable the rules name.
"""

from __future__ import annotations

import time
from typing import Any

import openai
import pytest

from tests.fakes import FakeUpstream, Reply, completion, text_stream

# litellm's own pydantic usage warns (ReadOnly TypedDict items, instance model_fields); harmless, not ours.
MODELS = [{"match": "claude-ish", "upstream": "up", "tool_mode": "native", "upstream_model": "openai/some-model"}]
MESSAGES: list[Any] = [{"role": "user", "content": "hi"}]
KEY = "sk-litellm-test-key"


@pytest.fixture
async def litellm_proxy(start_proxy: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("LITELLM_TEST_KEY", KEY)
    return await start_proxy(
        models=MODELS, upstream_extra={"provider": "litellm", "api_key_env": "LITELLM_TEST_KEY", "read_timeout": 5}
    )


def client(proxy: Any) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(base_url=proxy.base_url, api_key="x", max_retries=0)


async def test_litellm_non_stream(litellm_proxy: Any, fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(
        Reply(body=completion("via litellm", usage={"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}))
    )
    async with client(litellm_proxy) as c:
        resp = await c.chat.completions.create(model="claude-ish", messages=MESSAGES, temperature=0.1)
    assert resp.choices[0].message.content == "via litellm"
    assert resp.usage is not None and resp.usage.total_tokens == 5
    assert fake_upstream.paths == ["/v1/chat/completions"]
    sent = fake_upstream.requests[0]
    assert sent["model"] == "some-model" and sent["messages"] == MESSAGES and sent["temperature"] == 0.1
    assert fake_upstream.headers[0]["Authorization"] == f"Bearer {KEY}"


async def test_litellm_stream(litellm_proxy: Any, fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(
        Reply(pieces=text_stream(["Hel", "lo"], usage={"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5}))
    )
    async with client(litellm_proxy) as c:
        stream = await c.chat.completions.create(
            model="claude-ish", messages=MESSAGES, stream=True, stream_options={"include_usage": True}
        )
        chunks = [ch async for ch in stream]
    assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == "Hello"
    assert [ch.choices[0].finish_reason for ch in chunks if ch.choices and ch.choices[0].finish_reason] == ["stop"]
    assert fake_upstream.requests[0]["stream"] is True and fake_upstream.requests[0]["model"] == "some-model"


async def test_litellm_upstream_error_keeps_status(litellm_proxy: Any, fake_upstream: FakeUpstream) -> None:
    error = {"message": "context too long", "type": "invalid_request_error", "param": None, "code": None}
    fake_upstream.script(Reply(status=400, body={"error": error}))
    async with client(litellm_proxy) as c:
        with pytest.raises(openai.BadRequestError) as info:
            await c.chat.completions.create(model="claude-ish", messages=MESSAGES)
    assert "context too long" in info.value.message
    assert KEY not in str(info.value.body)


# --- one retry layer: the client's (issue 16, item 5) ------------------------------------------


async def test_litellm_does_not_retry_each_client_attempt(litellm_proxy: Any, fake_upstream: FakeUpstream) -> None:
    """The SDK's default 2 retries make 3 upstream requests, not 9: litellm's own retries are off.
    The upstream's retry-after-ms reaches the SDK, which waits that long instead of its backoff."""
    error = {"error": {"message": "overloaded", "type": "server_error", "param": None, "code": None}}
    fake_upstream.script(Reply(status=503, body=error, headers={"retry-after-ms": "10"}))
    async with openai.AsyncOpenAI(base_url=litellm_proxy.base_url, api_key="x") as c:  # max_retries=2
        started = time.monotonic()
        with pytest.raises(openai.InternalServerError) as info:
            await c.chat.completions.create(model="claude-ish", messages=MESSAGES)
    assert len(fake_upstream.requests) == 3
    assert info.value.response.headers["x-should-retry"] == "true"
    assert info.value.response.headers["retry-after-ms"] == "10"
    assert time.monotonic() - started < 1.5  # 10 ms waits, not the SDK's 0.5 s + 1 s backoff


@pytest.mark.parametrize("stream", [False, True])
async def test_litellm_hung_upstream_fails_in_one_timeout(
    start_proxy: Any, fake_upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch, stream: bool
) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("LITELLM_TEST_KEY", KEY)
    fake_upstream.script(Reply(hang=5, body=completion("late")))
    extra = {"provider": "litellm", "api_key_env": "LITELLM_TEST_KEY", "read_timeout": 0.5}
    proxy = await start_proxy(models=MODELS, upstream_extra=extra)
    started = time.monotonic()
    async with client(proxy) as c:
        with pytest.raises(openai.APIStatusError) as info:
            await c.chat.completions.create(model="claude-ish", messages=MESSAGES, stream=stream)
    assert info.value.status_code == 504 and info.value.code == "upstream_timeout"
    assert len(fake_upstream.requests) == 1
    assert time.monotonic() - started < 2.5
