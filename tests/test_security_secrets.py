"""Security: no configured secret reaches a client or a log line, on any path, at any level.

Secrets: upstream keys (``api_key_env``), upstream header values, client keys. Upstream error
texts are reduced to a short message (no HTML page, no traceback, no internal URL).
"""

from __future__ import annotations

import logging
from typing import Any

import aiohttp
import openai
import pytest
from toolshim.observe.redact import Redactor, short_upstream_message

from tests.fakes import FakeUpstream, Reply, chunk, sse, text_stream
from tests.formats.tools import OPENAI_TOOLS

KEY = "sk-upstream-secret-0123456789"
HEADER_SECRET = "tenant-token-abcdef"
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
TOOLS = [OPENAI_TOOLS["get_weather"]]


@pytest.fixture
async def proxy(start_proxy: Any, monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Any:
    monkeypatch.setenv("UPSTREAM_KEY", KEY)
    mode = getattr(request, "param", "native")
    return await start_proxy(
        models=[{"match": "*", "upstream": "up", "tool_mode": mode}],
        upstream_extra={"api_key_env": "UPSTREAM_KEY", "headers": {"X-Tenant": HEADER_SECRET}},
    )


def leaked(text: str) -> list[str]:
    return [s for s in (KEY, HEADER_SECRET) if s in text]


async def post_raw(proxy: Any, body: dict[str, Any]) -> tuple[int, str]:
    async with (
        aiohttp.ClientSession() as session,
        session.post(proxy.base_url + "/chat/completions", json=body) as resp,
    ):
        return resp.status, await resp.text()


ECHO = f"invalid key {KEY} for tenant {HEADER_SECRET}"


@pytest.mark.parametrize("proxy", ["native", "hermes"], indirect=True)
async def test_mid_stream_error_event_is_masked_for_client_and_log(
    proxy: Any, fake_upstream: FakeUpstream, caplog: pytest.LogCaptureFixture
) -> None:
    fake_upstream.script(
        Reply(
            pieces=[
                sse(chunk({"role": "assistant", "content": ""})),
                sse(chunk({"content": "partial"})),
                sse({"error": {"message": ECHO, "type": "server_error"}}),
            ]
        )
    )
    with caplog.at_level(logging.DEBUG):
        status, text = await post_raw(proxy, {**BODY, "stream": True, "tools": TOOLS})
    assert status == 200 and "***" in text
    assert leaked(text) == [] and leaked(caplog.text) == []


@pytest.mark.parametrize("stream", [False, True])
async def test_upstream_error_body_is_masked(
    proxy: Any, fake_upstream: FakeUpstream, stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    fake_upstream.script(Reply(status=401, body={"error": {"message": ECHO, "type": "invalid_request_error"}}))
    with caplog.at_level(logging.DEBUG):
        status, text = await post_raw(proxy, {**BODY, "stream": stream})
    assert status == 401 and "***" in text and leaked(text) == [] and leaked(caplog.text) == []


async def test_html_error_page_traceback_and_urls_are_reduced(proxy: Any, fake_upstream: FakeUpstream) -> None:
    fake_upstream.script(
        Reply(
            status=502,
            body="<!DOCTYPE html><html><body><h1>502 Bad Gateway</h1>"
            "<p>nginx at http://10.1.2.3:8080/internal</p></body></html>",
            content_type="text/html",
        )
    )
    status, text = await post_raw(proxy, BODY)
    assert status == 502 and "HTML error page" in text and "10.1.2.3" not in text and "<html" not in text
    trace = 'model crashed\nTraceback (most recent call last):\n  File "/srv/app/server.py", line 3\nValueError: boom'
    fake_upstream.script(Reply(status=500, body={"detail": trace}))
    status, text = await post_raw(proxy, BODY)
    assert status == 500 and "model crashed" in text and "Traceback" not in text and "/srv/app" not in text


async def test_debug_logs_and_answers_never_carry_a_secret(
    start_proxy: Any, fake_upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Even content logging at DEBUG: a user who pastes a configured key sees it masked in the log."""
    monkeypatch.setenv("UPSTREAM_KEY", KEY)
    proxy = await start_proxy(
        models=[{"match": "*", "upstream": "up", "tool_mode": "hermes"}],
        upstream_extra={"api_key_env": "UPSTREAM_KEY"},
        log_content=True,
    )
    fake_upstream.script(Reply(pieces=text_stream([f"your key is {KEY}"])))
    with caplog.at_level(logging.DEBUG):
        status, text = await post_raw(
            proxy, {**BODY, "tools": TOOLS, "messages": [{"role": "user", "content": f"is {KEY} valid?"}]}
        )
    assert status == 200 and "***" in text and KEY not in text
    assert "rendered prompt" in caplog.text and KEY not in caplog.text


async def test_litellm_errors_are_masked(
    start_proxy: Any, fake_upstream: FakeUpstream, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    monkeypatch.setenv("UPSTREAM_KEY", KEY)
    proxy = await start_proxy(
        models=[{"match": "*", "upstream": "up", "upstream_model": "openai/m"}],
        upstream_extra={"provider": "litellm", "api_key_env": "UPSTREAM_KEY", "headers": {"X-Tenant": HEADER_SECRET}},
    )
    fake_upstream.script(Reply(status=400, body={"error": {"message": ECHO, "type": "invalid_request_error"}}))
    with caplog.at_level(logging.DEBUG):
        async with openai.AsyncOpenAI(base_url=proxy.base_url, api_key="x", max_retries=0) as client:
            with pytest.raises(openai.BadRequestError) as info:
                await client.chat.completions.create(model="m", messages=BODY["messages"])
    assert leaked(str(info.value.body)) == [] and leaked(info.value.message) == []
    assert leaked(caplog.text) == []


def test_redactor_masks_longest_first_and_ignores_short_values() -> None:
    redactor = Redactor()
    redactor.update(["abcdef123", "abcdef123456", "1", None, ""])
    assert redactor.redact("x abcdef123456 y abcdef123 z 1") == "x *** y *** z 1"
    assert redactor.redact_bytes(b"k=abcdef123") == b"k=***"
    assert short_upstream_message("see https://internal.example/x?k=1 now", 400) == "see [url] now"
    assert len(short_upstream_message("x" * 5000, 400)) == 500


CHECK_RULES = """{upstreams: {
  token: {base_url: "https://tok3n-in-user-part@h.example/v1?api_key=qu3ry-secret-1&api-version=2024"},
  basic: {base_url: "http://user:pa55word-x@h.example:8080/v1#fr4gment-secret"},
  path: {base_url: "https://h.example/${PATH_TOKEN}/v1", api_key_env: "CHECK_KEY",
         headers: {"X-Tenant": "${PATH_TOKEN}", "X-Other": "h3ader-secret-2"}}},
 models: [{match: "a", upstream: "token"}, {match: "b", upstream: "basic"},
          {match: "c", upstream: "path", upstream_model: "model-h3ader-secret-2"}]}"""


def test_check_rules_prints_no_credential(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``check-rules`` output is pasted into tickets: a token in a URL's user part, query or fragment,
    its password, and any key or header value (wherever ``${VAR}`` put it) are printed as ``***``."""
    from toolshim.cli import main

    monkeypatch.setenv("PATH_TOKEN", "p4th-token-secret")
    monkeypatch.setenv("CHECK_KEY", "k3y-from-env-secret")
    path = tmp_path / "rules.json5"
    path.write_text(CHECK_RULES)
    assert main(["check-rules", str(path)]) == 0
    out = capsys.readouterr()
    printed = out.out + out.err
    for secret in ("tok3n", "qu3ry", "pa55word", "fr4gment", "p4th-token", "h3ader-secret", "k3y-from-env"):
        assert secret not in printed, secret
    assert "https://***@h.example/v1?api_key=***&api-version=***" in printed
    assert "http://user:***@h.example:8080/v1#***" in printed and "https://h.example/***/v1" in printed
    assert "3 model rules, 3 upstreams: OK" in printed
