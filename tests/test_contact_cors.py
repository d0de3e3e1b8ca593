"""CORS for browser clients (issue 17): off by default; one list of origins, shared with the Origin guard."""

from __future__ import annotations

from typing import Any

import aiohttp
import pytest
from toolshim.config.settings import load_settings

from tests.fakes import Reply, completion, text_stream

APP = "https://app.example"
CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
PREFLIGHT = {
    "Origin": APP,
    "Access-Control-Request-Method": "POST",
    "Access-Control-Request-Headers": "authorization, content-type",
}


async def test_off_by_default_preflight_gets_no_cors(start_proxy: Any) -> None:
    proxy = await start_proxy()
    async with (
        aiohttp.ClientSession() as session,
        session.options(proxy.base_url + "/chat/completions", headers=PREFLIGHT) as resp,
    ):
        assert resp.status == 403
        assert "Access-Control-Allow-Origin" not in resp.headers
        assert (await resp.json())["error"]["code"] == "origin_not_allowed"


async def test_preflight_from_an_allowed_origin_needs_no_key(start_proxy: Any, fake_upstream: Any) -> None:
    proxy = await start_proxy(allowed_origins=(APP,), api_keys=("sk-client",))
    async with (
        aiohttp.ClientSession() as session,
        session.options(proxy.base_url + "/chat/completions", headers=PREFLIGHT) as resp,
    ):
        assert resp.status == 204
        assert resp.headers["Access-Control-Allow-Origin"] == APP
        assert "POST" in resp.headers["Access-Control-Allow-Methods"]
        assert "authorization" in resp.headers["Access-Control-Allow-Headers"].lower()
    assert fake_upstream.requests == []


@pytest.mark.parametrize("stream", [False, True])
async def test_allowed_origin_can_read_answers_and_errors(start_proxy: Any, fake_upstream: Any, stream: bool) -> None:
    proxy = await start_proxy(allowed_origins=(APP,))
    fake_upstream.script(Reply(pieces=text_stream(["Hello"])) if stream else Reply(body=completion("Hello")))
    async with aiohttp.ClientSession() as session:
        async with session.post(
            proxy.base_url + "/chat/completions", json={**CHAT, "stream": stream}, headers={"Origin": APP}
        ) as resp:
            assert resp.status == 200
            assert resp.headers["Access-Control-Allow-Origin"] == APP
            assert "X-Request-Id" in resp.headers["Access-Control-Expose-Headers"]
        async with session.get(proxy.base_url + "/models/x/y", headers={"Origin": APP}) as resp:
            assert resp.headers["Access-Control-Allow-Origin"] == APP
        async with session.get(proxy.url + "/healthz", headers={"Origin": APP}) as resp:
            assert "Access-Control-Allow-Origin" not in resp.headers


def test_cors_origins_setting_and_its_old_name() -> None:
    assert load_settings(env={"TOOLSHIM_CORS_ORIGINS": "https://a.example, https://b.example"}).allowed_origins == (
        "https://a.example",
        "https://b.example",
    )
    assert load_settings(env={"TOOLSHIM_ALLOWED_ORIGINS": "https://a.example"}).allowed_origins == (
        "https://a.example",
    )
    assert load_settings({"allowed_origins": "*"}, env={}).origin_allowed("https://any.example")
    assert not load_settings(env={}).origin_allowed("https://a.example")
