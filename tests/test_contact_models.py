"""GET /v1/models shows what is served (issue 17): concrete rules, and the upstreams' models that glob rules serve."""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
import openai
import pytest

from tests.fakes import Reply

RULES = [
    {"match": "gpt-4o", "upstream": "up"},
    {"match": "llama-*", "upstream": "up", "tool_mode": "hermes"},
    {"match": "qwen*", "upstream": "up", "upstream_model": "qwen2.5:7b"},
]  # an alias: upstream names not listed
UPSTREAM_MODELS = {
    "object": "list",
    "data": [
        {"id": "llama-3-8b", "object": "model"},
        {"id": "qwen2.5:0.5b"},
        {"id": "mistral"},
        {"id": "gpt-4o"},
        {"bad": 1},
    ],
}


async def listing(proxy: Any) -> list[dict[str, Any]]:
    async with aiohttp.ClientSession() as session, session.get(proxy.base_url + "/models") as resp:
        assert resp.status == 200
        body = await resp.json()
    assert body["object"] == "list"
    return list(body["data"])


async def test_glob_rules_list_the_upstreams_matching_models(start_proxy: Any, fake_upstream: Any) -> None:
    proxy = await start_proxy(models=RULES)
    fake_upstream.script(Reply(body=UPSTREAM_MODELS))
    cards = await listing(proxy)
    assert [(c["id"], c["owned_by"]) for c in cards] == [("gpt-4o", "up"), ("llama-3-8b", "up")]
    assert fake_upstream.paths == ["/v1/models"]
    async with openai.AsyncOpenAI(base_url=proxy.base_url, api_key="x", max_retries=0) as client:
        assert [m.id async for m in client.models.list()] == ["gpt-4o", "llama-3-8b"]
        assert (await client.models.retrieve("llama-3-8b")).owned_by == "up"
    assert fake_upstream.paths == ["/v1/models"], "the upstream's list is cached"


async def test_a_failing_upstream_is_logged_and_skipped(
    start_proxy: Any, fake_upstream: Any, caplog: pytest.LogCaptureFixture
) -> None:
    proxy = await start_proxy(models=RULES)
    fake_upstream.script(Reply(status=500, body={"error": {"message": "models endpoint broke"}}))
    with caplog.at_level(logging.WARNING, logger="toolshim.server.catalog"):
        cards = await listing(proxy)
    assert [c["id"] for c in cards] == ["gpt-4o"]
    warning = [r for r in caplog.records if r.name == "toolshim.server.catalog"]
    assert warning and warning[0].levelno == logging.WARNING and "models endpoint broke" in warning[0].getMessage()
