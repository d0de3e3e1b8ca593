"""Security: error messages to clients carry no filesystem path, traceback or credential, from any source.

An upstream (llama.cpp, vLLM, a FastAPI server), a library's exception text or our own rules
loader may name a server file; the client sees ``[path]``, the operator's log keeps the text.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import aiohttp
import pytest
from toolshim.observe.redact import client_message
from toolshim.wire.errors import ProxyError, render_error

from tests.conftest import write_rules
from tests.fakes import FakeUpstream, Reply, sse

BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
SERVER_PATHS = ("/models/private/llama-3-8b.Q4_K_M.gguf", "/srv/app/server.py", "/home/svc/.cache")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("failed to open /models/qwen/q4.gguf: No such file", "failed to open [path]: No such file"),
        ('File "/app/server.py", line 3, in load', 'File "[path]", line 3, in load'),
        ("cannot read ~/rules/x.json5", "cannot read [path]"),
        ("missing C:\\Users\\bob\\model.bin now", "missing [path] now"),
        ("see /server.py", "see [path]"),
        ("boom\nTraceback (most recent call last):\n  File x", "boom"),
        ("via http://user:pw@host:8000/v1/x", "via http://***@host:8000/v1/x"),
        ("header Bearer abcdefgh12345678", "header Bearer ***"),
        ("key sk-abcdefghijklmnop1234 rejected", "key *** rejected"),
        ("url?api_key=abc123xyz&x=1", "url?api_key=***&x=1"),
    ],
)
def test_client_message_scrubs(text: str, expected: str) -> None:
    assert client_message(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "Invalid URL (GET /v1/foo); see /v1/chat/completions, /v1/models, /healthz, /metrics",
        "The model 'meta-llama/Llama-3-8B' does not exist or is not served by this proxy.",
        "Incorrect or missing API key: send 'Authorization: Bearer <key>'.",
        "see https://platform.openai.com/docs/guides/error-codes",
        "the schema at #/properties/city is invalid; close </tool_call> first; 1/2/3 done",
    ],
)
def test_client_message_keeps_ordinary_text(text: str) -> None:
    assert client_message(text) == text


async def post(url: str, body: dict[str, Any]) -> tuple[int, str]:
    async with aiohttp.ClientSession() as session, session.post(url + "/chat/completions", json=body) as resp:
        return resp.status, await resp.text()


@pytest.mark.parametrize(
    "reply",
    [
        Reply(status=500, body={"error": {"message": f"failed to load model '{SERVER_PATHS[0]}'"}}),
        Reply(status=500, body={"detail": f'File "{SERVER_PATHS[1]}", line 12, in handler: KeyError'}),
        Reply(status=400, body=f"cannot write {SERVER_PATHS[2]}/tmp-1: Permission denied", content_type="text/plain"),
    ],
)
async def test_upstream_errors_reach_the_client_without_server_paths(
    start_proxy: Any, fake_upstream: FakeUpstream, reply: Reply
) -> None:
    proxy = await start_proxy()
    fake_upstream.script(reply)
    status, text = await post(proxy.base_url, BODY)
    assert status == reply.status and "[path]" in text
    assert not any(path in text for path in SERVER_PATHS), text


async def test_mid_stream_upstream_error_has_no_server_path(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    proxy = await start_proxy()
    event = sse({"error": {"message": f"decode failed reading {SERVER_PATHS[0]}"}})
    fake_upstream.script(Reply(pieces=[event]))
    status, text = await post(proxy.base_url, {**BODY, "stream": True})
    assert status in (200, 502) and "[path]" in text and SERVER_PATHS[0] not in text


async def test_invalid_rules_on_reload_answer_without_the_rules_path(
    start_proxy: Any, fake_upstream: FakeUpstream, tmp_path: Path
) -> None:
    proxy = await start_proxy(admin_key="adm-key-123")
    rules = write_rules(tmp_path, fake_upstream.url, [])
    rules.write_text("{ nope")
    async with (
        aiohttp.ClientSession() as session,
        session.post(proxy.url + "/admin/reload", headers={"Authorization": "Bearer adm-key-123"}) as resp,
    ):
        body = await resp.json()
    message = body["error"]["message"]
    assert resp.status == 400 and "old rules keep serving" in message
    assert str(tmp_path) not in message and "rules.json5" not in message


def test_render_error_never_shows_an_exception_text_with_a_path() -> None:
    view = render_error(OSError(13, "Permission denied", "/var/lib/toolshim/db.sqlite"))
    assert view.status == 500 and "/var/lib" not in str(view.body)
    view = render_error(ProxyError("store at /var/lib/toolshim/db.sqlite failed"))
    assert view.body["error"]["message"] == "store at [path] failed"
