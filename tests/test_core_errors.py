"""Every error the proxy reports: the HTTP status and the exact OpenAI error body.

Request errors (400/404/413), upstream failures before the answer starts (502/504 and the
upstream's own 4xx/5xx, passed through), failures in the middle of a stream (an SSE error
event, never a hang or a clean close) and clients that leave mid-stream.
"""

from __future__ import annotations

import asyncio
import io
import json
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
import openai
import pytest
from aiohttp import web

from tests.conftest import free_port
from tests.fakes import FakeUpstream, Reply, chunk, sse, text_stream

MESSAGES = [{"role": "user", "content": "hi"}]
OK_BODY = {"model": "m", "messages": MESSAGES}


def assert_error(
    body: Any, *, code: str | None, type_: str | None = None, param: str | None = None, message: str | None = None
) -> dict[str, Any]:
    """The body is exactly ``{"error": {message, type, param, code}}`` with the given values."""
    assert isinstance(body, dict) and set(body) == {"error"}, body
    err = body["error"]
    assert set(err) == {"message", "type", "param", "code"}, err
    assert isinstance(err["message"], str) and err["message"]
    assert err["code"] == code
    assert err["param"] == param
    if type_ is not None:
        assert err["type"] == type_
    if message is not None:
        assert message in err["message"], err["message"]
    return err


async def post(url: str, **kwargs: Any) -> tuple[int, Any]:
    async with aiohttp.ClientSession() as session, session.post(url, **kwargs) as resp:
        text = await resp.text()
        try:
            return resp.status, json.loads(text)
        except ValueError:
            return resp.status, text


async def read_stream(url: str, body: dict[str, Any]) -> tuple[int, list[Any]]:
    """POST a streaming request; the status and every ``data:`` payload (JSON-decoded but [DONE])."""
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as resp:
        raw = (await resp.read()).decode()
    if resp.status != 200:
        return resp.status, [json.loads(raw)]
    events = [e.removeprefix("data: ") for e in raw.split("\n\n") if e]
    return resp.status, [e if e == "[DONE]" else json.loads(e) for e in events]


