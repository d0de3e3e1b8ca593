"""Client authentication and secrets: keys are checked, forwarded only upstream, never shown or logged."""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
import openai
import pytest
from toolshim.config.settings import load_settings
from toolshim.observe.logs import JsonFormatter

from tests.conftest import free_port
from tests.fakes import FakeUpstream, Reply, text_stream

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
UPSTREAM_SECRET = "sk-upstream-0123456789abcdef-SECRET"
CLIENT_SECRET = "client-key-fedcba9876543210-SECRET"


async def call(
    url: str, headers: dict[str, str] | None = None, method: str = "POST", json: Any = BODY
) -> tuple[int, Any]:
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, url, json=json if method == "POST" else None, headers=headers) as resp,
    ):
        return resp.status, await resp.json(content_type=None)


def assert_unauthorized(status: int, body: Any) -> None:
    assert status == 401
    assert set(body) == {"error"}, body
    error = dict(body["error"])
    message = error.pop("message")
    assert isinstance(message, str) and message, body
    assert error == {"type": "invalid_request_error", "param": None, "code": "invalid_api_key"}


@pytest.mark.parametrize(
    "headers",
    [
        None,
        {"Authorization": "Bearer k3"},
        {"Authorization": "Bearer k1x"},
        {"Authorization": "Bearer "},
        {"Authorization": "Basic k1"},
        {"Authorization": "k1"},
    ],
    ids=["none", "wrong", "prefix-of-a-key", "empty", "basic", "no-scheme"],
)
async def test_missing_or_wrong_key_is_401(
    start_proxy: Any, fake_upstream: FakeUpstream, headers: dict[str, str] | None
) -> None:
    proxy = await start_proxy(api_keys=("k1", "k2"))
    assert_unauthorized(*await call(proxy.base_url + "/chat/completions", headers))
    assert_unauthorized(*await call(proxy.base_url + "/models", headers, method="GET"))
    assert_unauthorized(*await call(proxy.base_url + "/embeddings", headers, json={"model": "m", "input": "x"}))
    assert fake_upstream.requests == []


@pytest.mark.parametrize("key", ["k1", "k2"])
async def test_right_key_is_200(start_proxy: Any, fake_upstream: FakeUpstream, key: str) -> None:
    proxy = await start_proxy(api_keys=("k1", "k2"))
    status, body = await call(proxy.base_url + "/chat/completions", {"Authorization": f"Bearer {key}"})
    assert status == 200 and body["choices"][0]["message"]["content"] == "ok"
    # the client's key is for the proxy only: it is never forwarded upstream
    assert "Authorization" not in fake_upstream.headers[0]
    async with openai.AsyncOpenAI(base_url=proxy.base_url, api_key=key, max_retries=0) as client:
        assert (await client.chat.completions.create(**BODY)).choices[0].message.content == "ok"


async def test_sdk_with_wrong_key_gets_authentication_error(start_proxy: Any) -> None:
    proxy = await start_proxy(api_keys=("k1",))
    async with openai.AsyncOpenAI(base_url=proxy.base_url, api_key="nope", max_retries=0) as client:
        with pytest.raises(openai.AuthenticationError) as info:
            await client.chat.completions.create(**BODY, stream=True)
    assert info.value.code == "invalid_api_key"


async def test_health_needs_no_key(start_proxy: Any) -> None:
    proxy = await start_proxy(api_keys=("k1",))
    status, body = await call(proxy.url + "/healthz", method="GET")
    assert (status, body["status"]) == (200, "ok")
    assert (await call(proxy.url + "/readyz", method="GET"))[0] == 200


async def test_no_keys_configured_means_open(start_proxy: Any) -> None:
    proxy = await start_proxy()
    assert (await call(proxy.base_url + "/chat/completions"))[0] == 200


