"""Security: paths, Host, Origin and network exposure.

* Only a documented set of ``/v1`` endpoints is passed through; dot segments (encoded or not)
  are a 400, any other path a 404, and nothing reaches the upstream (which would get its key).
  Sent with raw sockets: HTTP clients normalise ``..`` away before sending.
* A loopback listener serves only loopback ``Host`` names (DNS rebinding); a browser ``Origin``
  that is not allowed is a 403 before anything is sent upstream.
* ``serve`` refuses a non-loopback address without client keys unless told the exposure is
  intended, and says in one line at start who can use the proxy.
"""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from toolshim.server.middleware import has_dot_segments, host_name

from tests.conftest import write_rules
from tests.fakes import FakeUpstream
from tests.test_server_process import start_serve, stop

KEY = "sk-upstream-secret"
CHAT = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]})


async def raw_request(
    url: str,
    method: str,
    path: str,
    body: str = "",
    headers: dict[str, str] | None = None,
) -> tuple[int, dict[str, Any]]:
    """One HTTP/1.1 request written by hand, the path exactly as given."""
    host_port = url.removeprefix("http://")
    host, port = host_port.split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = {
        "Host": host_port,
        "Content-Type": "application/json",
        "Content-Length": str(len(body.encode())),
        "Connection": "close",
        **(headers or {}),
    }
    writer.write(
        (f"{method} {path} HTTP/1.1\r\n" + "".join(f"{k}: {v}\r\n" for k, v in head.items()) + "\r\n" + body).encode()
    )
    await writer.drain()
    raw = await reader.read()
    writer.close()
    status_line, _, rest = raw.partition(b"\r\n")
    payload = rest.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in rest else b""
    try:
        parsed = json.loads(payload) if payload else {}
    except ValueError:
        parsed = {"raw": payload.decode("utf-8", "replace")}
    return int(status_line.split()[1]), parsed


@pytest.fixture
async def keyed_proxy(start_proxy: Any, monkeypatch: pytest.MonkeyPatch) -> Any:
    monkeypatch.setenv("UPSTREAM_KEY", KEY)
    return await start_proxy(upstream_extra={"api_key_env": "UPSTREAM_KEY"})


@pytest.mark.parametrize(
    "path",
    [
        "/v1/../admin",
        "/v1/%2e%2e/api/create",
        "/v1/..%2fapi/delete",
        "/v1/x/../../secret",
        "/v1/%252e%252e/x",
        "/v1/.%2E/x",
        "/v1/..%5capi",
        "/v1/./embeddings",
        "/v1/embeddings/..",
        "/v1/x/%2E",
    ],
)
async def test_dot_segments_are_refused_and_nothing_goes_upstream(
    keyed_proxy: Any, fake_upstream: FakeUpstream, path: str
) -> None:
    status, body = await raw_request(keyed_proxy.url, "POST", path, CHAT, {"Content-Type": "text/plain"})
    assert status == 400 and body["error"]["code"] == "invalid_path", body
    assert fake_upstream.paths == [] and fake_upstream.headers == []


@pytest.mark.parametrize(
    "path",
    [
        "/v1/admin",
        "/v1/files",
        "/v1/fine_tuning/jobs",
        "/v1/api/delete",
        "/v1/embeddings/extra",
        "/v1/chat/completions/x",
    ],
)
async def test_paths_outside_the_allowlist_are_404_and_nothing_goes_upstream(
    keyed_proxy: Any, fake_upstream: FakeUpstream, path: str
) -> None:
    status, body = await raw_request(keyed_proxy.url, "POST", path, CHAT)
    assert status == 404 and body["error"]["code"] == "not_found", body
    assert fake_upstream.paths == []


