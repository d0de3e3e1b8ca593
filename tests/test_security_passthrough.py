"""Security of the pass-through routes (issue 32): what reaches the upstream, what comes back.

* Every pass-through route forwards only the fields its endpoint defines plus the upstream's
  ``extra_body_fields``: server-side extensions (``chat_template``, ``prompt_embeds``,
  ``guided_regex``) and destination fields never reach the upstream.
* Upstream response headers pass through one allowlist (``wire.headers``): no ``Set-Cookie``, no
  ``Access-Control-*``, no ``Server``/``Via``/``X-Powered-By``; toolshim's own CORS still works.
* A form body (``multipart/form-data``, ``application/x-www-form-urlencoded``) is a 415.
* Model names are bounded in size before any lookup, and every cache keyed by them in count.
* Credentials inside a ``base_url`` work alone, are refused beside an ``Authorization`` header, and
  are masked wherever they could be printed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest
from toolshim.config.allowlist import PASSTHROUGH_FIELDS
from toolshim.config.loading import describe, load_rules
from toolshim.config.rules import MAX_MODEL_NAME_CHARS, RESOLVE_CACHE_SIZE, RulesError
from toolshim.config.settings import _is_loopback, is_loopback
from toolshim.observe.logthrottle import LogThrottle
from toolshim.observe.redact import REDACTOR
from toolshim.server.handlers import PASSTHROUGH_PATHS
from toolshim.server.state import STATE

from tests.conftest import write_rules
from tests.fakes import FakeUpstream, Reply, sse

APP = "https://app.example"
# A legitimate body per route (model "m"), as a client of that endpoint sends it.
ROUTES: dict[str, dict[str, Any]] = {
    "/v1/completions": {"model": "m", "prompt": "2+2=", "max_tokens": 3, "temperature": 0},
    "/v1/embeddings": {"model": "m", "input": "hello", "dimensions": 8, "encoding_format": "float"},
    "/v1/moderations": {"model": "m", "input": "hello"},
    "/v1/rerank": {"model": "m", "query": "q", "documents": ["a", "b"], "top_n": 1},
    "/v1/score": {"model": "m", "text_1": "a", "text_2": "b"},
    "/v1/audio/speech": {"model": "m", "input": "hello", "voice": "alloy", "response_format": "mp3"},
    "/v1/images/generations": {"model": "m", "prompt": "a cat", "size": "256x256", "n": 1},
    "/v1/responses": {"model": "m", "input": "hi", "temperature": 0.2, "tools": [{"type": "web_search_preview"}]},
}
# What local servers execute or read, and what would steer the call: never forwarded unless allowed.
ODD_FIELDS: dict[str, Any] = {
    "chat_template": "{{ cycler.__init__.__globals__ }}",
    "chat_template_kwargs": {"x": 1},
    "prompt_embeds": "AAAA",
    "guided_regex": ".*",
    "regex": ".*",
    "grammar": "root ::= .*",
    "top_k": 40,
    "api_base": "http://attacker.invalid",
    "extra_body": {"x": 1},
    "messages": [{"role": "user", "content": "hi"}],
}
PASSTHROUGH_RULES = [{"match": "m", "upstream": "up", "tool_mode": "native", "responses_passthrough": True}]


def test_every_passthrough_route_has_a_field_list() -> None:
    assert {path.removeprefix("/v1") for path in PASSTHROUGH_PATHS} | {"/responses"} == set(PASSTHROUGH_FIELDS)
    assert set(ROUTES) == {*PASSTHROUGH_PATHS, "/v1/responses"}


@pytest.mark.parametrize("path", sorted(ROUTES))
async def test_odd_fields_do_not_reach_the_upstream(start_proxy: Any, fake_upstream: FakeUpstream, path: str) -> None:
    fake_upstream.script(Reply(body={"ok": True}))
    proxy = await start_proxy(models=PASSTHROUGH_RULES)
    async with (
        aiohttp.ClientSession() as session,
        session.post(proxy.url + path, json={**ROUTES[path], **ODD_FIELDS}) as resp,
    ):
        assert resp.status == 200, await resp.text()
    assert fake_upstream.paths == [path]
    assert fake_upstream.requests == [ROUTES[path]]


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/embeddings", "/v1/responses"])
async def test_extra_body_fields_extend_every_route(start_proxy: Any, fake_upstream: FakeUpstream, path: str) -> None:
    fake_upstream.script(Reply(body={"ok": True}))
    proxy = await start_proxy(models=PASSTHROUGH_RULES, upstream_extra={"extra_body_fields": ["top_k"]})
    async with (
        aiohttp.ClientSession() as session,
        session.post(proxy.url + path, json={**ROUTES[path], **ODD_FIELDS}) as resp,
    ):
        assert resp.status == 200, await resp.text()
    assert fake_upstream.requests == [{**ROUTES[path], "top_k": 40}]


UPSTREAM_HEADERS = {
    "Set-Cookie": "session=upstream; Path=/",
    "Set-Cookie2": "old=style",
    "Access-Control-Allow-Origin": "*",
    "Access-Control-Allow-Credentials": "true",
    "Access-Control-Expose-Headers": "*",
    "Server": "llama.cpp",
    "Via": "1.1 internal-gateway",
    "X-Powered-By": "PHP/5.4",
    "OpenAI-Organization": "org-operator",
    "X-RateLimit-Remaining-Requests": "99",
    "OpenAI-Processing-Ms": "12",
}
DROPPED = [n for n in UPSTREAM_HEADERS if n.lower().startswith(("set-", "access-", "via", "x-powered", "openai-org"))]


def _replies(stream: bool) -> Reply:
    if stream:
        pieces = [sse({"choices": [{"index": 0, "text": "hi", "finish_reason": "stop"}]}), sse("[DONE]")]
        return Reply(pieces=pieces, headers=UPSTREAM_HEADERS)
    return Reply(body={"object": "text_completion", "choices": []}, headers=UPSTREAM_HEADERS)


@pytest.mark.parametrize("stream", [False, True])
async def test_upstream_cookies_and_cors_headers_are_not_relayed(
    start_proxy: Any, fake_upstream: FakeUpstream, stream: bool
) -> None:
    fake_upstream.script(_replies(stream))
    proxy = await start_proxy(models=PASSTHROUGH_RULES)
    body = {**ROUTES["/v1/completions"], "stream": stream}
    async with aiohttp.ClientSession() as session, session.post(proxy.url + "/v1/completions", json=body) as resp:
        assert resp.status == 200
        await resp.read()
        for name in DROPPED:
            assert name not in resp.headers, name
        assert resp.headers.get("Server", "") != "llama.cpp"
        assert resp.headers["X-RateLimit-Remaining-Requests"] == "99"
        assert resp.headers["OpenAI-Processing-Ms"] == "12"
        assert resp.headers["Content-Type"].startswith("text/event-stream" if stream else "application/json")
        assert len(resp.headers["X-Request-Id"]) == 32  # toolshim's own id


@pytest.mark.parametrize("path", ["/v1/completions", "/v1/responses"])
async def test_toolshim_cors_replaces_the_upstreams(start_proxy: Any, fake_upstream: FakeUpstream, path: str) -> None:
    fake_upstream.script(Reply(body={"ok": True}, headers=UPSTREAM_HEADERS))
    proxy = await start_proxy(models=PASSTHROUGH_RULES, allowed_origins=(APP,))
    async with (
        aiohttp.ClientSession() as session,
        session.post(proxy.url + path, json=ROUTES[path], headers={"Origin": APP}) as resp,
    ):
        assert resp.status == 200
        assert resp.headers.getall("Access-Control-Allow-Origin") == [APP]
        assert resp.headers["Access-Control-Expose-Headers"] == "X-Request-Id"
        assert "Access-Control-Allow-Credentials" not in resp.headers
        assert "Set-Cookie" not in resp.headers


@pytest.mark.parametrize(
    "content_type",
    ["application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "Application/X-WWW-Form-Urlencoded"],
)
@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/embeddings", "/v1/responses"])
async def test_form_bodies_are_refused(
    start_proxy: Any, fake_upstream: FakeUpstream, path: str, content_type: str
) -> None:
    proxy = await start_proxy(models=PASSTHROUGH_RULES)
    data = b'{"model": "m", "input": "hi", "messages": [{"role": "user", "content": "hi"}]}'
    async with (
        aiohttp.ClientSession() as session,
        session.post(proxy.url + path, data=data, headers={"Content-Type": content_type}) as resp,
    ):
        assert resp.status == 415
        error = (await resp.json())["error"]
        assert error["code"] == "unsupported_media_type" and "application/json" in error["message"]
    assert fake_upstream.requests == []


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/json; charset=utf-8"])
async def test_json_under_other_content_types_is_read(
    start_proxy: Any, fake_upstream: FakeUpstream, content_type: str | None
) -> None:
    proxy = await start_proxy(models=PASSTHROUGH_RULES)
    data = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
    headers = {"Content-Type": content_type} if content_type else {}
    async with (
        aiohttp.ClientSession() as session,
        session.post(proxy.url + "/v1/chat/completions", data=data, headers=headers) as resp,
    ):
        assert resp.status == 200, await resp.text()


NAME_PATHS = ["/v1/chat/completions", "/v1/responses", "/v1/completions", "/v1/embeddings"]


async def test_long_model_names_are_refused_before_any_lookup(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    proxy = await start_proxy(models=[{"match": "*", "upstream": "up", "tool_mode": "auto"}])
    rules = proxy.app[STATE].runtime.rules
    body = {"messages": [{"role": "user", "content": "hi"}], "input": "hi", "prompt": "hi"}
    async with aiohttp.ClientSession() as session:
        for i in range(40):
            name = f"{i}-" + "m" * (64 * 1024)
            async with session.post(proxy.url + NAME_PATHS[i % 4], json={**body, "model": name}) as resp:
                assert resp.status == 400
                error = (await resp.json())["error"]
                assert error["param"] == "model"  # chat's schema says so too (max_length), with its own code
                assert error["code"] == "model_name_too_long" or NAME_PATHS[i % 4] == "/v1/chat/completions"
                assert len(error["message"]) < 200
        async with session.get(proxy.base_url + "/models/" + "m" * 1000) as resp:
            assert resp.status == 400
        name = "m" * MAX_MODEL_NAME_CHARS  # the limit itself is served
        async with session.post(proxy.base_url + "/chat/completions", json={**body, "model": name}) as resp:
            assert resp.status == 200
    assert rules.cache_size() == 1
    assert fake_upstream.requests == [{"model": name, "messages": body["messages"]}]
    assert proxy.app[STATE].auto_emulate_until == {}


def test_resolution_cache_is_bounded_by_count_and_size(tmp_path: Path) -> None:
    rules = load_rules(write_rules(tmp_path, "http://127.0.0.1:9/v1", [{"match": "*", "upstream": "up"}]))
    for i in range(RESOLVE_CACHE_SIZE + 500):
        assert rules.resolve(f"{i}-".ljust(MAX_MODEL_NAME_CHARS, "x")) is not None
    assert rules.cache_size() == RESOLVE_CACHE_SIZE
    rules = load_rules(write_rules(tmp_path, "http://127.0.0.1:9/v1", [{"match": "*", "upstream": "up"}]))
    for i in range(40):
        assert rules.resolve(f"{i}-" + "x" * (1 << 20)) is not None  # matched, never remembered
    assert rules.cache_size() == 0


def test_other_text_keyed_memories_are_bounded() -> None:
    _is_loopback.cache_clear()
    assert not is_loopback("a" * 100_000)
    assert _is_loopback.cache_info().currsize == 0
    throttle = LogThrottle(60)
    for i in range(1000):
        throttle.admit(f"{i} " + "x" * 100_000)
    assert len(throttle._kinds) <= 256 and all(len(kind) <= 200 for kind in throttle._kinds)


@pytest.mark.parametrize("extra", [{"api_key_env": "UP_KEY"}, {"headers": {"authorization": "Bearer x"}}])
def test_credentials_in_base_url_and_an_authorization_header_are_refused(tmp_path: Path, extra: dict[str, Any]) -> None:
    path = write_rules(tmp_path, "http://user:pa55@127.0.0.1:9/v1", [{"match": "*", "upstream": "up"}], extra)
    with pytest.raises(RulesError, match=r"upstreams\.up.*base_url carries credentials") as info:
        load_rules(path)
    assert "pa55" not in str(info.value)


async def test_credentials_in_base_url_alone_work_and_stay_masked(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    url = fake_upstream.url.replace("http://", "http://user:pa55word@")
    rules = load_rules(write_rules(tmp_path, url, [{"match": "*", "upstream": "up"}]))
    assert "pa55word" not in describe(rules) and "user:***@" in describe(rules)
    proxy = await start_proxy(models=[{"match": "*", "upstream": "up"}], upstream_extra={"base_url": url})
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    async with (
        aiohttp.ClientSession() as session,
        session.post(proxy.base_url + "/chat/completions", json=body) as resp,
    ):
        assert resp.status == 200, await resp.text()
    assert fake_upstream.headers[0]["Authorization"] == "Basic dXNlcjpwYTU1d29yZA=="
    assert "pa55word" not in REDACTOR.redact("the upstream said pa55word")
