"""Model listing, health endpoints, and pass-through of other ``/v1/*`` calls to the model's upstream."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import aiohttp
import openai
import pytest

from tests.fakes import FakeUpstream, Reply, sse

MODELS = [
    {"match": "gpt-4o", "upstream": "up", "tool_mode": "native"},
    {"match": "qwen*", "upstream": "up", "tool_mode": "hermes", "expose": ["qwen2.5-coder", "gpt-4o"]},
    {"match": "embed-small", "upstream": "up", "upstream_model": "nomic-embed-text:v1.5"},
    {"match": "llama-*", "upstream": "up", "tool_mode": "react"},
]
EMBEDDING = {
    "object": "list",
    "model": "nomic-embed-text:v1.5",
    "data": [{"object": "embedding", "index": 0, "embedding": [0.25, -0.5, 1.0]}],
    "usage": {"prompt_tokens": 2, "total_tokens": 2},
}


def completion_text(text: str) -> dict[str, Any]:
    return {
        "id": "cmpl-1",
        "object": "text_completion",
        "created": 1,
        "model": "up",
        "choices": [{"index": 0, "text": text, "finish_reason": "stop", "logprobs": None}],
    }


async def test_models_list_and_get(start_proxy: Any) -> None:
    proxy = await start_proxy(models=MODELS)
    async with aiohttp.ClientSession() as session:
        async with session.get(proxy.base_url + "/models") as resp:
            assert resp.status == 200
            listing = await resp.json()
        assert listing["object"] == "list"
        assert [m["id"] for m in listing["data"]] == ["gpt-4o", "qwen2.5-coder", "embed-small"]
        assert all(m["object"] == "model" and isinstance(m["created"], int) and m["owned_by"] for m in listing["data"])
        async with session.get(proxy.base_url + "/models/qwen2.5-coder") as resp:
            assert resp.status == 200
            assert (await resp.json())["id"] == "qwen2.5-coder"
        async with session.get(proxy.base_url + "/models/llama-3/8b") as resp:  # matches a glob rule
            assert resp.status == 200
            assert (await resp.json())["id"] == "llama-3/8b"
        async with session.get(proxy.base_url + "/models/mistral") as resp:
            assert resp.status == 404
            assert (await resp.json())["error"]["code"] == "model_not_found"
    async with openai.AsyncOpenAI(base_url=proxy.base_url, api_key="x", max_retries=0) as client:
        assert [m.id async for m in client.models.list()] == ["gpt-4o", "qwen2.5-coder", "embed-small"]
        assert (await client.models.retrieve("gpt-4o")).id == "gpt-4o"
        try:
            await client.models.retrieve("mistral")
            raise AssertionError("expected 404")
        except openai.NotFoundError as exc:
            assert exc.code == "model_not_found"


async def test_health_and_readiness(start_proxy: Any) -> None:
    proxy = await start_proxy()
    async with aiohttp.ClientSession() as session:
        async with session.get(proxy.url + "/healthz") as resp:
            assert (resp.status, (await resp.json())["status"]) == (200, "ok")
        async with session.get(proxy.url + "/readyz") as resp:
            assert (resp.status, await resp.json()) == (200, {"status": "ready"})


async def test_embeddings_pass_through_with_model_renamed(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(Reply(body=EMBEDDING))
    proxy = await start_proxy(models=MODELS)
    async with openai.AsyncOpenAI(base_url=proxy.base_url, api_key="x", max_retries=0) as client:
        result = await client.embeddings.create(model="embed-small", input="hello", encoding_format="float")
    assert result.data[0].embedding == [0.25, -0.5, 1.0]
    assert fake_upstream.paths == ["/v1/embeddings"]
    assert fake_upstream.requests == [{"model": "nomic-embed-text:v1.5", "input": "hello", "encoding_format": "float"}]


async def test_completions_non_stream(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(Reply(body=completion_text("4")))
    proxy = await start_proxy(models=MODELS)
    async with openai.AsyncOpenAI(base_url=proxy.base_url, api_key="x", max_retries=0) as client:
        result = await client.completions.create(model="gpt-4o", prompt="2+2=", max_tokens=3, temperature=0)
    assert result.choices[0].text == "4"
    assert fake_upstream.paths == ["/v1/completions"]
    assert fake_upstream.requests == [{"model": "gpt-4o", "prompt": "2+2=", "max_tokens": 3, "temperature": 0}]


async def test_completions_stream_relayed_byte_for_byte(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    pieces = [sse(completion_text(t)) for t in ("Once", " upon", " a time")] + [sse("[DONE]")]
    fake_upstream.script(Reply(pieces=pieces, delay=0.01), Reply(pieces=pieces))
    proxy = await start_proxy(models=MODELS)
    body = {"model": "llama-3", "prompt": "Tell", "stream": True}
    async with aiohttp.ClientSession() as session, session.post(proxy.base_url + "/completions", json=body) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        assert (await resp.read()).decode() == "".join(pieces)
    assert fake_upstream.paths[0] == "/v1/completions" and fake_upstream.requests[0] == body
    async with openai.AsyncOpenAI(base_url=proxy.base_url, api_key="x", max_retries=0) as client:
        stream = await client.completions.create(model="llama-3", prompt="Tell", stream=True)
        assert "".join([c.choices[0].text async for c in stream]) == "Once upon a time"


async def test_passthrough_relays_upstream_status_and_body(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    error = {"error": {"message": "input too long", "type": "invalid_request_error", "param": "input", "code": None}}
    fake_upstream.script(Reply(status=400, body=error))
    proxy = await start_proxy(models=MODELS)
    async with (
        aiohttp.ClientSession() as session,
        session.post(proxy.base_url + "/embeddings", json={"model": "embed-small", "input": "x" * 100}) as resp,
    ):
        assert resp.status == 400
        assert json.loads(await resp.read()) == error


async def test_passthrough_needs_a_known_model(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    proxy = await start_proxy(models=MODELS)
    async with aiohttp.ClientSession() as session:
        async with session.post(proxy.base_url + "/embeddings", json={"input": "x"}) as resp:
            assert resp.status == 400
            body = await resp.json()
            assert body["error"]["param"] == "model" and body["error"]["type"] == "invalid_request_error"
        async with session.post(proxy.base_url + "/embeddings", json={"model": "mistral", "input": "x"}) as resp:
            assert resp.status == 404
            assert (await resp.json())["error"]["code"] == "model_not_found"
        async with session.post(
            proxy.base_url + "/embeddings", data=b"{oops", headers={"Content-Type": "application/json"}
        ) as resp:
            assert resp.status == 400
    assert fake_upstream.requests == []


def access_lines(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [dict(r.fields) for r in caplog.records if r.name == "toolshim.access"]


async def test_an_upstream_that_stalls_mid_body_ends_the_stream_with_an_error_event(
    start_proxy: Any, fake_upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    """The headers went out: no HTTP error can follow, so the stream ends with an error event that says
    what happened (a read timeout), and the answer is logged as the upstream's failure, status 200."""
    pieces = [sse(completion_text(t)) for t in ("Once", " upon")] + [sse("[DONE]")]
    fake_upstream.script(Reply(pieces=pieces, stall=(1, 3.0)))
    proxy = await start_proxy(models=MODELS, upstream_extra={"read_timeout": 0.5})
    body = {"model": "llama-3", "prompt": "Tell", "stream": True}
    with caplog.at_level(logging.INFO):
        async with aiohttp.ClientSession() as session, session.post(proxy.base_url + "/completions", json=body) as r:
            assert r.status == 200
            text = (await r.read()).decode()
    assert text.startswith(pieces[0]) and "[DONE]" not in text
    event = json.loads(text.removeprefix(pieces[0]).removeprefix("data: ").strip())
    assert event["error"]["code"] == "upstream_timeout" and event["error"]["type"] == "upstream_error"
    (line,) = access_lines(caplog)
    assert line["status"] == 200 and line["error_code"] == "upstream_timeout"