async def test_allowlisted_paths_still_pass_through(keyed_proxy: Any, fake_upstream: FakeUpstream) -> None:
    status, _ = await raw_request(keyed_proxy.url, "POST", "/v1/embeddings", json.dumps({"model": "m", "input": "x"}))
    assert status == 200 and fake_upstream.paths == ["/v1/embeddings"]
    assert fake_upstream.headers[0]["Authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize("path", ["/v1/chat/completions", "/v1/embeddings", "/admin/reload"])
async def test_a_foreign_origin_is_refused_before_the_upstream(
    keyed_proxy: Any, fake_upstream: FakeUpstream, path: str
) -> None:
    """A web page's form or fetch (text/plain is a 'simple' request: no preflight) gets nowhere."""
    headers = {"Origin": "https://evil.example", "Content-Type": "text/plain"}
    status, body = await raw_request(keyed_proxy.url, "POST", path, CHAT, headers)
    assert status == 403 and body["error"]["code"] == "origin_not_allowed", body
    assert fake_upstream.paths == []


async def test_an_allowed_origin_and_health_checks_pass(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    proxy = await start_proxy(allowed_origins=("https://app.example",))
    status, _ = await raw_request(proxy.url, "POST", "/v1/chat/completions", CHAT, {"Origin": "https://app.example"})
    assert status == 200 and len(fake_upstream.paths) == 1
    status, _ = await raw_request(proxy.url, "GET", "/healthz", headers={"Origin": "https://evil.example"})
    assert status == 200


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "10.0.0.1", "attacker.localhost.evil"])
async def test_loopback_listener_refuses_foreign_host_names(
    keyed_proxy: Any, fake_upstream: FakeUpstream, host: str
) -> None:
    status, body = await raw_request(keyed_proxy.url, "POST", "/v1/chat/completions", CHAT, {"Host": host})
    assert status == 403 and body["error"]["code"] == "host_not_allowed", body
    assert fake_upstream.paths == []


@pytest.mark.parametrize("host", ["localhost", "localhost:1234", "127.0.0.1:9", "[::1]:80", "LOCALHOST"])
async def test_loopback_host_names_are_served(keyed_proxy: Any, fake_upstream: FakeUpstream, host: str) -> None:
    status, _ = await raw_request(keyed_proxy.url, "POST", "/v1/chat/completions", CHAT, {"Host": host})
    assert status == 200


async def test_allowed_hosts_setting(start_proxy: Any, fake_upstream: FakeUpstream) -> None:
    proxy = await start_proxy(allowed_hosts=("proxy.internal",))
    ok, _ = await raw_request(proxy.url, "POST", "/v1/chat/completions", CHAT, {"Host": "proxy.internal:8000"})
    refused, _ = await raw_request(proxy.url, "POST", "/v1/chat/completions", CHAT, {"Host": "localhost"})
    assert (ok, refused) == (200, 403)


def test_dot_segment_and_host_helpers() -> None:
    assert not has_dot_segments("/v1/chat/completions?x=../y")
    assert not has_dot_segments("/v1/files/a..b/.hidden")
    assert has_dot_segments("/v1/%25252e%25252e/x")
    assert [host_name(h) for h in ("A.b:80", "[::1]:8000", "::1", "host")] == ["a.b", "::1", "::1", "host"]


# ---- exposure -----------------------------------------------------------------------------------


def serve_cmd(rules: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "toolshim", "serve", "--rules", str(rules), "--port", "0", *extra]


def test_serve_refuses_a_public_address_without_keys(tmp_path: Path) -> None:
    rules = write_rules(tmp_path, "http://127.0.0.1:9/v1", [{"match": "*", "upstream": "up"}])
    env = {k: v for k, v in os.environ.items() if not k.startswith("TOOLSHIM_")}
    result = subprocess.run(serve_cmd(rules, "--host", "0.0.0.0"), capture_output=True, text=True, timeout=30, env=env)
    assert result.returncode == 2
    assert "refusing to listen on 0.0.0.0 without client keys" in result.stderr
    assert "--allow-unauthenticated" in result.stderr and "TOOLSHIM_API_KEYS" in result.stderr


@pytest.mark.parametrize(
    ("extra", "env", "says"),
    [
        (("--allow-unauthenticated",), {}, "OPEN to the network on 0.0.0.0"),
        ((), {"TOOLSHIM_ALLOW_UNAUTHENTICATED": "true"}, "OPEN to the network on 0.0.0.0"),
        ((), {"TOOLSHIM_API_KEYS": "k1,k2"}, "client keys required on /v1 (2 configured)"),
    ],
)
async def test_serve_on_a_public_address_when_intended(
    tmp_path: Path, extra: tuple[str, ...], env: dict[str, str], says: str
) -> None:
    rules = write_rules(tmp_path, "http://127.0.0.1:9/v1", [{"match": "*", "upstream": "up"}])
    proc, _ = await start_serve(rules, "--host", "0.0.0.0", "--workers", "1", *extra, env=env)
    try:
        log = next(tmp_path.glob("serve-*.log")).read_text()
        assert says in log
    finally:
        stop(proc)


async def test_serve_on_loopback_says_so(tmp_path: Path) -> None:
    rules = write_rules(tmp_path, "http://127.0.0.1:9/v1", [{"match": "*", "upstream": "up"}])
    proc, _ = await start_serve(rules, "--workers", "1")
    try:
        assert "reachable from this machine only (127.0.0.1)" in next(tmp_path.glob("serve-*.log")).read_text()
    finally:
        stop(proc)