@asynccontextmanager
async def custom_upstream(handler: Callable[[web.Request], Awaitable[web.StreamResponse]]) -> AsyncIterator[str]:
    """An upstream whose behaviour the test writes by hand (abrupt closes, hangs mid-stream)."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app, handler_cancellation=True)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        await runner.cleanup()


# --- the client's request ---------------------------------------------------------------------


@pytest.mark.parametrize("raw", [b"{not json", b"", b"   ", b'{"model": "m",', b"\xff\xfe"])
async def test_invalid_json_is_400(start_proxy: Any, raw: bytes) -> None:
    proxy = await start_proxy()
    status, body = await post(
        proxy.base_url + "/chat/completions", data=raw, headers={"Content-Type": "application/json"}
    )
    assert status == 400
    assert_error(body, code="invalid_request", type_="invalid_request_error")


@pytest.mark.parametrize(
    ("body", "param"),
    [
        ({"model": "m"}, "messages"),
        ({"messages": MESSAGES}, "model"),
        ({"model": "m", "messages": []}, "messages"),
        ({"model": "m", "messages": [{"role": "robot", "content": "x"}]}, "messages[0].role"),
        ({"model": "m", "messages": [{"content": "x"}]}, "messages[0].role"),
        ({"model": 42, "messages": MESSAGES}, "model"),
        ({"model": ["m"], "messages": MESSAGES}, "model"),
        (
            {"model": "m", "messages": MESSAGES, "tools": [{"type": "function", "function": {"parameters": {}}}]},
            "tools[0].function.name",
        ),
        ({"model": "m", "messages": MESSAGES, "stream": "yes"}, "stream"),
        ({"model": "m", "messages": MESSAGES, "stream_options": [1]}, "stream_options"),
        ({"model": "m", "messages": "hi"}, "messages"),
    ],
)
async def test_bad_field_is_400_naming_it(
    start_proxy: Any, fake_upstream: FakeUpstream, body: dict[str, Any], param: str
) -> None:
    proxy = await start_proxy()
    status, answer = await post(proxy.base_url + "/chat/completions", json=body)
    assert status == 400
    err = assert_error(answer, code="invalid_request", type_="invalid_request_error", param=param)
    assert param in err["message"]
    assert fake_upstream.requests == []  # rejected before any upstream call


async def test_body_not_an_object_is_400(start_proxy: Any) -> None:
    proxy = await start_proxy()
    status, body = await post(proxy.base_url + "/chat/completions", json=[OK_BODY])
    assert status == 400
    assert_error(body, code="invalid_request", type_="invalid_request_error")


async def test_unknown_model_is_404(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    proxy = await start_proxy(models=[{"match": "gpt-*", "upstream": "up"}])
    status, body = await post(proxy.base_url + "/chat/completions", json={**OK_BODY, "model": "llama-3"})
    assert status == 404
    assert_error(body, code="model_not_found", type_="invalid_request_error", param="model", message="llama-3")
    async with openai.AsyncOpenAI(base_url=proxy.base_url, api_key="x", max_retries=0) as client:
        with pytest.raises(openai.NotFoundError) as info:
            await client.chat.completions.create(model="llama-3", messages=MESSAGES, stream=True)
    assert info.value.code == "model_not_found"
    assert fake_upstream.requests == []


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
async def test_body_over_limit_is_413(start_proxy: Any, fake_upstream: FakeUpstream, chunked: bool) -> None:
    proxy = await start_proxy(max_body_bytes=4096)
    raw = json.dumps({**OK_BODY, "messages": [{"role": "user", "content": "x" * 20_000}]}).encode()

    async def pieces() -> AsyncIterator[bytes]:
        for i in range(0, len(raw), 1000):
            yield raw[i : i + 1000]

    status, body = await post(
        proxy.base_url + "/chat/completions",
        data=pieces() if chunked else raw,
        headers={"Content-Type": "application/json"},
    )
    assert status == 413
    assert_error(body, code="request_too_large", type_="invalid_request_error", message="4096")
    assert fake_upstream.requests == []
    padding = 4096 - len(json.dumps({**OK_BODY, "messages": [{"role": "user", "content": ""}]}).encode())
    at_limit = json.dumps({**OK_BODY, "messages": [{"role": "user", "content": "x" * padding}]}).encode()
    assert len(at_limit) == 4096
    status, _ = await post(
        proxy.base_url + "/chat/completions", data=at_limit, headers={"Content-Type": "application/json"}
    )
    assert status == 200  # exactly at the limit is fine


async def test_body_over_aiohttp_default_but_under_limit_is_accepted(
    start_proxy: Any, fake_upstream: FakeUpstream
) -> None:
    """aiohttp caps bodies at 1 MiB unless told otherwise; the proxy's default limit is 10 MiB."""
    proxy = await start_proxy()
    content = "y" * (3 * 1024 * 1024)
    raw = json.dumps({**OK_BODY, "messages": [{"role": "user", "content": content}]}).encode()
    # a file-like body: aiohttp warns (ResourceWarning) that a large bytes body may block the loop
    status, _ = await post(
        proxy.base_url + "/chat/completions", data=io.BytesIO(raw), headers={"Content-Type": "application/json"}
    )
    assert status == 200
    assert fake_upstream.requests[0]["messages"][0]["content"] == content


async def test_unknown_path_and_method_are_openai_shaped(start_proxy: Any) -> None:
    proxy = await start_proxy()
    async with aiohttp.ClientSession() as session:
        async with session.get(proxy.url + "/nope") as resp:
            assert resp.status == 404
            assert_error(await resp.json(), code="not_found")
        async with session.get(proxy.base_url + "/chat/completions") as resp:
            assert resp.status == 404  # as OpenAI answers: "Invalid URL (GET /v1/chat/completions)"
            err = assert_error(await resp.json(), code="not_found")
            assert "GET /v1/chat/completions" in err["message"]


# --- the upstream fails before the answer starts ----------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
async def test_upstream_unreachable_is_502(start_proxy: Any, stream: bool) -> None:
    closed = f"http://127.0.0.1:{free_port()}/v1"
    proxy = await start_proxy(upstream_extra={"base_url": closed})
    started = time.monotonic()
    status, body = await post(proxy.base_url + "/chat/completions", json={**OK_BODY, "stream": stream})
    assert status == 502
    err = assert_error(body, code="upstream_unreachable", type_="upstream_error")
    assert "127.0.0.1" not in err["message"]  # names the upstream, not its address
    assert time.monotonic() - started < 2


