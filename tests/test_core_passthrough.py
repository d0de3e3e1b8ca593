"""Model listing, health endpoints, and pass-through of other ``/v1/*`` calls to the model's upstream."""

from __future__ import annotations

import json
from typing import Any

import aiohttp
import openai

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