async def test_a_client_that_hangs_up_mid_relay_is_no_upstream_failure(
    start_proxy: Any, fake_upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    """A client gone mid-body is the client's doing: answered 499 when aiohttp cancels the handler, or
    ``client_closed`` when a write finds the connection closed first; never a 502 or an upstream error
    in the log, and the upstream is released."""
    pieces = [sse(completion_text(f" {n}")) for n in range(40)] + [sse("[DONE]")]
    fake_upstream.script(Reply(pieces=pieces, delay=0.05))
    proxy = await start_proxy(models=MODELS)
    body = {"model": "llama-3", "prompt": "Count", "stream": True}
    with caplog.at_level(logging.INFO):
        async with aiohttp.ClientSession() as session:
            resp = await session.post(proxy.base_url + "/completions", json=body)
            assert resp.status == 200
            await resp.content.readany()
            resp.close()  # hang up mid-stream
        for _ in range(100):
            if access_lines(caplog):
                break
            await asyncio.sleep(0.05)
    (line,) = access_lines(caplog)
    assert line["status"] == 499 or (line["status"] == 200 and line["error_code"] == "client_closed"), line
    assert not [r for r in caplog.records if r.levelno >= logging.WARNING and r.name.startswith("toolshim")]
    for _ in range(100):
        if fake_upstream.disconnected == [True]:
            break
        await asyncio.sleep(0.05)
    assert fake_upstream.disconnected == [True] and fake_upstream.pieces_sent[0] < len(pieces)