@pytest.mark.parametrize("stream", [False, True])
async def test_upstream_timeout_is_504(start_proxy: Any, fake_upstream: FakeUpstream, stream: bool) -> None:
    fake_upstream.script(Reply(hang=2, body={}))
    proxy = await start_proxy(upstream_extra={"read_timeout": 0.3})
    started = time.monotonic()
    status, body = await post(proxy.base_url + "/chat/completions", json={**OK_BODY, "stream": stream})
    assert status == 504
    assert_error(body, code="upstream_timeout", type_="upstream_error")
    assert time.monotonic() - started < 1.5


async def test_total_timeout_caps_a_slow_stream(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    """The optional overall cap ends a stream that keeps trickling within the idle timeout."""
    fake_upstream.script(Reply(pieces=text_stream(["x"] * 40), delay=0.05))
    proxy = await start_proxy(upstream_extra={"read_timeout": 1, "total_timeout": 0.5})
    started = time.monotonic()
    status, events = await read_stream(proxy.base_url + "/chat/completions", {**OK_BODY, "stream": True})
    assert status == 200
    assert_error(events[-1], code="upstream_timeout")
    assert time.monotonic() - started < 1.5


UPSTREAM_ERRORS = [
    pytest.param(
        429,
        {
            "error": {
                "message": "Rate limit reached for requests",
                "type": "requests",
                "param": None,
                "code": "rate_limit_exceeded",
            }
        },
        None,
        {
            "message": "Rate limit reached for requests",
            "type": "requests",
            "param": None,
            "code": "rate_limit_exceeded",
        },
        id="openai-shaped-429",
    ),
    pytest.param(
        400,
        {"error": {"message": "tools not supported", "type": "invalid_request_error", "param": "tools", "code": None}},
        None,
        {"message": "tools not supported", "type": "invalid_request_error", "param": "tools", "code": None},
        id="openai-shaped-400",
    ),  # an OpenAI-shaped error is relayed as it was
    pytest.param(
        422,
        {"detail": "Model is still loading"},
        None,
        {"message": "Model is still loading", "type": "invalid_request_error", "param": None, "code": "upstream_error"},
        id="fastapi-detail-422",
    ),
    pytest.param(
        401,
        {"error": "invalid token"},
        None,
        {"message": "invalid token", "type": "authentication_error", "param": None, "code": "upstream_error"},
        id="error-string-401",
    ),
    pytest.param(
        500,
        "Internal Server Error",
        "text/plain",
        {"message": "Internal Server Error", "type": "upstream_error", "param": None, "code": "upstream_error"},
        id="plain-text-500",
    ),
    pytest.param(
        503,
        "",
        "text/plain",
        {"message": "upstream returned HTTP 503", "type": "upstream_error", "param": None, "code": "upstream_error"},
        id="empty-503",
    ),
]


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize(("status", "body", "content_type", "expected"), UPSTREAM_ERRORS)
async def test_upstream_http_error_passed_through(
    start_proxy: Any,
    fake_upstream: FakeUpstream,
    stream: bool,
    status: int,
    body: Any,
    content_type: str | None,
    expected: dict[str, Any],
) -> None:
    fake_upstream.script(Reply(status=status, body=body, content_type=content_type))
    proxy = await start_proxy()
    got_status, got = await post(proxy.base_url + "/chat/completions", json={**OK_BODY, "stream": stream})
    assert got_status == status
    assert got == {"error": expected}


async def test_upstream_fastapi_validation_detail_list(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    detail = [{"loc": ["body", "messages"], "msg": "field required", "type": "missing"}]
    fake_upstream.script(Reply(status=422, body={"detail": detail}))
    proxy = await start_proxy()
    status, body = await post(proxy.base_url + "/chat/completions", json=OK_BODY)
    assert status == 422
    err = assert_error(body, code="upstream_error", type_="invalid_request_error")
    assert json.loads(err["message"]) == detail


async def test_sdk_sees_upstream_status_as_its_exception(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(
        Reply(
            status=429,
            body={
                "error": {
                    "message": "slow down",
                    "type": "rate_limit_error",
                    "code": "rate_limit_exceeded",
                    "param": None,
                }
            },
        )
    )
    proxy = await start_proxy()
    async with openai.AsyncOpenAI(base_url=proxy.base_url, api_key="x", max_retries=0) as client:
        with pytest.raises(openai.RateLimitError) as info:
            await client.chat.completions.create(model="m", messages=MESSAGES)
    assert info.value.status_code == 429 and info.value.code == "rate_limit_exceeded"
    assert "slow down" in info.value.message


# --- the upstream fails in the middle of a stream ---------------------------------------------


async def _first_chunk_then(
    request: web.Request,
    then: Callable[[web.StreamResponse], Awaitable[None]],
) -> web.StreamResponse:
    await request.read()
    resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await resp.prepare(request)
    await resp.write(sse(chunk({"role": "assistant", "content": "partial"})).encode())
    await then(resp)
    return resp


async def _abrupt_close(request: web.Request) -> web.StreamResponse:
    async def close(resp: web.StreamResponse) -> None:
        await asyncio.sleep(0.05)
        assert request.transport is not None
        request.transport.close()  # the server process died: the chunked body never ends

    return await _first_chunk_then(request, close)


async def _garbage_then_hang(request: web.Request) -> web.StreamResponse:
    async def hang(resp: web.StreamResponse) -> None:
        await resp.write(b"\x00\xffgarbage without a line end")
        await asyncio.sleep(10)

    return await _first_chunk_then(request, hang)


# a dropped connection is not "unreachable": the upstream was reached, then it went away
@pytest.mark.parametrize(
    ("handler", "code"), [(_abrupt_close, "upstream_disconnected"), (_garbage_then_hang, "upstream_timeout")]
)
async def test_mid_stream_failure_ends_with_error_event(start_proxy: Any, handler: Any, code: str) -> None:
    async with custom_upstream(handler) as url:
        proxy = await start_proxy(upstream_extra={"base_url": url, "read_timeout": 0.3})
        started = time.monotonic()
        status, events = await read_stream(proxy.base_url + "/chat/completions", {**OK_BODY, "stream": True})
        assert status == 200
        assert events[0]["choices"][0]["delta"]["content"] == "partial"
        assert "[DONE]" not in events  # a failed stream must not look complete
        assert_error(events[-1], code=code, type_="upstream_error")
        assert time.monotonic() - started < 2

        async with openai.AsyncOpenAI(base_url=proxy.base_url, api_key="x", max_retries=0) as client:
            stream = await client.chat.completions.create(model="m", messages=MESSAGES, stream=True)
            seen: list[str] = []
            with pytest.raises(openai.APIError):
                async for c in stream:
                    seen.append(c.choices[0].delta.content or "")
        assert seen == ["partial"]


async def test_stream_cut_without_done_or_finish_is_an_error(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    """An upstream that closes cleanly mid-answer (no finish_reason, no [DONE]) was cut short."""
    fake_upstream.script(Reply(pieces=text_stream(["a", "b"])[:2]))
    proxy = await start_proxy()
    status, events = await read_stream(proxy.base_url + "/chat/completions", {**OK_BODY, "stream": True})
    assert status == 200
    assert "[DONE]" not in events
    assert_error(events[-1], code="upstream_protocol_error", type_="upstream_error")


async def test_stream_with_finish_but_no_done_completes(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    """Servers that finish the answer but omit [DONE] are tolerated: the proxy adds it."""
    fake_upstream.script(Reply(pieces=text_stream(["a", "b"], done=False)))
    proxy = await start_proxy()
    status, events = await read_stream(proxy.base_url + "/chat/completions", {**OK_BODY, "stream": True})
    assert status == 200
    assert events[-1] == "[DONE]"
    assert events[-2]["choices"][0]["finish_reason"] == "stop"


async def test_client_disconnect_cancels_upstream(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    """The upstream would stream for 10 s; it sees the disconnect within about a second."""
    fake_upstream.script(Reply(pieces=text_stream(["tok"] * 200), delay=0.05))
    proxy = await start_proxy()
    async with aiohttp.ClientSession() as session:
        resp = await session.post(proxy.base_url + "/chat/completions", json={**OK_BODY, "stream": True})
        assert resp.status == 200
        await resp.content.readuntil(b"\n\n")
        await resp.content.readuntil(b"\n\n")
        resp.close()  # drop the connection
    closed_at = time.monotonic()
    while not (fake_upstream.disconnected and fake_upstream.disconnected[0]):
        assert time.monotonic() - closed_at < 1.5, "upstream still streaming after the client left"
        await asyncio.sleep(0.02)
    assert fake_upstream.pieces_sent[0] < 60


async def test_client_disconnect_cancels_non_stream_upstream(start_proxy: Any) -> None:
    """A client that gives up on a slow non-streaming answer frees the upstream request too."""
    cancelled = asyncio.Event()

    async def slow(request: web.Request) -> web.StreamResponse:
        await request.read()
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return web.json_response({})

    async with custom_upstream(slow) as url:
        proxy = await start_proxy(upstream_extra={"base_url": url})
        with pytest.raises(TimeoutError):
            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=0.3)) as session:
                await session.post(proxy.base_url + "/chat/completions", json=OK_BODY)
        await asyncio.wait_for(cancelled.wait(), 1.5)


async def test_odd_payload_mid_stream_is_relayed_not_fatal(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    """Native mode does not judge payloads: an odd-shaped event is relayed, and the stream goes on."""
    pieces = [sse(chunk({"role": "assistant", "content": ""})), sse({"choices": 5}), *text_stream(["after"])[1:]]
    fake_upstream.script(Reply(pieces=pieces))
    proxy = await start_proxy()
    async with (
        aiohttp.ClientSession() as session,
        session.post(proxy.base_url + "/chat/completions", json={**OK_BODY, "stream": True}) as resp,
    ):
        assert (await resp.read()).decode() == "".join(pieces)


async def test_unknown_model_404_names_served_models(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    proxy = await start_proxy(
        models=[
            {"match": "gpt-4o", "upstream": "up"},
            {"match": "qwen3", "upstream": "up"},
            {"match": "llama-*", "upstream": "up", "expose": ["llama-3.1-8b"]},
        ]
    )
    status, body = await post(proxy.base_url + "/chat/completions", json={**OK_BODY, "model": "mistral"})
    assert status == 404
    err = assert_error(body, code="model_not_found", type_="invalid_request_error", param="model")
    assert "gpt-4o, qwen3, llama-3.1-8b" in err["message"]


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/chat/completions"),
        ("GET", "/v1/embeddings"),
        ("POST", "/v1/models"),
        ("GET", "/admin/reload"),
        ("GET", "/v1/x"),
    ],
)
async def test_wrong_method_or_unknown_path_is_404(start_proxy: Any, method: str, path: str) -> None:
    proxy = await start_proxy()
    async with aiohttp.ClientSession() as session, session.request(method, proxy.url + path) as resp:
        assert resp.status == 404
        err = assert_error(await resp.json(), code="not_found", type_="invalid_request_error")
    assert f"{method} {path}" in err["message"]


async def test_deeply_nested_json_is_a_400_not_a_500(start_proxy: Any) -> None:
    proxy = await start_proxy()
    body = '{"a": ' * 5000 + "1" + "}" * 5000
    status, answer = await post(
        proxy.base_url + "/chat/completions", data=body.encode(), headers={"Content-Type": "application/json"}
    )
    assert status == 400
    assert_error(answer, code="invalid_request", type_="invalid_request_error")


async def test_lone_surrogate_escape_is_served_and_sent_on_as_valid_json(
    start_proxy: Any, fake_upstream: FakeUpstream
) -> None:
    proxy = await start_proxy()
    body = '{"model": "m", "messages": [{"role": "user", "content": "a\\ud800b"}]}'
    status, _ = await post(
        proxy.base_url + "/chat/completions", data=body.encode(), headers={"Content-Type": "application/json"}
    )
    assert status == 200
    assert fake_upstream.requests[0]["messages"][0]["content"] == "a\ud800b"