async def test_upstream_key_sent_as_bearer_and_never_echoed(
    start_proxy: Any, fake_upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("TEST_UPSTREAM_KEY", UPSTREAM_SECRET)
    fake_upstream.script(
        Reply(body={"choices": []}),
        Reply(
            status=401,
            body={
                "error": {
                    "message": f"Incorrect API key provided: {UPSTREAM_SECRET}.",
                    "type": "invalid_request_error",
                    "code": "invalid_api_key",
                }
            },
        ),
        Reply(status=401, body=f"bad key {UPSTREAM_SECRET}", content_type="text/plain"),
    )
    proxy = await start_proxy(upstream_extra={"api_key_env": "TEST_UPSTREAM_KEY"})
    assert (await call(proxy.base_url + "/chat/completions"))[0] == 200
    assert fake_upstream.headers[0]["Authorization"] == f"Bearer {UPSTREAM_SECRET}"
    for stream in (False, True):
        status, body = await call(proxy.base_url + "/chat/completions", json={**BODY, "stream": stream})
        assert status == 401
        assert UPSTREAM_SECRET not in str(body)
        assert "***" in body["error"]["message"]  # the echoed key is masked, the rest of the message kept


def _all_log_text(records: list[logging.LogRecord]) -> str:
    """Everything a log handler could print: messages, raw args, extra fields, tracebacks."""
    formatter = JsonFormatter()
    parts = []
    for record in records:
        parts += [
            formatter.format(record),
            repr(record.args),
            repr(getattr(record, "fields", None)),
            repr(record.__dict__),
        ]
    return "\n".join(parts)


async def test_secrets_never_logged(
    start_proxy: Any, fake_upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """At DEBUG, over good, failing and streamed requests, neither key reaches any log record."""
    monkeypatch.setenv("TEST_UPSTREAM_KEY", UPSTREAM_SECRET)
    caplog.set_level(logging.DEBUG)
    fake_upstream.script(
        Reply(body={"choices": []}),
        Reply(pieces=text_stream(["a", "b"])),
        Reply(pieces=text_stream(["a", "b"])[:2]),  # cut short: an error event, logged as a warning
        Reply(status=500, body=f"crash, key={UPSTREAM_SECRET}", content_type="text/plain"),
        Reply(hang=1, body={}),
    )
    proxy = await start_proxy(
        api_keys=(CLIENT_SECRET,), upstream_extra={"api_key_env": "TEST_UPSTREAM_KEY", "read_timeout": 0.3}
    )
    good = {"Authorization": f"Bearer {CLIENT_SECRET}"}
    statuses = [
        (await call(proxy.base_url + "/chat/completions", good))[0],
        (await call(proxy.base_url + "/chat/completions", {"Authorization": f"Bearer {CLIENT_SECRET}x"}))[0],
    ]
    async with aiohttp.ClientSession(headers=good) as session:
        for _ in range(2):
            async with session.post(proxy.base_url + "/chat/completions", json={**BODY, "stream": True}) as resp:
                statuses.append(resp.status)
                await resp.read()
    statuses.append((await call(proxy.base_url + "/chat/completions", good))[0])
    statuses.append((await call(proxy.base_url + "/chat/completions", good))[0])
    closed = await start_proxy(
        api_keys=(CLIENT_SECRET,),
        upstream_extra={"api_key_env": "TEST_UPSTREAM_KEY", "base_url": f"http://127.0.0.1:{free_port()}/v1"},
    )
    statuses.append((await call(closed.base_url + "/chat/completions", good))[0])
    assert statuses == [200, 401, 200, 200, 500, 504, 502]
    # the check below means something only if the requests were logged: access lines and the cut stream's warning
    access = {r.fields["status"] for r in caplog.records if r.name == "toolshim.access"}
    assert {200, 500, 502, 504} <= access, access
    assert any(r.name.startswith("toolshim") and r.levelno == logging.WARNING for r in caplog.records)
    text = _all_log_text(caplog.records)
    assert UPSTREAM_SECRET not in text
    assert CLIENT_SECRET not in text


def test_keys_and_limits_from_environment() -> None:
    settings = load_settings(env={"TOOLSHIM_API_KEYS": " k1, k2,,k3 ", "TOOLSHIM_MAX_BODY_BYTES": "2048"})
    assert settings.api_keys == ("k1", "k2", "k3")
    assert settings.max_body_bytes == 2048
    assert load_settings(env={}).api_keys == ()
    assert load_settings(env={}).max_body_bytes == 10 * 1024 * 1024
    flags = load_settings({"port": 9001}, env={"TOOLSHIM_PORT": "9000", "TOOLSHIM_HOST": "0.0.0.0"})
    assert (flags.port, flags.host) == (9001, "0.0.0.0")  # a flag beats the environment
